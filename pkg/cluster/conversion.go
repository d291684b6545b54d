package cluster

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// Conversion: with spec.adoption.convert, the members coreos/etcd-operator
// made are replaced, one at a time, by members of this operator's layout,
// until none is left and the cluster is one this operator could have made.
//
// Each replacement adds first and removes second, as a scale up by one
// followed by a scale down by one: a member of this layout joins (as a
// learner where etcd has them, promoted once it has caught up), and only
// once it votes and every member is ready is one of the original's members
// removed from etcd, then its pod and claim deleted. The cluster never has
// fewer voting members than spec.size, so it keeps its fault tolerance
// throughout; the original's restart policy Never and its probes are never
// relied on. A member whose data is on a claim is replaced the same way: the
// new member receives the data from the leader, and the original's claim
// goes with its member.
//
// The original's members are removed followers first; the leader last,
// after leadership moved to a member of this layout.
//
// A member whose data is on a claim (the original's persistentVolumeClaimSpec,
// a claim named as the member, mounted where this layout mounts its own) is
// not replaced but restarted on that claim: its pod is deleted and one of this
// layout made on the same claim, under the same name, so etcd finds its data
// and starts as the same member, with no copy. One member at a time, as an
// upgrade patches them: every member ready, caught up with the leader, the
// followers first and the leader last after a hand-off. A cluster of one or
// two members would lose its quorum while one restarts: its members are
// replaced instead.
//
// Conversion starts only from a cluster at rest: every member running and
// ready, spec.size as etcd's membership (or one more while a replacement is
// under way, or one fewer after a lost member was removed), spec.version as
// the members run, and no pod that is neither a member nor one joining.
// Anything else is said and waited on, as for an adopted cluster that is not
// converted. The exception is a member that cannot come back: it is
// replaced first, as this operator replaces its own.

// convertAdopted is what adoptedFromTheOriginal decides for an adopted
// cluster whose spec asks for its conversion.
func convertAdopted(s *snapshot) (action, bool) {
	if a, ok := expectations(s); ok {
		return a, true
	}
	// A member whose pod is gone or ended and whose data is on a claim is
	// restarted on that claim, in this operator's layout: that is its
	// conversion, and the one a running member on a claim gets too
	// (convertOnClaims).
	if a, ok := restartInPlace(s); ok {
		return a, true
	}
	// A member that cannot come back (its pod gone with the emptyDir its
	// data was on) is replaced first, as one of this operator's own would
	// be, on the same proof: etcd's leader confirms in this pass that it
	// does not answer, and the others keep a quorum. The conversion would
	// replace it anyway, and nothing else can be converted while it is
	// missing.
	if a, ok := replaceDeadMembers(s); ok {
		return a, true
	}
	if held := conversionHolds(s); len(held) > 0 {
		return waiting("adopted members are not converted while " + strings.Join(held, "; ")), true
	}
	if len(s.membership.Learners()) > 0 {
		return promoteLearners(s)
	}
	size := s.spec.Spec.Size
	if len(s.views) == size-1 {
		// A lost member was replaced: its successor, of this layout.
		return nextAdd(s)
	}
	original := membersTheOriginalMade(s)
	if len(original) == 0 {
		// Every member is of this layout; the pods the original made
		// still terminate (conversionHolds waits for them).
		return action{kind: actIdle}, true
	}
	if a, ok := convertOnClaims(s, original); ok {
		return a, true
	}
	if len(s.views) == size {
		return nextAdd(grownByOne(s))
	}
	// One member more than spec.size: the newest member votes; one of the
	// original's goes.
	if a, ok := readyForChange(s, "remove a member coreos/etcd-operator made"); ok {
		return a, true
	}
	leader := s.etcd.health.LeaderID
	for _, name := range original {
		if s.views[name].member.ID != leader {
			return action{kind: actRemoveMember, member: name, reason: conversionReason(len(original))}, true
		}
	}
	if a, ok := handOff(s, leader); ok {
		return a, true
	}
	return action{kind: actRemoveMember, member: original[0], reason: conversionReason(len(original))}, true
}

// conversionReason says why a member the original made is removed.
func conversionReason(left int) string {
	if left == 1 {
		return "converted: the last member coreos/etcd-operator made, replaced by one of this operator's layout"
	}
	return fmt.Sprintf("converted: one of %d members coreos/etcd-operator made, replaced by one of this operator's layout", left)
}

// grownByOne is the snapshot as it would be if spec.size asked for one
// member more: the join machinery (nextAdd) then adds the new member exactly
// as for a scale up.
func grownByOne(s *snapshot) *snapshot {
	grown := *s
	spec := *s.spec
	spec.Spec.Size++
	grown.spec = &spec
	return &grown
}

// membersTheOriginalMade are the members whose pods coreos/etcd-operator made,
// sorted.
func membersTheOriginalMade(s *snapshot) []string {
	var out []string
	for _, name := range sortedKeys(s.views) {
		if pod := s.views[name].pod; pod != nil && k8sutil.IsOriginalPod(pod) {
			out = append(out, name)
		}
	}
	return out
}

// conversionHolds says what keeps the conversion from its next change:
// anything but a cluster at rest or one replacement under way.
func conversionHolds(s *snapshot) []string {
	var held []string
	for _, name := range s.membership.Names() {
		m := s.views[name]
		if m.member.IsLearner {
			continue // a join under way: promoteLearners follows it
		}
		switch {
		case m.state != memberRunning:
			held = append(held, fmt.Sprintf("member %s does not run (%s)", name, m.state))
		case !m.ready:
			held = append(held, fmt.Sprintf("member %s is not ready", name))
		}
	}
	for _, name := range s.strayPods {
		held = append(held, fmt.Sprintf("pod %s is no member of etcd and none joining", name))
	}
	for _, name := range sortedKeys(s.terminating) {
		if s.membership[name] == nil {
			held = append(held, fmt.Sprintf("pod %s is being deleted", name))
		}
	}
	if n, size := len(s.views), s.spec.Spec.Size; n < size-1 || n > size+1 {
		held = append(held, fmt.Sprintf("spec.size is %d and etcd has %d members (resize after the conversion)", size, n))
	}
	if want, other := podsOffSpecVersion(s); len(other) > 0 {
		held = append(held, fmt.Sprintf("spec.version asks for %s and members run other versions (%s); set spec.version to the version they run, and upgrade after the conversion",
			want, strings.Join(other, ", ")))
	}
	return held
}

// convertOnClaims is the conversion of a running member the original made
// whose data is on a claim: a restart in place, in this operator's layout.
// Nothing to decide while a replacement is half made (one member more than
// spec.size): its removal comes first.
func convertOnClaims(s *snapshot, original []string) (action, bool) {
	if !s.usesClaims() || len(s.views) != s.spec.Spec.Size {
		return action{}, false
	}
	var onClaims []string
	for _, name := range original {
		if s.claims[name] != nil {
			onClaims = append(onClaims, name)
		}
	}
	if len(onClaims) == 0 {
		return action{}, false
	}
	if s.quorum.voters < 3 {
		// Down for its restart, one of one or two members would take the
		// quorum with it; a replacement keeps the cluster available.
		return action{}, false
	}
	if a, ok := readyForUpgrade(s); ok {
		return a, true
	}
	reason := fmt.Sprintf("converted in place: restarted on its claim in this operator's layout (%d of the original's members left)", len(original))
	leader := s.etcd.health.LeaderID
	for _, name := range onClaims {
		if s.views[name].member.ID != leader {
			return action{kind: actConvertInPlace, member: name, reason: reason}, true
		}
	}
	if a, ok := handOff(s, leader); ok {
		return a, true
	}
	return action{kind: actConvertInPlace, member: onClaims[0], reason: reason}, true
}

// convertInPlace deletes the pod of a member the original made, the one the
// pass saw, so that the next pass restarts the member on its claim in this
// operator's layout (restartInPlace): its data stays on the claim.
func (c *Cluster) convertInPlace(ctx context.Context, s *snapshot, a action) outcome {
	m := s.views[a.member]
	if m == nil || m.pod == nil {
		return outcome{}
	}
	c.log.WithFields(map[string]any{"member": a.member, "why": a.reason}).Info("deleting the pod the original made, for a restart on its claim")
	if err := c.deleteSeenPod(ctx, s, a.member, "for its conversion in place"); err != nil {
		return outcome{err: err}
	}
	c.tell(corev1.EventTypeNormal, eventConvertedInPlace, fmt.Sprintf("Member %s, made by coreos/etcd-operator, is restarted on its claim in this operator's layout", a.member))
	return outcome{requeue: c.cfg.MinPassInterval, downed: a.member}
}
