package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/maintenance"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// etcdObserveInterval is how often the day-2 care of a cluster at rest reads
// etcd's view (database sizes, alarms): a dial and a status call per member
// a minute, and no request to Kubernetes.
const etcdObserveInterval = time.Minute

// recoverNoSpace is step 11 of decide: it recovers a cluster that ran out
// of space: with a NOSPACE alarm it
// takes no write at all, so this comes before any other change.
func recoverNoSpace(s *snapshot) (action, bool) {
	if !s.etcd.hasAlarm(etcdutil.AlarmNoSpace) {
		return action{}, false
	}
	if a, ok := nextMaintenance(s); ok {
		return a, true
	}
	return action{}, false
}

// routineMaintenance is step 17 of decide: the day-2 care of a cluster at
// rest.
func routineMaintenance(s *snapshot) (action, bool) {
	if s.etcd == nil {
		if s.now.Sub(s.etcdReadAt) >= etcdObserveInterval || runningNotReady(s) {
			return readEtcd("day-2 care: the members' databases and alarms"), true
		}
		return action{}, false
	}
	if !s.etcd.confirmed {
		return action{}, false
	}
	return nextMaintenance(s)
}

// runningNotReady tells whether a member runs but is not ready: with an
// alarm (NOSPACE, CORRUPT) etcd's /health fails on every member.
func runningNotReady(s *snapshot) bool {
	for _, m := range s.views {
		if m.state == memberRunning && !m.ready {
			return true
		}
	}
	return false
}

// nextMaintenance turns the maintenance planner's next step into an
// action; it chooses, the executors below carry it out.
func nextMaintenance(s *snapshot) (action, bool) {
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
		a := waiting(next.Reason)
		a.backoff = true
		return a, true
	}
	return action{}, false
}

// The executors of maintenance. Each is said in an event: they are what a
// user would otherwise have done by hand with etcdctl.

// enableDowngrade enables etcd's downgrade of the cluster version, after
// which the members are patched back one at a time.
func (c *Cluster) enableDowngrade(ctx context.Context, s *snapshot, a action) outcome {
	c.log.Infof("%s", a)
	if err := c.cfg.Etcd.EnableDowngrade(ctx, c.clientConfig(s, s.endpoints()), a.version); err != nil {
		return outcome{err: etcdError("enable the downgrade to "+a.version, err)}
	}
	c.tell(corev1.EventTypeNormal, eventDowngradeEnabled, a.reason)
	return outcome{requeue: c.cfg.MinPassInterval}
}

// moveLeader hands leadership to member a.member.
func (c *Cluster) moveLeader(ctx context.Context, s *snapshot, a action) outcome {
	c.log.Infof("%s", a)
	m := s.views[a.member]
	if m == nil {
		return outcome{err: fmt.Errorf("move leadership to %s: no such member", a.member)}
	}
	if err := c.cfg.Etcd.MoveLeader(ctx, c.clientConfig(s, s.endpoints()), m.member.ID); err != nil {
		return outcome{err: etcdError("move leadership to "+a.member, err)}
	}
	c.tell(corev1.EventTypeNormal, eventLeaderMoved, fmt.Sprintf("Leadership moved to %s: %s", a.member, a.reason))
	return outcome{requeue: c.cfg.MinPassInterval}
}

// compact compacts the history to the current revision; the status records
// the revision.
func (c *Cluster) compact(ctx context.Context, s *snapshot, a action) outcome {
	c.log.Infof("%s", a)
	rev, err := c.cfg.Etcd.Compact(ctx, c.clientConfig(s, s.endpoints()))
	if err != nil {
		return outcome{err: etcdError("compact", err)}
	}
	c.tell(corev1.EventTypeNormal, eventCompacted, fmt.Sprintf("History compacted to revision %d: %s", rev, a.reason))
	return outcome{compacted: rev, requeue: c.cfg.MinPassInterval}
}

// defragment defragments one member; the status records when.
func (c *Cluster) defragment(ctx context.Context, s *snapshot, a action) outcome {
	c.log.Infof("%s", a)
	m := s.views[a.member]
	if m == nil {
		return outcome{err: fmt.Errorf("defragment %s: no such member", a.member)}
	}
	if err := c.cfg.Etcd.Defragment(ctx, c.clientConfig(s, s.endpoints()), m.member.ClientURL()); err != nil {
		return outcome{err: etcdError("defragment "+a.member, err)}
	}
	c.tell(corev1.EventTypeNormal, eventDefragmented, fmt.Sprintf("Member %s defragmented: %s", a.member, a.reason))
	return outcome{defragmented: a.member, requeue: c.cfg.MinPassInterval}
}

// disarmNoSpace disarms the NOSPACE alarm once every member has room.
func (c *Cluster) disarmNoSpace(ctx context.Context, s *snapshot, a action) outcome {
	c.log.Infof("%s", a)
	if err := c.cfg.Etcd.DisarmNoSpace(ctx, c.clientConfig(s, s.endpoints())); err != nil {
		return outcome{err: etcdError("disarm the NOSPACE alarm", err)}
	}
	c.tell(corev1.EventTypeNormal, eventNoSpaceDisarmed, "NOSPACE alarm disarmed: "+a.reason)
	return outcome{disarmedNoSpace: true, requeue: c.cfg.MinPassInterval}
}
