package cluster

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/etcdversion"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// resize is step 15 of decide.
func resize(s *snapshot) (action, bool) {
	n := len(s.views)
	switch {
	case wantsMember(s):
		return nextAdd(s)
	case n > s.spec.Spec.Size:
		return pickMemberToRemove(s)
	}
	return action{}, false
}

func nextAdd(s *snapshot) (action, bool) {
	chain := joinChain(s)
	if len(chain) == 0 {
		// Its --initial-cluster names the membership: it has to be etcd's.
		if a, ok := needEtcd(s, "create a joining pod"); ok {
			return a, true
		}
		return action{kind: actCreateJoiner, version: s.plan.newMembers}, true
	}
	joiner := s.joiners[chain[0]]
	if !k8sutil.HasPassedDNSCheck(joiner) {
		if a, ok := joinerAheadOfTurn(s, "while "+joiner.Name+" starts"); ok {
			if b, ok := needEtcd(s, "create a joining pod"); ok {
				return b, true
			}
			return a, true
		}
		return waiting(fmt.Sprintf("the pod of joining member %s does not resolve in DNS yet", joiner.Name)), true
	}
	if a, ok := readyForChange(s, "add member "+joiner.Name); ok {
		return a, true
	}
	a := action{kind: actAddJoiner, member: joiner.Name, learner: learnersSupported(s)}
	if !a.learner {
		a.reason = "a voter: etcd before 3.4 has no learners"
	}
	return a, true
}

// joinerAheadOfTurn chooses to make the next joining pod ahead of its turn,
// while the change before it completes, so that its check-dns runs meanwhile and only
// MemberAdd and the promotion stay serial. Nothing changes in etcd: the
// member is added in step 14 or 15 once the change before it is done and
// etcd's leader has confirmed the membership, and a pod that no longer
// matches the membership by then is deleted in step 12. Where etcd takes
// more than one learner, a pod is also made behind the joining pods not
// added yet, its --initial-cluster naming them, as many as etcd will take
// as learners at once.
func joinerAheadOfTurn(s *snapshot, why string) (action, bool) {
	if len(s.strayPods) > 0 || len(s.terminating) > 0 || s.plan.refused != nil || !wantsMember(s) {
		return action{}, false
	}
	chain := joinChain(s)
	switch {
	case len(chain) != len(s.joiners):
		return action{}, false // the unusable ones go first (step 12)
	case len(chain) == 0:
		return action{kind: actCreateJoiner, version: s.plan.newMembers, without: leaving(s), reason: why}, true
	case len(chain) >= s.learnerSlots || len(leaving(s)) > 0 ||
		len(s.views)+len(chain) >= s.spec.Spec.Size:
		return action{}, false
	}
	return action{kind: actCreateJoiner, version: s.plan.newMembers, behind: chain, reason: why}, true
}

// learnersSupported tells whether the new member and every running one run
// an etcd release that has learners.
func learnersSupported(s *snapshot) bool {
	versions := []string{s.plan.newMembers}
	for _, m := range s.views {
		if m.pod != nil {
			versions = append(versions, podVersion(m.pod))
		}
	}
	for _, v := range versions {
		if !releaseHas(v, func(r etcdversion.Release) bool { return r.Learners }) {
			return false
		}
	}
	return true
}

// cleanUp is step 12 of decide.
func cleanUp(s *snapshot) (action, bool) {
	if len(s.strayPods) > 0 {
		if a, ok := needEtcd(s, "delete a pod that belongs to no member"); ok {
			return a, true
		}
		return action{kind: actDeleteStrayPod, member: s.strayPods[0], reason: "it belongs to no member of the cluster"}, true
	}
	for _, name := range sortedKeys(s.joiners) {
		if why := unusableJoiner(s, name); why != "" {
			// One that ended as the joining pods before it did stays, for
			// its status to say why, until its back-off has passed.
			if a, ok := replacementWaits(s, "joining member "+name, endedJoinerCause(s, name)); ok {
				return a, true
			}
			if a, ok := needEtcd(s, "delete a joining pod"); ok {
				return a, true
			}
			return action{kind: actDeleteJoiner, member: name, reason: why}, true
		}
	}
	if len(s.strayClaims) > 0 {
		if a, ok := needEtcd(s, "delete a claim that belongs to no member"); ok {
			return a, true
		}
		return action{kind: actDeleteStrayClaim, member: s.strayClaims[0], reason: "it belongs to no member, pod or joining pod of the cluster"}, true
	}
	return action{}, false
}

// endedJoinerCause is why a joining pod ended (the kubelet rejected it, its
// etcd exited), "" when it has not ended: the next one made for the same
// spec would most likely end the same way.
func endedJoinerCause(s *snapshot, name string) string {
	pod := s.joiners[name]
	if pod == nil || !k8sutil.IsPodDead(pod) {
		return ""
	}
	_, cause := podTroubleCause(pod, s.claims[name], s.now)
	return cause
}

// unusableJoiner says why a joining pod can never be added, "" when it can.
// Its member was never added, so etcd knows nothing of it and the pod and its
// claim may go at any time. Of several usable ones, those of joinChain are
// kept.
func unusableJoiner(s *snapshot, name string) string {
	if why := joinerProblem(s, name); why != "" {
		return why
	}
	if !slices.Contains(joinChain(s), name) {
		return "another joining pod is used"
	}
	return ""
}

func joinerProblem(s *snapshot, name string) string {
	pod := s.joiners[name]
	switch {
	case !wantsMember(s):
		return "no member is to be added any more"
	case k8sutil.IsPodDead(pod):
		return "it ended before its member was added"
	case !k8sutil.HasPassedDNSCheck(pod) && k8sutil.IsPodPendingTooLong(pod, s.now, s.pendingTimeout):
		return fmt.Sprintf("it has not started within %v", s.pendingTimeout)
	case podVersion(pod) != s.plan.newMembers:
		return fmt.Sprintf("it was made for etcd %s and new members now run %s", displayVersion(podVersion(pod)), s.plan.newMembers)
	case podPolicyChanged(s, pod):
		// A new member follows the spec in force: one made unschedulable
		// by the old spec.pod would otherwise wait out the pending timeout.
		return "spec.pod changed since it was made"
	}
	ahead := joinersAhead(s, name)
	if len(ahead) > 0 && !usableAhead(s, name, ahead) ||
		!slices.Equal(k8sutil.InitialCluster(pod), initialClusterWith(s, name, ahead, nil)) &&
			!slices.Equal(k8sutil.InitialCluster(pod), initialClusterWith(s, name, ahead, leaving(s))) {
		return "the membership changed since it was made"
	}
	return ""
}

// joinersAhead are the members a joining pod's --initial-cluster names that
// etcd does not list yet: the joining members made before it, to be added
// before it (joinerAheadOfTurn).
func joinersAhead(s *snapshot, name string) []string {
	var ahead []string
	for _, pair := range k8sutil.InitialCluster(s.joiners[name]) {
		other, _, _ := strings.Cut(pair, "=")
		if _, member := s.views[other]; !member && other != name {
			ahead = append(ahead, other)
		}
	}
	return ahead
}

// usableAhead tells whether the joining pods a joining pod was made behind
// can still be added before it: each one usable and itself first in line,
// with room among etcd's learners for all of them.
func usableAhead(s *snapshot, name string, ahead []string) bool {
	if len(ahead) >= s.learnerSlots {
		return false
	}
	for _, other := range ahead {
		if _, ok := s.joiners[other]; !ok || other == name || len(joinersAhead(s, other)) > 0 || joinerProblem(s, other) != "" {
			return false
		}
	}
	return true
}

// joinChain are the joining pods to be added, in the order of their adds:
// the first usable one (by name) that names only members, then the one
// made behind it, as far as etcd's learners (snapshot.learnerSlots) and
// spec.size leave room.
func joinChain(s *snapshot) []string {
	if !wantsMember(s) {
		return nil
	}
	room := max(1, s.spec.Spec.Size-(len(s.views)-len(leaving(s))))
	var chain []string
	for len(chain) < min(room, s.learnerSlots) {
		next := ""
		for _, name := range sortedKeys(s.joiners) {
			if !slices.Contains(chain, name) && slices.Equal(joinersAhead(s, name), chain) && joinerProblem(s, name) == "" {
				next = name
				break
			}
		}
		if next == "" {
			break
		}
		chain = append(chain, next)
	}
	return chain
}

// countLearnerSlots is how many learners etcd takes in the membership at
// once. Every member checks the count as it applies an add, so it is the
// least any member's etcd allows, counting the new members' too: etcd's
// default of one unless every member runs a release that reads
// ETCD_MAX_LEARNERS (k8sutil.MaxLearners), which the operator sets on the
// members it makes.
func (s *snapshot) countLearnerSlots() int {
	if !holdsLearners(s.plan.newMembers) {
		return 1
	}
	slots := k8sutil.MaxLearners
	pods := make([]*corev1.Pod, 0, len(s.views)+len(s.joiners))
	for _, m := range s.views {
		pods = append(pods, m.pod)
	}
	for _, pod := range s.joiners {
		pods = append(pods, pod)
	}
	for _, pod := range pods {
		if pod == nil || !holdsLearners(podVersion(pod)) {
			return 1
		}
		// A member being patched from an older version may still run it.
		if v := runningVersion(pod); v != "" && !holdsLearners(v) {
			return 1
		}
		slots = min(slots, k8sutil.PodMaxLearners(pod))
	}
	return slots
}

// holdsLearners tells whether etcd of version takes ETCD_MAX_LEARNERS
// learners at once rather than one.
func holdsLearners(version string) bool {
	return releaseHas(version, func(r etcdversion.Release) bool { return r.MaxLearners })
}

// releaseHas tells whether the release of version has a feature; an
// unknown version has none.
func releaseHas(version string, feature func(etcdversion.Release) bool) bool {
	v, err := etcdversion.Parse(version)
	return err == nil && feature(v.Release())
}

// wantsMember tells whether a member is to be added: the cluster is smaller
// than its spec, or a member that cannot be upgraded in place is to be
// replaced (added first, removed once the new one is ready). A replacement
// is the version move itself, so it waits for etcd's rules to allow the
// move (judgeVersionMove), which needs etcd's view of the members.
func wantsMember(s *snapshot) bool {
	n := len(s.views) - len(leaving(s))
	return n < s.spec.Spec.Size || n == s.spec.Spec.Size && len(s.plan.replace) > 0 && s.versionMove != nil
}

// leaving are the members that step 13 removes from etcd to replace them:
// a joining pod may be made for their successors before they are removed,
// with an --initial-cluster that leaves them out.
func leaving(s *snapshot) []string {
	var out []string
	for _, name := range sortedKeys(s.views) {
		if s.views[name].repair == repairReplace {
			out = append(out, name)
		}
	}
	return out
}

// initialClusterWith is --initial-cluster for member name joining the
// membership once the joining members ahead have been added and the members
// without have left, sorted as k8sutil.InitialCluster returns it.
func initialClusterWith(s *snapshot, name string, ahead, without []string) []string {
	pairs := joiningMembership(s, append(slices.Clone(ahead), name), without).PeerURLPairs()
	slices.Sort(pairs)
	return pairs
}

// joiningMembership is the membership once the members joining are added
// and the members without removed.
func joiningMembership(s *snapshot, joining, without []string) etcdutil.MemberSet {
	membership := s.membership.Clone()
	for _, w := range without {
		membership.Remove(w)
	}
	for _, name := range joining {
		m := *s.memberTemplate()
		m.Name = name
		membership.Add(&m)
	}
	return membership
}

// promoteLearners is step 14 of decide.
func promoteLearners(s *snapshot) (action, bool) {
	names := s.membership.Learners()
	if len(names) == 0 {
		return action{}, false
	}
	// Where etcd takes another learner, the next one is added before any
	// promotion: once a learner votes, etcd refuses adds until it has been
	// connected to it for its health interval. Not before every learner's
	// etcd has started, though: a member checks its --initial-cluster
	// against the membership as it starts, and one added meanwhile would
	// make it refuse to start ("member count is unequal"), for good.
	var next *corev1.Pod
	if chain := joinChain(s); len(names) < s.learnerSlots && len(chain) > 0 {
		next = s.joiners[chain[0]]
	}
	nextResolves := next != nil && k8sutil.HasPassedDNSCheck(next)
	if nextResolves {
		if a, ok := needEtcd(s, "add member "+next.Name); ok {
			return a, true
		}
		if learnersStarted(s, names) {
			return nextAdd(s)
		}
	}
	// A learner is a join not finished: nothing else changes before it
	// votes. etcd refuses the promotion until it has caught up.
	for _, name := range names {
		m := s.views[name]
		if m.state != memberRunning {
			continue
		}
		// Holding the promotion for the next add costs nothing until the
		// learner has run for etcd's health interval: an add after the
		// promotion would wait that long anyway.
		if next != nil {
			if d := etcdStartedAt(m.pod).Add(etcdHealthInterval).Sub(s.now); d > 0 {
				a := waiting(fmt.Sprintf("learner %s votes once the next learner %s is added", name, next.Name))
				a.after = d
				// Nothing in Kubernetes tells when the learner's etcd has
				// started: etcd is asked again soon.
				a.backoff = nextResolves
				return a, true
			}
		}
		return action{kind: actPromoteLearner, member: name}, true
	}
	if a, ok := joinerAheadOfTurn(s, "while learner "+names[0]+" starts"); ok {
		if b, ok := needEtcd(s, "create a joining pod"); ok {
			return b, true
		}
		return a, true
	}
	if len(names) > 1 {
		return waiting(fmt.Sprintf("learners %s do not run yet", strings.Join(names, ", "))), true
	}
	return waiting(fmt.Sprintf("learner %s does not run yet", names[0])), true
}

// learnersStarted tells whether etcd lists every one of the learners by
// name, which a member publishes once it has started and joined.
func learnersStarted(s *snapshot, names []string) bool {
	for _, name := range names {
		h, ok := s.etcd.healthOf(s.views[name].member.ID)
		if !ok || h.Name == "" {
			return false
		}
	}
	return true
}
