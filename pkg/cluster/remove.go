package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// pickMemberToRemove picks the member to remove to shrink the cluster by
// one: the one whose removal costs availability least:
//  1. a member replaced because it cannot be upgraded in place, once every
//     other member is ready;
//  2. a member whose pod is not Ready;
//  3. a follower (the original could pick the leader, costing an
//     election);
//  4. the leader, only when it is the sole candidate.
func pickMemberToRemove(s *snapshot) (action, bool) {
	if a, ok := needEtcd(s, "remove a member"); ok {
		return a, true
	}
	ready := s.readyNames()
	var notReady []string
	for _, name := range sortedKeys(s.views) {
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
				return waiting(fmt.Sprintf("member %s is not ready; %s is removed once it is", n, victim)), true
			}
		}
		return remove(victim, "it was replaced because it cannot run the new version in place")
	}
	if len(notReady) > 0 {
		return remove(notReady[0], "its pod is not ready")
	}
	leader := s.etcd.health.LeaderID
	for _, name := range sortedKeys(s.views) {
		if s.views[name].member.ID != leader && quorumWithout(s, name) {
			return remove(name, "a follower")
		}
	}
	for _, name := range sortedKeys(s.views) {
		if quorumWithout(s, name) {
			return remove(name, "the only member left to choose")
		}
	}
	return waiting("no member can be removed while the others hold no quorum without it"), true
}

// quorumWithout tells whether the voting members left once member name is
// removed still have a quorum of them running.
func quorumWithout(s *snapshot, name string) bool {
	m := s.views[name]
	if m.member.IsLearner {
		return true
	}
	voters, up := s.quorum.voters-1, 0
	for other, v := range s.views {
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

// removeOneMember removes a member to shrink the cluster (or to finish the
// replacement of one that cannot be upgraded in place).
func (c *Cluster) removeOneMember(ctx context.Context, s *snapshot, a action) outcome {
	return c.removeMemberAndData(ctx, s, a, false)
}

// removeMemberAndData removes a member from etcd, then deletes its pod and
// claim. A deletion that fails leaves a pod or claim of no member, which a
// later pass collects. dead adds the original's "Replacing Dead Member"
// event, in its order: once etcd has let the member go, before "Member
// Removed".
func (c *Cluster) removeMemberAndData(ctx context.Context, s *snapshot, a action, dead bool) outcome {
	m := s.views[a.member].member
	if m.ID == 0 {
		return outcome{err: newPassError(problemEtcdMembership, "remove member "+m.Name, errors.New("its etcd ID is unknown"))}
	}
	c.log.Infof("removing member %s: %s", a.member, a.reason)
	if err := c.cfg.Etcd.MemberRemove(ctx, c.clientConfig(s, s.changeEndpoints(a.member)), m.ID); err != nil {
		if isNotReadyForChange(err) {
			c.log.Debugf("etcd refused to remove %s for now: %v", a.member, err)
			return outcome{requeue: c.waitBackoff.Next()}
		}
		c.knownMembership.forget()
		return outcome{err: etcdError("remove member "+m.Name, err)}
	}
	c.waitBackoff.Reset()
	membership := s.membership.Clone()
	membership.Remove(m.Name)
	c.knownMembership.learn(membership)
	c.log.Infof("removed member %s (%x) from etcd; membership %s", m.Name, m.ID, membership)
	if dead {
		c.tell(corev1.EventTypeNormal, eventReplacingDeadMember, fmt.Sprintf("The dead member %s is being replaced", m.Name))
	}
	c.tell(corev1.EventTypeNormal, eventMemberRemoved, fmt.Sprintf("Existing member %s removed from the cluster", m.Name))
	if err := c.deletePod(ctx, m.Name); err != nil {
		return outcome{err: err}
	}
	return outcome{err: c.deleteClaim(ctx, s, m.Name), requeue: c.cfg.MinPassInterval}
}
