package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/maintenance"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// decide is the algorithm: from the snapshot of a pass, the one action the
// pass takes. It is a pure function, and its table test (decide_test.go) is
// the specification of what the operator does. The steps run in order and the
// first one with something to do decides:
//
//  1. Hands off: no valid spec yet, a cluster the original marked Failed, a
//     cluster being deleted.
//  2. Services: the peer and client services are created when missing (even
//     while paused: the restore operator's seed waits for the peer service),
//     and the PodDisruptionBudget keeps a quorum through voluntary
//     disruptions (kubectl drain, evictions).
//  3. Paused: nothing else is touched; nor without the operator's client TLS
//     secret, when the cluster serves clients over TLS.
//  4. Bootstrap: a new cluster gets a seed member; pods found while the phase
//     still says Creating (an operator restart, the restore hand-over) are
//     adopted, and so are claims under a status that names no phase (one the
//     server did not store): nothing is seeded while the cluster owns claims
//     or member pods.
//  5. Unknown membership (operator restart, hand-over, an uncertain change):
//     read from etcd once a member pod runs; with no member running, every
//     member is restarted from the claims the status listed. A seed that
//     never ran, in a cluster that was never available, is made again.
//  6. Expectations: pods just created and not in the cache yet are waited for.
//  7. A seed that never started is made again from the spec in force.
//  8. Restart in place: a member whose pod is gone or failed, and whose claim
//     holds its data, gets a new pod on that claim: same name, same member
//     ID, no membership change and no copy of the data. Members stopped
//     together are restarted together (they need each other for a quorum);
//     this is how a cluster comes back after a node restart or after every
//     pod was deleted, with or without a quorum. A pod stuck terminating
//     holds back its own member only.
//  9. Quorum: without a quorum of voting members running, nothing is changed
//     but the opt-in disaster recovery, on proof read from etcd (recoverQuorum).
//  10. Space: with a NOSPACE alarm (the cluster takes no write), the history
//     is compacted, the members defragmented one at a time (the leader last,
//     after leadership moved away) and the alarm disarmed once every member
//     has room again.
//  11. Clean-up: pods, joining pods and claims that belong to no member.
//  12. Replacement: a member that cannot come back (its data was on an
//     emptyDir, it keeps failing after restarts in place, etcd refuses its
//     data or raised a CORRUPT alarm for it) is removed from etcd — once its
//     pod is gone and etcd confirms it does not answer — and a new member
//     replaces it in step 14. While a member whose pod is gone still answers
//     (a pod deleted at once, its etcd stopped a moment later), its
//     successor's pod is made, without it in --initial-cluster.
//  13. Learners are promoted once they run.
//  14. Size: one member is added (its pod first, then MemberAdd once the pod
//     resolves in DNS and etcd can take the change) or removed (not-ready
//     members first, the leader last).
//  15. Version: one member is patched to spec.version (not-ready members
//     first, the leader last after leadership moved away), one at a time,
//     as etcd's rules for the cluster version allow (3.6 to 3.5 through
//     etcd's downgrade API).
//  16. Day-2 care: a cluster at rest is looked at every minute; a member
//     whose free space passes the threshold, or whose scheduled run is due,
//     is defragmented (followers first, the leader last).
//  17. A pod stuck terminating (its node never confirms the deletion) is
//     waited for, and said to be; it is never deleted again.
//  18. Otherwise the cluster is what its spec asks for.
//
// Every change that depends on the membership (steps 11, 12, 14, 15) needs it
// confirmed by etcd's leader in this very pass: decide then answers "read
// etcd", the pass asks etcd and decides again.
func decide(s *snapshot) action {
	for _, step := range decisionSteps {
		if a, decided := step(s); decided {
			return a
		}
	}
	return action{kind: actIdle}
}

var decisionSteps = []func(*snapshot) (action, bool){
	handsOff,
	services,
	paused,
	bootstrap,
	unknownMembership,
	expectations,
	neverStartedSeed,
	restartInPlace,
	quorum,
	space,
	cleanUp,
	deadMembers,
	learners,
	size,
	version,
	care,
	stuckPods,
}

// etcdObserveInterval is how often the day-2 care of a cluster at rest reads
// etcd's view (database sizes, alarms): a dial and a status call per member
// a minute, and no request to Kubernetes.
const etcdObserveInterval = time.Minute

// 1.
func handsOff(s *snapshot) (action, bool) {
	switch {
	case s.spec == nil:
		return wait("no valid spec yet"), true
	case s.phase == api.ClusterPhaseFailed:
		// Never set by this operator: a cluster failed by the original is
		// left alone.
		return wait("the cluster is Failed"), true
	case s.beingDeleted:
		return wait("the cluster is being deleted"), true
	}
	return action{}, false
}

// 2.
func services(s *snapshot) (action, bool) {
	switch {
	case len(s.missingServices) > 0:
		return action{kind: actCreateServices, reason: strings.Join(s.missingServices, ", ")}, true
	case s.serviceConflict != "":
		return wait(s.serviceConflict), true
	}
	if why := budgetOutOfDate(s); why != "" {
		return action{kind: actSyncBudget, reason: why}, true
	}
	return action{}, false
}

// budgetOutOfDate says why the cluster's PodDisruptionBudget has to be made,
// changed or deleted, "" when it is what spec.size calls for: a quorum of
// members kept through voluntary disruptions, no budget for one member.
func budgetOutOfDate(s *snapshot) string {
	if !s.budgetsManaged {
		return ""
	}
	want := k8sutil.NewDisruptionBudget(s.spec)
	switch {
	case want == nil && s.budget != nil:
		return "a single member has no disruption budget"
	case want == nil:
		return ""
	case s.budget == nil:
		return fmt.Sprintf("keep %s members available through voluntary disruptions", want.Spec.MinAvailable)
	case s.budget.Spec.MinAvailable == nil || *s.budget.Spec.MinAvailable != *want.Spec.MinAvailable:
		return fmt.Sprintf("keep %s members available (spec.size changed)", want.Spec.MinAvailable)
	}
	return ""
}

// 3.
func paused(s *snapshot) (action, bool) {
	switch {
	case s.spec.Spec.Paused:
		return wait("spec.paused is true"), true
	case s.tlsProblem != nil:
		return wait("the operator's etcd client TLS secret is not usable"), true
	}
	return action{}, false
}

// 4.
func bootstrap(s *snapshot) (action, bool) {
	if s.phase != api.ClusterPhaseNone && s.phase != api.ClusterPhaseCreating {
		return action{}, false
	}
	switch {
	case len(s.pods) > 0:
		return action{kind: actAdopt, reason: fmt.Sprintf("member pods exist for a %q cluster", s.phase)}, true
	case len(s.claims) > 0 && s.phase == api.ClusterPhaseNone:
		// A status the server did not store (the original's roles) reads
		// empty after an operator restart: the claims are the members'
		// data, restarted in place once the membership is looked for.
		// Creating is written before a seed's claim, so a claim found then
		// is that seed's, from an interrupted try, and holds nothing.
		return action{kind: actAdopt, reason: "member claims exist for a cluster whose status names no phase"}, true
	case len(s.terminating) > 0:
		return wait("pods of an earlier seed are being deleted"), true
	case len(s.certProblems) > 0:
		// The seed would only fail its handshakes, over and over.
		return wait("the TLS certificates are not usable"), true
	case s.podExpect != nil:
		return wait(fmt.Sprintf("pod %s was created and is not in the cache yet", strings.Join(s.podExpect.names, ", "))), true
	}
	// A seed made again, or one whose pod was never made, starts on the
	// claim its predecessor had: whatever etcd wrote there is kept.
	return action{kind: actSeed, member: seedClaim(s), version: s.spec.Spec.Version}, true
}

// seedClaim is the claim a Creating cluster's seed starts on, "" for a new
// one: the claim of the member the status lists, else the only claim.
func seedClaim(s *snapshot) string {
	for _, name := range s.lastMembers {
		if s.claims[name] != nil {
			return name
		}
	}
	if len(s.claims) == 1 {
		return sortedKeys(s.claims)[0]
	}
	return ""
}

// 5.
func unknownMembership(s *snapshot) (action, bool) {
	if s.membership != nil {
		return action{}, false
	}
	running, starting := 0, 0
	for _, pod := range s.pods {
		switch {
		case pod.Status.Phase == corev1.PodRunning:
			running++
		case k8sutil.WaitsForMembership(pod) && pod.Status.Phase != corev1.PodRunning:
			// A joining pod cannot start before a member runs to list it.
		case pod.Status.Phase == corev1.PodPending && !k8sutil.IsPodPendingTooLong(pod, s.now, s.pendingTimeout),
			pod.Status.Phase == "":
			starting++
		}
	}
	if running > 0 && s.etcd == nil {
		return readEtcd("the membership is unknown"), true
	}
	// Members whose pods are gone come back on their claims whatever the
	// others do: same names, same data, no change etcd has to agree to.
	restart, ok := restartFromClaims(s)
	switch {
	case ok && restart.kind != actWait:
		return restart, true
	case running > 0:
		return wait("etcd did not tell its membership"), true
	case ok:
		return restart, true
	case starting > 0:
		return wait("the membership is unknown and no member pod runs yet"), true
	}
	if seed, ok := lonelyNeverStartedPod(s); ok {
		return action{kind: actReseed, member: seed, reason: "the only member pod never ran and the cluster was never available"}, true
	}
	return wait("no member pod runs"), true
}

// restartFromClaims restarts every member in place when no member runs and
// the membership cannot be read: after a node restart or after every pod was
// deleted, and an operator restart meanwhile. The members are the claims the
// status last listed as members (or every claim of the cluster, when it
// listed none); their data directories tell etcd the rest.
func restartFromClaims(s *snapshot) (action, bool) {
	if !s.usesClaims() || len(s.claims) == 0 {
		return action{}, false
	}
	var names []string
	for _, name := range sortedKeys(s.claims) {
		if len(s.lastMembers) == 0 || slices.Contains(s.lastMembers, name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return action{}, false
	}
	// A pod being deleted or on a node that does not answer holds its
	// member back, and no other: each member comes back on its own claim.
	// Members whose pods are gone are restarted before ended pods are
	// deleted, one a pass: they need no deletion to wait for.
	var gone, ended, held []string
	for _, name := range names {
		pod, live := s.pods[name]
		switch {
		case s.terminating[name] != nil:
			held = append(held, fmt.Sprintf("pod %s is being deleted", name))
		case live && pod.Status.Phase == corev1.PodUnknown:
			held = append(held, fmt.Sprintf("the node of pod %s does not answer", name))
		case live && (k8sutil.IsPodDead(pod) || k8sutil.IsPodPendingTooLong(pod, s.now, s.pendingTimeout)):
			ended = append(ended, name)
		case live:
			held = append(held, fmt.Sprintf("pod %s is starting or runs", name))
		default:
			gone = append(gone, name)
		}
	}
	switch {
	case len(gone) == 0 && len(ended) > 0:
		return deleteToRestart(s, ended[0]), true
	case len(gone) == 0:
		return wait(strings.Join(held, "; ") + "; those members are restarted in place once their pods are gone"), true
	}
	return action{kind: actRestartMembers, members: gone, version: restartVersion(s, gone), reason: "no member runs; their claims hold their data"}, true
}

// lonelyNeverStartedPod finds the one pod of a cluster that was never
// available, when that pod cannot run: such a cluster holds no data anyone
// was told is stored, so making a new seed loses nothing. A seed made by the
// restore operator (it restores a backup in init containers of its own) is
// that operator's to make again.
func lonelyNeverStartedPod(s *snapshot) (string, bool) {
	if s.everAvailable {
		return "", false
	}
	// A joining pod made while the seed started does not count: it waits
	// for a membership that never came.
	seeds := map[string]*corev1.Pod{}
	for name, pod := range s.pods {
		if !k8sutil.WaitsForMembership(pod) {
			seeds[name] = pod
		}
	}
	if len(seeds) != 1 {
		return "", false
	}
	for name, pod := range seeds {
		if !k8sutil.IsMadeByOperator(pod) {
			return "", false
		}
		if (k8sutil.IsPodDead(pod) || k8sutil.IsPodPendingTooLong(pod, s.now, s.pendingTimeout)) && seedMayBeMadeAgain(s, pod) {
			return name, true
		}
	}
	return "", false
}

// 6.
func expectations(s *snapshot) (action, bool) {
	if e := s.podExpect; e != nil {
		// Until the created pod is in the cache its member would look dead,
		// and the next change would be made on a wrong picture. Its informer
		// event wakes the loop; the deadline bounds the wait.
		a := wait(fmt.Sprintf("pod %s was created and is not in the cache yet", strings.Join(e.names, ", ")))
		a.after = e.deadline.Sub(s.now)
		return a, true
	}
	return action{}, false
}

// 7.
func neverStartedSeed(s *snapshot) (action, bool) {
	if len(s.members) != 1 || s.everAvailable {
		return action{}, false
	}
	for name, m := range s.members {
		if m.state == memberFailed && k8sutil.IsMadeByOperator(m.pod) && seedMayBeMadeAgain(s, m.pod) {
			return action{kind: actReseed, member: name, reason: "the seed never ran and the cluster was never available"}, true
		}
	}
	return action{}, false
}

// seedMayBeMadeAgain tells whether a seed of a cluster never seen available
// can be made again without losing what it may hold. On a claim it can: the
// new seed starts on that claim, and etcd finds whatever data the old one
// wrote. On an emptyDir, only a seed whose etcd never started holds nothing:
// one that started may have served between two passes.
func seedMayBeMadeAgain(s *snapshot, pod *corev1.Pod) bool {
	if s.usesClaims() && s.claims[pod.Name] != nil {
		return true
	}
	st := k8sutil.EtcdContainerStatus(pod)
	return st == nil || st.RestartCount == 0 && st.State.Running == nil && st.State.Terminated == nil && st.LastTerminationState.Terminated == nil
}

// 8.
func restartInPlace(s *snapshot) (action, bool) {
	for _, name := range sortedKeys(s.members) {
		if m := s.members[name]; m.pod != nil && k8sutil.IsForcedNewCluster(m.pod) && len(s.members) == 1 && m.state == memberRunning {
			// The survivor of a disaster recovery runs alone now: it must
			// not keep --force-new-cluster, which would wipe the members
			// added next at its next restart.
			return action{kind: actDeleteFailedPod, member: name, reason: "to restart it without --force-new-cluster, now that it runs alone"}, true
		}
	}
	var gone, ended []string
	for _, name := range sortedKeys(s.members) {
		m := s.members[name]
		switch {
		case m.repair != repairRestart || m.state == memberCrashing:
			// the kubelet restarts a crashing member in its pod
		case m.pod != nil && k8sutil.IsBeingDeleted(m.pod):
			// Deleted already, on a node that has not confirmed it: the
			// name is free once it has (step 17 says so meanwhile), and the
			// other members are not held back.
		case m.pod != nil:
			ended = append(ended, name)
		default:
			gone = append(gone, name)
		}
	}
	if len(gone) == 0 && len(ended) > 0 {
		// The pod's name has to be free for the new one. Members whose
		// pods are gone already are restarted first.
		return deleteToRestart(s, ended[0]), true
	}
	if len(gone) == 0 {
		return action{}, false
	}
	if r := s.recovering; r != nil && slices.Contains(gone, r.member) {
		if r.flagRemoved {
			return action{kind: actRestartMembers, members: []string{r.member}, version: restartVersion(s, []string{r.member}),
				reason: "disaster recovery: the survivor runs without --force-new-cluster"}, true
		}
		return action{kind: actRestartMembers, members: []string{r.member}, version: restartVersion(s, []string{r.member}), force: true,
			reason: "disaster recovery: the survivor becomes a one-member cluster with its data"}, true
	}
	return action{kind: actRestartMembers, members: gone, version: restartVersion(s, gone), reason: "their pods are gone and their claims hold their data"}, true
}

// deleteToRestart deletes member name's pod, which ended or did not start
// in time, so that the member is restarted in place on its claim under its
// name. Only a pod that ended is a failure of the member, and only the
// restart after it counts on the repair ladder: a pod that did not start
// (unschedulable, an image that cannot be pulled) says nothing of the data.
func deleteToRestart(s *snapshot, name string) action {
	if pod := s.pods[name]; pod != nil && podEnded(pod) {
		return action{kind: actDeleteFailedPod, member: name, failure: true,
			reason: fmt.Sprintf("its pod ended: restart %d of %d in place within %v, on its claim", s.claimRestarts(name)+1, ladderRestarts, ladderWindow)}
	}
	return action{kind: actDeleteFailedPod, member: name,
		reason: fmt.Sprintf("its pod has not started within %v: to restart the member in place on its claim", s.pendingTimeout)}
}

// restartVersion is the etcd version members restarted in place run: the
// version that last wrote their claims (a member upgraded in place wrote it
// when it was patched), else the oldest version made among the other
// members, else spec.version.
func restartVersion(s *snapshot, names []string) string {
	v := ""
	for _, name := range names {
		if c := s.claims[name]; c != nil {
			if cv := k8sutil.ClaimVersion(c); cv != "" && (v == "" || compareVersions(cv, v) < 0) {
				v = cv
			}
		}
	}
	if v == "" {
		v = s.plan.newMembers
	}
	if v == "" {
		v = s.spec.Spec.Version
	}
	return v
}

// 9.
func quorum(s *snapshot) (action, bool) {
	q := s.quorum
	switch {
	case q.held():
		return action{}, false
	case q.up+q.starting >= q.needed && q.voters > 0:
		if q.voters == 1 && !s.everAvailable {
			// A new cluster's seed starts: the first joiner's pod is made
			// meanwhile, from the membership the seed was made with.
			if a, ok := prepareJoiner(s, "while the seed starts"); ok {
				return a, true
			}
		}
		return wait(fmt.Sprintf("%d of %d voting members run and %d are starting; %d are needed", q.up, q.voters, q.starting, q.needed)), true
	}
	if a, ok := recoverQuorum(s); ok {
		return a, true
	}
	// Without quorum etcd cannot change its membership, and a member removed
	// now could hold the data needed to recover.
	return wait(fmt.Sprintf("quorum lost: %d of %d voting members run, %d are needed", q.up, q.voters, q.needed)), true
}

// recoverQuorum is the opt-in disaster recovery (spec.disasterRecovery) of a
// cluster whose quorum has been lost for its grace period, with the missing
// members unable to come back (their claims are gone, or the repair ladder
// gave up on them): the survivor with the newest data becomes a one-member
// cluster (etcd's --force-new-cluster, on its claim) and the cluster regrows
// from it one member at a time; with no member's data left, the cluster is
// restored from its newest successful EtcdBackup by the restore operator.
// Whatever only the lost members held is lost; status.recovery says how
// much may be.
//
// Both are taken on proof only. A survivor is forced when etcd, read in this
// pass, answers from every member that may still run, none reports a leader,
// and this goroutine has seen the quorum lost for the grace period on
// several such reads (the status's Available condition is no proof: it may
// date from before an operator restart, or from another cause). A backup is
// restored only when no member has data left: no claim, no pod that has not
// ended.
func recoverQuorum(s *snapshot) (action, bool) {
	if !s.spec.Spec.RecoveryEnabled() {
		return action{}, false
	}
	loss := quorumLoss{since: s.now}
	if s.quorumLoss != nil {
		loss = *s.quorumLoss
	}
	var survivors []string
	for _, name := range sortedKeys(s.members) {
		// A learner was never a voter: it may hold nothing of the log.
		if m := s.members[name]; m.state == memberRunning && m.claim != nil && !m.member.IsLearner {
			survivors = append(survivors, name)
		}
	}
	if len(survivors) == 0 {
		return recoverFromBackup(s, loss)
	}
	if s.etcd == nil {
		return readEtcd("disaster recovery: ask every member for its leader and raft index"), true
	}
	if why := noLeaderUnproven(s); why != "" {
		a := wait("disaster recovery waits: " + why)
		a.backoff = true
		return a, true
	}
	if a, ok := graceNotOver(s, loss); ok {
		return a, true
	}
	// The reads without a leader span the grace period too.
	if read := loss.firstLeaderlessRead; !read.IsZero() && read.After(loss.since) {
		if a, ok := graceNotOver(s, quorumLoss{since: read}); ok {
			return a, true
		}
	}
	if loss.leaderlessReads < leaderlessReadsNeeded {
		a := wait(fmt.Sprintf("disaster recovery waits for more reads of etcd without a leader (%d of %d)", loss.leaderlessReads, leaderlessReadsNeeded))
		a.backoff = true
		return a, true
	}
	best, index := survivors[0], uint64(0)
	for _, name := range survivors {
		if h, _ := s.etcd.healthOf(s.members[name].member.ID); h.RaftIndex > index {
			best, index = name, h.RaftIndex
		}
	}
	return action{kind: actForceNewCluster, member: best, reason: fmt.Sprintf("the survivor with the newest data (raft index %d)", index)}, true
}

// noLeaderUnproven says why etcd, as read in this pass, does not prove that
// the quorum is gone and that the survivor to force holds the newest data
// left; "" when it does. Every member must be accounted for: it answered
// without a leader, or its etcd cannot be running (no pod, or a pod whose
// etcd has stopped). A member that may still run (its node does not answer,
// its pod is being deleted, its pod runs but did not answer) could hold a
// quorum with others, or newer data.
func noLeaderUnproven(s *snapshot) string {
	if s.etcd.err != nil {
		return fmt.Sprintf("etcd could not be asked: %v", s.etcd.err)
	}
	if m, ok := s.etcd.leaderReported(); ok {
		name := m.Name
		if name == "" {
			name = fmt.Sprintf("%x", m.ID)
		}
		return fmt.Sprintf("member %s follows leader %x: the quorum may be held where the operator does not see its pods", name, m.Leader)
	}
	var newest uint64
	for _, name := range sortedKeys(s.members) {
		m := s.members[name]
		h, answered := s.etcd.healthOf(m.member.ID)
		answered = answered && h.Err == nil
		switch {
		case answered && m.claim == nil && m.pod != nil:
			newest = max(newest, h.RaftIndex)
		case answered:
		case m.pod != nil && k8sutil.IsBeingDeleted(m.pod):
			return fmt.Sprintf("member %s may still run: its pod is being deleted and its node has not confirmed it", name)
		case m.pod != nil && m.pod.Status.Phase == corev1.PodUnknown:
			return fmt.Sprintf("member %s may still run: the node of its pod does not answer", name)
		case m.state == memberRunning:
			return fmt.Sprintf("member %s does not answer etcd although its pod runs", name)
		case m.state == memberStarting:
			return fmt.Sprintf("member %s is starting", name)
		}
	}
	for _, name := range sortedKeys(s.members) {
		m := s.members[name]
		if h, ok := s.etcd.healthOf(m.member.ID); ok && h.Err == nil && m.claim != nil && m.state == memberRunning && h.RaftIndex >= newest {
			return ""
		}
	}
	return fmt.Sprintf("a member on an emptyDir volume holds newer data (raft index %d) than every survivor on a claim", newest)
}

// graceNotOver waits out the grace period of a disaster recovery, counted
// from when this goroutine first saw the quorum lost.
func graceNotOver(s *snapshot, loss quorumLoss) (action, bool) {
	at := loss.since.Add(s.spec.Spec.DisasterRecovery.GracePeriod())
	if !s.now.Before(at) {
		return action{}, false
	}
	a := wait(fmt.Sprintf("quorum lost since %s; disaster recovery starts at %s unless the members come back",
		loss.since.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339)))
	a.after = at.Sub(s.now)
	return a, true
}

// recoverFromBackup restores a cluster from its newest backup, the last
// resort: only when no member has any data left, since the restore replaces
// every member and whatever was written after the backup is lost.
func recoverFromBackup(s *snapshot, loss quorumLoss) (action, bool) {
	if !s.spec.Spec.DisasterRecovery.FromBackup {
		return wait("disaster recovery cannot start: no member with its data on a claim runs to become a one-member cluster; restore the cluster from a backup with an EtcdRestore"), true
	}
	if why := dataLeft(s); why != "" {
		return wait("disaster recovery cannot start: " + why + ", which a restore from a backup would delete: fix what keeps them from starting and they come back with it"), true
	}
	if a, ok := graceNotOver(s, loss); ok {
		return a, true
	}
	return action{kind: actRestoreFromBackup, reason: "no member's data is left"}, true
}

// dataLeft says which members still hold data, "" when none does: a claim
// holds its member's data; a pod holds it on its emptyDir volume as long as
// it has not ended (the kubelet restarts a crashing etcd in it). When the
// claims cannot be seen at all, nothing proves they are gone.
func dataLeft(s *snapshot) string {
	if s.claimsUnseen && s.usesClaims() {
		return "the operator cannot see the cluster's claims"
	}
	var onClaims, inPods []string
	for _, name := range sortedKeys(s.members) {
		m := s.members[name]
		switch {
		case m.claim != nil:
			onClaims = append(onClaims, name)
		case m.pod != nil && !k8sutil.IsPodDead(m.pod) || m.pod != nil && m.pod.Status.Phase == corev1.PodUnknown:
			inPods = append(inPods, name)
		}
	}
	switch {
	case len(onClaims) > 0:
		return "members " + strings.Join(onClaims, ", ") + " hold data on their claims"
	case len(inPods) > 0:
		return "members " + strings.Join(inPods, ", ") + " hold data in their pods"
	}
	return ""
}

// 11.
func cleanUp(s *snapshot) (action, bool) {
	if len(s.strayPods) > 0 {
		if a, ok := needEtcd(s, "delete a pod that belongs to no member"); ok {
			return a, true
		}
		return action{kind: actDeleteStrayPod, member: s.strayPods[0], reason: "it belongs to no member of the cluster"}, true
	}
	for _, name := range sortedKeys(s.joiners) {
		if why := unusableJoiner(s, name); why != "" {
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
	case pod.Annotations[k8sutil.AnnotationPodPolicy] != "" && pod.Annotations[k8sutil.AnnotationPodPolicy] != k8sutil.PodPolicyHash(s.spec):
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
// before it (prepareJoiner).
func joinersAhead(s *snapshot, name string) []string {
	var ahead []string
	for _, pair := range k8sutil.InitialCluster(s.joiners[name]) {
		other, _, _ := strings.Cut(pair, "=")
		if _, member := s.members[other]; !member && other != name {
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
	room := max(1, s.spec.Spec.Size-(len(s.members)-len(leaving(s))))
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
// default of one unless every member runs etcd 3.6 or later with
// ETCD_MAX_LEARNERS (k8sutil.MaxLearners), which the operator sets on the
// members it makes.
func (s *snapshot) countLearnerSlots() int {
	if !atLeast36(s.plan.newMembers) {
		return 1
	}
	slots := k8sutil.MaxLearners
	pods := make([]*corev1.Pod, 0, len(s.members)+len(s.joiners))
	for _, m := range s.members {
		pods = append(pods, m.pod)
	}
	for _, pod := range s.joiners {
		pods = append(pods, pod)
	}
	for _, pod := range pods {
		if pod == nil || !atLeast36(podVersion(pod)) {
			return 1
		}
		// A member being patched from an older version may still run it.
		if v := runningVersion(pod); v != "" && !atLeast36(v) {
			return 1
		}
		slots = min(slots, k8sutil.PodMaxLearners(pod))
	}
	return slots
}

func atLeast36(version string) bool {
	major, minor, err := api.ParseVersion(version)
	return err == nil && (major > 3 || major == 3 && minor >= 6)
}

// wantsMember tells whether a member is to be added: the cluster is smaller
// than its spec, or a member that cannot be upgraded in place is to be
// replaced (added first, removed once the new one is ready).
func wantsMember(s *snapshot) bool {
	n := len(s.members) - len(leaving(s))
	return n < s.spec.Spec.Size || n == s.spec.Spec.Size && len(s.plan.replace) > 0
}

// leaving are the members that step 12 removes from etcd to replace them:
// a joining pod may be made for their successors before they are removed,
// with an --initial-cluster that leaves them out.
func leaving(s *snapshot) []string {
	var out []string
	for _, name := range sortedKeys(s.members) {
		if s.members[name].repair == repairReplace {
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
	members := s.membership.Clone()
	for _, w := range without {
		members.Remove(w)
	}
	for _, name := range joining {
		m := *s.memberTemplate()
		m.Name = name
		members.Add(&m)
	}
	return members
}

// 12.
func deadMembers(s *snapshot) (action, bool) {
	for _, name := range sortedKeys(s.members) {
		m := s.members[name]
		if m.state == memberTerminating {
			// Deleting every pod at once shows one pod terminating while
			// the others still run; removing that member then would leave
			// etcd listing members that all go away a moment later. By the
			// time the pod is gone, the others are terminating too, and
			// quorum says no.
			return wait(fmt.Sprintf("pod %s is being deleted; its member is repaired once it is gone", name)), true
		}
	}
	var needed []string
	for _, name := range sortedKeys(s.members) {
		m := s.members[name]
		if m.repair != repairReplace {
			continue
		}
		if !quorumWithout(s, name) {
			// etcd would refuse it, and rightly: the others need it.
			needed = append(needed, name)
			continue
		}
		if a, ok := needEtcd(s, "remove member "+name); ok {
			return a, true
		}
		if m.state == memberGone && s.etcd.answers(m.member.ID) {
			// Either the cache lags (the pod's event wakes the loop) or the
			// pod was deleted at once (kubectl delete --force) and the
			// kubelet stops its etcd a moment later: no event announces
			// that, so etcd is asked again soon rather than at the next tick.
			// Its successor's pod is made meanwhile, so that its check-dns
			// runs while this member is confirmed dead and removed.
			if a, ok := prepareJoiner(s, "ahead of the replacement of "+name); ok {
				return a, true
			}
			a := wait(fmt.Sprintf("member %s answers etcd although its pod is not seen; it is not dead", name))
			a.backoff = true
			return a, true
		}
		if r, again := s.replaced[m.cause]; again && m.cause != "" {
			if next := r.last.Add(replacementBackoff(r)); s.now.Before(next) {
				a := wait(fmt.Sprintf("member %s fails as the %d member(s) replaced before it did (%s); the next replacement waits until %s: fix the cause (spec.pod, the node) meanwhile",
					name, r.count, m.cause, next.UTC().Format(time.RFC3339)))
				a.after = next.Sub(s.now)
				return a, true
			}
		}
		return action{kind: actRemoveDeadMember, member: name, reason: replaceReason(m)}, true
	}
	if len(needed) > 0 {
		return wait(fmt.Sprintf("member %s is to be replaced (%s), but the quorum needs it until the other members run", needed[0], replaceReason(s.members[needed[0]]))), true
	}
	return action{}, false
}

// quorumWithout tells whether the voting members left once member name is
// removed still have a quorum of them running.
func quorumWithout(s *snapshot, name string) bool {
	m := s.members[name]
	if m.member.IsLearner {
		return true
	}
	voters, up := s.quorum.voters-1, 0
	for other, v := range s.members {
		switch {
		case other == name || v.member.IsLearner || v.state != memberRunning:
		case s.etcd != nil && s.etcd.err == nil && !s.etcd.answers(v.member.ID):
			// Its pod runs, but etcd, asked in this pass, says it does not.
		default:
			up++
		}
	}
	return voters == 0 || up >= voters/2+1
}

// replaceReason says why a member is replaced rather than restarted.
func replaceReason(m *memberView) string {
	switch {
	case m.refused != "":
		return "etcd refuses its data: " + m.refused
	case m.restarts >= ladderRestarts:
		return fmt.Sprintf("it failed again after %d restarts in place within %v", m.restarts, ladderWindow)
	case m.claim == nil:
		return fmt.Sprintf("its pod is %s and its data was on an emptyDir volume", m.state)
	}
	return "its pod is " + m.state.String()
}

// 13.
func learners(s *snapshot) (action, bool) {
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
			return addMember(s)
		}
	}
	// A learner is a join not finished: nothing else changes before it
	// votes. etcd refuses the promotion until it has caught up.
	for _, name := range names {
		m := s.members[name]
		if m.state != memberRunning {
			continue
		}
		// Holding the promotion for the next add costs nothing until the
		// learner has run for etcd's health interval: an add after the
		// promotion would wait that long anyway.
		if next != nil {
			if d := etcdStartedAt(m.pod).Add(etcdHealthInterval).Sub(s.now); d > 0 {
				a := wait(fmt.Sprintf("learner %s votes once the next learner %s is added", name, next.Name))
				a.after = d
				// Nothing in Kubernetes tells when the learner's etcd has
				// started: etcd is asked again soon.
				a.backoff = nextResolves
				return a, true
			}
		}
		return action{kind: actPromoteLearner, member: name}, true
	}
	if a, ok := prepareJoiner(s, "while learner "+names[0]+" starts"); ok {
		if b, ok := needEtcd(s, "create a joining pod"); ok {
			return b, true
		}
		return a, true
	}
	if len(names) > 1 {
		return wait(fmt.Sprintf("learners %s do not run yet", strings.Join(names, ", "))), true
	}
	return wait(fmt.Sprintf("learner %s does not run yet", names[0])), true
}

// learnersStarted tells whether etcd lists every one of the learners by
// name, which a member publishes once it has started and joined.
func learnersStarted(s *snapshot, names []string) bool {
	for _, name := range names {
		h, ok := s.etcd.healthOf(s.members[name].member.ID)
		if !ok || h.Name == "" {
			return false
		}
	}
	return true
}

// etcdStartedAt is when the pod's etcd container started, zero when it does
// not run.
func etcdStartedAt(pod *corev1.Pod) time.Time {
	if st := etcdContainerStatus(pod); st != nil && st.State.Running != nil {
		return st.State.Running.StartedAt.Time
	}
	return time.Time{}
}

// 14.
func size(s *snapshot) (action, bool) {
	n := len(s.members)
	switch {
	case wantsMember(s):
		return addMember(s)
	case n > s.spec.Spec.Size:
		return removeMember(s)
	}
	return action{}, false
}

func addMember(s *snapshot) (action, bool) {
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
		if a, ok := prepareJoiner(s, "while "+joiner.Name+" starts"); ok {
			if b, ok := needEtcd(s, "create a joining pod"); ok {
				return b, true
			}
			return a, true
		}
		return wait(fmt.Sprintf("the pod of joining member %s does not resolve in DNS yet", joiner.Name)), true
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

// prepareJoiner makes the next joining pod ahead of its turn, while the
// change before it completes, so that its check-dns runs meanwhile and only
// MemberAdd and the promotion stay serial. Nothing changes in etcd: the
// member is added in step 13 or 14 once the change before it is done and
// etcd's leader has confirmed the membership, and a pod that no longer
// matches the membership by then is deleted in step 11. Where etcd takes
// more than one learner, a pod is also made behind the joining pods not
// added yet, its --initial-cluster naming them, as many as etcd will take
// as learners at once.
func prepareJoiner(s *snapshot, why string) (action, bool) {
	if len(s.strayPods) > 0 || len(s.terminating) > 0 || s.plan.refused != nil || !wantsMember(s) {
		return action{}, false
	}
	chain := joinChain(s)
	switch {
	case len(chain) != len(s.joiners):
		return action{}, false // the unusable ones go first (step 11)
	case len(chain) == 0:
		return action{kind: actCreateJoiner, version: s.plan.newMembers, without: leaving(s), reason: why}, true
	case len(chain) >= s.learnerSlots || len(leaving(s)) > 0 ||
		len(s.members)+len(chain) >= s.spec.Spec.Size:
		return action{}, false
	}
	return action{kind: actCreateJoiner, version: s.plan.newMembers, behind: chain, reason: why}, true
}

// readyForChange checks what etcd's strict reconfiguration check will before
// a member is added: every voting member's pod Ready, every voting member
// connected for etcd's health interval, a leader, a working quorum, and
// every voting member answering. The original tried anyway and lost a tick
// per member to etcd's refusal. Learners are left out, as etcd leaves them
// out: they count towards no quorum, and where etcd takes two, one still
// starting does not hold the next add back.
func readyForChange(s *snapshot, what string) (action, bool) {
	if q := s.quorum; q.ready < q.voters {
		return wait(fmt.Sprintf("%d of %d voting members are ready; every one must be to %s", q.ready, q.voters, what)), true
	}
	if d := untilConnectedLongEnough(s); d > 0 {
		a := wait("the newest member has not been connected for etcd's health interval")
		a.after = d
		return a, true
	}
	if a, ok := needEtcd(s, what); ok {
		return a, true
	}
	return everyMemberAnswers(s)
}

// readyForUpgrade checks what taking the next member down for its upgrade
// needs of the others: every pod Ready, a leader, a working quorum, and every
// member answering, following that leader and caught up with its log. A
// patch is no membership change, so etcd's health interval does not apply:
// a member restarted a moment ago that has caught up is what the next
// restart needs, and it gets there within a second or two, not five.
func readyForUpgrade(s *snapshot) (action, bool) {
	const what = "upgrade a member"
	if a, ok := everyMemberReady(s, what); ok {
		return a, true
	}
	if a, ok := needEtcd(s, what); ok {
		return a, true
	}
	if a, ok := everyMemberAnswers(s); ok {
		return a, true
	}
	h := s.etcd.health
	leader, ok := h.Member(h.LeaderID)
	if !ok {
		a := wait(fmt.Sprintf("the leader %x is not in the member list", h.LeaderID))
		a.backoff = true
		return a, true
	}
	for _, m := range h.Members {
		if m.ID == leader.ID {
			continue
		}
		if m.Leader != leader.ID || leader.RaftIndex > m.RaftAppliedIndex+etcdutil.MaxTransfereeLag {
			a := wait(fmt.Sprintf("member %s (%x) has not caught up with leader %s: it follows %x and applied %d of %d",
				m.Name, m.ID, leader.Name, m.Leader, m.RaftAppliedIndex, leader.RaftIndex))
			a.backoff = true
			return a, true
		}
	}
	return action{}, false
}

func everyMemberReady(s *snapshot, what string) (action, bool) {
	if ready := len(s.readyNames()); ready < len(s.members) {
		return wait(fmt.Sprintf("%d of %d members are ready; every member must be to %s", ready, len(s.members), what)), true
	}
	return action{}, false
}

// everyMemberAnswers checks that every voting member answered etcd in this
// pass. A learner still starting counts towards no quorum and is left out:
// where etcd takes two, the next one is added meanwhile (an upgrade never
// runs with learners: step 13 comes first).
func everyMemberAnswers(s *snapshot) (action, bool) {
	for _, m := range s.etcd.health.Members {
		if m.Err != nil && !m.IsLearner {
			a := wait(fmt.Sprintf("member %s (%x) does not answer etcd: %v", m.Name, m.ID, m.Err))
			a.backoff = true
			return a, true
		}
	}
	return action{}, false
}

// untilConnectedLongEnough is how long until every voting member's etcd has
// run for etcdHealthInterval, counted from its container's start (a little
// before it connects, so an add may still be refused once, and is then
// retried).
func untilConnectedLongEnough(s *snapshot) time.Duration {
	if s.quorum.voters <= 1 {
		// etcd counts itself as connected: a single member takes an add at once.
		return 0
	}
	var longest time.Duration
	for _, m := range s.members {
		if m.pod == nil || m.member.IsLearner {
			continue
		}
		if started := etcdStartedAt(m.pod); !started.IsZero() {
			longest = max(longest, started.Add(etcdHealthInterval).Sub(s.now))
		}
	}
	return longest
}

// learnersSupported tells whether the new member and every running one are
// etcd 3.4 or later, which have learners.
func learnersSupported(s *snapshot) bool {
	versions := []string{s.plan.newMembers}
	for _, m := range s.members {
		if m.pod != nil {
			versions = append(versions, podVersion(m.pod))
		}
	}
	for _, v := range versions {
		major, minor, err := api.ParseVersion(v)
		if err != nil || major < 3 || major == 3 && minor < 4 {
			return false
		}
	}
	return true
}

// removeMember shrinks the cluster by one, choosing the member whose removal
// costs availability least:
//  1. a member replaced because it cannot be upgraded in place, once every
//     other member is ready;
//  2. a member whose pod is not Ready;
//  3. a follower (the original could pick the leader, #1191, costing an
//     election);
//  4. the leader, only when it is the sole candidate.
func removeMember(s *snapshot) (action, bool) {
	if a, ok := needEtcd(s, "remove a member"); ok {
		return a, true
	}
	ready := s.readyNames()
	var notReady []string
	for _, name := range sortedKeys(s.members) {
		if !slices.Contains(ready, name) && quorumWithout(s, name) {
			notReady = append(notReady, name)
		}
	}
	remove := func(name, why string) (action, bool) {
		return action{kind: actRemoveMember, member: name, reason: why}, true
	}
	if len(s.plan.replace) > 0 {
		victim := s.plan.replace[0]
		for _, n := range notReady {
			if n != victim {
				return wait(fmt.Sprintf("member %s is not ready; %s is removed once it is", n, victim)), true
			}
		}
		return remove(victim, "it was replaced because it cannot run the new version in place")
	}
	if len(notReady) > 0 {
		return remove(notReady[0], "its pod is not ready")
	}
	leader := s.etcd.health.LeaderID
	for _, name := range sortedKeys(s.members) {
		if s.members[name].member.ID != leader && quorumWithout(s, name) {
			return remove(name, "a follower")
		}
	}
	for _, name := range sortedKeys(s.members) {
		if quorumWithout(s, name) {
			return remove(name, "the only member left to choose")
		}
	}
	return wait("no member can be removed while the others hold no quorum without it"), true
}

// 15.
func version(s *snapshot) (action, bool) {
	p := s.plan
	switch {
	case p.refused != nil:
		return wait(p.refused.msg), true
	case len(p.old) == 0:
		return action{}, false
	}
	if e := s.upgradeExpect; e != nil {
		return wait(fmt.Sprintf("member %s is restarting on %s", e.name, e.version)), true
	}
	// A member that is not ready serves nothing, so patching it first costs
	// no availability. It is also how a rollout to an image that never
	// started is taken back: that member is the one not ready.
	for _, name := range p.old {
		if m := s.members[name]; m.pod != nil && !(m.state == memberRunning && m.ready) && m.state != memberTerminating {
			return action{kind: actUpgradeMember, member: name, version: p.target, reason: "it is not ready"}, true
		}
	}
	if a, ok := readyForUpgrade(s); ok {
		return a, true
	}
	if mv := s.versionMove; mv != nil {
		switch mv.Kind {
		case maintenance.MoveWait:
			a := wait(mv.Reason)
			a.backoff = true
			return a, true
		case maintenance.MoveEnableDowngrade:
			for _, m := range s.etcd.health.Members {
				if m.Downgrade.Enabled {
					a := wait("the downgrade is enabled; waiting for the cluster version to drop")
					a.backoff = true
					return a, true
				}
			}
			return action{kind: actEnableDowngrade, version: mv.DowngradeTarget, reason: mv.Reason}, true
		}
	}
	leader := s.etcd.health.LeaderID
	for _, name := range p.old {
		if s.members[name].member.ID != leader {
			return action{kind: actUpgradeMember, member: name, version: p.target, reason: "a follower"}, true
		}
	}
	if a, ok := handOff(s, leader); ok {
		return a, true
	}
	return action{kind: actUpgradeMember, member: p.old[0], version: p.target, reason: "the leader, last"}, true
}

// handOff moves leadership away from member id before it is taken down, to
// a healthy, caught-up follower: one election, planned, instead of clients
// meeting a leaderless cluster. When no follower can take over it waits.
func handOff(s *snapshot, id uint64) (action, bool) {
	h := maintenance.Handoff(s.etcd.health, id)
	switch {
	case h.Kind == maintenance.MoveLeader:
		return action{kind: actMoveLeader, member: h.Member.Name, reason: h.Reason}, true
	case h.Reason != "the member does not lead" && s.quorum.voters > 1:
		a := wait(h.Reason)
		a.backoff = true
		return a, true
	}
	return action{}, false
}

// 10. (space) and 16. (care)

// space recovers a cluster that ran out of space: with a NOSPACE alarm it
// takes no write at all, so this comes before any other change.
func space(s *snapshot) (action, bool) {
	if !s.etcd.hasAlarm(etcdutil.AlarmNoSpace) {
		return action{}, false
	}
	if a, ok := maintain(s); ok {
		return a, true
	}
	return action{}, false
}

// care is the day-2 care of a cluster at rest.
func care(s *snapshot) (action, bool) {
	if s.etcd == nil {
		if s.now.Sub(s.etcdReadAt) >= etcdObserveInterval || runningNotReady(s) {
			return readEtcd("day-2 care: the members' databases and alarms"), true
		}
		return action{}, false
	}
	if !s.etcd.confirmed {
		return action{}, false
	}
	return maintain(s)
}

// 17.
func stuckPods(s *snapshot) (action, bool) {
	for _, name := range sortedKeys(s.members) {
		if pod := s.members[name].pod; s.members[name].state == memberGone && pod != nil {
			return wait(stuckMessage(pod) + "; its member is restarted or replaced once it is gone"), true
		}
	}
	return action{}, false
}

// stuckMessage says since when a pod has been terminating, and where.
func stuckMessage(pod *corev1.Pod) string {
	msg := fmt.Sprintf("pod %s has been terminating since %s", pod.Name, pod.DeletionTimestamp.UTC().Format(time.RFC3339))
	if pod.Spec.NodeName != "" {
		msg += fmt.Sprintf(" on node %s, which has not confirmed the deletion (if the node is lost for good, delete its Node object)", pod.Spec.NodeName)
	}
	return msg
}

// runningNotReady tells whether a member runs but is not ready: with an
// alarm (NOSPACE, CORRUPT) etcd's /health fails on every member.
func runningNotReady(s *snapshot) bool {
	for _, m := range s.members {
		if m.state == memberRunning && !m.ready {
			return true
		}
	}
	return false
}

// maintain turns the maintenance planner's next step into an action.
func maintain(s *snapshot) (action, bool) {
	if s.etcd == nil || !s.etcd.confirmed {
		return action{}, false
	}
	in := maintenance.Input{
		Now:              s.now,
		Health:           s.etcd.health,
		Settings:         s.spec.Spec.ResolvedMaintenance(),
		Created:          s.created,
		LastDefragmented: map[uint64]time.Time{},
	}
	for _, d := range s.status.MemberDetails {
		if id, err := strconv.ParseUint(d.ID, 16, 64); err == nil && d.LastDefragmentation != nil {
			in.LastDefragmented[id] = d.LastDefragmentation.Time
		}
	}
	if m := s.status.Maintenance; m != nil {
		in.LastCompactedRevision = m.LastCompactedRevision
	}
	next := maintenance.Next(in)
	switch next.Kind {
	case maintenance.Compact:
		return action{kind: actCompact, reason: next.Reason}, true
	case maintenance.Defragment:
		return action{kind: actDefragment, member: next.Member.Name, reason: next.Reason}, true
	case maintenance.MoveLeader:
		return action{kind: actMoveLeader, member: next.Member.Name, reason: next.Reason}, true
	case maintenance.DisarmNoSpace:
		return action{kind: actDisarmNoSpace, reason: next.Reason}, true
	}
	if s.etcd.hasAlarm(etcdutil.AlarmNoSpace) {
		a := wait(next.Reason)
		a.backoff = true
		return a, true
	}
	return action{}, false
}

// needEtcd returns the action that has to come first when a change needs the
// membership confirmed by etcd's leader in this pass: reading etcd, or
// waiting when it cannot be read.
func needEtcd(s *snapshot, what string) (action, bool) {
	switch {
	case s.etcd == nil:
		return readEtcd(what), true
	case s.etcd.err != nil:
		a := wait(fmt.Sprintf("etcd cannot be asked before the change (%s): %v", what, s.etcd.err))
		a.backoff = true
		return a, true
	case !s.etcd.confirmed:
		a := wait(fmt.Sprintf("etcd has no leader to confirm the membership before the change (%s)", what))
		a.backoff = true
		return a, true
	}
	return action{}, false
}

func wait(reason string) action { return action{kind: actWait, reason: reason} }

func readEtcd(why string) action { return action{kind: actReadEtcd, reason: why} }
