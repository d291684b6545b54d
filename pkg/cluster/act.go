package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// Events of the original, with its exact texts (§3.11).
const (
	eventNewMemberAdded      = "New Member Added"
	eventMemberRemoved       = "Member Removed"
	eventReplacingDeadMember = "Replacing Dead Member"
	eventMemberUpgraded      = "Member Upgraded"
	// eventMemberRestarted is new: a member restarted in place, on its own
	// data, with its own ID.
	eventMemberRestarted = "Member Restarted"
	// Day-2 care, new.
	eventLeaderMoved      = "LeaderMoved"
	eventCompacted        = "Compacted"
	eventDefragmented     = "Defragmented"
	eventNoSpaceDisarmed  = "NoSpaceDisarmed"
	eventDowngradeEnabled = "DowngradeEnabled"
	// eventDisasterRecovery is a Warning: data may be lost.
	eventDisasterRecovery = "DisasterRecovery"
)

// podDeleteGracePeriod is the original's: a member removed from etcd has
// nothing left to flush.
const podDeleteGracePeriod int64 = 5

// outcome is what an action did, for the status and the run loop.
type outcome struct {
	// requeue is when the next pass is wanted (0: next event or tick).
	requeue time.Duration
	// err ends the pass with a problem, retried with backoff.
	err error
	// phase, when set, is the cluster's new phase.
	phase api.ClusterPhase
	// stop is set when the action found the pass's snapshot outdated and
	// wrote nothing: the next pass starts over.
	stop bool
	// Records of maintenance for the status: the revision compacted to,
	// the member defragmented; and of a disaster recovery.
	compacted    int64
	defragmented string
	recovery     *api.RecoveryStatus
	// downed is a member the action took down on purpose (a patch): the
	// status counts it as not ready already.
	downed string
}

// act carries out one action.
func (c *Cluster) act(ctx context.Context, s *snapshot, a action) outcome {
	switch a.kind {
	case actIdle:
		c.waitBackoff.Reset()
		return outcome{}
	case actWait, actReadEtcd:
		out := outcome{requeue: max(a.after, 0)}
		if a.backoff {
			out.requeue = c.waitBackoff.Next()
		}
		return out
	case actCreateServices:
		return outcome{err: c.createServices(ctx, s), requeue: c.cfg.MinPassInterval}
	case actSyncBudget:
		return outcome{err: c.syncBudget(ctx, s), requeue: c.cfg.MinPassInterval}
	case actSeed:
		return c.seed(ctx, s, a)
	case actAdopt:
		c.log.Infof("%s; adopting them", a.reason)
		c.members.forget()
		return outcome{phase: api.ClusterPhaseRunning, requeue: c.cfg.MinPassInterval}
	case actReseed:
		return c.reseed(ctx, s, a)
	case actDeleteStrayPod:
		c.log.Infof("deleting pod %s: %s", a.member, a.reason)
		return outcome{err: c.deletePod(ctx, a.member), requeue: c.cfg.MinPassInterval}
	case actDeleteJoiner:
		c.log.Infof("deleting pod %s of a member that was never added: %s", a.member, a.reason)
		err := c.deletePod(ctx, a.member)
		if err == nil {
			err = c.deleteClaim(ctx, s, a.member)
		}
		return outcome{err: err, requeue: c.cfg.MinPassInterval}
	case actDeleteStrayClaim:
		c.log.Infof("deleting claim %s: %s", a.member, a.reason)
		return outcome{err: c.deleteClaim(ctx, s, a.member), requeue: c.cfg.MinPassInterval}
	case actRemoveDeadMember:
		out := c.removeMember(ctx, s, a, true)
		if known := c.members.known(); out.err == nil && known != nil && known[a.member] == nil {
			c.recordReplacement(s.members[a.member].cause)
		}
		return out
	case actDeleteFailedPod:
		c.log.Infof("deleting the pod of member %s: %s", a.member, a.reason)
		if m := s.members[a.member]; m != nil && m.pod != nil && k8sutil.IsForcedNewCluster(m.pod) {
			c.recovering = &recovering{member: a.member, started: c.now(), flagRemoved: true}
		}
		err := c.deletePod(ctx, a.member)
		if err == nil && a.failure {
			c.noteEndedPod(a.member)
		}
		return outcome{err: err, requeue: c.cfg.MinPassInterval, downed: a.member}
	case actForceNewCluster:
		return c.forceNewCluster(ctx, s, a)
	case actRestoreFromBackup:
		return c.restoreFromBackup(ctx, s, a)
	case actRestartMembers:
		return c.restartMembers(ctx, s, a)
	case actRemoveMember:
		return c.removeMember(ctx, s, a, false)
	case actPromoteLearner:
		return c.promote(ctx, s, a)
	case actCreateJoiner:
		return c.createJoiner(ctx, s, a)
	case actAddJoiner:
		return c.addJoiner(ctx, s, a)
	case actUpgradeMember:
		return c.upgradeMember(ctx, s, a)
	case actEnableDowngrade, actMoveLeader, actCompact, actDefragment, actDisarmNoSpace:
		return c.maintain(ctx, s, a)
	}
	return outcome{err: fmt.Errorf("no way to act on %s", a)}
}

func (c *Cluster) createServices(ctx context.Context, s *snapshot) error {
	for _, svc := range []*corev1.Service{k8sutil.NewPeerService(s.spec), k8sutil.NewClientService(s.spec)} {
		missing := false
		for _, name := range s.missingServices {
			missing = missing || name == svc.Name
		}
		if !missing {
			continue
		}
		_, err := c.cfg.KubeClient.CoreV1().Services(c.namespace).Create(ctx, svc, metav1.CreateOptions{})
		switch {
		case err == nil:
			c.log.Infof("created service %s", svc.Name)
		case apierrors.IsAlreadyExists(err):
		default:
			return kubeError("create service "+svc.Name, err)
		}
	}
	return nil
}

// syncBudget makes the cluster's PodDisruptionBudget what spec.size calls for.
func (c *Cluster) syncBudget(ctx context.Context, s *snapshot) error {
	budgets := c.cfg.KubeClient.PolicyV1().PodDisruptionBudgets(c.namespace)
	want := k8sutil.NewDisruptionBudget(s.spec)
	switch {
	case want == nil:
		err := budgets.Delete(ctx, s.budget.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return kubeError("delete the PodDisruptionBudget", err)
		}
	case s.budget == nil:
		_, err := budgets.Create(ctx, want, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return kubeError("create the PodDisruptionBudget", err)
		}
		c.log.Infof("created PodDisruptionBudget %s: minAvailable %s", want.Name, want.Spec.MinAvailable)
	default:
		pdb := s.budget.DeepCopy()
		pdb.Spec.MinAvailable = want.Spec.MinAvailable
		if _, err := budgets.Update(ctx, pdb, metav1.UpdateOptions{}); err != nil {
			return kubeError("update the PodDisruptionBudget", err)
		}
	}
	return nil
}

// seed creates the first member of a new cluster. The phase is written as
// Creating before the seed pod exists, so that an operator restarting in
// between finds either no pod (and creates the seed) or the seed (and adopts
// it); it never has to fail the cluster as the original did. The write also
// finds the restore operator's hand-over, which sets the phase first.
func (c *Cluster) seed(ctx context.Context, s *snapshot, a action) outcome {
	if s.phase == api.ClusterPhaseNone {
		st := statusOf(s, *c.status(), api.ClusterPhaseCreating, c.latest.Generation, assess(s), outcome{})
		written, err := c.writeStatus(ctx, st)
		if err != nil || !written {
			return outcome{err: err, stop: true, requeue: c.cfg.MinPassInterval}
		}
		c.log.Infof("creating cluster: size %d, version %s", s.spec.Spec.Size, a.version)
	}
	m := c.newMember(s.spec)
	if a.member != "" {
		m.Name = a.member
	}
	members := etcdutil.NewMemberSet(m)
	// The token keeps members of different clusters from ever forming one
	// cluster; the CR's UID in it makes sure a re-created cluster of the same
	// name never talks to leftover members of its predecessor.
	token := string(s.spec.UID) + "-" + c.randomSuffix()
	if err := c.createClaim(ctx, s, m.Name, a.version); err != nil {
		return outcome{err: err}
	}
	pod := k8sutil.NewEtcdPod(s.spec, m, a.version, members.PeerURLPairs(), k8sutil.ClusterStateNew, token)
	if err := c.createPod(ctx, pod); err != nil {
		return outcome{err: err}
	}
	c.members.learn(members)
	c.event(corev1.EventTypeNormal, eventNewMemberAdded, fmt.Sprintf("New member %s added to cluster", m.Name))
	c.log.Infof("created seed member %s", m.Name)
	return outcome{phase: api.ClusterPhaseRunning, requeue: c.cfg.MinPassInterval}
}

// reseed deletes a seed that never ran, so that the next pass makes a new
// one from the spec in force: the cluster never served, there is nothing to
// lose, and a spec fixed since (memory, environment, secrets) takes effect.
func (c *Cluster) reseed(ctx context.Context, s *snapshot, a action) outcome {
	c.log.Infof("making a new seed: member %s never ran (%s)", a.member, a.reason)
	if a.member != "" {
		// Its claim stays: the next seed starts on it (bootstrap).
		if err := c.deletePod(ctx, a.member); err != nil {
			return outcome{err: err}
		}
		c.event(corev1.EventTypeNormal, eventReplacingDeadMember, fmt.Sprintf("The dead member %s is being replaced", a.member))
	}
	// A joining pod made while the seed started names the seed in its
	// --initial-cluster: it goes with it, or it would be adopted as a member.
	for _, name := range sortedKeys(s.pods) {
		if name == a.member || !k8sutil.WaitsForMembership(s.pods[name]) || s.membership[name] != nil {
			continue
		}
		if err := c.deletePod(ctx, name); err != nil {
			return outcome{err: err}
		}
		if err := c.deleteClaim(ctx, s, name); err != nil {
			return outcome{err: err}
		}
	}
	if a.member != "" && s.claims[a.member] != nil {
		// The status keeps listing it, for the next seed to take its claim.
		m := memberTemplate(s.spec)
		m.Name = a.member
		c.members.learn(etcdutil.NewMemberSet(&m))
	} else {
		c.members.forget()
	}
	return outcome{phase: api.ClusterPhaseCreating, requeue: c.cfg.MinPassInterval}
}

// restartMembers gives members whose pods are gone new pods on their claims.
// etcd finds its data directory and starts as the member it was: same ID, no
// MemberAdd, no copy of the data, --initial-cluster ignored. A restart after
// a failure (this goroutine deleted the member's ended pod) is counted on the
// member's claim, for the repair ladder; the restart of a member whose pod
// was deleted by someone else, or never started, is not: it is no failure.
func (c *Cluster) restartMembers(ctx context.Context, s *snapshot, a action) outcome {
	members := restartMembership(s, a.members)
	pairs := members.PeerURLPairs()
	recovery := c.recovering != nil && slices.Contains(a.members, c.recovering.member)
	for _, name := range a.members {
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
			c.members.forget()
		}
		pod := k8sutil.NewEtcdPod(s.spec, members[name], a.version, pairs, k8sutil.ClusterStateExisting, "", opts...)
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
			c.event(corev1.EventTypeNormal, eventMemberRestarted, fmt.Sprintf("Member %s restarted in place on its data", name))
			continue
		}
		c.log.Infof("restarted member %s in place on its claim, on %s, after its pod ended (restart %d within %v)", name, a.version, restarts, ladderWindow)
		c.event(corev1.EventTypeNormal, eventMemberRestarted,
			fmt.Sprintf("Member %s restarted in place on its data after its pod ended (restart %d of %d within %v)", name, restarts, ladderRestarts, ladderWindow))
	}
	return outcome{requeue: c.cfg.MinPassInterval}
}

// restartMembership is the membership members restarted in place are told
// (their --initial-cluster, which etcd ignores when it finds its data): the
// one known, with the restarted members in it.
func restartMembership(s *snapshot, names []string) etcdutil.MemberSet {
	members := s.membership.Clone()
	if members == nil {
		members = etcdutil.MemberSet{}
	}
	for _, name := range names {
		if members[name] == nil {
			m := memberTemplate(s.spec)
			m.Name = name
			members.Add(&m)
		}
	}
	return members
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

// createJoiner creates the claim and pod of a new member that etcd does not
// know yet; its wait-membership init container holds etcd back until the
// member is added (join.go).
func (c *Cluster) createJoiner(ctx context.Context, s *snapshot, a action) outcome {
	m := c.newMember(s.spec)
	if err := c.createClaim(ctx, s, m.Name, a.version); err != nil {
		return outcome{err: err}
	}
	members := joiningMembership(s, a.behind, a.without)
	members.Add(m)
	pairs := members.PeerURLPairs()
	pod := k8sutil.NewEtcdPod(s.spec, m, a.version, pairs, k8sutil.ClusterStateExisting, "",
		k8sutil.WithMembershipWait(m, pairs, c.cfg.MembershipWait))
	if err := c.createPod(ctx, pod); err != nil {
		if derr := c.deleteClaim(ctx, s, m.Name); derr != nil {
			c.log.WithError(derr).Warn("could not delete the claim of a pod that was not created; it is collected later")
		}
		return outcome{err: err}
	}
	behind := ""
	if len(a.behind) > 0 {
		behind = ", after " + strings.Join(a.behind, ", ")
	}
	c.log.Infof("created pod %s for a new member on %s; it is added to etcd%s once the pod resolves in DNS", m.Name, a.version, behind)
	return outcome{requeue: c.cfg.MinPassInterval}
}

// addJoiner adds the member of a joining pod to etcd.
func (c *Cluster) addJoiner(ctx context.Context, s *snapshot, a action) outcome {
	m := *s.memberTemplate()
	m.Name = a.member
	add := c.cfg.Etcd.MemberAdd
	if a.learner {
		add = c.cfg.Etcd.MemberAddAsLearner
	}
	added, err := add(ctx, c.clientConfig(s, s.changeEndpoints(a.member)), m.PeerURL())
	if err != nil {
		if isNotReadyForChange(err) {
			c.log.Debugf("etcd refused to add %s for now: %v", a.member, err)
			return outcome{requeue: c.waitBackoff.Next()}
		}
		// The reply may have been lost after etcd added the member: the
		// membership is unknown until read again, so that the pod is not
		// taken for a joiner (and deleted) while etcd counts it as a member.
		c.members.forget()
		return outcome{err: etcdError("add member "+m.Name, err)}
	}
	c.waitBackoff.Reset()
	m.ID, m.IsLearner = added.ID, added.IsLearner
	members := s.membership.Clone()
	members.Add(&m)
	c.members.learn(members)
	kind := "member"
	if m.IsLearner {
		kind = "learner"
	}
	c.log.Infof("added %s %s (%x) to etcd, its pod waiting; membership %s", kind, m.Name, m.ID, members)
	c.event(corev1.EventTypeNormal, eventNewMemberAdded, fmt.Sprintf("New member %s added to cluster", m.Name))
	return outcome{requeue: c.cfg.MinPassInterval}
}

// promote makes a learner vote; etcd refuses until it has caught up with the
// leader, and the loop asks again shortly.
func (c *Cluster) promote(ctx context.Context, s *snapshot, a action) outcome {
	m := s.members[a.member].member
	if err := c.cfg.Etcd.MemberPromote(ctx, c.clientConfig(s, s.changeEndpoints(a.member)), m.ID); err != nil {
		if isNotReadyForChange(err) {
			c.log.Debugf("etcd refused to promote %s for now: %v", a.member, err)
			return outcome{requeue: c.waitBackoff.Next()}
		}
		return outcome{err: etcdError("promote learner "+a.member, err)}
	}
	c.waitBackoff.Reset()
	members := s.membership.Clone()
	members[a.member].IsLearner = false
	c.members.learn(members)
	c.log.Infof("promoted learner %s (%x) to a voting member", a.member, m.ID)
	return outcome{requeue: c.cfg.MinPassInterval}
}

// removeMember removes a member from etcd, then deletes its pod and claim.
// A deletion that fails leaves a pod or claim of no member, which a later
// pass collects. dead adds the original's "Replacing Dead Member" event, in
// its order: once etcd has let the member go, before "Member Removed".
func (c *Cluster) removeMember(ctx context.Context, s *snapshot, a action, dead bool) outcome {
	m := s.members[a.member].member
	if m.ID == 0 {
		return outcome{err: newPassError(problemEtcdMembership, "remove member "+m.Name, errors.New("its etcd ID is unknown"))}
	}
	c.log.Infof("removing member %s: %s", a.member, a.reason)
	if err := c.cfg.Etcd.MemberRemove(ctx, c.clientConfig(s, s.changeEndpoints(a.member)), m.ID); err != nil {
		if isNotReadyForChange(err) {
			c.log.Debugf("etcd refused to remove %s for now: %v", a.member, err)
			return outcome{requeue: c.waitBackoff.Next()}
		}
		c.members.forget()
		return outcome{err: etcdError("remove member "+m.Name, err)}
	}
	c.waitBackoff.Reset()
	members := s.membership.Clone()
	members.Remove(m.Name)
	c.members.learn(members)
	c.log.Infof("removed member %s (%x) from etcd; membership %s", m.Name, m.ID, members)
	if dead {
		c.event(corev1.EventTypeNormal, eventReplacingDeadMember, fmt.Sprintf("The dead member %s is being replaced", m.Name))
	}
	c.event(corev1.EventTypeNormal, eventMemberRemoved, fmt.Sprintf("Existing member %s removed from the cluster", m.Name))
	if err := c.deletePod(ctx, m.Name); err != nil {
		return outcome{err: err}
	}
	return outcome{err: c.deleteClaim(ctx, s, m.Name), requeue: c.cfg.MinPassInterval}
}

// upgradeMember patches a member in place: the kubelet restarts the etcd
// container on the new image and the data directory survives. The next
// member waits until this one runs the new image and is Ready again.
func (c *Cluster) upgradeMember(ctx context.Context, s *snapshot, a action) outcome {
	pod := s.members[a.member].pod
	from := podVersion(pod)
	if v := runningVersion(pod); v != "" {
		from = v
	} else if f := s.failedUpgrade; f != nil && f.member == a.member {
		from = f.from
	}
	image := api.EtcdImage(s.spec.Spec.Repository, a.version)
	if claim := s.claims[a.member]; claim != nil && k8sutil.ClaimVersion(claim) != a.version {
		// Before the pod: a member restarted on its claim later must start on
		// a version its data allows.
		if err := c.annotateClaimVersion(ctx, a.member, a.version); err != nil {
			return outcome{err: err}
		}
	}
	if err := c.patchMemberPod(ctx, pod, a.version, image); err != nil {
		return outcome{err: err}
	}
	restarts := int32(0)
	if st := etcdContainerStatus(pod); st != nil {
		restarts = st.RestartCount
	}
	c.expectUpgrade(pod, &upgradeExpectation{name: a.member, version: a.version, from: from, restarts: restarts, image: image,
		deadline: c.now().Add(c.cfg.PendingTimeout)})
	c.log.Infof("upgrading member %s from %s to %s (%s)", a.member, from, a.version, a.reason)
	// The trailing space is the original's.
	c.event(corev1.EventTypeNormal, eventMemberUpgraded, fmt.Sprintf("Member %s upgraded from %s to %s ", a.member, from, a.version))
	return outcome{downed: a.member}
}

// patchMemberPod sets the etcd container's image and the version annotation
// with one strategic merge patch (containers merge by name). The pod's UID is
// part of the patch: the API server refuses to change a UID, so a different
// pod that took the name in the meantime is never patched.
func (c *Cluster) patchMemberPod(ctx context.Context, pod *corev1.Pod, version, image string) error {
	meta := map[string]any{"annotations": map[string]string{api.AnnotationVersion: version}}
	if pod.UID != "" {
		meta["uid"] = pod.UID
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": meta,
		"spec": map[string]any{
			"containers": []map[string]string{{"name": k8sutil.EtcdContainerName, "image": image}},
		},
	})
	if err != nil {
		return fmt.Errorf("build patch: %w", err)
	}
	_, err = c.cfg.KubeClient.CoreV1().Pods(c.namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return kubeError(fmt.Sprintf("patch pod %s to %s", pod.Name, image), err)
	}
	return nil
}

// maintain carries out a step of day-2 care. Each is said in an event: they
// are what a user would otherwise have done by hand with etcdctl.
func (c *Cluster) maintain(ctx context.Context, s *snapshot, a action) outcome {
	cc := c.clientConfig(s, s.endpoints())
	c.log.Infof("%s", a)
	switch a.kind {
	case actEnableDowngrade:
		if err := c.cfg.Etcd.EnableDowngrade(ctx, cc, a.version); err != nil {
			return outcome{err: etcdError("enable the downgrade to "+a.version, err)}
		}
		c.event(corev1.EventTypeNormal, eventDowngradeEnabled, a.reason)
	case actMoveLeader:
		m := s.members[a.member]
		if m == nil {
			return outcome{err: fmt.Errorf("move leadership to %s: no such member", a.member)}
		}
		if err := c.cfg.Etcd.MoveLeader(ctx, cc, m.member.ID); err != nil {
			return outcome{err: etcdError("move leadership to "+a.member, err)}
		}
		c.event(corev1.EventTypeNormal, eventLeaderMoved, fmt.Sprintf("Leadership moved to %s: %s", a.member, a.reason))
	case actCompact:
		rev, err := c.cfg.Etcd.Compact(ctx, cc)
		if err != nil {
			return outcome{err: etcdError("compact", err)}
		}
		c.event(corev1.EventTypeNormal, eventCompacted, fmt.Sprintf("History compacted to revision %d: %s", rev, a.reason))
		return outcome{compacted: rev, requeue: c.cfg.MinPassInterval}
	case actDefragment:
		m := s.members[a.member]
		if m == nil {
			return outcome{err: fmt.Errorf("defragment %s: no such member", a.member)}
		}
		if err := c.cfg.Etcd.Defragment(ctx, cc, m.member.ClientURL()); err != nil {
			return outcome{err: etcdError("defragment "+a.member, err)}
		}
		c.event(corev1.EventTypeNormal, eventDefragmented, fmt.Sprintf("Member %s defragmented: %s", a.member, a.reason))
		return outcome{defragmented: a.member, requeue: c.cfg.MinPassInterval}
	case actDisarmNoSpace:
		if err := c.cfg.Etcd.DisarmNoSpace(ctx, cc); err != nil {
			return outcome{err: etcdError("disarm the NOSPACE alarm", err)}
		}
		c.event(corev1.EventTypeNormal, eventNoSpaceDisarmed, "NOSPACE alarm disarmed: "+a.reason)
	}
	return outcome{requeue: c.cfg.MinPassInterval}
}

// forceNewCluster starts a disaster recovery from a surviving member: its
// pod is deleted, and restartInPlace restarts it on its claim with
// --force-new-cluster. What only the lost members held is lost; the status
// records how much may be.
func (c *Cluster) forceNewCluster(ctx context.Context, s *snapshot, a action) outcome {
	m := s.members[a.member]
	var revision int64
	if h, ok := s.etcd.healthOf(m.member.ID); ok {
		revision = h.Revision
	}
	msg := fmt.Sprintf("Disaster recovery: the quorum was lost for good; member %s (%s) becomes a one-member cluster with its data, at revision %d, and the cluster regrows from it",
		a.member, a.reason, revision)
	if c.lastRevision > revision {
		msg += fmt.Sprintf("; writes up to revision %d were seen before and the last %d revisions may be lost", c.lastRevision, c.lastRevision-revision)
	}
	c.log.Warn(msg)
	c.event(corev1.EventTypeWarning, eventDisasterRecovery, msg)
	if err := c.deletePod(ctx, a.member); err != nil {
		return outcome{err: err}
	}
	c.recovering = &recovering{member: a.member, started: c.now(), revision: revision}
	return outcome{requeue: c.cfg.MinPassInterval, recovery: &api.RecoveryStatus{
		Time: metav1.NewTime(c.now()), FromMember: a.member, RecoveredRevision: revision, LastSeenRevision: c.lastRevision, Message: msg,
	}}
}

// restoreFromBackup asks the restore operator to restore the cluster from
// the newest successful EtcdBackup of it, when no member's data is left.
func (c *Cluster) restoreFromBackup(ctx context.Context, s *snapshot, a action) outcome {
	restores, err := c.cfg.EtcdClient.EtcdV1beta2().EtcdRestores(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return outcome{err: kubeError("list EtcdRestores", err)}
	}
	for _, r := range restores.Items {
		finished := r.Status.Phase == api.RestorePhaseCompleted || r.Status.Phase == api.RestorePhaseFailed
		switch {
		case r.Spec.EtcdCluster.Name == c.name && !finished:
			c.log.Infof("waiting for EtcdRestore %s to restore the cluster", r.Name)
			return outcome{requeue: c.cfg.ReconcileInterval}
		case r.Name == c.name:
			// The restore takes the cluster's name, so the record of an
			// earlier, finished restore must make way; it holds no data.
			err := c.cfg.EtcdClient.EtcdV1beta2().EtcdRestores(c.namespace).Delete(ctx, r.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &r.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				return outcome{err: kubeError("delete the finished EtcdRestore "+r.Name, err)}
			}
			c.log.Infof("deleted EtcdRestore %s (%s) of an earlier restore, to restore the cluster again", r.Name, r.Status.Phase)
			return outcome{requeue: c.cfg.MinPassInterval}
		}
	}
	backups, err := c.cfg.EtcdClient.EtcdV1beta2().EtcdBackups(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return outcome{err: kubeError("list EtcdBackups", err)}
	}
	var newest *api.EtcdBackup
	for i := range backups.Items {
		b := &backups.Items[i]
		if _, _, ok := api.RestoreSourceOf(b); ok && b.TargetsCluster(c.name) &&
			(newest == nil || b.Status.LastSuccessDate.After(newest.Status.LastSuccessDate.Time)) {
			newest = b
		}
	}
	if newest == nil {
		return outcome{err: newPassError(problemNoMembersRunning, "disaster recovery from a backup",
			fmt.Errorf("no EtcdBackup of this cluster in %s has succeeded; restore it with an EtcdRestore", c.namespace))}
	}
	storage, src, _ := api.RestoreSourceOf(newest)
	// Named like the cluster: the restore operator recreates the cluster
	// under the restore's name, and admission refuses any other.
	restore := &api.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.namespace},
		Spec:       api.RestoreSpec{BackupStorageType: storage, RestoreSource: src, EtcdCluster: api.EtcdClusterRef{Name: c.name}},
	}
	if err := restore.Validate(); err != nil {
		return outcome{err: newPassError(problemNoMembersRunning, "disaster recovery from EtcdBackup "+newest.Name, err)}
	}
	if _, err := c.cfg.EtcdClient.EtcdV1beta2().EtcdRestores(c.namespace).Create(ctx, restore, metav1.CreateOptions{}); err != nil {
		return outcome{err: kubeError("create EtcdRestore "+restore.Name, err)}
	}
	msg := fmt.Sprintf("Disaster recovery: no member's data is left; EtcdRestore %s restores the cluster from EtcdBackup %s (%s, taken %s at revision %d); writes after it are lost",
		restore.Name, newest.Name, newest.Status.BackupPath, newest.Status.LastSuccessDate.UTC().Format(time.RFC3339), newest.Status.EtcdRevision)
	c.log.Warn(msg)
	c.event(corev1.EventTypeWarning, eventDisasterRecovery, msg)
	return outcome{requeue: c.cfg.ReconcileInterval, recovery: &api.RecoveryStatus{
		Time: metav1.NewTime(c.now()), FromBackup: newest.Status.BackupPath, RecoveredRevision: newest.Status.EtcdRevision,
		LastSeenRevision: c.lastRevision, Message: msg,
	}}
}

// annotateClaimVersion records on a member's claim the version that writes it.
func (c *Cluster) annotateClaimVersion(ctx context.Context, name, version string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{api.AnnotationVersion: version}}})
	if err != nil {
		return fmt.Errorf("build patch: %w", err)
	}
	_, err = c.cfg.KubeClient.CoreV1().PersistentVolumeClaims(c.namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return kubeError("record the version on claim "+name, err)
	}
	return nil
}

// newMember names a new member "<cluster>-<10 random characters>", as the
// original did; the name is also its pod's and its claim's.
func (c *Cluster) newMember(cl *api.EtcdCluster) *etcdutil.Member {
	m := memberTemplate(cl)
	m.Name = c.name + "-" + c.randomSuffix()
	return &m
}

// createClaim creates a member's claim when members use claims. An existing
// claim of that name is this member's from an earlier, interrupted try.
func (c *Cluster) createClaim(ctx context.Context, s *snapshot, name, version string) error {
	pvc := k8sutil.NewEtcdPVC(s.spec, name, version)
	if pvc == nil {
		return nil
	}
	_, err := c.cfg.KubeClient.CoreV1().PersistentVolumeClaims(c.namespace).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return kubeError("create claim "+name, err)
	}
	return nil
}

// createPod creates a member pod and expects it in the lister.
func (c *Cluster) createPod(ctx context.Context, pod *corev1.Pod) error {
	if _, err := c.cfg.KubeClient.CoreV1().Pods(c.namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return kubeError("create pod "+pod.Name, err)
	}
	e := c.podExpect
	if e == nil {
		e = &podExpectation{}
	}
	c.podExpect = &podExpectation{names: append(slices.Clone(e.names), pod.Name), deadline: c.now().Add(c.cfg.ExpectationTimeout)}
	return nil
}

func (c *Cluster) deletePod(ctx context.Context, name string) error {
	grace := podDeleteGracePeriod
	err := c.cfg.KubeClient.CoreV1().Pods(c.namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return kubeError("delete pod "+name, err)
	}
	return nil
}

// deleteClaim deletes a claim no member needs: a replacement is a new member
// with a new name and an empty data directory anyway.
func (c *Cluster) deleteClaim(ctx context.Context, s *snapshot, name string) error {
	if _, exists := s.claims[name]; !exists && !s.usesClaims() {
		return nil
	}
	err := c.cfg.KubeClient.CoreV1().PersistentVolumeClaims(c.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return kubeError("delete claim "+name, err)
	}
	return nil
}
