package cluster

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// TestDestructiveStepsNeedProof is the part of the specification that keeps
// the repair machinery from harming a healthy cluster: a member is removed, a
// claim deleted, a cluster forced, restored or seeded only on evidence read in
// the same pass; when the evidence is weak the pass waits and says why.
//
// Each case is a decision the operator once made on weak evidence.
func TestDestructiveStepsNeedProof(t *testing.T) {
	tests := []struct {
		name string
		mods []snapMod
		want string
	}{
		// The repair ladder counts the restarts of its window only.
		{name: "a month-old member whose container restarted four times in its life is left to the kubelet after one OOM kill",
			mods: mods(spec(withPVC), claims(memberA, memberB, memberC), podIs(memberC, crashLooping(4)), etcdLeader(memberA, memberC)),
			want: "idle"},
		{name: "a member whose container restarted four times in the window is replaced",
			mods: mods(spec(withPVC), claims(memberA, memberB, memberC), podIs(memberC, crashLooping(4)), restartsInWindow(memberC, 4), etcdLeader(memberA, memberC)),
			want: "remove dead member example-c (it failed again after 4 restarts"},
		{name: "a member whose pod was deleted after three restarts in place is restarted again, not replaced: a deletion is no failure",
			mods: mods(spec(withPVC), claims(memberA, memberB, memberC), claimRestarts(memberC, 3, time.Minute), noPod(memberC), etcdLeader(memberA, memberC)),
			want: "restart in place example-c"},
		{name: "a member whose pod ended after three restarts in place is replaced",
			mods: mods(spec(withPVC), claims(memberA, memberB, memberC), claimRestarts(memberC, 3, time.Minute), podIs(memberC, failed), etcdLeader(memberA, memberC)),
			want: "remove dead member example-c (it failed again after 3 restarts in place within 10m0s)"},
		{name: "the deletion of an ended pod counts a restart in place on the ladder",
			mods: mods(spec(withPVC), claims(memberA, memberB, memberC), claimRestarts(memberC, 1, time.Minute), podIs(memberC, evicted)),
			want: "delete failed pod example-c (its pod ended: restart 2 of 3 in place within 10m0s, on its claim)"},
		{name: "the deletion of a pod that did not start in time counts no restart: the member did not fail",
			mods: mods(spec(withPVC), claims(memberA, memberB, memberC), claimRestarts(memberC, 2, time.Minute), podIs(memberC, pendingFor(6*time.Minute))),
			want: "delete failed pod example-c (its pod has not started within 5m0s: to restart the member in place on its claim)"},
		{name: "a member whose pod ended after a long life of restarts is restarted in place, not replaced",
			mods: mods(spec(withPVC), claims(memberA, memberB, memberC), podIs(memberC, failed, restarted(5))),
			want: "delete failed pod example-c"},
		{name: "a member being patched by an upgrade is not dead, however often its container restarted",
			mods: mods(spec(withPVC), claims(memberA, memberB, memberC), spec(withVersion("3.5.22")), podIs(memberC, onVersion("3.5.22"), crashLooping(9)), restartsInWindow(memberC, 9), upgrading(memberC, "3.5.22")),
			want: "wait (member example-c is restarting on 3.5.22)"},

		// Restore from a backup only when no member has data left.
		{name: "members crash-looping on their claims are not restored from a backup: their claims hold data",
			mods: mods(spec(withPVC), recoveryOn(true), claims(memberA, memberB, memberC),
				podIs(memberA, crashLooping(5)), podIs(memberB, crashLooping(5)), podIs(memberC, crashLooping(5)),
				restartsInWindow(memberA, 5), restartsInWindow(memberB, 5), restartsInWindow(memberC, 5), quorumLostAgo(time.Hour)),
			want: "wait (disaster recovery cannot start: members example-a, example-b, example-c hold data on their claims"},
		{name: "members whose claims are gone and whose pods are gone are restored from the newest backup",
			mods: mods(spec(withPVC), recoveryOn(true), noPods, quorumLostAgo(time.Hour)),
			want: "restore from the newest backup"},
		{name: "an emptyDir member whose pod still crash-loops holds data: no restore from a backup",
			mods: mods(recoveryOn(true), podIs(memberA, crashLooping(5)), restartsInWindow(memberA, 5), noPod(memberB), noPod(memberC), quorumLostAgo(time.Hour)),
			want: "wait (disaster recovery cannot start: members example-a hold data"},

		// Force a new cluster only on proof from etcd.
		{name: "a survivor is not forced while etcd cannot be read",
			mods: mods(spec(withPVC), recoveryOn(false), claims(memberA), noPod(memberB), noPod(memberC), quorumLostAgo(time.Hour), etcdFailed),
			want: "wait (disaster recovery waits: etcd could not be asked"},
		{name: "a survivor is not forced while members whose node does not answer may still run",
			mods: mods(spec(withPVC), recoveryOn(false), claims(memberA, memberB, memberC), podIs(memberB, unknownPhase), podIs(memberC, unknownPhase), quorumLostAgo(time.Hour), etcdWithoutLeaderFrom(memberA)),
			want: "wait (disaster recovery waits: member example-b"},
		{name: "a survivor is not forced while a member shown crash-looping is on a node that is not Ready: its kubelet's last word may be out of date",
			mods: mods(spec(withPVC), recoveryOn(false), claims(memberA, memberB, memberC), podIs(memberB, crashLooping(5)), podIs(memberC, crashLooping(5)), restartsInWindow(memberB, 5), restartsInWindow(memberC, 5), podNodeNotReady(memberB), quorumLostAgo(time.Hour), lossSeen(time.Hour, 5), etcdWithoutLeaderFrom(memberA)),
			want: "wait (disaster recovery waits: member example-b may still run: its node node-of-example-b is not Ready"},
		{name: "a survivor is not forced while a member reports a leader",
			mods: mods(spec(withPVC), recoveryOn(false), claims(memberA), noPod(memberB), noPod(memberC), quorumLostAgo(time.Hour), etcdLeader(memberB, memberB, memberC)),
			want: "wait (disaster recovery waits: member example-a follows leader"},
		{name: "a survivor is not forced while another survivor does not answer with its raft index",
			mods: mods(spec(withSize(5)), members(memberA, memberB, memberC, memberD, memberE), spec(withPVC), recoveryOn(false), claims(memberA, memberB),
				noPod(memberC), noPod(memberD), noPod(memberE), quorumLostAgo(time.Hour), etcdWithoutLeaderFrom(memberA)),
			want: "wait (disaster recovery waits: member example-b does not answer"},
		{name: "the grace period counts from the operator's own sight of the lost quorum, not from the Available condition",
			mods: mods(spec(withPVC), recoveryOn(false), claims(memberA), noPod(memberB), noPod(memberC), availableFalseSince(time.Hour), lossSeen(time.Minute, 5), etcdWithoutLeaderFrom(memberA)),
			want: "wait (quorum lost since 2025-03-01T11:59:00Z; disaster recovery starts at 2025-03-01T12:04:00Z"},
		{name: "an operator that restarts finds an old LostQuorum condition and counts the grace period again",
			mods: mods(spec(withPVC), recoveryOn(false), claims(memberA), noPod(memberB), noPod(memberC), availableFalseSince(time.Hour), etcdWithoutLeaderFrom(memberA)),
			want: "wait (quorum lost since 2025-03-01T12:00:00Z"},
		{name: "a survivor is forced only after several reads without a leader",
			mods: mods(spec(withPVC), recoveryOn(false), claims(memberA), noPod(memberB), noPod(memberC), lossSeen(time.Hour, 1), etcdWithoutLeaderFrom(memberA)),
			want: "wait (disaster recovery waits for more reads of etcd without a leader"},
		{name: "a survivor is forced only once the reads without a leader span the grace period, not just follow it",
			mods: mods(spec(withPVC), recoveryOn(false), claims(memberA), noPod(memberB), noPod(memberC), lossSeen(time.Hour, 5), firstLeaderlessReadAgo(time.Second), etcdWithoutLeaderFrom(memberA)),
			want: "wait (quorum lost since 2025-03-01T11:59:59Z"},
		{name: "a learner is no survivor to force: it may hold nothing of the log",
			mods: mods(spec(withSize(5)), members(memberA, memberB, memberC, memberD, memberE), learner(memberD), spec(withPVC), recoveryOn(false), claims(memberD),
				noPod(memberA), noPod(memberB), noPod(memberC), noPod(memberE), quorumLostAgo(time.Hour), etcdWithoutLeaderFrom(memberD)),
			want: "wait (disaster recovery cannot start"},
		{name: "with every survivor answering without a leader after the grace period, the one with the newest data is forced",
			mods: mods(spec(withSize(5)), members(memberA, memberB, memberC, memberD, memberE), spec(withPVC), recoveryOn(false), claims(memberA, memberB),
				noPod(memberC), noPod(memberD), noPod(memberE), quorumLostAgo(time.Hour), etcdWithoutLeaderFrom(memberA, memberB), raftIndex(memberB, 120)),
			want: "force a new cluster from example-b (the survivor with the newest data (raft index 120)"},

		// Nothing is seeded while the cluster owns claims or member pods.
		{name: "an operator restarted under a status the server does not store finds claims and no pod: the members are adopted, not seeded over",
			mods: mods(spec(withPVC), spec(withPhase(api.ClusterPhaseNone)), noMembership, noPods, claims(memberA, memberB, memberC)),
			want: "adopt"},
		{name: "a Creating cluster whose seed's claim exists but whose pod was never made seeds again",
			mods: mods(spec(withPVC), spec(withPhase(api.ClusterPhaseCreating)), noMembership, noPods, claims(memberA)),
			want: "seed"},

		// A pod stuck terminating shadows no other repair.
		{name: "a member whose pod is stuck terminating does not hold back the restart of another member",
			mods: mods(spec(withPVC), claims(memberA, memberB, memberC), stuckPod(memberB), noPod(memberC)),
			want: "restart in place example-c"},
		{name: "a pod stuck terminating is not deleted again",
			mods: mods(spec(withPVC), claims(memberA, memberB, memberC), stuckPod(memberB)),
			want: "wait (pod example-b has been terminating since"},
		{name: "after an operator restart, a pod stuck terminating does not hold back the restart of the other members",
			mods: mods(spec(withPVC), noMembership, noPods, claims(memberA, memberB, memberC), stuckPod(memberB), statusMembers(memberA, memberB, memberC)),
			want: "restart in place example-a example-c"},
		{name: "after an operator restart, a member whose pod is gone is restarted before the pods that never started are deleted",
			mods: mods(spec(withPVC), noMembership, claims(memberA, memberB, memberC), podIs(memberA, pendingFor(6*time.Minute)), stuckPod(memberB), noPod(memberC),
				statusMembers(memberA, memberB, memberC)),
			want: "restart in place example-c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(testSnapshot(tt.mods...))
			if !strings.HasPrefix(got.String(), tt.want) {
				t.Errorf("decide = %q\n    want %q...", got, tt.want)
			}
		})
	}
}

// TestStatusTellsTheTruthAboutTheQuorum: conditions and status.reason, which
// alerts and users read, say when the cluster does not serve.
func TestStatusTellsTheTruthAboutTheQuorum(t *testing.T) {
	wasAvailable := api.ClusterStatus{Phase: api.ClusterPhaseRunning, Conditions: []api.ClusterCondition{{
		Type: api.ClusterConditionAvailable, Status: corev1.ConditionTrue, Reason: reasonClusterAvailable,
	}}}
	t.Run("Available turns False when running members are not ready and etcd has no leader", func(t *testing.T) {
		s := testSnapshot(podIs(memberA, notReady), podIs(memberB, notReady), etcdWithoutLeaderFrom(memberA, memberB, memberC))
		st := statusOf(s, wasAvailable, api.ClusterPhaseRunning, 1, assess(s), outcome{})
		c := condition(&st, api.ClusterConditionAvailable)
		if c == nil || c.Status != corev1.ConditionFalse {
			t.Fatalf("Available = %+v, want False", c)
		}
		if !strings.Contains(st.Reason, "etcd has no leader") {
			t.Errorf("status.reason %q does not say etcd has no leader", st.Reason)
		}
	})
	t.Run("Available turns False when a quorum of members is not ready, before etcd is asked", func(t *testing.T) {
		s := testSnapshot(podIs(memberA, notReady), podIs(memberB, notReady))
		st := statusOf(s, wasAvailable, api.ClusterPhaseRunning, 1, assess(s), outcome{})
		if c := condition(&st, api.ClusterConditionAvailable); c == nil || c.Status != corev1.ConditionFalse {
			t.Fatalf("Available = %+v, want False", c)
		}
	})
	t.Run("one member not ready of three leaves the cluster available", func(t *testing.T) {
		s := testSnapshot(podIs(memberA, notReady))
		st := statusOf(s, wasAvailable, api.ClusterPhaseRunning, 1, assess(s), outcome{})
		if c := condition(&st, api.ClusterConditionAvailable); c == nil || c.Status != corev1.ConditionTrue {
			t.Fatalf("Available = %+v, want True", c)
		}
	})
	t.Run("a pod stuck terminating is in status.reason, and is no upgrade", func(t *testing.T) {
		s := testSnapshot(spec(withPVC), claims(memberA, memberB, memberC), stuckPod(memberB))
		st := statusOf(s, wasAvailable, api.ClusterPhaseRunning, 1, assess(s), outcome{})
		if !strings.Contains(st.Reason, "pod example-b has been terminating since") {
			t.Errorf("status.reason %q does not name the stuck pod", st.Reason)
		}
		if c := condition(&st, api.ClusterConditionUpgrading); c != nil {
			t.Errorf("Upgrading = %+v on a cluster at its version", c)
		}
	})
	t.Run("a status that names no phase and no condition may belong to a cluster that served", func(t *testing.T) {
		if !everAvailable(api.ClusterStatus{}, true) {
			t.Error("an empty status of a cluster with pods or claims (a status the server did not store, after an operator restart) counts as never available")
		}
		if everAvailable(api.ClusterStatus{}, false) {
			t.Error("a new cluster without any pod or claim counts as available")
		}
		if everAvailable(api.ClusterStatus{Phase: api.ClusterPhaseCreating}, true) {
			t.Error("a cluster the operator marked Creating before its seed counts as available")
		}
	})
}
