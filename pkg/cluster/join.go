package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// Members join pod first when the operator knows its own image (see
// k8sutil.MembershipWait for why):
//
//  1. the pod of the new member is created, with --initial-cluster naming the
//     current members and itself, and an init container that holds etcd
//     back until the member is in the membership;
//  2. once its check-dns container has found the pod's name, and the cluster
//     is healthy enough for a change, the member is added with MemberAdd;
//  3. the init container sees the member in every peer's membership, and
//     etcd starts and joins;
//  4. the member was added as a learner, which does not vote, so that the
//     quorum does not grow before the member can take part in it (a 1-member
//     cluster would otherwise stop serving until the second member runs);
//     it is promoted once it has caught up with the leader. etcd before 3.4
//     has no learners: there the member votes from the start.
//
// Until step 2 the pod is a "joiner": no member, nothing etcd knows about,
// safe to delete at any time. A joiner whose --initial-cluster no longer
// matches the membership (a member was removed meanwhile), whose version is
// not the one new members get, or that cannot start, is deleted and a new
// one made. Joiners are found from the pods on every pass, so a restarted
// operator carries on with the joiner it finds.

// joinsPodFirst tells whether new members join pod first.
func (c *Cluster) joinsPodFirst() bool { return c.cfg.MembershipWait.Image != "" }

// joinOneMember is addOneMember for pod-first joins: one of the steps above
// per pass.
func (c *Cluster) joinOneMember(ctx context.Context, cl *api.EtcdCluster, v memberView, plan versionPlan) (time.Duration, error) {
	joiner, err := c.usableJoiner(ctx, cl, v, plan)
	if err != nil {
		return 0, err
	}
	if joiner == nil {
		return c.createJoiner(ctx, cl, plan)
	}
	if !k8sutil.HasPassedDNSCheck(joiner) {
		// Its status changes wake the loop.
		c.log.Debugf("waiting for the pod of the joining member %s to resolve in DNS", joiner.Name)
		return 0, nil
	}
	if proceed, requeue, err := c.readyToAdd(ctx, cl, v); !proceed {
		return requeue, err
	}
	m := c.memberTemplate(cl)
	m.Name = joiner.Name
	m.IsLearner = learnersSupported(plan, v)
	add := c.cfg.Etcd.MemberAdd
	if m.IsLearner {
		add = c.cfg.Etcd.MemberAddAsLearner
	}
	added, err := add(ctx, c.clientConfig(c.endpoints(v)), m.PeerURL())
	if err != nil {
		if isNotReadyForChange(err) {
			return c.waitOrFail(fmt.Errorf("%w: %v", errEtcdNotReady, err))
		}
		// The reply may have been lost after etcd added the member. The
		// membership is then unknown, and the next pass reads it from etcd
		// before anything else, so that the pod is not taken for a joiner
		// (and deleted) while etcd counts it as a member.
		c.members = nil
		return 0, etcdError(fmt.Sprintf("add member %s", m.Name), err)
	}
	m.ID = added.ID
	m.IsLearner = added.IsLearner
	c.members.Add(&m)
	kind := "member"
	if m.IsLearner {
		kind = "learner"
	}
	c.log.Infof("added %s %s (%x) to etcd, its pod waiting; membership %s", kind, m.Name, m.ID, c.members)
	c.event(corev1.EventTypeNormal, eventNewMemberAdded, fmt.Sprintf("New member %s added to cluster", m.Name))
	return c.cfg.MinPassInterval, nil
}

// createJoiner creates the claim and pod of a new member that etcd does not
// know yet.
func (c *Cluster) createJoiner(ctx context.Context, cl *api.EtcdCluster, plan versionPlan) (time.Duration, error) {
	m := c.newMember(cl)
	podCluster := cl.DeepCopy()
	podCluster.Spec.Version = plan.newMembers
	if err := c.ensurePVC(ctx, podCluster, m.Name); err != nil {
		return 0, err
	}
	members := c.members.Clone()
	members.Add(m)
	pairs := members.PeerURLPairs()
	wait := k8sutil.WithMembershipWait(m, pairs, c.cfg.MembershipWait)
	if err := c.createMemberPod(ctx, podCluster, m, members, k8sutil.ClusterStateExisting, "", wait); err != nil {
		if derr := c.deletePVC(ctx, cl, m.Name); derr != nil {
			c.log.WithError(derr).Warn("could not delete the PVC of a pod that was not created")
		}
		return 0, err
	}
	c.log.Infof("created pod %s for a new member; it is added to etcd once the pod resolves in DNS", m.Name)
	return c.cfg.MinPassInterval, nil
}

// usableJoiner deletes the joiners that cannot be added and returns the one
// that can, if any.
func (c *Cluster) usableJoiner(ctx context.Context, cl *api.EtcdCluster, v memberView, plan versionPlan) (*corev1.Pod, error) {
	var usable *corev1.Pod
	for _, name := range sortedKeys(v.joiners) {
		pod := v.joiners[name]
		var why string
		switch {
		case usable != nil:
			why = "another joining pod is used"
		case k8sutil.IsPodDead(pod):
			why = "it ended before its member was added"
		case !k8sutil.HasPassedDNSCheck(pod) && k8sutil.IsPodPendingTooLong(pod, c.now(), c.cfg.PendingTimeout):
			why = fmt.Sprintf("it has not started within %v", c.cfg.PendingTimeout)
		case podVersion(pod) != plan.newMembers:
			why = fmt.Sprintf("it was made for etcd %s and new members now run %s", displayVersion(podVersion(pod)), plan.newMembers)
		case !slices.Equal(k8sutil.InitialCluster(pod), c.initialClusterWith(cl, name)):
			why = "the membership changed since it was made"
		default:
			usable = pod
			continue
		}
		if err := c.deleteJoiner(ctx, cl, name, why); err != nil {
			return nil, err
		}
	}
	return usable, nil
}

// initialClusterWith is --initial-cluster for a member called name joining
// the current membership, sorted as k8sutil.InitialCluster returns it.
func (c *Cluster) initialClusterWith(cl *api.EtcdCluster, name string) []string {
	m := c.memberTemplate(cl)
	m.Name = name
	members := c.members.Clone()
	members.Add(&m)
	pairs := members.PeerURLPairs()
	slices.Sort(pairs)
	return pairs
}

// dropJoiners deletes every joiner: no member is to be added.
func (c *Cluster) dropJoiners(ctx context.Context, cl *api.EtcdCluster, v memberView) error {
	for _, name := range sortedKeys(v.joiners) {
		if err := c.deleteJoiner(ctx, cl, name, "no member is to be added any more"); err != nil {
			return err
		}
	}
	return nil
}

// deleteJoiner deletes a joiner's pod and claim. Its etcd never ran, so the
// claim holds no data.
func (c *Cluster) deleteJoiner(ctx context.Context, cl *api.EtcdCluster, name, why string) error {
	c.log.Infof("deleting pod %s of a member that was never added: %s", name, why)
	if err := c.deletePod(ctx, name); err != nil {
		return err
	}
	return c.deletePVC(ctx, cl, name)
}

// readyToAdd checks everything etcd's strict reconfiguration check will
// before a member is added: every member Ready, connected long enough, the
// membership as etcd has it, and a healthy cluster. When it returns false,
// the caller returns requeue and err.
func (c *Cluster) readyToAdd(ctx context.Context, cl *api.EtcdCluster, v memberView) (bool, time.Duration, error) {
	if n := c.members.Size(); len(v.ready) < n {
		c.log.Debugf("waiting for every member to be ready before adding one (%d of %d)", len(v.ready), n)
		return false, 0, nil
	}
	if wait := c.untilConnectedLongEnough(v); wait > 0 {
		c.log.Debugf("waiting %v for the newest member to count as connected in etcd", wait)
		return false, wait, nil
	}
	if changed, err := c.syncMembers(ctx, cl, v); err != nil || changed {
		return false, c.cfg.MinPassInterval, err
	}
	if _, err := c.etcdReadyForChange(ctx, v); err != nil {
		requeue, err := c.waitOrFail(err)
		return false, requeue, err
	}
	c.waitBackoff.reset()
	return true, 0, nil
}

// isJoiner tells whether an owned pod that belongs to no member is a joiner.
func (c *Cluster) isJoiner(pod *corev1.Pod) bool {
	return c.joinsPodFirst() && k8sutil.WaitsForMembership(pod)
}

// learnersSupported tells whether the new member and every running one are
// etcd 3.4 or later, which have learners.
func learnersSupported(plan versionPlan, v memberView) bool {
	versions := []string{plan.newMembers}
	for _, pod := range v.pods {
		versions = append(versions, podVersion(pod))
	}
	for _, ver := range versions {
		major, minor, err := api.ParseVersion(ver)
		if err != nil || major < 3 || major == 3 && minor < 4 {
			return false
		}
	}
	return true
}

// promoteLearner makes the learner name vote once its etcd runs; etcd
// refuses until it has caught up with the leader, and the loop asks again
// shortly.
func (c *Cluster) promoteLearner(ctx context.Context, v memberView, name string) (time.Duration, error) {
	if !slices.Contains(v.running, name) {
		c.log.Debugf("waiting for learner %s to run before promoting it", name)
		return 0, nil
	}
	m := c.members[name]
	if err := c.cfg.Etcd.MemberPromote(ctx, c.clientConfig(c.endpoints(v)), m.ID); err != nil {
		if isNotReadyForChange(err) {
			return c.waitOrFail(fmt.Errorf("%w: %v", errEtcdNotReady, err))
		}
		return 0, etcdError(fmt.Sprintf("promote learner %s", name), err)
	}
	c.waitBackoff.reset()
	m.IsLearner = false
	c.log.Infof("promoted learner %s (%x) to a voting member", name, m.ID)
	return c.cfg.MinPassInterval, nil
}
