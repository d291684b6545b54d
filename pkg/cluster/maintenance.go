package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/maintenance"
)

// etcdObserveInterval is how often the day-2 care of a cluster at rest reads
// etcd's view (database sizes, alarms): a dial and a status call per member
// a minute, and no request to Kubernetes.
const etcdObserveInterval = time.Minute

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
