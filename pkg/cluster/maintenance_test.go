package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// TestDayTwoCare runs day-2 care as passes on fake clients: a NOSPACE
// alarm is recovered from, the leader is defragmented last, and the status
// shows the leader and each member's details.
func TestDayTwoCare(t *testing.T) {
	t.Run("a NOSPACE alarm is compacted, defragmented and disarmed, with conditions and events", func(t *testing.T) {
		f := healthyFixture(t)
		f.etcd.revision = 900
		f.etcd.alarms = []etcdutil.Alarm{{MemberID: memberID(memberB), Type: etcdutil.AlarmNoSpace}}
		for _, n := range []string{memberA, memberB, memberC} {
			f.etcd.dbSize[memberID(n)], f.etcd.dbSizeInUse[memberID(n)] = 2000<<20, 100<<20
			f.setPodStatus(n, notReady) // etcd's /health fails with an alarm
		}
		for range 12 {
			f.mustPass()
		}
		expect(t, "etcd writes", f.etcdWrites(), []string{
			"compact",
			"defragment " + memberB, "defragment " + memberC,
			fmt.Sprintf("move-leader %x", memberID(memberB)), "defragment " + memberA,
			"disarm",
		})
		var reasons []string
		for _, e := range f.events() {
			reasons = append(reasons, strings.Fields(e)[1])
		}
		for _, want := range []string{"Compacted", "Defragmented", "LeaderMoved", "NoSpaceDisarmed"} {
			if !slices.Contains(reasons, want) {
				t.Errorf("events %v lack %s", reasons, want)
			}
		}
		s := f.mustStatus()
		if condition(s, api.ClusterConditionNoSpace) != nil {
			t.Errorf("NoSpace still set after the alarm was disarmed: %+v", s.Conditions)
		}
		if s.Maintenance == nil || s.Maintenance.LastCompactedRevision != 900 {
			t.Errorf("maintenance status %+v", s.Maintenance)
		}
	})
	t.Run("the NoSpace condition goes with the disarm, not with the next look at etcd a minute later", func(t *testing.T) {
		f := healthyFixture(t)
		f.etcd.revision = 900
		f.etcd.alarms = []etcdutil.Alarm{{MemberID: memberID(memberB), Type: etcdutil.AlarmNoSpace}}
		for _, n := range []string{memberA, memberB, memberC} {
			f.setPodStatus(n, notReady) // etcd's /health fails with an alarm
		}
		for i := 0; i < 12 && !slices.Contains(f.etcdWrites(), "disarm"); i++ {
			f.mustPass()
		}
		if !slices.Contains(f.etcdWrites(), "disarm") {
			t.Fatalf("etcd writes %v: the alarm was never disarmed", f.etcdWrites())
		}
		if s := f.mustStatus(); condition(s, api.ClusterConditionNoSpace) != nil {
			t.Errorf("the pass that disarmed the alarm left NoSpace set: %+v", s.Conditions)
		}
		// With the alarm gone the members are ready again, and the next
		// look at etcd is a minute away.
		for _, n := range []string{memberA, memberB, memberC} {
			f.setPodStatus(n, readyAgain)
		}
		f.mustPass()
		if s := f.mustStatus(); condition(s, api.ClusterConditionNoSpace) != nil {
			t.Errorf("NoSpace still set after the alarm was disarmed: %+v", s.Conditions)
		}
	})
	t.Run("the status names the leader and each member's role, version and database", func(t *testing.T) {
		f := healthyFixture(t)
		f.etcd.dbSize[memberID(memberA)], f.etcd.dbSizeInUse[memberID(memberA)] = 30<<20, 25<<20
		f.now = f.now.Add(2 * time.Minute) // time for the day-2 look
		f.mustPass()
		s := f.mustStatus()
		if s.Leader != memberA || len(s.MemberDetails) != 3 {
			t.Fatalf("leader %q, details %+v", s.Leader, s.MemberDetails)
		}
		d := s.MemberDetails[0]
		if d.Name != memberA || d.Role != api.MemberRoleLeader || d.ID != fmt.Sprintf("%x", memberID(memberA)) || d.DBSize != 30<<20 || d.DBSizeInUse != 25<<20 || d.Version != testVersion {
			t.Errorf("details of %s: %+v", memberA, d)
		}
		if r := s.MemberDetails[1].Role; r != api.MemberRoleFollower {
			t.Errorf("role of %s = %s", memberB, r)
		}
	})
}
