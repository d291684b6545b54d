package crds

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
)

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

// apiserverLike makes the fake behave as the apiserver does for a definition it
// accepts: Established right away, or NamesAccepted=False when clash is set.
func apiserverLike(client *fake.Clientset, clash bool) {
	setStatus := func(action clienttesting.Action) (bool, runtime.Object, error) {
		var obj runtime.Object
		switch a := action.(type) {
		case clienttesting.CreateAction:
			obj = a.GetObject()
		case clienttesting.UpdateAction:
			obj = a.GetObject()
		}
		crd := obj.(*apiextv1.CustomResourceDefinition)
		crd.Status.Conditions = []apiextv1.CustomResourceDefinitionCondition{{Type: apiextv1.Established, Status: apiextv1.ConditionTrue}}
		if clash {
			crd.Status.Conditions = []apiextv1.CustomResourceDefinitionCondition{{Type: apiextv1.NamesAccepted, Status: apiextv1.ConditionFalse, Message: "\"etcd\" is already in use"}}
		}
		return false, nil, nil
	}
	client.PrependReactor("create", "customresourcedefinitions", setStatus)
	client.PrependReactor("update", "customresourcedefinitions", setStatus)
}

func verbs(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		out = append(out, a.GetVerb())
	}
	return out
}

func TestInstallCreatesAndWaitsForEstablished(t *testing.T) {
	client := fake.NewSimpleClientset()
	apiserverLike(client, false)
	if err := Install(context.Background(), client, EtcdCluster(), quietLog()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(verbs(client), ","); !strings.HasPrefix(got, "get,create,get") {
		t.Fatalf("actions %s, want get, create, then get until established", got)
	}
}

func TestInstallUpdatesAnOlderDefinition(t *testing.T) {
	old := EtcdCluster()
	old.Spec.Versions[0].AdditionalPrinterColumns = nil
	old.Status.Conditions = []apiextv1.CustomResourceDefinitionCondition{{Type: apiextv1.Established, Status: apiextv1.ConditionTrue}}
	client := fake.NewSimpleClientset(old)
	apiserverLike(client, false)
	if err := Install(context.Background(), client, EtcdCluster(), quietLog()); err != nil {
		t.Fatal(err)
	}
	got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), old.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Versions[0].AdditionalPrinterColumns) == 0 {
		t.Fatal("the older definition was not updated")
	}
}

// TestInstallUpdatesAfterAnotherWriterDid: a definition updated by someone
// else between the read and the update (a second operator starting during a
// rolling update) is read again and updated, not an error.
func TestInstallUpdatesAfterAnotherWriterDid(t *testing.T) {
	old := EtcdCluster()
	old.Spec.Versions[0].AdditionalPrinterColumns = nil
	client := fake.NewSimpleClientset(old)
	apiserverLike(client, false)
	conflicts := 1
	client.PrependReactor("update", "customresourcedefinitions", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(apiextv1.Resource("customresourcedefinitions"), old.Name, errors.New("the object has been modified"))
	})
	if err := Install(context.Background(), client, EtcdCluster(), quietLog()); err != nil {
		t.Fatalf("a conflict on the update failed the install: %v", err)
	}
	got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), old.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Versions[0].AdditionalPrinterColumns) == 0 {
		t.Fatal("the definition was not updated after the conflict")
	}
}

// An operator whose role lacks <resource>/status installs the definition
// without the status subresource over one that serves it, and the other way
// round once the role grants it.
func TestInstallSwitchesTheStatusSubresourceEitherWay(t *testing.T) {
	for name, tc := range map[string]struct {
		installed, want *apiextv1.CustomResourceDefinition
	}{
		"dropped": {EtcdCluster(), WithoutStatusSubresource(EtcdCluster())},
		"a definition without the status subresource gets it back": {WithoutStatusSubresource(EtcdBackup()), EtcdBackup()},
	} {
		t.Run(name, func(t *testing.T) {
			tc.installed.Status.Conditions = []apiextv1.CustomResourceDefinitionCondition{{Type: apiextv1.Established, Status: apiextv1.ConditionTrue}}
			client := fake.NewSimpleClientset(tc.installed)
			apiserverLike(client, false)
			if err := Install(context.Background(), client, tc.want, quietLog()); err != nil {
				t.Fatal(err)
			}
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), tc.want.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got.Spec, tc.want.Spec) {
				t.Fatalf("installed subresources %+v, want %+v", got.Spec.Versions[0].Subresources, tc.want.Spec.Versions[0].Subresources)
			}
		})
	}
}

func TestInstallLeavesACurrentDefinitionAlone(t *testing.T) {
	current := EtcdCluster()
	current.Status.Conditions = []apiextv1.CustomResourceDefinitionCondition{{Type: apiextv1.Established, Status: apiextv1.ConditionTrue}}
	client := fake.NewSimpleClientset(current)
	if err := Install(context.Background(), client, EtcdCluster(), quietLog()); err != nil {
		t.Fatal(err)
	}
	for _, v := range verbs(client) {
		if v != "get" {
			t.Fatalf("a current definition was written: %v", verbs(client))
		}
	}
}

func TestInstallFailsFastOnANameClash(t *testing.T) {
	client := fake.NewSimpleClientset()
	apiserverLike(client, true)
	start := time.Now()
	err := Install(context.Background(), client, EtcdCluster(), quietLog())
	if err == nil || !strings.Contains(err.Error(), "names not accepted") {
		t.Fatalf("error %v, want names not accepted", err)
	}
	if time.Since(start) > establishTimeout/2 {
		t.Fatal("a name clash waited for the establish timeout instead of failing at once")
	}
}

func TestInstallUntilDoneGivesUpWhenCancelled(t *testing.T) {
	client := fake.NewSimpleClientset()
	client.PrependReactor("get", "customresourcedefinitions", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("apiserver unavailable")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if InstallUntilDone(ctx, client, EtcdCluster(), quietLog()) {
		t.Fatal("reported success while the apiserver failed")
	}
	if n := len(client.Actions()); n < 2 {
		t.Fatalf("%d attempts, want retries", n)
	}
}
