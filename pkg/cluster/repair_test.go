package cluster

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// TestRestartInPlace, at the level of passes: members whose
// pods are lost come back on their claims with their IDs, without any
// membership change.
func TestRestartInPlace(t *testing.T) {
	pvcCluster := claimsFixture
	t.Run("a member whose pod was deleted gets a new pod of the same name on its claim", func(t *testing.T) {
		f := pvcCluster(t)
		f.podGone(memberC)
		f.mustPass()
		expect(t, "pod actions", f.podActions(), []string{"create pods " + memberC})
		expect(t, "etcd writes", f.etcdWrites(), nil)
		pod := f.createdPod(memberC)
		if v := pod.Spec.Volumes[0].PersistentVolumeClaim; v == nil || v.ClaimName != memberC {
			t.Errorf("data volume %+v, want the member's claim", pod.Spec.Volumes[0])
		}
		if k8sutil.WaitsForMembership(pod) {
			t.Error("a member restarted in place waits for a membership it has")
		}
		if len(pod.Spec.InitContainers) != 0 {
			t.Errorf("a member restarted in place waits in %v; its data makes it start without resolving its own name", pod.Spec.InitContainers)
		}
		expectEvents(t, f.events(), "Normal Member Restarted Member "+memberC+" restarted in place on its data")
		claim, err := f.kube.CoreV1().PersistentVolumeClaims(testNS).Get(context.Background(), memberC, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := k8sutil.ClaimRestarts(claim); n != 0 {
			t.Errorf("restarts on the claim = %d; a pod deleted is no failure of its member", n)
		}
	})
	t.Run("a member whose pod ended is restarted on its claim, and the restart counts on the repair ladder", func(t *testing.T) {
		f := pvcCluster(t)
		f.setPodStatus(memberC, failed)
		f.mustPass()
		expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberC})
		f.kube.ClearActions()
		f.mustPass()
		expect(t, "pod actions", f.podActions(), []string{"patch persistentvolumeclaims " + memberC, "create pods " + memberC})
		expectEvents(t, f.events(), "Normal Member Restarted Member "+memberC+" restarted in place on its data after its pod ended (restart 1 of 3")
		claim, err := f.kube.CoreV1().PersistentVolumeClaims(testNS).Get(context.Background(), memberC, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n, since := k8sutil.ClaimRestarts(claim); n != 1 || !since.Equal(testStart) {
			t.Errorf("restarts on the claim = %d since %v", n, since)
		}
	})
	t.Run("every pod deleted at once: all members come back together, without a seed or a membership change", func(t *testing.T) {
		f := pvcCluster(t)
		for _, n := range []string{memberA, memberB, memberC} {
			f.podGone(n)
		}
		f.forgetMembership() // and the operator restarted meanwhile
		f.c.latest.Status.Members.Ready = []string{memberA, memberB, memberC}
		f.mustPass()
		var created []string
		for _, a := range f.podActions() {
			if strings.HasPrefix(a, "create pods ") {
				created = append(created, strings.TrimPrefix(a, "create pods "))
			}
		}
		expect(t, "pods created", created, []string{memberA, memberB, memberC})
		expect(t, "etcd calls", f.etcd.Calls(false), nil)
		for _, n := range created {
			if cmd := strings.Join(f.createdPod(n).Spec.Containers[0].Command, " "); strings.Contains(cmd, "--initial-cluster-state=new") || strings.Contains(cmd, "--initial-cluster-token") {
				t.Errorf("member %s restarted as a new cluster: %q", n, cmd)
			}
		}
		s := f.mustStatus()
		if s.Phase != api.ClusterPhaseRunning || strings.Contains(s.Reason, "restore") {
			t.Errorf("status %+v", s)
		}
	})
	t.Run("an emptyDir member whose pod was deleted is replaced as before", func(t *testing.T) {
		f := healthyFixture(t)
		_ = f.indexer.Delete(f.pod(memberC))
		f.mustPass()
		expect(t, "etcd writes", f.etcdWrites(), []string{removeCall(memberC)})
	})
}
