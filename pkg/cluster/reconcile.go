package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// reconcile runs one pass: setup if needed, then at most one membership change
// or one member upgrade, then the status write. It returns when the next pass
// is wanted (0: at the next tick or event) and the error that ended the pass,
// which the run loop retries with backoff.
func (c *Cluster) reconcile(ctx context.Context) (time.Duration, error) {
	start := c.now()
	c.problems = nil
	c.log.Debug("reconcile pass")

	requeue, err := c.step(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		p := problemOf(err)
		c.problems = append(c.problems, p)
		c.log.WithError(err).Debug("reconcile pass failed")
		if p.code == reasonEtcdUnreachable {
			// The operator secret may have been rotated: read it again.
			c.tlsConfig = nil
		}
	}

	pods, perr := c.listPods()
	if perr != nil {
		pods = nil
	}
	c.refreshStatus(pods)
	active := c.activeProblems()
	c.status.Reason = joinMessages(active)
	if werr := c.writeStatus(ctx); werr != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		active = append(active, problemOf(werr))
		if err == nil {
			err = werr
		}
	}
	c.announce(active)

	c.cfg.Metrics.observePass(c.namespace, c.name, c.now().Sub(start))
	desired := 0
	if c.spec != nil {
		desired = c.spec.Spec.Size
	}
	c.cfg.Metrics.setState(c.namespace, c.name, desired, c.status.Size, len(c.status.Members.Ready), c.status.Phase)
	return requeue, err
}

// activeProblems lists what is wrong now, the user's own mistakes first.
func (c *Cluster) activeProblems() []problem {
	var ps []problem
	if c.specProblem != nil {
		ps = append(ps, *c.specProblem)
	}
	return append(ps, c.problems...)
}

// announce emits one Warning event per problem the first time it is seen and
// forgets problems that went away, so that a recurrence is announced again.
func (c *Cluster) announce(active []problem) {
	seen := map[string]bool{}
	for _, p := range active {
		k := p.key()
		if seen[k] {
			continue
		}
		seen[k] = true
		c.cfg.Metrics.failed(c.namespace, c.name, p.code)
		if !c.reported[k] {
			c.reported[k] = true
			c.log.Warn(p.msg)
			c.event(corev1.EventTypeWarning, p.event, p.msg)
		}
	}
	for k := range c.reported {
		if !seen[k] {
			delete(c.reported, k)
		}
	}
}

// step is the pass without its bookkeeping.
func (c *Cluster) step(ctx context.Context) (time.Duration, error) {
	if c.spec == nil {
		return 0, nil // invalid from the start: reported, waiting for a fix
	}
	if c.status.Phase == api.ClusterPhaseFailed {
		// Never set by this operator (every failure is retried and reported);
		// a cluster failed by the original is left alone.
		return 0, nil
	}
	cl := c.desired()
	// Services and the TLS secret come before the pause check: the restore
	// operator's seed pod (created while the cluster is paused) waits in its
	// DNS init container for the peer service.
	if err := c.ensureServices(ctx, cl); err != nil {
		return 0, err
	}
	if err := c.loadTLS(ctx, cl); err != nil {
		return 0, err
	}
	if cl.Spec.Paused {
		return 0, nil
	}
	pods, err := c.listPods()
	if err != nil {
		return 0, err
	}
	switch c.status.Phase {
	case api.ClusterPhaseNone, api.ClusterPhaseCreating:
		if len(pods.owned) == 0 {
			return c.bootstrap(ctx, cl)
		}
		// A seed exists: the operator restarted while the cluster was
		// Creating (the original failed the cluster for good here), or the
		// restore operator created it. Either way it is adopted, and the
		// membership is read from it once it runs.
		c.log.Infof("member pods exist for a %q cluster; adopting them", c.status.Phase)
		c.status.Phase = api.ClusterPhaseRunning
		c.members = nil
	}
	return c.reconcileMembers(ctx, cl, pods)
}

// podSet is the cluster's pods as the lister shows them.
type podSet struct {
	// owned are the pods whose controller is this cluster, by name, without
	// the ones being deleted (the API shows some of those as Pending, #1693).
	owned map[string]*corev1.Pod
	// terminating are owned pods being deleted.
	terminating map[string]*corev1.Pod
}

// listPods reads the cluster's pods from the shared informer's cache. Pods
// with the cluster's labels but another controller (a look-alike, or a
// leftover of a deleted cluster of the same name) are ignored: never counted,
// never deleted.
func (c *Cluster) listPods() (*podSet, error) {
	list, err := c.cfg.PodLister.Pods(c.namespace).List(k8sutil.ClusterSelector(c.name))
	if err != nil {
		return nil, fmt.Errorf("list pods from cache: %w", err)
	}
	s := &podSet{owned: map[string]*corev1.Pod{}, terminating: map[string]*corev1.Pod{}}
	for _, p := range list {
		if !k8sutil.IsOwnedBy(p, c.latest) {
			continue
		}
		if k8sutil.IsBeingDeleted(p) {
			s.terminating[p.Name] = p
			continue
		}
		s.owned[p.Name] = p
	}
	return s, nil
}

// memberView sorts the members by the state of their pods. Every list is
// sorted by name, so a retried pass acts on the same member.
type memberView struct {
	// running are members whose pod is Running; ready is the subset whose
	// pod is Ready too.
	running, ready []string
	// starting are members whose pod is Pending within PendingTimeout, or
	// was just created and has not reached the lister yet.
	starting []string
	// dead are members whose pod is gone, has ended, is being deleted or has
	// been Pending longer than PendingTimeout.
	dead []string
	// unknown are owned pods that belong to no member and are no joiner.
	unknown []string
	// joiners are the pods of members to be added, by name (see join.go).
	joiners map[string]*corev1.Pod
	// pods are the pods of running and starting members, by name.
	pods map[string]*corev1.Pod
}

func (c *Cluster) classify(pods *podSet) memberView {
	now := c.now()
	v := memberView{pods: map[string]*corev1.Pod{}, joiners: map[string]*corev1.Pod{}}
	for _, name := range c.members.Names() {
		pod, ok := pods.owned[name]
		switch {
		case !ok:
			if c.podExpect != nil && c.podExpect.name == name {
				v.starting = append(v.starting, name)
			} else {
				v.dead = append(v.dead, name)
			}
			continue
		case pod.Status.Phase == corev1.PodRunning:
			v.running = append(v.running, name)
			if k8sutil.IsPodReady(pod) {
				v.ready = append(v.ready, name)
			}
			v.pods[name] = pod
		case pod.Status.Phase == corev1.PodPending &&
			// A pod that waited for its member to be added may be older than
			// the timeout, but starts etcd a moment after the add; its own
			// timeout fails it otherwise.
			(!k8sutil.IsPodPendingTooLong(pod, now, c.cfg.PendingTimeout) || k8sutil.IsWaitingForMembership(pod)):
			v.starting = append(v.starting, name)
			v.pods[name] = pod
		default:
			v.dead = append(v.dead, name)
		}
	}
	for name, pod := range pods.owned {
		switch _, member := c.members[name]; {
		case member:
		case c.isJoiner(pod):
			v.joiners[name] = pod
		default:
			v.unknown = append(v.unknown, name)
		}
	}
	sort.Strings(v.unknown)
	return v
}

// endpoints are the client URLs etcd calls go to: voting members whose pod
// runs, ready ones first.
func (c *Cluster) endpoints(v memberView) []string {
	var eps []string
	seen := map[string]bool{}
	for _, names := range [][]string{v.ready, v.running} {
		for _, n := range names {
			// A learner serves no linearizable requests; clients would only
			// be sent on to another member.
			if !seen[n] && !c.members[n].IsLearner {
				seen[n] = true
				eps = append(eps, c.members[n].ClientURL())
			}
		}
	}
	return eps
}

// reconcileMembers is the diff of original.md §3.5 with the fixes: quorum is
// checked before anything destructive, created pods are waited for, pending
// pods no longer freeze the cluster, and a change is only tried when etcd can
// take it.
func (c *Cluster) reconcileMembers(ctx context.Context, cl *api.EtcdCluster, pods *podSet) (time.Duration, error) {
	if c.members == nil {
		if ok, err := c.rebuildMembers(ctx, cl, pods); !ok {
			return 0, err
		}
	}
	c.checkExpectations(pods)
	if requeue, reseeded, err := c.reseedIfNeverStarted(ctx, cl, pods); reseeded || err != nil {
		return requeue, err
	}
	v := c.classify(pods)
	if !c.evaluateQuorum(cl, v) {
		// Without quorum etcd cannot change its membership, and a member
		// removed now could be one whose data is needed to recover. Nothing
		// is touched; pod events and ticks re-check.
		return 0, nil
	}

	plan := planVersions(cl.Spec.Version, v)
	c.haltFailedUpgrade(&plan)
	c.setVersionStatus(plan)

	if err := c.deleteUnknownPods(ctx, v.unknown); err != nil {
		return 0, err
	}
	if e := c.podExpect; e != nil {
		// The pod of the last added member has not reached the lister: until
		// it does, that member would look dead and the next change would be
		// made on a wrong picture. Its informer event wakes the loop; the
		// deadline bounds the wait.
		c.log.Debugf("waiting for pod %s to show up before any other membership change", e.name)
		return max(e.deadline.Sub(c.now()), c.cfg.MinPassInterval), nil
	}
	n := c.members.Size()
	if wantsMember := n < cl.Spec.Size || n == cl.Spec.Size && len(plan.replace) > 0; !wantsMember {
		if err := c.dropJoiners(ctx, cl, v); err != nil {
			return 0, err
		}
	}
	if len(v.dead) > 0 {
		return c.replaceDeadMember(ctx, cl, v)
	}
	if learners := c.members.Learners(); len(learners) > 0 {
		// Before any other change: a learner is a join not yet finished.
		return c.promoteLearner(ctx, v, learners[0])
	}
	switch {
	case n < cl.Spec.Size:
		return c.addOneMember(ctx, cl, v, plan)
	case n > cl.Spec.Size:
		return c.removeOneMember(ctx, cl, v, plan)
	}
	return c.upgrade(ctx, cl, v, plan)
}

// evaluateQuorum sets the Available condition and reports a lost quorum. It
// returns whether a quorum of members runs, the condition for any change.
//
// A member counts as up when its pod is Running. Pod readiness is not used to
// declare quorum lost: a 3.2 member's probe passes without a leader, and a
// member restarting for an upgrade is briefly unready without anything being
// lost. Available becomes True once a quorum is also Ready.
func (c *Cluster) evaluateQuorum(cl *api.EtcdCluster, v memberView) bool {
	voters := c.members.Voters()
	n := voters.Size()
	quorum := n/2 + 1
	countVoters := func(names []string) int {
		k := 0
		for _, name := range names {
			if voters[name] != nil {
				k++
			}
		}
		return k
	}
	up, ready, starting := countVoters(v.running), countVoters(v.ready), countVoters(v.starting)
	switch {
	case up >= quorum:
		if ready >= quorum {
			c.setCondition(api.ClusterConditionAvailable, corev1.ConditionTrue, reasonClusterAvailable, "")
		}
		return true
	case up == 0 && starting == 0:
		msg := noMembersMessage(cl, n)
		c.setCondition(api.ClusterConditionAvailable, corev1.ConditionFalse, reasonNoMembersRunningCond, msg)
		c.problems = append(c.problems, problem{code: reasonNoMembersRunning, event: warnNoMembersRunning, msg: msg})
	case up+starting < quorum:
		msg := fmt.Sprintf("lost quorum: %d of %d members are up, %d are needed; nothing is removed or deleted while quorum is lost: bring the members back or restore the cluster from a backup with an EtcdRestore",
			up, n, quorum)
		c.setCondition(api.ClusterConditionAvailable, corev1.ConditionFalse, reasonLostQuorumCond, msg)
		c.problems = append(c.problems, problem{code: reasonLostQuorum, event: warnLostQuorum, msg: msg})
	default:
		// Members are still starting (the seed of a new cluster): nothing is
		// lost, nothing to do until they run.
	}
	return false
}

// noMembersMessage says what a cluster whose members are all gone can still
// hope for: with emptyDir storage the data went with the pods.
func noMembersMessage(cl *api.EtcdCluster, n int) string {
	if n == 0 {
		return "no member pod exists; restore the cluster from a backup with an EtcdRestore"
	}
	if cl.Spec.Pod != nil && cl.Spec.Pod.PersistentVolumeClaimSpec != nil {
		return fmt.Sprintf("no member is running (all %d are down); their data may remain on their PersistentVolumeClaims, but members are not restarted in place: restore the cluster from a backup with an EtcdRestore", n)
	}
	return fmt.Sprintf("no member is running (all %d are down); their data was on emptyDir volumes and is gone: restore the cluster from a backup with an EtcdRestore", n)
}

// rebuildMembers reads the membership from etcd through the running pods,
// after an operator restart or a hand-over. It returns whether the membership
// is known now.
func (c *Cluster) rebuildMembers(ctx context.Context, cl *api.EtcdCluster, pods *podSet) (bool, error) {
	tmpl := c.memberTemplate(cl)
	var endpoints []string
	pending, total := 0, len(pods.owned)
	for _, name := range sortedKeys(pods.owned) {
		pod := pods.owned[name]
		switch {
		case pod.Status.Phase == corev1.PodRunning:
			m := tmpl
			m.Name = name
			endpoints = append(endpoints, m.ClientURL())
		case pod.Status.Phase == corev1.PodPending && !k8sutil.IsPodPendingTooLong(pod, c.now(), c.cfg.PendingTimeout):
			pending++
		}
	}
	if len(endpoints) == 0 {
		if pending > 0 {
			c.log.Debugf("membership unknown and no member pod runs yet (%d pending); waiting", pending)
			return false, nil
		}
		msg := noMembersMessage(cl, total)
		c.setCondition(api.ClusterConditionAvailable, corev1.ConditionFalse, reasonNoMembersRunningCond, msg)
		c.problems = append(c.problems, problem{code: reasonNoMembersRunning, event: warnNoMembersRunning, msg: msg})
		return false, nil
	}
	list, err := c.cfg.Etcd.MemberList(ctx, c.clientConfig(endpoints))
	if err != nil {
		c.reportQuorumFromHealth(ctx, endpoints)
		return false, etcdError("read the membership from the running members", err)
	}
	ms, err := etcdutil.MembersFromEtcd(list, tmpl)
	if err != nil {
		return false, newPassError(reasonEtcdMembership, warnEtcdMembership, "read the membership", err)
	}
	c.members = ms
	c.log.Infof("membership read from etcd: %s", ms)
	return true, nil
}

// reportQuorumFromHealth tells a lost quorum from an unreachable etcd when
// the membership cannot be read (the list needs a quorum; the health report
// does not), so that a restart during a quorum loss still reports it.
func (c *Cluster) reportQuorumFromHealth(ctx context.Context, endpoints []string) {
	h, err := c.cfg.Etcd.ClusterHealth(ctx, c.clientConfig(endpoints))
	if err != nil || len(h.Members) == 0 || h.Healthy() {
		return
	}
	n := len(h.Members)
	up := len(h.Answered())
	if quorum := n/2 + 1; up < quorum {
		msg := fmt.Sprintf("lost quorum: %d of %d members answer, %d are needed; nothing is removed or deleted while quorum is lost: bring the members back or restore the cluster from a backup with an EtcdRestore",
			up, n, quorum)
		c.setCondition(api.ClusterConditionAvailable, corev1.ConditionFalse, reasonLostQuorumCond, msg)
		c.problems = append(c.problems, problem{code: reasonLostQuorum, event: warnLostQuorum, msg: msg})
	}
}

// deleteUnknownPods deletes owned pods that are no member: a member removed
// while its pod could not be deleted, or a pod of a failed add.
func (c *Cluster) deleteUnknownPods(ctx context.Context, names []string) error {
	for _, name := range names {
		c.log.Infof("deleting pod %s: it belongs to no member of the cluster", name)
		if err := c.deletePod(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// reseedIfNeverStarted replaces the seed of a one-member cluster whose pod
// has been Pending longer than PendingTimeout (unschedulable, a missing
// storage class, a DNS wait that never ends). A dead member is normally
// replaced by MemberRemove and MemberAdd, which a cluster without any running
// member cannot do; but a Pending pod has never run etcd, so the cluster holds
// no data yet and starting again from a new seed loses nothing.
func (c *Cluster) reseedIfNeverStarted(ctx context.Context, cl *api.EtcdCluster, pods *podSet) (time.Duration, bool, error) {
	if c.members.Size() != 1 {
		return 0, false, nil
	}
	name := c.members.Names()[0]
	pod, ok := pods.owned[name]
	if !ok || !k8sutil.IsPodPendingTooLong(pod, c.now(), c.cfg.PendingTimeout) {
		return 0, false, nil
	}
	c.log.Infof("seed member %s has been Pending for more than %v and never ran; creating a new seed", name, c.cfg.PendingTimeout)
	if err := c.deletePod(ctx, name); err != nil {
		return 0, false, err
	}
	if err := c.deletePVC(ctx, cl, name); err != nil {
		return 0, false, err
	}
	c.event(corev1.EventTypeNormal, eventReplacingDeadMember, fmt.Sprintf("The dead member %s is being replaced", name))
	c.members = nil
	c.status.Phase = api.ClusterPhaseCreating
	requeue, err := c.bootstrap(ctx, cl)
	return requeue, true, err
}

// replaceDeadMember removes one dead member; the next pass adds its
// replacement, with a new name and an empty data directory, once the cluster
// is healthy again.
func (c *Cluster) replaceDeadMember(ctx context.Context, cl *api.EtcdCluster, v memberView) (time.Duration, error) {
	if changed, err := c.syncMembers(ctx, cl, v); err != nil || changed {
		return c.cfg.MinPassInterval, err
	}
	name := v.dead[0]
	m := c.members[name]
	if m == nil {
		return c.cfg.MinPassInterval, nil
	}
	c.log.Infof("removing dead member %s", name)
	if err := c.removeMember(ctx, cl, v, m, true); err != nil {
		return c.waitOrFail(err)
	}
	return c.cfg.MinPassInterval, nil
}

// errEtcdNotReady means etcd refused a membership change because the cluster
// is not healthy enough for it yet; the change is tried again soon, without a
// warning.
var errEtcdNotReady = errors.New("etcd is not ready for a membership change")

// waitOrFail turns errEtcdNotReady into a short wait and passes other errors on.
func (c *Cluster) waitOrFail(err error) (time.Duration, error) {
	if errors.Is(err, errEtcdNotReady) {
		c.log.Debugf("waiting: %v", err)
		return c.waitBackoff.next(), nil
	}
	return 0, err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
