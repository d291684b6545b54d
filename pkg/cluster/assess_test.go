package cluster

import (
	"strings"
	"testing"
	"time"
)

// TestStartProblems covers what status.reason says of members that do not
// start, and what it advises.
func TestStartProblems(t *testing.T) {
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
