//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestDeletingTheClusterRemovesItsPodsServicesAndClaims: everything the operator
// creates for a cluster carries the cluster as owner, so `kubectl delete
// etcdcluster` is all a user does (the original left objects behind).
func TestDeletingTheClusterRemovesItsPodsServicesAndClaims(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("delete")
	createHostPathPVs(t, "e2e-"+name, 3)
	cl := framework.NewCluster(name, 2, "3.5.21")
	cl.Spec.Pod = &api.PodPolicy{PersistentVolumeClaimSpec: claimSpec("e2e-" + name)}
	createCluster(t, cl)
	waitReady(t, opNS, name, 2, bootstrapTimeout(2))

	sel := metav1.ListOptions{LabelSelector: framework.ClusterSelector(name)}
	svcs, err := f.Kube.CoreV1().Services(opNS).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	pvcs, err := f.Kube.CoreV1().PersistentVolumeClaims(opNS).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	if len(svcs.Items) != 2 || len(pvcs.Items) != 2 {
		t.Fatalf("before deletion: %d services and %d claims, want 2 and 2", len(svcs.Items), len(pvcs.Items))
	}

	if _, err := f.Kubectl(ctx, "delete", "-n", opNS, "etcdcluster", name); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = framework.WaitFor(ctx, cleanupTimeout, framework.Poll, fmt.Sprintf("the pods, services and claims of %s to be garbage collected", name),
		framework.Both(f.ClusterGone(opNS, name), f.DependentsGone(opNS, name)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("everything of %s gone %.1fs after kubectl delete", name, time.Since(start).Seconds())
}
