package maintenance

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)

var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// cluster is a healthy three-member cluster led by m1, each member with a
// 100 MiB database of which 90 MiB are in use.
func cluster(changes ...func(*etcdutil.Health)) etcdutil.Health {
	h := etcdutil.Health{LeaderID: 1, Linearizable: true}
	for i, name := range []string{"m1", "m2", "m3"} {
		h.Members = append(h.Members, etcdutil.MemberHealth{
			ID: uint64(i + 1), Name: name, ClientURL: "http://" + name + ":2379", Version: "3.5.35",
			Leader: 1, RaftIndex: 5000, RaftAppliedIndex: 5000, Revision: 4000,
			DBSize: 100 * mib, DBSizeInUse: 90 * mib,
		})
	}
	for _, c := range changes {
		c(&h)
	}
	return h
}

func member(id uint64, change func(*etcdutil.MemberHealth)) func(*etcdutil.Health) {
	return func(h *etcdutil.Health) {
		for i := range h.Members {
			if h.Members[i].ID == id {
				change(&h.Members[i])
			}
		}
	}
}

func sizes(id uint64, size, inUse int64) func(*etcdutil.Health) {
	return member(id, func(m *etcdutil.MemberHealth) { m.DBSize, m.DBSizeInUse = size, inUse })
}

func alarm(typ string, ids ...uint64) func(*etcdutil.Health) {
	return func(h *etcdutil.Health) {
		for _, id := range ids {
			h.Alarms = append(h.Alarms, etcdutil.Alarm{MemberID: id, Type: typ})
		}
	}
}

func settings(change ...func(*v1beta2.ResolvedMaintenance)) v1beta2.ResolvedMaintenance {
	s := (&v1beta2.ClusterSpec{}).ResolvedMaintenance()
	for _, c := range change {
		c(&s)
	}
	return s
}

func TestNext(t *testing.T) {
	quota1G := func(s *v1beta2.ResolvedMaintenance) { s.QuotaBytes = gib }
	daily := func(s *v1beta2.ResolvedMaintenance) { s.DefragSchedule = "0 3 * * *"; s.DefragFreeSpacePercent = 0 }
	full := func(id uint64) func(*etcdutil.Health) { return sizes(id, gib-mib, 200*mib) }
	tests := []struct {
		name      string
		in        Input
		kind      ActionKind
		member    string
		reasonHas string
	}{
		{"a healthy cluster with little free space needs nothing",
			Input{Health: cluster(), Settings: settings()}, None, "", "no maintenance is due"},
		{"a cluster without a leader is left alone",
			Input{Health: cluster(func(h *etcdutil.Health) { h.LeaderID = 0 }, sizes(2, gib, mib)), Settings: settings()}, None, "", "no agreed leader"},
		{"a follower past the free-space threshold is defragmented",
			Input{Health: cluster(sizes(3, 400*mib, 100*mib)), Settings: settings()}, Defragment, "m3", "300.0MiB of its 400.0MiB database is free"},
		{"free space under the minimum is not worth a pause",
			Input{Health: cluster(sizes(3, 150*mib, 60*mib)), Settings: settings()}, None, "", "no maintenance is due"},
		{"the follower with the most free space goes first",
			Input{Health: cluster(sizes(2, 400*mib, 100*mib), sizes(3, 800*mib, 100*mib)), Settings: settings()}, Defragment, "m3", "700.0MiB"},
		{"followers go before the leader",
			Input{Health: cluster(sizes(1, 2*gib, 100*mib), sizes(2, 400*mib, 100*mib)), Settings: settings()}, Defragment, "m2", ""},
		{"a leader that is due hands leadership to the most caught-up follower first",
			Input{Health: cluster(sizes(1, 400*mib, 100*mib), member(3, func(m *etcdutil.MemberHealth) { m.RaftAppliedIndex = 4990 })),
				Settings: settings()}, MoveLeader, "m2", "moving leadership from m1 to m2"},
		{"a leader with no follower fit to lead is not defragmented",
			Input{Health: cluster(sizes(1, 400*mib, 100*mib),
				member(2, func(m *etcdutil.MemberHealth) { m.RaftAppliedIndex = 100 }),
				member(3, func(m *etcdutil.MemberHealth) { m.IsLearner = true })),
				Settings: settings()}, None, "", "no healthy, caught-up follower"},
		{"a single member is defragmented although it leads",
			Input{Health: etcdutil.Health{LeaderID: 1, Linearizable: true, Members: cluster(sizes(1, 400*mib, 100*mib)).Members[:1]},
				Settings: settings()}, Defragment, "m1", ""},
		{"nothing is defragmented while a voting member is missing",
			Input{Health: cluster(sizes(3, 400*mib, 100*mib), member(2, func(m *etcdutil.MemberHealth) { m.Err = errors.New("down") })),
				Settings: settings()}, None, "", "[m2] does not answer"},
		{"threshold-driven defragmentation can be turned off",
			Input{Health: cluster(sizes(3, 400*mib, 100*mib)), Settings: settings(func(s *v1beta2.ResolvedMaintenance) { s.DefragFreeSpacePercent = 0 })},
			None, "", "no maintenance is due"},
		{"a scheduled run defragments every member once, followers first",
			Input{Now: now, Created: now.Add(-48 * time.Hour), Health: cluster(), Settings: settings(daily),
				LastDefragmented: map[uint64]time.Time{2: now.Add(-30 * time.Hour), 3: now.Add(-30 * time.Hour)}}, Defragment, "m2", "scheduled defragmentation (0 3 * * *) is due"},
		{"a member defragmented since the last scheduled time is not due again",
			Input{Now: now, Created: now.Add(-48 * time.Hour), Health: cluster(), Settings: settings(daily),
				LastDefragmented: map[uint64]time.Time{1: now.Add(-2 * time.Hour), 2: now.Add(-2 * time.Hour), 3: now.Add(-8 * time.Hour)}},
			None, "", "no maintenance is due"},
		{"the leader's scheduled run comes last, after moving leadership",
			Input{Now: now, Created: now.Add(-48 * time.Hour), Health: cluster(), Settings: settings(daily),
				LastDefragmented: map[uint64]time.Time{2: now.Add(-2 * time.Hour), 3: now.Add(-2 * time.Hour)}}, MoveLeader, "m2", "scheduled defragmentation"},
		{"a cluster created after the last scheduled time waits for the next one",
			Input{Now: now, Created: now.Add(-2 * time.Hour), Health: cluster(), Settings: settings(daily)}, None, "", "no maintenance is due"},
		{"NOSPACE starts with a compaction to the current revision",
			Input{Health: cluster(alarm(etcdutil.AlarmNoSpace, 1, 2, 3), full(1), full(2), full(3)), Settings: settings(quota1G), LastCompactedRevision: 100},
			Compact, "", "up to revision 4000"},
		{"NOSPACE defragments the full followers once compacted",
			Input{Health: cluster(alarm(etcdutil.AlarmNoSpace, 1, 2, 3), full(1), full(2), full(3)), Settings: settings(quota1G), LastCompactedRevision: 4000},
			Defragment, "m2", "NOSPACE: the database (1023.0MiB) is near the quota (1.0GiB)"},
		{"NOSPACE defragments whatever has free pages, regardless of the threshold",
			Input{Health: cluster(alarm(etcdutil.AlarmNoSpace, 1), full(1), sizes(2, 100*mib, 90*mib), sizes(3, 100*mib, 90*mib)),
				Settings: settings(quota1G, func(s *v1beta2.ResolvedMaintenance) { s.DefragFreeSpacePercent = 0 }), LastCompactedRevision: 4000},
			MoveLeader, "m2", ""},
		{"NOSPACE is disarmed once every member is back under the quota",
			Input{Health: cluster(alarm(etcdutil.AlarmNoSpace, 1, 2, 3)), Settings: settings(quota1G), LastCompactedRevision: 4000},
			DisarmNoSpace, "", "under 90% of the quota (1.0GiB)"},
		{"NOSPACE says so when the data itself fills the quota",
			Input{Health: cluster(alarm(etcdutil.AlarmNoSpace, 1), sizes(1, gib-mib, gib-mib), sizes(2, gib-mib, gib-mib), sizes(3, gib-mib, gib-mib)),
				Settings: settings(quota1G), LastCompactedRevision: 4000},
			None, "", "raise spec.maintenance.quota or delete keys"},
		{"NOSPACE uses etcd's 2 GiB quota when none is set",
			Input{Health: cluster(alarm(etcdutil.AlarmNoSpace, 1), sizes(1, gib, gib/2)), Settings: settings(), LastCompactedRevision: 4000},
			DisarmNoSpace, "", "quota (2.0GiB)"},
		{"a 3.6 member's reported quota wins",
			Input{Health: cluster(alarm(etcdutil.AlarmNoSpace, 1), sizes(1, gib, gib/2), member(2, func(m *etcdutil.MemberHealth) { m.DBSizeQuota = gib })),
				Settings: settings(), LastCompactedRevision: 4000},
			MoveLeader, "m2", ""},
		{"NOSPACE is not disarmed while a member is missing",
			Input{Health: cluster(alarm(etcdutil.AlarmNoSpace, 1), member(3, func(m *etcdutil.MemberHealth) { m.Err = errors.New("down") })),
				Settings: settings(quota1G), LastCompactedRevision: 4000},
			None, "", "waiting for [m3]"},
		{"CORRUPT stops all maintenance and names the member",
			Input{Health: cluster(alarm(etcdutil.AlarmCorrupt, 3), alarm(etcdutil.AlarmNoSpace, 1)), Settings: settings()},
			None, "", "CORRUPT on [m3]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Next(tt.in)
			if a.Kind != tt.kind || a.Member.Name != tt.member || !strings.Contains(a.Reason, tt.reasonHas) {
				t.Fatalf("Next = %s\nwant %s %q with reason containing %q", a, tt.kind, tt.member, tt.reasonHas)
			}
		})
	}
}

func TestHandoff(t *testing.T) {
	tests := []struct {
		name      string
		h         etcdutil.Health
		id        uint64
		kind      ActionKind
		to        string
		reasonHas string
	}{
		{"a follower needs no handoff", cluster(), 2, None, "", "does not lead"},
		{"the leader hands over to the most caught-up follower", cluster(member(2, func(m *etcdutil.MemberHealth) { m.RaftAppliedIndex = 4900 })), 1, MoveLeader, "m3", "from m1 to m3"},
		{"ties go to the lowest name", cluster(), 1, MoveLeader, "m2", ""},
		{"a learner is never chosen", cluster(member(2, func(m *etcdutil.MemberHealth) { m.IsLearner = true })), 1, MoveLeader, "m3", ""},
		{"no fit follower means waiting", cluster(member(2, func(m *etcdutil.MemberHealth) { m.Err = errors.New("down") }),
			member(3, func(m *etcdutil.MemberHealth) { m.Leader = 3 })), 1, None, "", "no healthy, caught-up follower"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Handoff(tt.h, tt.id)
			if a.Kind != tt.kind || a.Member.Name != tt.to || !strings.Contains(a.Reason, tt.reasonHas) {
				t.Fatalf("Handoff = %s; want %s to %q, reason containing %q", a, tt.kind, tt.to, tt.reasonHas)
			}
		})
	}
}
