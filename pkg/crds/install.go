package crds

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// establishTimeout bounds the wait for the apiserver to serve a new definition; it
// usually takes well under a second.
const establishTimeout = 60 * time.Second

// Install creates the definition, or updates it when an older one exists, then waits
// until the apiserver serves it. A name clash with another definition fails at once
// instead of waiting for the timeout.
func Install(ctx context.Context, client apiextclient.Interface, want *apiextv1.CustomResourceDefinition, log *logrus.Entry) error {
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	// Another writer of the definition (a second operator starting during a
	// rolling update, a chart upgrade) may update it between the read and
	// the update: read it again and judge again.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := crds.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create CRD %s: %w", want.Name, err)
			}
			log.Infof("created CRD %s", want.Name)
		case err != nil:
			return fmt.Errorf("get CRD %s: %w", want.Name, err)
		case !equality.Semantic.DeepEqual(got.Spec, want.Spec):
			update := got.DeepCopy()
			update.Spec = want.Spec
			if _, err := crds.Update(ctx, update, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update CRD %s: %w", want.Name, err)
			}
			log.Infof("updated CRD %s to this operator's definition", want.Name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return WaitEstablished(ctx, client, want.Name)
}

// WaitEstablished polls until the definition is Established, and fails fast when the
// apiserver refused its names.
func WaitEstablished(ctx context.Context, client apiextclient.Interface, name string) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, establishTimeout, true, func(ctx context.Context) (bool, error) {
		crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			lastErr = err
			return false, nil
		}
		for _, c := range crd.Status.Conditions {
			switch {
			case c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue:
				return true, nil
			case c.Type == apiextv1.NamesAccepted && c.Status == apiextv1.ConditionFalse:
				return false, fmt.Errorf("CRD %s: names not accepted: %s", name, c.Message)
			}
		}
		return false, nil
	})
	if err != nil && lastErr != nil {
		return fmt.Errorf("wait for CRD %s: %w (last error: %v)", name, err, lastErr)
	}
	if err != nil {
		return fmt.Errorf("wait for CRD %s to be established: %w", name, err)
	}
	return nil
}

// InstallUntilDone retries Install with a capped backoff until the definition is
// established or ctx ends, and tells which: an apiserver that is briefly
// unavailable at startup must not kill the operator.
func InstallUntilDone(ctx context.Context, client apiextclient.Interface, want *apiextv1.CustomResourceDefinition, log *logrus.Entry) bool {
	delay := time.Second
	for {
		err := Install(ctx, client, want, log)
		if err == nil {
			return true
		}
		log.Errorf("install CRD %s (retrying in %s): %v", want.Name, delay, err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}
