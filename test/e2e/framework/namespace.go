package framework

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
)

// NamespaceLabel marks namespaces made by the suite, so leftovers of an interrupted
// run can be found: kubectl get ns -l etcd-operator-e2e.
const NamespaceLabel = "etcd-operator-e2e"

// CreateNamespace creates a namespace named e2e-<purpose>-<random>.
func (f *Framework) CreateNamespace(ctx context.Context, purpose string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   fmt.Sprintf("e2e-%s-%s", purpose, utilrand.String(5)),
		Labels: map[string]string{NamespaceLabel: "true"},
	}}
	if _, err := f.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create namespace %s: %w", ns.Name, err)
	}
	return ns.Name, nil
}

// DeleteNamespace deletes a namespace and waits until it is gone, so that the next
// test (or the next run) starts on a node that is not still busy tearing it down.
func (f *Framework) DeleteNamespace(ctx context.Context, name string, timeout time.Duration) error {
	err := f.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	return WaitFor(ctx, timeout, time.Second, "namespace "+name+" to be deleted", func(ctx context.Context) (bool, string, error) {
		ns, err := f.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "gone", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, fmt.Sprintf("phase %s, conditions %v", ns.Status.Phase, ns.Status.Conditions), nil
	})
}
