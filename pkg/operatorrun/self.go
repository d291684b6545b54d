package operatorrun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// OwnPodTimeout bounds the start-up's look at the operator's own pod (the
// original retried for 500 s): a pod that cannot read itself is
// misconfigured, and saying so soon beats waiting.
const OwnPodTimeout = time.Minute

// OwnPod reads the operator's own pod, retrying while the apiserver may still
// be starting.
func OwnPod(ctx context.Context, kube kubernetes.Interface, id Identity, timeout time.Duration) (*corev1.Pod, error) {
	var self *corev1.Pod
	var notFound error
	err := RetryFor(ctx, timeout, func() error {
		p, err := kube.CoreV1().Pods(id.Namespace).Get(ctx, id.PodName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// Not a transient error: the operator runs outside a cluster
			// under a made-up name.
			notFound = err
			return nil
		}
		self = p
		return err
	})
	if err == nil {
		err = notFound
	}
	if err != nil {
		return nil, fmt.Errorf("read the operator's own pod %s/%s (%s/%s): %w", id.Namespace, id.PodName, EnvPodNamespace, EnvPodName, err)
	}
	return self, nil
}

// ImageOf is the image, and its pull policy, of the container that runs
// binary in the operator's own pod. Pods the operator creates run helper
// steps from the same binary: they need nothing the operator's image does
// not have, and the node most likely has it already.
func ImageOf(self *corev1.Pod, binary string) (string, corev1.PullPolicy, error) {
	cs := self.Spec.Containers
	if len(cs) == 0 {
		return "", "", errors.New("the operator's pod has no containers")
	}
	c := cs[0]
	for _, cand := range cs {
		if slices.ContainsFunc(append(slices.Clone(cand.Command), cand.Args...), func(a string) bool {
			return strings.HasSuffix(a, binary)
		}) {
			c = cand
			break
		}
	}
	policy := c.ImagePullPolicy
	if policy == "" {
		policy = corev1.PullIfNotPresent
	}
	return c.Image, policy, nil
}

// RetryFor retries fn with backoff for up to d: the apiserver may be briefly
// unavailable while the operator starts.
func RetryFor(ctx context.Context, d time.Duration, fn func() error) error {
	deadline := time.Now().Add(d)
	delay := 500 * time.Millisecond
	for {
		err := fn()
		if err == nil || time.Now().Add(delay).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}
