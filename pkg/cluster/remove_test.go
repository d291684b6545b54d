package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// A scale-down right after a scale-up: the newest member has been connected
// to its peers for less than etcd's health interval, and refuses a removal
// sent to it ("unhealthy cluster"). Every membership change goes to the
// leader, and the next removal follows one short requeue later, while the
// pod of the member removed before still terminates.
func TestScaleDownRemovesOneMemberAPassThroughTheLeader(t *testing.T) {
	f := newFixture(t, newTestCluster(withSize(3)))
	f.withMembers(memberA, memberB, memberC, memberD, memberE) // memberA leads
	for _, m := range []string{memberA, memberB, memberC, memberD, memberE} {
		f.pod(m)
	}
	leader := f.member(memberA).ClientURL()
	for i, removed := range []string{memberB, memberC} {
		f.syncEtcdWithPods()
		requeue, err := f.c.pass(context.Background())
		if err != nil {
			t.Fatalf("pass %d: %v", i+1, err)
		}
		if requeue != f.c.cfg.MinPassInterval {
			t.Errorf("pass %d asks for the next pass after %v, want %v", i+1, requeue, f.c.cfg.MinPassInterval)
		}
		// The pod goes only after its grace period.
		f.pod(removed, terminating)
	}
	expect(t, "etcd writes", f.etcdWrites(), []string{removeCall(memberB), removeCall(memberC)})
	for i, eps := range f.etcd.changedThrough {
		expect(t, fmt.Sprintf("endpoints of change %d", i+1), eps, []string{leader})
	}
}

// The endpoints of a membership change: the leader's when the pass read it,
// never the changed member's own.
func TestChangeEndpoints(t *testing.T) {
	url := func(names ...string) []string {
		var out []string
		for _, n := range names {
			m := memberTemplate(newTestCluster().WithDefaults())
			m.Name = n
			out = append(out, m.ClientURL())
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		mods    []snapMod
		changed string
		want    []string
	}{
		{name: "a change goes to the leader", mods: mods(etcdLeader(memberA)), changed: memberC, want: url(memberA)},
		{name: "the leader's removal goes to the other members", mods: mods(etcdLeader(memberA)), changed: memberA, want: url(memberB, memberC)},
		{name: "without etcd read in the pass, every running voter but the changed one", mods: nil, changed: memberB, want: url(memberA, memberC)},
		{name: "a leader that does not answer is not asked", mods: mods(etcdLeader(memberA, memberA), noPod(memberA)), changed: memberC, want: url(memberB)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, "endpoints", testSnapshot(tc.mods...).changeEndpoints(tc.changed), tc.want)
		})
	}
}

// A member pod deleted at once (kubectl delete --force, the measurement's
// kill) leaves its etcd running a moment longer, and no event comes when it
// stops: the loop asks again half a second later, not at the next 8 s tick.
func TestAForceDeletedMemberIsRemovedOnceItStopsAnswering(t *testing.T) {
	f := newFixture(t, newTestCluster())
	f.withMembers(memberA, memberB, memberC)
	f.pod(memberA)
	f.pod(memberB)
	f.etcd.answering[memberID(memberC)] = true // its pod is gone, its etcd not yet
	f.syncEtcdWithPods()
	requeue, err := f.c.pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if requeue <= 0 || requeue > f.c.cfg.MinPassInterval {
		t.Errorf("next pass after %v, want within %v: nothing else announces that the member stopped", requeue, f.c.cfg.MinPassInterval)
	}
	expect(t, "etcd writes while it answers", f.etcdWrites(), nil)
	// Meanwhile its successor's pod is made, without it in --initial-cluster.
	joiner := "example-new0000001"
	if got, want := k8sutil.InitialCluster(f.createdPod(joiner)), initialCluster(f, memberA, memberB, joiner); !slices.Equal(got, want) {
		t.Errorf("the successor's --initial-cluster = %q, want %q", got, want)
	}
	f.showCreatedPods(resolving)
	f.mustPass()
	expect(t, "etcd writes while it still answers", f.etcdWrites(), nil)
	delete(f.etcd.answering, memberID(memberC))
	f.mustPass()
	expect(t, "etcd writes once it stopped", f.etcdWrites(), []string{removeCall(memberC)})
	// The pod made ahead is the one added once it resolves.
	obj, _, _ := f.indexer.GetByKey(testNS + "/" + joiner)
	p := obj.(*corev1.Pod).DeepCopy()
	resolvable(p)
	f.setPod(p)
	f.mustPass()
	expect(t, "etcd writes once the successor resolves", f.etcdWrites(), []string{removeCall(memberC), f.learnerCall(joiner)})
	expect(t, "pod actions after it was made", f.podActions(), []string{"delete pods " + memberC})
}

// TestScaleDown covers the removal of members to shrink a cluster, one pass
// at a time: which member goes, and what goes with it.
func TestScaleDown(t *testing.T) {
	tests := []passCase{
		{
			name:    "scale down removes a follower, not the leader",
			cluster: newTestCluster(withSize(1)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC) // memberA leads
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{removeCall(memberB)})
				expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberB})
				expectEvents(t, f.events(), "Normal Member Removed Existing member "+memberB+" removed from the cluster")
				s := f.mustStatus()
				if c := condition(s, api.ClusterConditionScaling); c == nil || c.Reason != "ScalingDown" || c.Message != "Current cluster size: 2, desired cluster size: 1" {
					t.Errorf("Scaling = %+v", c)
				}
				if calls := strings.Join(f.etcd.Calls(false), ","); !strings.HasPrefix(calls, "health,list,") {
					t.Errorf("etcd calls %s: the leader was not found before the removal", calls)
				}
			},
		},
		{
			name:    "scale down removes an unready member before any ready one",
			cluster: newTestCluster(withSize(2)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC, notReady)
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{removeCall(memberC)})
				if s := f.mustStatus(); condition(s, api.ClusterConditionScaling) != nil {
					t.Errorf("Scaling still set at the desired size: %+v", s.Conditions)
				}
			},
		},
		{
			name:    "a member etcd refuses for now keeps its pod and claim for the next try",
			cluster: newTestCluster(withSize(4), withPVC),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				joiner := "example-new0000001"
				f.joinerPod(joiner, []string{memberA, memberB, memberC})
				f.claim(joiner)
				f.etcd.addErr = rpctypes.ErrMemberNotEnoughStarted
				if _, err := f.c.pass(context.Background()); err != nil {
					t.Fatalf("a refused add failed the pass: %v", err)
				}
				f.etcd.addErr = nil
				if _, err := f.c.pass(context.Background()); err != nil {
					t.Fatal(err)
				}
				// No deletion: a bound claim deleted would leave its volume
				// Released and lost.
				expect(t, "pod actions", f.podActions(), nil)
				expect(t, "etcd writes, the refused one included", f.etcdWrites(), []string{f.learnerCall(joiner), f.learnerCall(joiner)})
			},
		},
		{
			name:    "scale down of a cluster with volumes deletes the member's claim too",
			cluster: newTestCluster(withSize(2), withPVC),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberB, "delete persistentvolumeclaims " + memberB})
			},
		},
	}
	runPassCases(t, tests)
}
