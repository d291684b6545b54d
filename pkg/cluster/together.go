package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// Members started together (spec.bootstrap.mode Together): a new cluster's
// members are made at once, from one static --initial-cluster naming all of
// them, --initial-cluster-state=new and one new --initial-cluster-token,
// as etcd's own clustering guide starts a cluster. Etcd's rule of one
// membership change at a time protects data; a cluster being born holds
// none, so its members need not be added one by one.
//
// What was planned is read from the pods' own flags (startedTogether),
// never from the goroutine's memory: an operator that restarts in the middle
// of a start finds the plan on the pods it made. Until the cluster was first
// available:
//
//   - a member of the plan whose pod is gone and whose claim is there is made
//     again on its claim, with the plan's flags (etcd takes whatever it wrote
//     there and ignores the flags);
//   - a member whose pod is gone, and no claim, is made again from the plan
//     when no other member's etcd ever ran, or when fewer than a quorum of
//     members can have run it (mayHaveRun, counting those gone): then no
//     quorum ever formed and nothing was ever committed;
//   - when a member's pod cannot start (it ended, or is pending in vain) on
//     the same proof, the members are started again with new names and a
//     new token (restartTogether).
//
// Once etcd has a leader, or answered the operator once, or a quorum of
// members may have run, the members are repaired as any cluster's: a member
// that never started is replaced as a dead member, through a learner.

// togetherPlan is what a start together made: the members' names, their
// --initial-cluster and the token.
type togetherPlan struct {
	names []string
	pairs []string
	token string
}

// startedTogether reads the plan from the cluster's live pods that were
// made to start together; nil when there are none, or when they disagree
// (pods of two starts: the ordinary ladder sorts them out).
func startedTogether(s *snapshot) *togetherPlan {
	var plan *togetherPlan
	for _, name := range sortedKeys(s.pods) {
		pairs, token := k8sutil.StartedTogether(s.pods[name])
		switch {
		case pairs == nil:
		case plan == nil:
			plan = &togetherPlan{pairs: pairs, token: token}
			for _, pair := range pairs {
				member, _, _ := strings.Cut(pair, "=")
				plan.names = append(plan.names, member)
			}
		case plan.token != token || !slices.Equal(plan.pairs, pairs):
			return nil
		}
	}
	if plan != nil && !slices.Contains(plan.names, "") {
		return plan
	}
	return nil
}

// startTogether is the choice of step 4 (bootstrap) for a cluster whose
// spec asks for its members to start together: every member at once,
// instead of a seed. A claim left by an earlier try is a seed's, started on
// as the seed-and-join bootstrap does.
func startTogether(s *snapshot) (action, bool) {
	if !s.spec.Spec.StartsTogether() || len(s.claims) > 0 {
		return action{}, false
	}
	return action{kind: actStartTogether, version: s.spec.Spec.Version,
		reason: fmt.Sprintf("%d members from one static initial cluster", s.spec.Spec.Size)}, true
}

// bootstrapTogether is step 3c: the members of a start together that have
// no pod, or cannot start, before the cluster was ever available.
func bootstrapTogether(s *snapshot) (action, bool) {
	if s.everAvailable || s.podExpect != nil {
		// Pods just made and not in the cache yet would look gone.
		return action{}, false
	}
	plan := startedTogether(s)
	if plan == nil {
		return startAgainFromNothing(s)
	}
	if quorumFormed(s) != "" {
		return action{}, false
	}
	var gone, onClaims, stuck []string
	// lost are the members whose claim's volume went with its node: they
	// may have run, like the gone.
	lost := 0
	for _, name := range plan.names {
		pod := s.pods[name]
		switch {
		case pod != nil && cannotStart(s, pod):
			stuck = append(stuck, name)
		case pod != nil, s.terminating[name] != nil:
		case s.usesClaims() && s.claims[name] != nil && s.volumeNodeGone[name] != "":
			// Its claim's volume went with its node, and its data: no pod
			// can start on that claim.
			stuck = append(stuck, name)
			lost++
		case s.usesClaims() && s.claims[name] != nil:
			onClaims = append(onClaims, name)
		default:
			gone = append(gone, name)
		}
	}
	if len(onClaims) > 0 {
		// Whatever their etcd wrote is on their claims and is kept: no
		// evidence is needed to start them again.
		return action{kind: actResumeTogether, names: onClaims, version: s.spec.Spec.Version,
			reason: "members started together whose pods are gone come back on their claims"}, true
	}
	if len(gone) == 0 && len(stuck) == 0 {
		return action{}, false
	}
	ran, why := mayHaveRun(s, plan)
	// Fewer than a quorum can ever have run: no quorum ever committed
	// anything, on any member.
	noQuorumEver := ran+len(gone)+lost < len(plan.names)/2+1
	switch {
	case len(gone) > 0 && (noQuorumEver || ran == 0):
		// Made again with their names: with no member left that ran, no
		// member remembers anything of them (what the gone ones may have
		// run went with their pods).
		return action{kind: actResumeTogether, names: gone, version: s.spec.Spec.Version,
			reason: "members started together whose pods are gone are made again: no member left ran with them"}, true
	case len(stuck) > 0 && len(gone) == 0 && noQuorumEver:
		if pod := s.pods[stuck[0]]; pod != nil {
			_, cause := podTroubleCause(pod, s.claims[stuck[0]], s.now)
			if a, ok := replacementWaits(s, "member "+stuck[0], cause); ok {
				return a, true
			}
		}
		return action{kind: actRestartTogether, names: plan.names,
			reason: fmt.Sprintf("%s cannot start and no quorum ever formed: they start again with a new token", strings.Join(stuck, ", "))}, true
	case len(gone) > 0 && runningOrStarting(s, plan) < len(plan.names)/2+1:
		// No quorum can form from the members left: the ladder could do
		// nothing either. Say why nothing is made.
		return waiting(fmt.Sprintf("members %s started together have no pod and are not made again: %s, and with them a quorum may have formed and served; "+
			"recreate them by hand with the flags of the others, or delete the EtcdCluster to start it again", strings.Join(gone, ", "), why)), true
	}
	// A quorum may have formed: the members are repaired as any
	// cluster's, which waits for a quorum and says so.
	return action{}, false
}

// startAgainFromNothing starts a cluster that was to start together again,
// once it owns nothing at all: a start together made again that an operator
// restart interrupted after its last deletion, before the status said
// Creating. Without a pod or a claim there is no data anywhere to lose.
func startAgainFromNothing(s *snapshot) (action, bool) {
	if !s.spec.Spec.StartsTogether() || s.phase != api.ClusterPhaseRunning ||
		len(s.pods) > 0 || len(s.terminating) > 0 || len(s.claims) > 0 || s.claimsUnseen {
		return action{}, false
	}
	return action{kind: actRecordCreating, reason: "a cluster that never served owns no pod and no claim: it is started again"}, true
}

// quorumFormed says what shows that the members started together formed a
// quorum once, "" when nothing does: etcd's leader read in this pass, or a
// member's role that etcd told in an earlier pass (the status keeps it).
func quorumFormed(s *snapshot) string {
	if s.etcd != nil && s.etcd.err == nil && s.etcd.health.LeaderID != 0 {
		return "etcd has a leader"
	}
	if s.status.Leader != "" {
		return "etcd named a leader before"
	}
	for _, d := range s.status.MemberDetails {
		if d.Role != "" && d.Role != api.MemberRoleUnknown {
			return "member " + d.Name + " answered etcd before"
		}
	}
	return ""
}

// mayHaveRun counts the members of the plan still in the cluster (a pod, a
// pod being deleted) whose etcd may have run, and says which. A pod whose
// etcd never ran holds nothing; on a claim, only if it is the first pod
// made on it (an earlier one may have written there). A pod being deleted,
// or on a node that does not answer, may be running its etcd still. The
// members with no pod are the caller's to count: whether they ran is not
// known, and their data went with their pods.
func mayHaveRun(s *snapshot, plan *togetherPlan) (int, string) {
	var names []string
	for _, name := range plan.names {
		pod := s.pods[name]
		switch {
		case pod == nil && s.terminating[name] != nil:
			names = append(names, name+" (being deleted)")
		case pod == nil:
		case s.usesClaims() && !k8sutil.IsFirstOnClaim(pod):
			names = append(names, name+" (on a claim an earlier pod may have written)")
		case pod.Status.Phase == corev1.PodUnknown || !k8sutil.EtcdNeverRan(pod):
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return 0, ""
	}
	return len(names), "the etcd of " + strings.Join(names, ", ") + " ran"
}

// runningOrStarting counts the members of the plan whose pod runs, or is
// pending and may still start.
func runningOrStarting(s *snapshot, plan *togetherPlan) int {
	n := 0
	for _, name := range plan.names {
		if pod := s.pods[name]; pod != nil && (pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodPending && !cannotStart(s, pod)) {
			n++
		}
	}
	return n
}

// startTogether creates every member's claim and pod at once, with one
// --initial-cluster naming them all. The claim of each goes first, so that
// a pod never waits for one; each pod is the first on its claim.
func (c *Cluster) startTogether(ctx context.Context, s *snapshot, a action) outcome {
	members := etcdutil.MemberSet{}
	for range s.spec.Spec.Size {
		members.Add(c.newMember(s))
	}
	// The CR's UID in the token keeps a cluster re-created under the same
	// name from ever talking to its predecessor's members.
	plan := &togetherPlan{names: members.Names(), pairs: members.PeerURLPairs(), token: string(s.spec.UID) + "-" + c.randomSuffix()}
	if err := c.makeTogether(ctx, s, plan, plan.names, a.version); err != nil {
		return outcome{err: err}
	}
	c.knownMembership.learn(members)
	c.tell(corev1.EventTypeNormal, eventNewMemberAdded, fmt.Sprintf("Members %s started together", strings.Join(plan.names, ", ")))
	c.log.Infof("created members %s together", strings.Join(plan.names, ", "))
	return outcome{phase: api.ClusterPhaseRunning, requeue: c.cfg.MinPassInterval}
}

// resumeTogether makes the pods of members of the plan that have none,
// with the plan's flags; the membership is the plan's.
func (c *Cluster) resumeTogether(ctx context.Context, s *snapshot, a action) outcome {
	plan := startedTogether(s)
	if plan == nil {
		return outcome{err: fmt.Errorf("resume the members started together: no pod tells the plan any more")}
	}
	c.log.Infof("%s: %s", a.reason, strings.Join(a.names, ", "))
	if err := c.makeTogether(ctx, s, plan, a.names, a.version); err != nil {
		return outcome{err: err}
	}
	members := etcdutil.MemberSet{}
	for _, name := range plan.names {
		m := memberTemplate(s.spec)
		m.Name = name
		members.Add(&m)
	}
	c.knownMembership.learn(members)
	return outcome{phase: api.ClusterPhaseRunning, requeue: c.cfg.MinPassInterval}
}

// makeTogether creates the claims and pods of the named members of plan.
func (c *Cluster) makeTogether(ctx context.Context, s *snapshot, plan *togetherPlan, names []string, version string) error {
	for _, name := range names {
		m := memberTemplate(s.spec)
		m.Name = name
		var opts []k8sutil.PodOption
		if s.usesClaims() && s.claims[name] == nil {
			if err := c.createClaim(ctx, s, name, version); err != nil {
				return err
			}
			opts = append(opts, k8sutil.WithFirstOnClaim())
		}
		if err := c.createPod(ctx, k8sutil.NewEtcdPod(s.spec, &m, version, plan.pairs, k8sutil.ClusterStateNew, plan.token, opts...)); err != nil {
			return err
		}
	}
	return nil
}

// restartTogether deletes the claims, then the pods, of members started
// together that never served, so that the next pass starts them again with
// new names and a new token. The claims go first: a claim in use stays until
// its pod is gone, and a pod left by an interrupted pass still tells the
// plan, so the next pass goes on.
func (c *Cluster) restartTogether(ctx context.Context, s *snapshot, a action) outcome {
	c.log.Infof("starting the members again: %s", a.reason)
	for _, name := range a.names {
		if pod := s.pods[name]; pod != nil && cannotStart(s, pod) {
			// A start that fails the same way waits longer each time.
			_, cause := podTroubleCause(pod, s.claims[name], s.now)
			c.recordReplacement(cause, s.spec.Generation)
			break
		}
	}
	for _, name := range a.names {
		if s.claims[name] != nil {
			if err := c.deleteClaim(ctx, s, name); err != nil {
				return outcome{err: err}
			}
		}
	}
	// Those whose etcd ran go first: a pass interrupted in between finds
	// the members that may have run as many as before (a deleted one may
	// have run too), and goes on.
	names := slices.Clone(a.names)
	slices.SortStableFunc(names, func(x, y string) int {
		return boolOrder(s.pods[x] != nil && k8sutil.EtcdNeverRan(s.pods[x]), s.pods[y] != nil && k8sutil.EtcdNeverRan(s.pods[y]))
	})
	for _, name := range names {
		if s.pods[name] == nil {
			continue
		}
		if err := c.deletePod(ctx, name); err != nil {
			return outcome{err: err}
		}
	}
	c.tell(corev1.EventTypeNormal, eventReplacingDeadMember, fmt.Sprintf("The members %s started together never served and start again", strings.Join(a.names, ", ")))
	c.knownMembership.forget()
	return outcome{phase: api.ClusterPhaseCreating, requeue: c.cfg.MinPassInterval}
}

// cannotStart tells whether a member's pod ended, or has been pending in
// vain. A pod on a node that does not answer may still run its etcd.
func cannotStart(s *snapshot, pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded || s.pendingInVain(pod) != ""
}

// boolOrder sorts false before true.
func boolOrder(x, y bool) int {
	switch {
	case x == y:
		return 0
	case y:
		return -1
	}
	return 1
}
