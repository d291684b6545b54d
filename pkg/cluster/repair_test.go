package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

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

// TestDeadMembersAreReplaced covers members that cannot come back, one pass
// at a time: removed from etcd once proven dead, replaced by new members.
func TestDeadMembersAreReplaced(t *testing.T) {
	tests := []passCase{
		{
			name:    "a dead member is removed now and replaced by a new member on a later pass",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC, failed)
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{removeCall(memberC)})
				expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberC})
				expectEvents(t, f.events(),
					"Normal Replacing Dead Member The dead member "+memberC+" is being replaced",
					"Normal Member Removed Existing member "+memberC+" removed from the cluster")
				s := f.mustStatus()
				if s.Size != 2 || s.Phase != api.ClusterPhaseRunning {
					t.Errorf("status = %+v", s)
				}
				if c := condition(s, api.ClusterConditionScaling); c == nil || c.Message != "Current cluster size: 2, desired cluster size: 3" {
					t.Errorf("Scaling = %+v", c)
				}

				f.indexer.Delete(f.pod(memberC, failed, terminating))
				f.kube.ClearActions()
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"create pods example-new0000001"})
			},
		},
		{
			name:    "a member whose pod is gone is replaced",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{removeCall(memberC)})
			},
		},
		{
			name:    "a member whose pod is being deleted is replaced once the pod is gone",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC, terminating)
				f.mustPass()
				expect(t, "etcd writes while it terminates", f.etcdWrites(), nil)
				f.indexer.Delete(f.pod(memberC, terminating))
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{removeCall(memberC)})
			},
		},
		{
			name:    "a pod pending longer than the timeout is replaced",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC, pendingFor(5*time.Minute+time.Second))
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{removeCall(memberC)})
				expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberC})
			},
		},
		{
			name:    "a seed that stays pending longer than the timeout in a cluster never available is replaced by a new seed",
			cluster: newTestCluster(neverAvailable, withSeedAndJoin),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA)
				f.pod(memberA, pendingFor(4*time.Minute))
				f.mustPass()
				joiner := "example-new0000001"
				expect(t, "pod actions within the timeout: the first joining pod, made while the seed starts", f.podActions(), []string{"create pods " + joiner})
				f.showCreatedPods(pendingFor(time.Second))
				f.now = f.now.Add(2 * time.Minute)
				f.mustPass() // deletes the seed's pod and the joining pod; the lister no longer has them
				f.mustPass()
				seed := "example-new0000002"
				expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberA, "delete pods " + joiner, "create pods " + seed})
				expect(t, "etcd writes", f.etcdWrites(), nil)
				if cmd := strings.Join(f.createdPod(seed).Spec.Containers[0].Command, " "); !strings.Contains(cmd, "--initial-cluster-state=new") {
					t.Errorf("the new seed does not start a new cluster: %q", cmd)
				}
				expect(t, "membership", f.c.knownMembership.set.Names(), []string{seed})
				expectEvents(t, f.events(),
					"Normal Replacing Dead Member The dead member "+memberA+" is being replaced",
					"Normal New Member Added New member "+seed+" added to cluster")
			},
		},
		{
			name:    "a pod pending within the timeout is waited for, and does not block healing another member",
			cluster: newTestCluster(withSize(5)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC, memberD, memberE)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.pod(memberD, failed)
				f.pod(memberE, pendingFor(time.Minute))
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{removeCall(memberD)})
				expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberD})
				// With the dead member gone, the pending one is left alone and
				// the replacement's pod is made meanwhile.
				f.indexer.Delete(f.pod(memberD, failed))
				f.kube.ClearActions()
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{removeCall(memberD)})
				expect(t, "pod actions", f.podActions(), []string{"create pods example-new0000001"})
			},
		},
	}
	runPassCases(t, tests)
}
