package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// nodeReadySince is a node whose Ready condition has been status since at.
func nodeReadySince(name string, status corev1.ConditionStatus, at time.Time) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(at.Add(-time.Hour))},
		{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(at)},
	}}}
}

func TestANodeCountsAsLostOnlyAfterTheUsersBoundNotReady(t *testing.T) {
	const bound = 10 * time.Minute
	tests := []struct {
		name  string
		node  *corev1.Node
		bound time.Duration
		lost  bool
	}{
		{"not Ready for longer than the bound", nodeReadySince("n", corev1.ConditionFalse, testStart.Add(-11*time.Minute)), bound, true},
		{"unknown (the kubelet stopped posting) for longer than the bound", nodeReadySince("n", corev1.ConditionUnknown, testStart.Add(-time.Hour)), bound, true},
		{"exactly the bound", nodeReadySince("n", corev1.ConditionUnknown, testStart.Add(-bound)), bound, true},
		{"not Ready for less than the bound: a restart, a kubelet upgrade", nodeReadySince("n", corev1.ConditionFalse, testStart.Add(-9*time.Minute)), bound, false},
		{"Ready", nodeReadySince("n", corev1.ConditionTrue, testStart.Add(-time.Hour)), bound, false},
		{"no bound set: only a deleted node counts", nodeReadySince("n", corev1.ConditionUnknown, testStart.Add(-24*time.Hour)), 0, false},
		{"no Ready condition yet: nothing proves anything", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, bound, false},
		{"a Ready condition without a transition time", nodeReadySince("n", corev1.ConditionFalse, time.Time{}), bound, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			why := nodeLostWhy(tc.node, tc.bound, testStart)
			if (why != "") != tc.lost {
				t.Fatalf("nodeLostWhy = %q, want lost %v", why, tc.lost)
			}
			if tc.lost && !strings.Contains(why, "spec.pod.nodeLostAfterSeconds (600s)") {
				t.Errorf("%q does not name the user's bound", why)
			}
		})
	}
}

// stuckSnapshot is a snapshot under a bound of 10 minutes with a pod stuck
// terminating on node on, and the other pods given running.
func stuckSnapshot(on string, bound int64) *snapshot {
	cl := newTestCluster(withNodeLostAfter(bound))
	deleted := metav1.NewTime(testStart.Add(-time.Hour))
	s := &snapshot{now: testStart, spec: cl, pods: map[string]*corev1.Pod{}, claims: map[string]*corev1.PersistentVolumeClaim{},
		terminating: map[string]*corev1.Pod{"c": {ObjectMeta: metav1.ObjectMeta{Name: "c", DeletionTimestamp: &deleted}, Spec: corev1.PodSpec{NodeName: on}}}}
	return s
}

func TestTheNodesOfPodsStuckTerminatingAreReadUnderTheBound(t *testing.T) {
	lostSince := testStart.Add(-time.Hour)
	c, kube := volumeCluster(nodeReadySince("n-lost", corev1.ConditionUnknown, lostSince), nodeReadySince("n-back", corev1.ConditionTrue, testStart.Add(-time.Minute)))
	allowed := true
	nodesReadable(kube, &allowed)

	s := stuckSnapshot("n-lost", 600)
	c.observeLostNodes(context.Background(), s)
	if why := s.nodesLost["n-lost"]; !strings.Contains(why, "node n-lost has not been Ready since "+lostSince.UTC().Format(time.RFC3339)) {
		t.Errorf("nodesLost %v", s.nodesLost)
	}
	s = stuckSnapshot("n-back", 600)
	c.observeLostNodes(context.Background(), s)
	if why, read := s.nodesLost["n-back"]; !read || why != "" {
		t.Errorf("a Ready node counts as lost, or was not read: %v", s.nodesLost)
	}
	// A deleted node is the pod garbage collector's: nothing to force.
	s = stuckSnapshot("n-deleted", 600)
	c.observeLostNodes(context.Background(), s)
	if why := s.nodesLost["n-deleted"]; why != "" || len(s.nodesUnknown) != 0 {
		t.Errorf("deleted node: lost %v, unknown %v", s.nodesLost, s.nodesUnknown)
	}
	reads := countActions(kube, "get", "nodes")

	// Without the bound, no node is read.
	s = stuckSnapshot("n-lost", 0)
	c.observeLostNodes(context.Background(), s)
	if got := countActions(kube, "get", "nodes"); got != reads || s.nodesLost != nil {
		t.Errorf("without the bound: %d node reads (want %d), lost %v", got, reads, s.nodesLost)
	}
	// A pod deleted a moment ago is not stuck: its node is not read.
	s = stuckSnapshot("n-lost", 600)
	just := metav1.NewTime(testStart.Add(-time.Second))
	s.terminating["c"].DeletionTimestamp = &just
	c.observeLostNodes(context.Background(), s)
	if got := countActions(kube, "get", "nodes"); got != reads || len(s.nodesLost) != 0 {
		t.Errorf("a pod just deleted: %d node reads (want %d), lost %v", got, reads, s.nodesLost)
	}
}

func TestANodeThatCannotBeReadDoesNotCountAsLost(t *testing.T) {
	c, kube := volumeCluster()
	allowed := true
	nodesReadable(kube, &allowed)
	kube.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("the apiserver is restarting")
	})
	s := stuckSnapshot("n-lost", 600)
	c.observeLostNodes(context.Background(), s)
	if s.nodesLost["n-lost"] != "" || len(s.nodesUnknown) != 1 || !strings.Contains(s.nodesUnknown[0], "read node n-lost") {
		t.Errorf("lost %v, unknown %v", s.nodesLost, s.nodesUnknown)
	}
	if a := releaseStuckPodsOf(s); a.kind == actForceDeletePod {
		t.Errorf("forced on a node that could not be read: %v", a)
	}
}

// releaseStuckPodsOf is releaseStuckPods' action, idle when it decides nothing.
func releaseStuckPodsOf(s *snapshot) action {
	a, _ := releaseStuckPods(s)
	return a
}

func TestALocalVolumeOnANodeLostForLongerThanTheBoundCountsAsGone(t *testing.T) {
	c, _ := volumeCluster(nodeReadySince("n3", corev1.ConditionUnknown, testStart.Add(-time.Hour)),
		localVolume("pv-c", hostnameTerm("n3")))
	s := volumeSnapshot("a", "b")
	s.spec = newTestCluster(withPVC, withNodeLostAfter(600))
	c.observeVolumeNodes(context.Background(), s)
	if s.volumeNodeGone["c"] != "n3" {
		t.Fatalf("gone %v, want c on n3", s.volumeNodeGone)
	}
	if got := s.dataGoneWithNode("c", memberGone); !strings.Contains(got, "which counts as lost: node n3 has not been Ready since") {
		t.Errorf("dataGoneWithNode = %q", got)
	}
	// Without the bound the same node, there, is no evidence.
	s = volumeSnapshot("a", "b")
	s.spec = newTestCluster(withPVC)
	c.observeVolumeNodes(context.Background(), s)
	if s.volumeNodeGone != nil {
		t.Errorf("without the bound: gone %v", s.volumeNodeGone)
	}
}

func TestAStuckPodIsForceDeletedByItsUIDAndSaidInAWarning(t *testing.T) {
	c, kube := volumeCluster(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "example-c", Namespace: "ns", UID: "uid-1"}})
	c.namespace = "ns"
	out := c.forceDeletePod(context.Background(), action{kind: actForceDeletePod, member: "example-c", uid: "uid-1", reason: "it is stuck terminating"})
	if out.err != nil {
		t.Fatal(out.err)
	}
	var del k8stesting.DeleteActionImpl
	for _, a := range kube.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok {
			del = d
		}
	}
	o := del.DeleteOptions
	if del.Name != "example-c" || o.GracePeriodSeconds == nil || *o.GracePeriodSeconds != 0 || o.Preconditions == nil || *o.Preconditions.UID != types.UID("uid-1") {
		t.Errorf("delete %s with %+v, want example-c at once, only uid-1", del.Name, o)
	}
	if len(c.told) != 1 || c.told[0].eventType != corev1.EventTypeWarning || c.told[0].reason != eventPodForceDeleted {
		t.Errorf("told %v, want one PodForceDeleted Warning", c.told)
	}
	// A pod made again under the name meanwhile is not touched: the
	// precondition fails, and the next pass looks again.
	kube.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(corev1.Resource("pods"), "example-c", nil)
	})
	c.told = nil
	if out := c.forceDeletePod(context.Background(), action{kind: actForceDeletePod, member: "example-c", uid: "uid-1"}); out.err != nil || len(c.told) != 0 {
		t.Errorf("a pod made again: err %v, told %v", out.err, c.told)
	}
}

func TestTheNodesOfPodsAreReadOnlyForADisasterRecoveryUnderWay(t *testing.T) {
	c, kube := volumeCluster(nodeReadySince("n-up", corev1.ConditionTrue, testStart.Add(-time.Hour)),
		nodeReadySince("n-down", corev1.ConditionUnknown, testStart.Add(-time.Minute)))
	allowed := true
	nodesReadable(kube, &allowed)
	kube.PrependReactor("get", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == "n-flaky" {
			return true, nil, apierrors.NewServiceUnavailable("the apiserver is restarting")
		}
		return false, nil, nil
	})
	snap := func() *snapshot {
		s := &snapshot{now: testStart, spec: newTestCluster(withPVC, func(cl *api.EtcdCluster) {
			cl.Spec.DisasterRecovery = &api.DisasterRecoveryPolicy{Enabled: true}
		}), pods: map[string]*corev1.Pod{}}
		for name, node := range map[string]string{"a": "n-up", "b": "n-down", "c": "n-flaky", "d": "n-gone", "e": "n-up"} {
			s.pods[name] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}}
		}
		return s
	}
	// No quorum loss seen: nothing is read.
	s := snap()
	c.observePodNodes(context.Background(), s)
	if n := countActions(kube, "get", "nodes"); n != 0 || s.podNodesNotReady != nil {
		t.Fatalf("without a quorum loss: %d node reads, %v", n, s.podNodesNotReady)
	}
	c.quorumLoss = &quorumLoss{since: testStart.Add(-time.Minute)}
	s = snap()
	c.observePodNodes(context.Background(), s)
	if n := countActions(kube, "get", "nodes"); n != 4 {
		t.Errorf("%d node reads, want one per node", n)
	}
	if len(s.podNodesNotReady) != 2 || !strings.Contains(s.podNodesNotReady["n-down"], "is not Ready") || !strings.Contains(s.podNodesNotReady["n-flaky"], "could not be read") {
		t.Errorf("not ready %v, want n-down and n-flaky only", s.podNodesNotReady)
	}
	// A Ready pod's node is not read: its member answers, or is held for
	// not answering anyway.
	s = snap()
	s.pods["a"].Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	s.pods["e"].Status.Conditions = s.pods["a"].Status.Conditions
	before := countActions(kube, "get", "nodes")
	c.observePodNodes(context.Background(), s)
	if n := countActions(kube, "get", "nodes") - before; n != 3 {
		t.Errorf("%d node reads with the pods on n-up Ready, want 3", n)
	}
	// A role that may not read nodes proves nothing: every node is
	// unknown, and no refused request is made.
	c2, kube2 := volumeCluster()
	denied := false
	nodesReadable(kube2, &denied)
	c2.quorumLoss = c.quorumLoss
	s = snap()
	c2.observePodNodes(context.Background(), s)
	if n := countActions(kube2, "get", "nodes"); n != 0 || len(s.podNodesNotReady) != 4 || !strings.Contains(s.podNodesNotReady["n-up"], nodesDenied) {
		t.Errorf("denied: %d node reads, not ready %v", n, s.podNodesNotReady)
	}
}
