//go:build e2e

package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestRestrictedNamespaceRunsOperatorAndMembers: in a namespace that enforces
// Pod Security "restricted", the operator (example/deployment.yaml) starts and
// a 3-member cluster whose spec.pod.securityContext runs as non-root comes up,
// members joining through their check-dns and wait-membership init containers.
func TestRestrictedNamespaceRunsOperatorAndMembers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "restricted")
	nsObj, err := f.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if _, err := f.Kube.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	installOperator(t, ns, framework.Install{})

	name := framework.UniqueName("psa")
	cl := framework.NewCluster(name, 3, "3.5.21")
	cl.Spec.Pod = &api.PodPolicy{SecurityContext: &corev1.PodSecurityContext{
		RunAsNonRoot: new(true),
		RunAsUser:    new(int64(65532)),
		RunAsGroup:   new(int64(65532)),
		FSGroup:      new(int64(65532)),
	}}
	createClusterIn(t, ns, ns, cl)
	waitReady(t, ns, name, 3, bootstrapTimeout(3))
}
