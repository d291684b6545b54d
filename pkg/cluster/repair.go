package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// repairStep is where a member stands on the repair ladder: a member that
// stopped is restarted in place, on its own data, as long as that can help;
// only one that keeps failing, or whose data etcd refuses, is replaced by a
// new member on a fresh claim.
type repairStep int

const (
	// repairNone: the member runs, or starts, on its own.
	repairNone repairStep = iota
	// repairRestart: the member is restarted in place: by the kubelet in its
	// pod, or by the operator in a new pod on its claim.
	repairRestart
	// repairReplace: the member is removed and a new one added.
	repairReplace
)

var repairStepNames = map[repairStep]string{repairNone: "", repairRestart: "restart in place", repairReplace: "replace"}

func (r repairStep) String() string { return repairStepNames[r] }

// The repair ladder: a member is restarted in place up to ladderRestarts
// times within ladderWindow before it is replaced.
const (
	ladderRestarts = 3
	ladderWindow   = 10 * time.Minute
	// terminatingGrace is how long past its deletion deadline a pod may stay
	// terminating before its member counts as gone: a pod on a node that no
	// longer answers is never confirmed gone.
	terminatingGrace = 30 * time.Second
)

// repairOf places a member on the repair ladder.
func (s *snapshot) repairOf(v *memberView) repairStep {
	switch {
	case v.refused != "", v.dataGone != "":
		return repairReplace
	case v.state == memberCrashing:
		// The kubelet restarts it in its pod, with its data.
		if v.restarts > ladderRestarts {
			return repairReplace
		}
		return repairRestart
	case v.state != memberGone && v.state != memberFailed:
		return repairNone
	case v.pod != nil && v.pod.Status.Phase == corev1.PodUnknown && !k8sutil.IsBeingDeleted(v.pod):
		// Its node does not answer: its containers may still run, on its
		// claim or its emptyDir, and its claim cannot be used elsewhere.
		// Once the pod is deleted and gone, the member is repaired.
		return repairNone
	case v.claim == nil || !s.usesClaims():
		// Its data went with its pod (emptyDir), or its claim is gone.
		return repairReplace
	case v.state == memberFailed && v.restarts >= ladderRestarts:
		// It failed again after its restarts in place. A member whose pod
		// is gone did not fail: its pod was deleted (a user, a drain, every
		// pod at once), and it is restarted whatever its count.
		return repairReplace
	}
	return repairRestart
}

// claimRestarts are the restarts in place after failures counted on member
// name's claim within the repair ladder's window.
func (s *snapshot) claimRestarts(name string) int {
	if c := s.claims[name]; c != nil {
		if n, since := k8sutil.ClaimRestarts(c); n > 0 && s.now.Sub(since) < ladderWindow {
			return n
		}
	}
	return 0
}

// unknownMembership is step 5 of decide.
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
		case pod.Status.Phase == corev1.PodPending && s.pendingInVain(pod) == "",
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
		return waiting("etcd did not tell its membership"), true
	case ok:
		return restart, true
	case starting > 0:
		return waiting("the membership is unknown and no member pod runs yet"), true
	}
	if seed, ok := lonelyNeverStartedPod(s); ok {
		if _, cause := podTroubleCause(s.pods[seed], s.claims[seed], s.now); cause != "" {
			if a, ok := replacementWaits(s, "seed "+seed, cause); ok {
				return a, true
			}
		}
		return action{kind: actReseed, member: seed, reason: "the only member pod never ran and the cluster was never available"}, true
	}
	return waiting("no member pod runs"), true
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
		case live && (k8sutil.IsPodDead(pod) || s.pendingInVain(pod) != ""):
			ended = append(ended, name)
		case live:
			held = append(held, fmt.Sprintf("pod %s is starting or runs", name))
		default:
			gone = append(gone, name)
		}
	}
	switch {
	case len(gone) == 0 && len(ended) > 0:
		return podDeletionForRestart(s, ended[0]), true
	case len(gone) == 0:
		return waiting(strings.Join(held, "; ") + "; those members are restarted in place once their pods are gone"), true
	}
	if a, ok := survivorRestart(s, gone); ok {
		return a, true
	}
	return action{kind: actRestartMembers, names: gone, version: restartVersion(s, gone), reason: "no member runs; their claims hold their data"}, true
}

// restartInPlace is step 9 of decide.
func restartInPlace(s *snapshot) (action, bool) {
	for _, name := range sortedKeys(s.views) {
		if m := s.views[name]; m.pod != nil && k8sutil.IsForcedNewCluster(m.pod) && len(s.views) == 1 && m.state == memberRunning {
			// The survivor of a disaster recovery runs alone now: it must
			// not keep --force-new-cluster, which would wipe the members
			// added next at its next restart.
			return action{kind: actDeleteFailedPod, member: name, reason: "to restart it without --force-new-cluster, now that it runs alone"}, true
		}
	}
	var gone, ended []string
	for _, name := range sortedKeys(s.views) {
		m := s.views[name]
		switch {
		case m.repair != repairRestart || m.state == memberCrashing:
			// the kubelet restarts a crashing member in its pod
		case m.pod != nil && k8sutil.IsBeingDeleted(m.pod):
			// Deleted already, on a node that has not confirmed it: the
			// name is free once it has (step 19 says so meanwhile), and the
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
		return podDeletionForRestart(s, ended[0]), true
	}
	if len(gone) == 0 {
		return action{}, false
	}
	if a, ok := survivorRestart(s, gone); ok {
		return a, true
	}
	return action{kind: actRestartMembers, names: gone, version: restartVersion(s, gone), reason: "their pods are gone and their claims hold their data"}, true
}

// survivorRestart is the restart of a disaster recovery's survivor, when its
// pod is among the gone ones: with --force-new-cluster until it has run with
// it, then without. Whichever step restarts members from their claims must
// ask it first: the forced restart forgets the membership, so the pass after
// it may find none known and no member running.
func survivorRestart(s *snapshot, gone []string) (action, bool) {
	r := s.recovering
	if r == nil || !slices.Contains(gone, r.member) {
		return action{}, false
	}
	if r.flagRemoved {
		return action{kind: actRestartMembers, names: []string{r.member}, version: restartVersion(s, []string{r.member}),
			reason: "disaster recovery: the survivor runs without --force-new-cluster"}, true
	}
	return action{kind: actRestartMembers, names: []string{r.member}, version: restartVersion(s, []string{r.member}), force: true,
		reason: "disaster recovery: the survivor becomes a one-member cluster with its data"}, true
}

// podDeletionForRestart is the action that deletes member name's pod, which
// ended or did not start in time, so that the member is restarted in place
// on its claim under its name. Only a pod that ended is a failure of the member, and only the
// restart after it counts on the repair ladder: a pod that did not start
// (unschedulable, an image that cannot be pulled) says nothing of the data.
func podDeletionForRestart(s *snapshot, name string) action {
	if pod := s.pods[name]; pod != nil && podEnded(pod) {
		return action{kind: actDeleteFailedPod, member: name, failure: true,
			reason: fmt.Sprintf("its pod ended: restart %d of %d in place within %v, on its claim", s.claimRestarts(name)+1, ladderRestarts, ladderWindow)}
	}
	why := fmt.Sprintf("has not started within %v", s.pendingTimeout)
	if pod := s.pods[name]; pod != nil {
		if inVain := s.pendingInVain(pod); inVain != "" {
			why = inVain
		}
	}
	return action{kind: actDeleteFailedPod, member: name, reason: "its pod " + why + ": to restart the member in place on its claim"}
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

// replaceDeadMembers is step 13 of decide.
func replaceDeadMembers(s *snapshot) (action, bool) {
	for _, name := range sortedKeys(s.views) {
		m := s.views[name]
		if m.state == memberTerminating {
			// Deleting every pod at once shows one pod terminating while
			// the others still run; removing that member then would leave
			// etcd listing members that all go away a moment later. By the
			// time the pod is gone, the others are terminating too, and
			// quorum says no.
			return waiting(fmt.Sprintf("pod %s is being deleted; its member is repaired once it is gone", name)), true
		}
	}
	var needed []string
	for _, name := range sortedKeys(s.views) {
		m := s.views[name]
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
		if (m.state == memberGone || m.dataGone != "") && s.etcd.answers(m.member.ID) {
			// Either the cache lags (the pod's event wakes the loop) or the
			// pod was deleted at once (kubectl delete --force) and the
			// kubelet stops its etcd a moment later: no event announces
			// that, so etcd is asked again soon rather than at the next tick.
			// Its successor's pod is made meanwhile, so that its check-dns
			// runs while this member is confirmed dead and removed.
			if a, ok := joinerAheadOfTurn(s, "ahead of the replacement of "+name); ok && m.dataGone == "" {
				return a, true
			}
			seen := "its pod is not seen"
			if m.dataGone != "" {
				seen = m.dataGone
			}
			a := waiting(fmt.Sprintf("member %s answers etcd although %s; it is not dead", name, seen))
			a.backoff = true
			return a, true
		}
		if a, ok := replacementWaits(s, "member "+name, m.cause); ok {
			return a, true
		}
		return action{kind: actRemoveDeadMember, member: name, reason: replaceReason(m)}, true
	}
	if len(needed) > 0 {
		return waiting(fmt.Sprintf("member %s is to be replaced (%s), but the quorum needs it until the other members run", needed[0], replaceReason(s.views[needed[0]]))), true
	}
	return action{}, false
}

// replaceReason says why a member is replaced rather than restarted.
func replaceReason(m *memberView) string {
	switch {
	case m.refused != "":
		return "etcd refuses its data: " + m.refused
	case m.dataGone != "":
		return m.dataGone
	case m.restarts >= ladderRestarts:
		return fmt.Sprintf("it failed again after %d restarts in place within %v", m.restarts, ladderWindow)
	case m.claim == nil:
		return fmt.Sprintf("its pod is %s and its data was on an emptyDir volume", m.state)
	}
	return "its pod is " + m.state.String()
}

// removeDeadMember removes a member that cannot come back from etcd, with
// its pod and claim; a new member replaces it in a later pass. The
// replacement is recorded by cause, so that one that fails the same way is
// not replaced in a loop.
func (c *Cluster) removeDeadMember(ctx context.Context, s *snapshot, a action) outcome {
	out := c.removeMemberAndData(ctx, s, a, true)
	if known := c.knownMembership.known(); out.err == nil && known != nil && known[a.member] == nil {
		c.recordReplacement(s.views[a.member].cause, s.spec.Generation)
	}
	return out
}

// deleteFailedPod deletes the ended pod of a member that is restarted in
// place, so that its name is free for the new pod.
func (c *Cluster) deleteFailedPod(ctx context.Context, s *snapshot, a action) outcome {
	c.log.Infof("deleting the pod of member %s: %s", a.member, a.reason)
	if m := s.views[a.member]; m != nil && m.pod != nil && k8sutil.IsForcedNewCluster(m.pod) {
		c.recovering = &recovering{member: a.member, started: c.now(), flagRemoved: true}
	}
	err := c.deletePod(ctx, a.member)
	if err == nil && a.failure {
		c.noteEndedPod(a.member)
	}
	return outcome{err: err, requeue: c.cfg.MinPassInterval, downed: a.member}
}

// restartMembers gives members whose pods are gone new pods on their claims.
// etcd finds its data directory and starts as the member it was: same ID, no
// MemberAdd, no copy of the data, --initial-cluster ignored. A restart after
// a failure (this goroutine deleted the member's ended pod) is counted on the
// member's claim, for the repair ladder; the restart of a member whose pod
// was deleted by someone else, or never started, is not: it is no failure.
func (c *Cluster) restartMembers(ctx context.Context, s *snapshot, a action) outcome {
	membership := restartMembership(s, a.names)
	pairs := membership.PeerURLPairs()
	recovery := c.recovering != nil && slices.Contains(a.names, c.recovering.member)
	for _, name := range a.names {
		// The restarts of a disaster recovery are not failures of the
		// member: they do not count on the repair ladder.
		restarts := 0
		if c.restartFollowsFailure(name) && !recovery {
			var err error
			if restarts, err = c.countRestart(ctx, s, name); err != nil {
				return outcome{err: err}
			}
		}
		opts := []k8sutil.PodOption{k8sutil.WithoutDNSCheck()}
		if a.force {
			opts = append(opts, k8sutil.WithForceNewCluster())
			// etcd forgets the other members: the membership is read again.
			c.knownMembership.forget()
		}
		pod := k8sutil.NewEtcdPod(s.spec, membership[name], a.version, pairs, k8sutil.ClusterStateExisting, "", opts...)
		if err := c.createPod(ctx, pod); err != nil {
			return outcome{err: err}
		}
		if recovery {
			if !a.force {
				c.recovering = nil // the survivor runs without the flag: done
			}
			c.log.Infof("restarted member %s in place for the disaster recovery (%s)", name, a.reason)
			continue
		}
		if restarts == 0 {
			c.log.Infof("restarted member %s in place on its claim, on %s; its pod was gone, no failure of the member", name, a.version)
			c.tell(corev1.EventTypeNormal, eventMemberRestarted, fmt.Sprintf("Member %s restarted in place on its data", name))
			continue
		}
		c.log.Infof("restarted member %s in place on its claim, on %s, after its pod ended (restart %d within %v)", name, a.version, restarts, ladderWindow)
		c.tell(corev1.EventTypeNormal, eventMemberRestarted,
			fmt.Sprintf("Member %s restarted in place on its data after its pod ended (restart %d of %d within %v)", name, restarts, ladderRestarts, ladderWindow))
	}
	return outcome{requeue: c.cfg.MinPassInterval}
}

// restartMembership is the membership members restarted in place are told
// (their --initial-cluster, which etcd ignores when it finds its data): the
// one known, with the restarted members in it.
func restartMembership(s *snapshot, names []string) etcdutil.MemberSet {
	membership := s.membership.Clone()
	if membership == nil {
		membership = etcdutil.MemberSet{}
	}
	for _, name := range names {
		if membership[name] == nil {
			m := *s.memberTemplate()
			m.Name = name
			membership.Add(&m)
		}
	}
	return membership
}

// countRestart counts a restart in place after a failure on the member's
// claim, starting a new window when the last one is over, and returns the
// count.
func (c *Cluster) countRestart(ctx context.Context, s *snapshot, name string) (int, error) {
	pvc := s.claims[name]
	if pvc == nil {
		return 0, nil
	}
	n, since := k8sutil.ClaimRestarts(pvc)
	if n == 0 || s.now.Sub(since) >= ladderWindow {
		n, since = 0, s.now
	}
	n++
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		k8sutil.AnnotationRestarts:      fmt.Sprint(n),
		k8sutil.AnnotationRestartsSince: since.UTC().Format(time.RFC3339),
	}}})
	if err != nil {
		return 0, fmt.Errorf("build patch: %w", err)
	}
	_, err = c.cfg.KubeClient.CoreV1().PersistentVolumeClaims(c.namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return 0, kubeError("count a restart on claim "+name, err)
	}
	return n, nil
}
