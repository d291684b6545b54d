package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The named histories: each broke one rule of the contract on the code it
// was written against and must keep it now, told with the steps below.

// TestContractKnownViolations are histories, told as sentences, each of
// which broke one rule of the contract on the code it was written against:
// they must keep that rule. Other rules they break are logged; the random
// histories of TestSafetyContract report those.
func TestContractKnownViolations(t *testing.T) {
	threeOnClaims := worldConfig{size: 3, claims: true}
	withRecovery := func(c worldConfig, fromBackup bool) worldConfig {
		c.recovery, c.fromBackup = true, fromBackup
		return c
	}
	monthOld := func(c worldConfig, member int, restarts int32) worldConfig {
		c.lifetimeRestarts[member] = restarts
		return c
	}
	unstored := threeOnClaims
	unstored.neverStored = true
	warmThree := threeOnClaims
	warmThree.warm = true
	tests := []struct {
		name string
		// rule is the rule the history must keep; bucket, when set, the one
		// check of it.
		rule, bucket string
		start        worldConfig
		steps        []step
	}{
		{
			name:  "a month-old member whose container restarted four times is not replaced after one OOM kill",
			rule:  "C1",
			start: monthOld(threeOnClaims, 2, 4),
			steps: []step{crash(memberC)},
		},
		{
			name:  "a month-old member is not replaced while an upgrade in place restarts its container",
			rule:  "C1",
			start: monthOld(threeOnClaims, 1, 4),
			steps: []step{upgrade(), tick(time.Second)},
		},
		{
			name:  "three crash-looping members whose claims hold their data are not restored from a backup",
			rule:  "C5",
			start: withRecovery(threeOnClaims, true),
			steps: slices.Concat(
				[]step{tick(time.Second), held(crash(memberA)), held(crash(memberB)), crash(memberC)},
				crashes(memberA, 4), crashes(memberB, 4), crashes(memberC, 4),
				[]step{tick(time.Minute), tick(6 * time.Minute)}),
		},
		{
			name:  "members on nodes that do not answer, whose etcd still leads, are not forced out by a new cluster",
			rule:  "C4",
			start: withRecovery(threeOnClaims, false),
			steps: []step{nodeLost(memberA, true, true), nodeLost(memberB, true, true), tick(6 * time.Minute)},
		},
		{
			name:  "etcd that cannot be reached is not taken for a cluster without a leader",
			rule:  "C4",
			start: withRecovery(threeOnClaims, false),
			steps: []step{nodeLost(memberB, true, false), nodeLost(memberC, true, false), unreachable(), tick(6 * time.Minute)},
		},
		{
			name:  "the grace period counts from the loss of the leader, not from an old Available condition found after an operator restart",
			rule:  "C4",
			start: withRecovery(threeOnClaims, false),
			steps: []step{
				nodeLost(memberB, true, true), nodeLost(memberC, true, true), operatorStops(),
				tick(time.Hour), nodeLost(memberB, true, true), nodeLost(memberC, true, true), operatorComesBack(),
			},
		},
		{
			name:  "an operator restarted under a status the server does not store restarts the members from their claims, never seeds",
			rule:  "C3",
			start: unstored,
			steps: []step{operatorStops(), allPodsGone(), operatorComesBack(), kubelet(), kubelet(), tick(time.Second)},
		},
		{
			name:  "the claims of members are not deleted as strays of a cluster seeded beside them",
			rule:  "C2",
			start: unstored,
			steps: []step{operatorStops(), allPodsGone(), operatorComesBack(), kubelet(), kubelet(), tick(time.Second)},
		},
		{
			name:  "a pod stuck terminating on a dead node is not deleted again and again, and does not keep another gone member from being restarted in place",
			rule:  "L1",
			start: threeOnClaims,
			steps: []step{
				held(nodeLost(memberB, false, false)), deletePod(memberB), tick(time.Minute), tick(20 * time.Second),
				held(deletePod(memberC)), podsGone(), tick(20 * time.Second), tick(20 * time.Second), tick(20 * time.Second), tick(20 * time.Second),
			},
		},
		{
			name:  "members whose pods were all deleted three times are restarted in place, not replaced, when one is then evicted: a deletion is no failure",
			rule:  "C1",
			start: warmThree,
			steps: []step{
				allPodsGone(), kubelet(), tick(time.Second), allPodsGone(), kubelet(), tick(time.Second), allPodsGone(), kubelet(),
				podEvicted(memberB), tick(time.Second),
			},
		},
		{
			name:  "a member evicted while an upgrade restarts its container, after two restarts in place, is restarted again: the upgrade's restart is no failure",
			rule:  "C1",
			start: warmThree,
			steps: []step{
				podEvicted(memberB), tick(time.Second), kubelet(), podEvicted(memberB), tick(time.Second), kubelet(),
				upgrade(), podEvicted(memberB), tick(time.Second),
			},
		},
		{
			name:  "after an operator restart, a member whose pod is gone is restarted before the pods that never started are deleted one by one",
			rule:  "L1",
			start: worldConfig{size: 5, claims: true},
			steps: []step{
				operatorStops(), allPodsDeleted(), nodeLost(memberC, true, false), tick(time.Second), operatorComesBack(),
				deletePod(memberD), tick(6 * time.Minute), tick(time.Minute), nothing(),
			},
		},
		{
			name:  "Available turns False when etcd loses its leader while its pods run",
			rule:  "L3",
			start: threeOnClaims,
			steps: []step{tick(time.Second), partition()},
		},

		// Found by TestSafetyContract beyond the histories above.
		{
			name:  "a member with a CORRUPT alarm is not removed while the quorum needs it, and the dead member beside it is replaced",
			rule:  "C1",
			start: worldConfig{size: 3, warm: true},
			steps: []step{corruptAlarm(memberA), podEvicted(memberB), tick(time.Minute), tick(6 * time.Minute)},
		},
		{
			name:  "a disaster recovery under way from a survivor is not followed by a restore from a backup while the survivor's pod terminates",
			rule:  "C5",
			start: withRecovery(warmThree, true),
			steps: []step{held(refuseData(memberA)), refuseData(memberB), tick(time.Minute), tick(6 * time.Minute), nothing()},
		},
		{
			name:   "a disaster recovery under way is not started again from another survivor while the first survivor's pod terminates",
			rule:   "C4",
			bucket: "C4 forces with a member unaccounted for",
			start:  withRecovery(worldConfig{size: 5, claims: true, warm: true}, false),
			steps: []step{
				held(refuseData(memberC)), held(refuseData(memberD)), refuseData(memberE), tick(time.Minute), tick(6 * time.Minute),
				nothing(),
			},
		},
		{
			name:   "the survivor with the newest data is chosen even when its pod shows phase Unknown",
			rule:   "C4",
			bucket: "C4 forces from an older member",
			start:  withRecovery(warmThree, false),
			steps: []step{
				crash(memberC), tick(time.Minute), held(nodeLost(memberA, true, true)), held(refuseData(memberB)), held(partition()), recoverPod(memberC),
				tick(6 * time.Minute),
			},
		},
		{
			name:  "a seed that ran is not made again: clients may have written to it",
			rule:  "C6",
			start: worldConfig{size: 1, claims: true, fresh: true},
			steps: []step{tick(time.Second), held(kubelet()), podEvicted(""), tick(time.Second)},
		},
		{
			name:  "a new cluster whose seed pod was deleted before it ran says why it waits",
			rule:  "L2",
			start: worldConfig{size: 3, fresh: true},
			steps: []step{tick(time.Second), deletePod(""), tick(5 * time.Second), tick(2 * time.Minute)},
		},
		{
			name:  "members started together are not started again over a member never ready on a node that does not answer, which formed a quorum with a member that served and was deleted",
			rule:  "C8",
			start: worldConfig{size: 3, fresh: true, together: true},
			steps: []step{nothing(), tick(time.Second), tick(6 * time.Minute), partition(), tick(time.Second),
				nodeLost("example-n006", false, false), kubelet(), operatorStops(), nodeLost("example-n005", false, true), partition(),
				tick(6 * time.Minute), deletePod("example-n004"), podsGone(), operatorComesBack(), tick(time.Minute)},
		},
		{
			name:  "a member on a node that does not answer, found by an operator that just started, is a reason in status",
			rule:  "L2",
			start: worldConfig{size: 1, claims: true},
			steps: []step{nodeLost(memberA, true, false), tick(2 * time.Minute)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := play(history{start: tt.start, steps: tt.steps}, playOptions{story: true})
			var broken, other []string
			for _, v := range r.violations {
				kept := v.rule != tt.rule || tt.bucket != "" && v.bucket() != tt.bucket
				switch {
				case !kept && !slices.Contains(broken, v.bucket()):
					broken = append(broken, v.bucket())
				case kept && !slices.Contains(other, v.bucket()):
					other = append(other, v.bucket())
				}
			}
			if len(other) > 0 {
				t.Logf("the history also breaks: %s", strings.Join(other, "; "))
			}
			if len(broken) > 0 {
				t.Errorf("%s is broken (%s):\n%s", tt.rule, strings.Join(broken, "; "), r.story())
			}
		})
	}
}

// Steps of the named histories.

func tick(d time.Duration) step {
	i := slices.Index(tickDurations, d)
	if i < 0 {
		panic(fmt.Sprintf("no tick of %v", d))
	}
	return step{ev: evTick, idx: -1, param: byte(i)}
}

func kubelet() step                 { return step{ev: evKubelet, idx: -1} }
func crash(name string) step        { return step{ev: evCrash, target: name, idx: -1, param: 2} }
func deletePod(name string) step    { return byName(step{ev: evPodDeleted}, name) }
func podsGone() step                { return step{ev: evPodsGone, idx: -1} }
func partition() step               { return step{ev: evPartition, idx: -1} }
func unreachable() step             { return step{ev: evUnreachable, idx: -1} }
func upgrade() step                 { return step{ev: evSpecVersion, idx: -1} }
func allPodsGone() step             { return step{ev: evAllPodsDeleted, idx: -1, param: 1} }
func allPodsDeleted() step          { return step{ev: evAllPodsDeleted, idx: -1} }
func operatorStops() step           { return step{ev: evOperatorRestart, idx: -1, param: 1} }
func operatorComesBack() step       { return step{ev: evOperatorRestart, idx: -1} }
func nothing() step                 { return step{ev: evNothing, idx: -1} }
func held(st step) step             { st.held = true; return st }
func podEvicted(name string) step   { return byName(step{ev: evPodFails, param: 1}, name) }
func recoverPod(name string) step   { return step{ev: evRecover, target: name, idx: -1} }
func refuseData(name string) step   { return step{ev: evDataRefused, target: name, idx: -1} }
func corruptAlarm(name string) step { return step{ev: evDataRefused, target: name, idx: -1, param: 1} }

// byName aims the step at name; "" aims it at the first target (the seed
// of a new cluster, whose name is random).
func byName(st step, name string) step {
	st.target, st.idx = name, -1
	if name == "" {
		st.idx = 0
	}
	return st
}

// crashes are n more failures of a crash-looping member's etcd, one after
// the other.
func crashes(name string, n int) []step {
	var out []step
	for range n {
		out = append(out, crash(name))
	}
	return out
}

// nodeLost makes the node of name's pod stop answering: the pod shows phase
// Unknown when unknownPhase, and its etcd runs on when etcdRuns.
func nodeLost(name string, unknownPhase, etcdRuns bool) step {
	st := step{ev: evNodeLost, target: name, idx: -1}
	if unknownPhase {
		st.param |= 1
	}
	if etcdRuns {
		st.param |= 2
	}
	return st
}
