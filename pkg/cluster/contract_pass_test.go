package cluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// TestContractWholePasses plays some of the histories of
// TestContractKnownViolations as whole passes on fake clients (fixture_test.go),
// observe and act included: what the contract forbids is judged on the API
// and etcd calls the passes make.
func TestContractWholePasses(t *testing.T) {
	onClaims := claimsFixture
	t.Run("a month-old member whose container restarted four times is not replaced after one OOM kill", func(t *testing.T) {
		f := onClaims(t)
		f.setPodStatus(memberC, crashLooping(4))
		f.etcd.down[memberID(memberC)] = true
		f.pass()
		if slices.Contains(f.etcdWrites(), removeCall(memberC)) || slices.Contains(f.podActions(), "delete persistentvolumeclaims "+memberC) {
			t.Errorf("C1: a member whose claim holds its data was removed for its container's lifetime restarts: etcd %q, API %q", f.etcdWrites(), f.podActions())
		}
	})
	t.Run("an operator restarted under a status the server does not store restarts the members from their claims, never seeds", func(t *testing.T) {
		cl := newTestCluster(withPVC)
		cl.Status = api.ClusterStatus{}
		f := newFixture(t, cl)
		for _, n := range []string{memberA, memberB, memberC} {
			f.claim(n)
		}
		f.pass()
		for _, a := range f.podActions() {
			if name, ok := strings.CutPrefix(a, "create pods "); ok {
				if cmd := strings.Join(f.createdPod(name).Spec.Containers[0].Command, " "); strings.Contains(cmd, "--initial-cluster-state=new") {
					t.Errorf("C3: a seed %s was made beside the claims of members %v: %q", name, []string{memberA, memberB, memberC}, f.podActions())
				}
			}
		}
	})
	t.Run("a pod stuck terminating on a dead node is not deleted again and again, and does not keep another gone member from being restarted in place", func(t *testing.T) {
		f := onClaims(t)
		stuck := func(p *corev1.Pod) {
			ts := metav1.NewTime(testStart.Add(-2 * time.Minute))
			p.DeletionTimestamp = &ts
			notReady(p)
		}
		f.setPodStatus(memberB, stuck)
		f.podGone(memberC)
		deletes := 0
		for range 4 {
			f.kube.ClearActions()
			f.pass()
			for _, a := range f.podActions() {
				switch a {
				case "delete pods " + memberB:
					deletes++
				case "create pods " + memberC:
					return
				}
			}
			// The node does not answer: the deletion never completes.
			f.pod(memberB, stuck)
			f.now = f.now.Add(20 * time.Second)
		}
		t.Errorf("L1: member %s was not restarted in place in 4 passes over a minute, and pod %s, terminating, was deleted %d more times", memberC, memberB, deletes)
	})
	t.Run("a member with a CORRUPT alarm is not removed while the quorum needs it", func(t *testing.T) {
		f := healthyFixture(t)
		f.etcd.alarms = append(f.etcd.alarms, etcdutil.Alarm{MemberID: memberID(memberA), Type: etcdutil.AlarmCorrupt})
		f.setPodStatus(memberB, evicted)
		for range 3 {
			f.pass()
			f.now = f.now.Add(time.Minute)
		}
		// Once b is removed, a and c are the membership and c alone is a
		// quorum of what is left: a may go then, not before.
		calls := f.etcd.Calls(true)
		if a := slices.Index(calls, removeCall(memberA)); a >= 0 && !slices.Contains(calls[:a], removeCall(memberB)) {
			t.Errorf("C1: member %s was asked to be removed while %s is down and the quorum needs it: %q", memberA, memberB, calls)
		}
		if !slices.Contains(calls, removeCall(memberB)) {
			t.Errorf("the dead member %s was not replaced beside the member the quorum needs: %q", memberB, calls)
		}
	})
}
