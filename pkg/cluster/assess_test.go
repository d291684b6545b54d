package cluster

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// madeOnePerNode gives the pod the required anti-affinity spec.pod gives
// member pods under antiAffinity: true.
func madeOnePerNode(p *corev1.Pod) {
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}},
	}}
}

// keptOffByAntiAffinity makes the pod one the scheduler cannot place for
// the anti-affinity of the pods already on the only node.
func keptOffByAntiAffinity(p *corev1.Pod) {
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules.",
	}}}
}

// TestStartProblems covers what status.reason says of members that do not
// start, and what it advises.
func TestStartProblems(t *testing.T) {
	const joiner = "example-new"
	three := []string{memberA, memberB, memberC}
	cases := []struct {
		name string
		mods []snapMod
		// want are in status.reason, wantNot are not.
		want, wantNot []string
	}{
		{name: "a member whose DNS name never resolves names it and the cluster domain to check, long before the pending timeout",
			mods: mods(spec(withClusterDomain(".cluster.locl")), onlyPods(memberA, memberB, memberC), podIs(memberC, resolvingFor(90*time.Second))),
			want: []string{"member example-c does not start: its pod waits for its DNS name example-c.example.ns.svc.cluster.locl to resolve", "check spec.pod.ClusterDomain"}},
		{name: "a member that looks up its DNS name for a moment is not reported",
			mods:    mods(podIs(memberC, resolvingFor(10*time.Second))),
			wantNot: []string{"example-c"}},
		{name: "members made one per node on claims are made again by deleting a pod: the member restarts on its claim",
			mods: mods(spec(withSize(4), withPVC), claims(memberA, memberB, memberC),
				podIs(memberA, madeOnePerNode), podIs(memberB, madeOnePerNode), podIs(memberC, madeOnePerNode), joiningPod(joiner, three, keptOffByAntiAffinity)),
			want: []string{"members example-a, example-b, example-c were made when spec.pod asked for one member per node", "it restarts on its claim, with its data"}},
		{name: "members made one per node on emptyDir volumes are replaced one at a time while the others keep a quorum, with no word of claims",
			mods:    mods(spec(withSize(4)), podIs(memberA, madeOnePerNode), podIs(memberB, madeOnePerNode), podIs(memberC, madeOnePerNode), joiningPod(joiner, three, keptOffByAntiAffinity)),
			want:    []string{"its data is on an emptyDir volume and goes with the pod, and the member made in its place copies it from the others"},
			wantNot: []string{"claim"}},
		{name: "the only member, made one per node on an emptyDir volume, is not to be deleted: its data would be lost",
			mods:    mods(spec(withSize(3)), members(memberA), onlyPods(memberA), podIs(memberA, madeOnePerNode), joiningPod(joiner, []string{memberA}, keptOffByAntiAffinity)),
			want:    []string{"add a node. Do not delete their pods", "EtcdBackup"},
			wantNot: []string{"claim", "replace those members"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason := joinMessages(assess(testSnapshot(tc.mods...)))
			for _, w := range tc.want {
				if !strings.Contains(reason, w) {
					t.Errorf("reason = %q, want %q in it", reason, w)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(reason, w) {
					t.Errorf("reason = %q, want no %q in it", reason, w)
				}
			}
		})
	}
}
