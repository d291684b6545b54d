package cluster

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// The join carried out: join.go decides from the snapshot alone, and the
// executors below act on the API server and etcd — the pod of a new member
// made first, its member added and its learner promoted, and the joining
// pods, stray pods and stray claims deleted.

// deleteJoiner deletes a joining pod that can no longer be added, and its
// claim: etcd never knew its member.
func (c *Cluster) deleteJoiner(ctx context.Context, s *snapshot, a action) outcome {
	c.log.Infof("deleting pod %s of a member that was never added: %s", a.member, a.reason)
	if cause := endedJoinerCause(s, a.member); cause != "" {
		c.recordReplacement(cause, s.spec.Generation)
	}
	err := c.deletePod(ctx, a.member)
	if err == nil {
		err = c.deleteClaim(ctx, s, a.member)
	}
	return outcome{err: err, requeue: c.cfg.MinPassInterval}
}

// deleteStrayPod deletes a pod of the cluster that belongs to no member and
// is no joining pod; its claim goes in a later pass.
func (c *Cluster) deleteStrayPod(ctx context.Context, a action) outcome {
	c.log.Infof("deleting pod %s: %s", a.member, a.reason)
	return outcome{err: c.deletePod(ctx, a.member), requeue: c.cfg.MinPassInterval}
}

// deleteStrayClaim deletes a claim that belongs to no member, pod or joining
// pod.
func (c *Cluster) deleteStrayClaim(ctx context.Context, s *snapshot, a action) outcome {
	c.log.Infof("deleting claim %s: %s", a.member, a.reason)
	return outcome{err: c.deleteClaim(ctx, s, a.member), requeue: c.cfg.MinPassInterval}
}

// createJoiner creates the claim and pod of a new member that etcd does not
// know yet; its wait-membership init container holds etcd back until the
// member is added (join.go).
func (c *Cluster) createJoiner(ctx context.Context, s *snapshot, a action) outcome {
	m := c.newMember(s)
	if err := c.createClaim(ctx, s, m.Name, a.version); err != nil {
		return outcome{err: err}
	}
	membership := joiningMembership(s, a.behind, a.without)
	membership.Add(m)
	pairs := membership.PeerURLPairs()
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

// addOneMember adds the member of a joining pod to etcd.
func (c *Cluster) addOneMember(ctx context.Context, s *snapshot, a action) outcome {
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
		c.knownMembership.forget()
		return outcome{err: etcdError("add member "+m.Name, err)}
	}
	c.waitBackoff.Reset()
	m.ID, m.IsLearner = added.ID, added.IsLearner
	membership := s.membership.Clone()
	membership.Add(&m)
	c.knownMembership.learn(membership)
	kind := "member"
	if m.IsLearner {
		kind = "learner"
	}
	c.log.Infof("added %s %s (%x) to etcd, its pod waiting; membership %s", kind, m.Name, m.ID, membership)
	c.tell(corev1.EventTypeNormal, eventNewMemberAdded, fmt.Sprintf("New member %s added to cluster", m.Name))
	return outcome{requeue: c.cfg.MinPassInterval}
}

// promoteLearner makes a learner vote; etcd refuses until it has caught up with the
// leader, and the loop asks again shortly.
func (c *Cluster) promoteLearner(ctx context.Context, s *snapshot, a action) outcome {
	m := s.views[a.member].member
	if err := c.cfg.Etcd.MemberPromote(ctx, c.clientConfig(s, s.changeEndpoints(a.member)), m.ID); err != nil {
		if isNotReadyForChange(err) {
			c.log.Debugf("etcd refused to promote %s for now: %v", a.member, err)
			return outcome{requeue: c.waitBackoff.Next()}
		}
		return outcome{err: etcdError("promote learner "+a.member, err)}
	}
	c.waitBackoff.Reset()
	membership := s.membership.Clone()
	membership[a.member].IsLearner = false
	c.knownMembership.learn(membership)
	c.log.Infof("promoted learner %s (%x) to a voting member", a.member, m.ID)
	return outcome{requeue: c.cfg.MinPassInterval}
}
