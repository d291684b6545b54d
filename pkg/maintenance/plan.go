// Package maintenance decides the day-2 care of an etcd cluster's data:
// given one observation of the members and the spec's settings, which single
// maintenance action is due next. It makes no call to etcd or Kubernetes;
// the cluster loop observes (etcdutil.ClusterHealth), asks Next, and acts
// with the etcdutil function the action names.
//
// The order it follows, as etcd's maintenance guide and the NOSPACE alarm
// require:
//
//  1. nothing while the cluster has no agreed leader or no quorum read, and
//     nothing but reports while a CORRUPT alarm is active (the member must be
//     replaced, which is the cluster loop's business);
//  2. with a NOSPACE alarm: compact to the current revision (once per
//     revision), defragment every member that has free pages, then disarm
//     the alarm once every member's database is back under the quota with
//     room to spare; if the live data alone fills the quota, say so;
//  3. otherwise defragment members whose free space passes the threshold or
//     whose scheduled run is due;
//
// always one member at a time, followers first, and the leader last, after
// leadership has moved to a healthy, caught-up follower; and never while a
// voting member is missing, since a member being defragmented serves nothing
// and the cluster must keep its quorum without it.
package maintenance

import (
	"fmt"
	"sort"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// ActionKind names what the cluster loop should do.
type ActionKind string

const (
	// None: nothing is due; Reason may still say why (a problem the user
	// must solve, such as data that fills the quota).
	None ActionKind = "None"
	// Compact: etcdutil.CompactToCurrent.
	Compact ActionKind = "Compact"
	// Defragment: etcdutil.Defragment of Action.Member's ClientURL.
	Defragment ActionKind = "Defragment"
	// MoveLeader: etcdutil.MoveLeaderTo Action.Member's ID.
	MoveLeader ActionKind = "MoveLeader"
	// DisarmNoSpace: etcdutil.DisarmNoSpace.
	DisarmNoSpace ActionKind = "DisarmNoSpace"
)

// Action is the one step to take now.
type Action struct {
	Kind ActionKind
	// Member is the member to defragment, or the one to hand leadership to.
	Member etcdutil.MemberHealth
	// Reason says why, in words fit for a log line, an event or a condition.
	Reason string
}

func (a Action) String() string {
	if a.Member.ID != 0 {
		return fmt.Sprintf("%s %s (%x): %s", a.Kind, a.Member.Name, a.Member.ID, a.Reason)
	}
	return fmt.Sprintf("%s: %s", a.Kind, a.Reason)
}

// DefaultQuotaBytes is etcd's own quota when none is given (3.4 and later;
// 3.2 and 3.3 also default to 2 GiB).
const DefaultQuotaBytes = 2 << 30

// SpaceBackFraction is how far under the quota every member's database must
// be before a NOSPACE alarm is disarmed: etcd raises it again at the first
// write that does not fit, so disarming at the brim only flaps.
const SpaceBackFraction = 0.9

// Input is one observation and the settings it is judged by.
type Input struct {
	// Now is the time of the observation.
	Now time.Time
	// Health is the cluster as etcdutil.ClusterHealth saw it.
	Health etcdutil.Health
	// Settings is spec.ResolvedMaintenance().
	Settings v1beta2.ResolvedMaintenance
	// Created is when the cluster was created: scheduled runs before it do
	// not count.
	Created time.Time
	// LastDefragmented is when each member (by ID) was last defragmented,
	// from status.memberDetails; a member missing here never was.
	LastDefragmented map[uint64]time.Time
	// LastCompactedRevision is the revision the operator last compacted to
	// (status.maintenance.lastCompactedRevision).
	LastCompactedRevision int64
}

// Next returns the single maintenance action due now, or None.
func Next(in Input) Action {
	h := in.Health
	if !h.Healthy() {
		return none("the cluster has no agreed leader or no quorum: maintenance waits")
	}
	if etcdutil.HasAlarm(h.Alarms, etcdutil.AlarmCorrupt) {
		return none(fmt.Sprintf("a CORRUPT alarm is active (%s): the member must be replaced before any maintenance", alarmMembers(h, etcdutil.AlarmCorrupt)))
	}
	if etcdutil.HasAlarm(h.Alarms, etcdutil.AlarmNoSpace) {
		return recoverSpace(in)
	}
	return defragmentDue(in)
}

// recoverSpace is step 2: compact, defragment, disarm.
func recoverSpace(in Input) Action {
	h := in.Health
	quota := quotaBytes(in.Settings, h)
	if rev := currentRevision(h); rev > in.LastCompactedRevision {
		return Action{Kind: Compact, Reason: fmt.Sprintf(
			"NOSPACE: compacting the history up to revision %d so that defragmentation can give its space back", rev)}
	}
	var need []etcdutil.MemberHealth
	for _, m := range h.Members {
		if m.Err == nil && m.DBSize > m.DBSizeInUse && float64(m.DBSize) >= SpaceBackFraction*float64(quota) {
			need = append(need, m)
		}
	}
	if len(need) > 0 {
		return nextDefragment(in, need, func(m etcdutil.MemberHealth) string {
			return fmt.Sprintf("NOSPACE: the database (%s) is near the quota (%s) with %s free inside",
				HumanBytes(m.DBSize), HumanBytes(quota), HumanBytes(m.DBSize-m.DBSizeInUse))
		})
	}
	if full := overQuota(h, quota); len(full) > 0 {
		return none(fmt.Sprintf("NOSPACE: the data itself fills the quota (%s) on %s even after compaction and defragmentation: "+
			"raise spec.maintenance.quota or delete keys", HumanBytes(quota), full))
	}
	if unanswered := missing(h); unanswered != "" {
		return none("NOSPACE: waiting for " + unanswered + " to answer before disarming the alarm")
	}
	return Action{Kind: DisarmNoSpace, Reason: fmt.Sprintf(
		"NOSPACE: every member's database is under %d%% of the quota (%s) again", int(SpaceBackFraction*100), HumanBytes(quota))}
}

// defragmentDue is step 3: threshold and schedule.
func defragmentDue(in Input) Action {
	s := in.Settings
	var sched cron.Schedule
	if s.DefragSchedule != "" {
		var err error
		if sched, err = cron.ParseStandard(s.DefragSchedule); err != nil {
			return none(fmt.Sprintf("defragmentation schedule %q: %v", s.DefragSchedule, err))
		}
	}
	var due []etcdutil.MemberHealth
	why := map[uint64]string{}
	for _, m := range in.Health.Members {
		if m.Err != nil {
			continue
		}
		free := m.DBSize - m.DBSizeInUse
		switch {
		case s.DefragFreeSpacePercent > 0 && free >= s.DefragMinFreeSpaceBytes && free > 0 &&
			free*100 >= int64(s.DefragFreeSpacePercent)*m.DBSize:
			due = append(due, m)
			why[m.ID] = fmt.Sprintf("%s of its %s database is free (threshold %d%%)", HumanBytes(free), HumanBytes(m.DBSize), s.DefragFreeSpacePercent)
		case sched != nil && scheduledRunDue(sched, in, m.ID):
			due = append(due, m)
			why[m.ID] = fmt.Sprintf("the scheduled defragmentation (%s) is due", s.DefragSchedule)
		}
	}
	if len(due) == 0 {
		return none("no maintenance is due")
	}
	a := nextDefragment(in, due, func(m etcdutil.MemberHealth) string { return why[m.ID] })
	if a.Kind == MoveLeader {
		a.Reason = "the leader's defragmentation is due (" + why[in.Health.LeaderID] + "): " + a.Reason
	}
	return a
}

// nextDefragment picks among due members: a follower first (the one with
// the most free space), the leader only when no follower is due, and then
// only after moving leadership away. reason says why a member is due.
func nextDefragment(in Input, due []etcdutil.MemberHealth, reason func(etcdutil.MemberHealth) string) Action {
	h := in.Health
	if gone := missing(h); gone != "" {
		return none("defragmentation waits: " + gone + " does not answer, and a member being defragmented serves nothing")
	}
	sort.Slice(due, func(i, j int) bool {
		fi, fj := due[i].DBSize-due[i].DBSizeInUse, due[j].DBSize-due[j].DBSizeInUse
		if fi != fj {
			return fi > fj
		}
		return due[i].Name < due[j].Name
	})
	var leaderDue *etcdutil.MemberHealth
	for i, m := range due {
		if m.ID == h.LeaderID {
			leaderDue = &due[i]
			continue
		}
		return Action{Kind: Defragment, Member: m, Reason: reason(m)}
	}
	if leaderDue == nil {
		return none("no maintenance is due")
	}
	if len(voters(h)) == 1 {
		// A single member cannot hand leadership to anyone; it is
		// defragmented as the leader, which pauses the cluster briefly.
		return Action{Kind: Defragment, Member: *leaderDue, Reason: reason(*leaderDue)}
	}
	return Handoff(h, h.LeaderID)
}

// Handoff plans the leadership move that must precede upgrading, removing,
// restarting or defragmenting member id: MoveLeader to the caught-up
// voting follower with the highest applied index (then the lowest name)
// when id leads, None when it does not (nothing to do first). When id leads
// and no follower can take over, the Action is None with a Reason that says
// why; the caller should wait rather than take the leader down.
func Handoff(h etcdutil.Health, id uint64) Action {
	if h.LeaderID != id || id == 0 {
		return none("the member does not lead")
	}
	leader, ok := h.Member(id)
	if !ok {
		return none("the leader is not in the member list")
	}
	var best *etcdutil.MemberHealth
	var refusals []string
	for i, m := range h.Members {
		if m.ID == id {
			continue
		}
		if err := etcdutil.CheckTransferee(leader, m); err != nil {
			refusals = append(refusals, err.Error())
			continue
		}
		if best == nil || m.RaftAppliedIndex > best.RaftAppliedIndex ||
			m.RaftAppliedIndex == best.RaftAppliedIndex && m.Name < best.Name {
			best = &h.Members[i]
		}
	}
	if best == nil {
		return none(fmt.Sprintf("leadership cannot move away from %s: no healthy, caught-up follower (%v)", leader.Name, refusals))
	}
	return Action{Kind: MoveLeader, Member: *best, Reason: fmt.Sprintf("moving leadership from %s to %s first", leader.Name, best.Name)}
}

// scheduledRunDue tells whether a scheduled run has come since the member's
// last defragmentation (or the cluster's creation).
func scheduledRunDue(sched cron.Schedule, in Input, id uint64) bool {
	since := in.Created
	if t, ok := in.LastDefragmented[id]; ok && t.After(since) {
		since = t
	}
	next := sched.Next(since.UTC())
	return !next.IsZero() && !next.After(in.Now)
}

// quotaBytes is the quota in force: what a 3.6 member reports, else the
// setting, else etcd's default.
func quotaBytes(s v1beta2.ResolvedMaintenance, h etcdutil.Health) int64 {
	for _, m := range h.Members {
		if m.Err == nil && m.DBSizeQuota > 0 {
			return m.DBSizeQuota
		}
	}
	if s.QuotaBytes > 0 {
		return s.QuotaBytes
	}
	return DefaultQuotaBytes
}

func currentRevision(h etcdutil.Health) int64 {
	var rev int64
	for _, m := range h.Members {
		if m.Err == nil && m.Revision > rev {
			rev = m.Revision
		}
	}
	return rev
}

func overQuota(h etcdutil.Health, quota int64) string {
	var names []string
	for _, m := range h.Members {
		if m.Err == nil && float64(m.DBSize) >= SpaceBackFraction*float64(quota) {
			names = append(names, fmt.Sprintf("%s (%s in use)", m.Name, HumanBytes(m.DBSizeInUse)))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprint(names)
}

// missing names the voting members that did not answer.
func missing(h etcdutil.Health) string {
	var names []string
	for _, m := range h.Members {
		if m.Err != nil && !m.IsLearner {
			name := m.Name
			if name == "" {
				name = fmt.Sprintf("%x", m.ID)
			}
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprint(names)
}

func voters(h etcdutil.Health) []etcdutil.MemberHealth {
	var out []etcdutil.MemberHealth
	for _, m := range h.Members {
		if !m.IsLearner {
			out = append(out, m)
		}
	}
	return out
}

func alarmMembers(h etcdutil.Health, typ string) string {
	var names []string
	for _, a := range h.Alarms {
		if a.Type != typ {
			continue
		}
		name := fmt.Sprintf("%x", a.MemberID)
		if m, ok := h.Member(a.MemberID); ok && m.Name != "" {
			name = m.Name
		}
		names = append(names, name)
	}
	return fmt.Sprintf("%s on %v", typ, names)
}

func none(reason string) Action { return Action{Kind: None, Reason: reason} }

// HumanBytes prints a size with binary units ("1.5GiB"), for reasons and
// the kubectl plugin.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTP"[exp])
}
