package backupcontroller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
)

// drilledBackup is an archived backup whose status holds a recovery point:
// the snapshot at 50 brought to revision 80 by the archive.
func drilledBackup(name string) *api.EtcdBackup {
	eb := archivedBackup(name)
	eb.Status.Archive = &api.BackupArchiveStatus{RecoveryPoint: &api.BackupRecoveryPoint{Revision: 80, SnapshotRevision: 50}}
	return eb
}

func TestDrillPoint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(eb *api.EtcdBackup)
		want   *DrillPoint
	}{
		{"the recovery point is drilled from the snapshot it was made from", func(*api.EtcdBackup) {},
			&DrillPoint{BackupPath: "bucket/a_v50_20240101T000000Z", SnapshotRevision: 50, Revision: 80}},
		{"no drill before a recovery point is known", func(eb *api.EtcdBackup) { eb.Status.Archive.RecoveryPoint = nil }, nil},
		{"no drill of a point made from an older snapshot than the newest", func(eb *api.EtcdBackup) {
			eb.Status.EtcdRevision, eb.Status.BackupPath = 90, "bucket/a_v90_20240101T010000Z"
		}, nil},
		{"no drill once the archive is off", func(eb *api.EtcdBackup) { eb.Spec.BackupPolicy.Archive = nil }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eb := drilledBackup("a")
			tc.change(eb)
			got, ok := drillPoint(eb)
			switch {
			case tc.want == nil && ok:
				t.Fatalf("drills %+v, want no drill", got)
			case tc.want != nil && (!ok || got != *tc.want):
				t.Fatalf("drills %+v (%v), want %+v", got, ok, *tc.want)
			}
		})
	}
}

// fakeDrills is an injected DrillArchiveFunc returning one answer.
type fakeDrills struct {
	mu     sync.Mutex
	points []DrillPoint
	done   archive.Drilled
	err    error
}

func (f *fakeDrills) drill(_ context.Context, _ *api.EtcdBackup, p DrillPoint) (archive.Drilled, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.points = append(f.points, p)
	return f.done, f.err
}

func TestADrillBeforeAVerifiedSnapshotIsReportedInStatusEventAndMetrics(t *testing.T) {
	passed := metav1.NewTime(time.Date(2023, 12, 31, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name   string
		done   archive.Drilled
		err    error
		result api.BackupArchiveDrillResult
		event  string
		reason string
		// earlier is the time of a pass the status records from before.
		earlier *metav1.Time
	}{
		{"a restored point that is what the cluster held passes", archive.Drilled{Revision: 80, Keys: 12, Revisions: 30},
			nil, api.BackupArchiveDrillPassed, corev1.EventTypeNormal + " " + ReasonArchiveDrilled, "", nil},
		{"a restored point that differs fails, saying how",
			archive.Drilled{Revision: 80}, errors.New(`the restored point differs from the cluster: key "k" is not restored`),
			api.BackupArchiveDrillFailed, corev1.EventTypeWarning + " " + ReasonArchiveDrillFailed, `key "k" is not restored`, nil},
		{"a point the cluster compacted is said to be so, neither passed nor failed", archive.Drilled{Revision: 80, Compacted: true},
			nil, api.BackupArchiveDrillCompacted, corev1.EventTypeNormal + " " + ReasonArchiveDrillCompacted, "compacted revision 80", nil},
		{"a failed drill after a pass keeps the time of that pass",
			archive.Drilled{Revision: 80}, errors.New("a chunk is missing"),
			api.BackupArchiveDrillFailed, corev1.EventTypeWarning + " " + ReasonArchiveDrillFailed, "a chunk is missing", &passed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd := &fakeDrills{done: tc.done, err: tc.err}
			eb := drilledBackup("a")
			if tc.earlier != nil {
				eb.Status.Archive.Drill = &api.BackupArchiveDrill{Time: *tc.earlier, Result: api.BackupArchiveDrillPassed, Revision: 40, LastPassedTime: tc.earlier}
			}
			f := newFixture(t, []*api.EtcdBackup{eb}, func(_ *fixture, c *Config) { c.DrillArchive = fd.drill })
			st := f.waitStatus("a", "the drill", func(s api.BackupStatus) bool {
				return s.Archive != nil && s.Archive.Drill != nil && s.Archive.Drill.Revision == 80
			})
			d := st.Archive.Drill
			if d.Result != tc.result || d.Revision != 80 || d.SnapshotRevision != 50 || d.BackupPath != "bucket/a_v50_20240101T000000Z" || d.Time.IsZero() {
				t.Errorf("status.archive.drill = %+v, want %s of revision 80 from the snapshot at 50", d, tc.result)
			}
			if tc.reason != "" && !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("reason %q does not say %q", d.Reason, tc.reason)
			}
			if tc.result == api.BackupArchiveDrillPassed && (d.Keys != 12 || d.Revisions != 30 || d.Reason != "") {
				t.Errorf("status.archive.drill = %+v, want 12 keys and 30 revisions, no reason", d)
			}
			// The pass the alert reads: this drill's, or the earlier one's.
			var wantPassed *metav1.Time
			switch {
			case tc.result == api.BackupArchiveDrillPassed:
				wantPassed = &d.Time
			case tc.earlier != nil:
				wantPassed = tc.earlier
			}
			if !d.LastPassedTime.Equal(wantPassed) {
				t.Errorf("status.archive.drill.lastPassedTime = %v, want %v", d.LastPassedTime, wantPassed)
			}
			ls := map[string]string{"namespace": testNamespace, "name": "a"}
			eventually(t, "the drill's metrics", func() bool {
				return f.metric("etcd_backup_operator_archive_drill_revision", ls) == 80
			})
			if got := f.metric("etcd_backup_operator_archive_drill_timestamp_seconds", ls); got != float64(d.Time.Unix()) {
				t.Errorf("archive_drill_timestamp_seconds = %v, want %d", got, d.Time.Unix())
			}
			for _, r := range drillResults {
				want := 0.0
				if r == tc.result {
					want = 1
				}
				if got := f.metric("etcd_backup_operator_archive_drill_result", map[string]string{"namespace": testNamespace, "name": "a", "result": string(r)}); got != want {
					t.Errorf("archive_drill_result{result=%q} = %v, want %v", r, got, want)
				}
			}
			wantSeconds := -1.0 // absent while no drill passed
			if wantPassed != nil {
				wantSeconds = float64(wantPassed.Unix())
			}
			if got := f.metric("etcd_backup_operator_archive_drill_last_passed_timestamp_seconds", ls); got != wantSeconds {
				t.Errorf("archive_drill_last_passed_timestamp_seconds = %v, want %v", got, wantSeconds)
			}
			// Hourly snapshots, every tenth verified: a drill every ten hours.
			if got := f.metric("etcd_backup_operator_archive_drill_interval_seconds", ls); got != 10*3600 {
				t.Errorf("archive_drill_interval_seconds = %v, want ten hours", got)
			}
			eventually(t, "the drill's event", func() bool { return f.events.count(tc.event) == 1 })
			// It went with the first snapshot, which the runner verified.
			if n := f.backups.verifyCalls("a"); len(n) == 0 || !n[0] {
				t.Errorf("backups %v, want the first one verified", n)
			}
			fd.mu.Lock()
			defer fd.mu.Unlock()
			if len(fd.points) != 1 {
				t.Errorf("%d drills, want one before the first verified snapshot", len(fd.points))
			}
		})
	}
}

func TestDrillDue(t *testing.T) {
	now := time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)
	no := false
	for _, tc := range []struct {
		name   string
		drill  *api.BackupArchiveDrillPolicy
		verify bool
		last   time.Time
		want   bool
	}{
		{"by default a drill goes with a verified snapshot", nil, true, now.Add(-time.Minute), true},
		{"by default no drill goes with a snapshot that is not verified", nil, false, time.Time{}, false},
		{"drills switched off never run, even with a verified snapshot", &api.BackupArchiveDrillPolicy{Enabled: &no}, true, time.Time{}, false},
		{"with an interval the first drill runs at once", &api.BackupArchiveDrillPolicy{IntervalInSecond: 86400}, false, time.Time{}, true},
		{"with an interval a drill waits until it has passed since the last", &api.BackupArchiveDrillPolicy{IntervalInSecond: 86400},
			true, now.Add(-23 * time.Hour), false},
		{"with an interval a drill runs once it has passed, the snapshot verified or not", &api.BackupArchiveDrillPolicy{IntervalInSecond: 86400},
			false, now.Add(-24 * time.Hour), true},
		{"a snapshot a moment early for the interval still drills", &api.BackupArchiveDrillPolicy{IntervalInSecond: 86400},
			false, now.Add(-24*time.Hour + time.Second), true},
		{"a snapshot a period early for the interval does not", &api.BackupArchiveDrillPolicy{IntervalInSecond: 86400},
			false, now.Add(-23 * time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eb := archivedBackup("a")
			eb.Spec.BackupPolicy.Archive.Drill = tc.drill
			if got := drillDue(eb, tc.verify, tc.last, now); got != tc.want {
				t.Fatalf("drillDue = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDrillsExpected(t *testing.T) {
	no := false
	for _, tc := range []struct {
		name   string
		drill  *api.BackupArchiveDrillPolicy
		verify *api.BackupVerify
		want   time.Duration
	}{
		{"by default drills are as far apart as verified snapshots", nil, nil, api.DefaultVerifyEveryNthBackup * time.Hour},
		{"verifying every other backup drills every other period", nil, &api.BackupVerify{EveryNthBackup: 2}, 2 * time.Hour},
		{"without verification the default asks for no drill", nil, &api.BackupVerify{Enabled: &no}, 0},
		{"drills switched off are expected never", &api.BackupArchiveDrillPolicy{Enabled: &no}, nil, 0},
		{"an interval of whole periods is kept", &api.BackupArchiveDrillPolicy{IntervalInSecond: 86400}, &api.BackupVerify{Enabled: &no}, 24 * time.Hour},
		{"an interval between periods is rounded up to the next", &api.BackupArchiveDrillPolicy{IntervalInSecond: 5400}, nil, 2 * time.Hour},
		{"an interval shorter than the period drills with every snapshot", &api.BackupArchiveDrillPolicy{IntervalInSecond: 60}, nil, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eb := archivedBackup("a")
			eb.Spec.BackupPolicy.Archive.Drill = tc.drill
			eb.Spec.Verify = tc.verify
			got, ok := drillsExpected(&eb.Spec, time.Hour)
			if got != tc.want || ok != (tc.want > 0) {
				t.Fatalf("drillsExpected = %v, %v; want %v", got, ok, tc.want)
			}
		})
	}
}

// TestDrillsHonourTheirSetting runs five hourly snapshots of an archived
// backup, the recovery point following each as the archive would make it,
// and says before which of them a drill ran.
func TestDrillsHonourTheirSetting(t *testing.T) {
	no := false
	for _, tc := range []struct {
		name   string
		drill  *api.BackupArchiveDrillPolicy
		verify *api.BackupVerify
		// before is the end of a drill the status already records, if any.
		before time.Duration
		want   []int
	}{
		{"by default drills go with the verified snapshots", nil, &api.BackupVerify{EveryNthBackup: 2}, 0, []int{0, 2, 4}},
		{"an interval drills on its own clock, with verification off", &api.BackupArchiveDrillPolicy{IntervalInSecond: 7200},
			&api.BackupVerify{Enabled: &no}, 0, []int{0, 2, 4}},
		{"an interval longer than the verification's cadence thins the drills out", &api.BackupArchiveDrillPolicy{IntervalInSecond: 3 * 3600},
			&api.BackupVerify{EveryNthBackup: 1}, 0, []int{0, 3}},
		{"the interval counts from the drill the status records", &api.BackupArchiveDrillPolicy{IntervalInSecond: 7200},
			nil, 90 * time.Minute, []int{1, 3}},
		{"drills switched off never run, though every snapshot is verified", &api.BackupArchiveDrillPolicy{Enabled: &no},
			&api.BackupVerify{EveryNthBackup: 1}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eb := drilledBackup("a")
			eb.Spec.BackupPolicy.Archive.Drill = tc.drill
			eb.Spec.Verify = tc.verify
			start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) // the fixture's clock
			if tc.before > 0 {
				eb.Status.Archive.Drill = &api.BackupArchiveDrill{Time: metav1.NewTime(start.Add(-tc.before)), Result: api.BackupArchiveDrillPassed}
			}
			fd := &fakeDrills{done: archive.Drilled{Revision: 80, Keys: 1}}
			f := newFixture(t, []*api.EtcdBackup{eb}, func(f *fixture, c *Config) {
				c.DrillArchive = fd.drill
				c.Backup = func(ctx context.Context, eb *api.EtcdBackup, verify bool) (*backup.Result, error) {
					res, err := f.backups.backup(ctx, eb, verify)
					if err == nil {
						res.Path = backup.PeriodicKey(res.Path, res.Revision, f.clock.Now())
					}
					return res, err
				}
			})
			const periods = 5
			for i := range periods {
				// The fake backup stores revisions 101, 102, ...
				rev := int64(101 + i)
				st := f.waitStatus("a", fmt.Sprintf("snapshot %d", i), func(s api.BackupStatus) bool { return s.EtcdRevision == rev })
				if i == periods-1 {
					break
				}
				// As the archive publishes it: the newest snapshot carried on.
				cur := f.get("a")
				cur.Status = st
				cur.Status.Archive.RecoveryPoint = &api.BackupRecoveryPoint{Revision: rev + 5, SnapshotRevision: rev}
				if _, err := f.client.EtcdV1beta2().EtcdBackups(testNamespace).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				eventually(t, "the cache holds the recovery point", func() bool {
					c, err := f.ctrl.lister.EtcdBackups(testNamespace).Get("a")
					return err == nil && c.Status.Archive != nil && c.Status.Archive.RecoveryPoint != nil && c.Status.Archive.RecoveryPoint.SnapshotRevision == rev
				})
				eventually(t, "the runner waits for the next period", f.clock.HasWaiters)
				f.clock.Step(time.Hour)
			}
			fd.mu.Lock()
			defer fd.mu.Unlock()
			// A drill before snapshot i restores the snapshot before it: 50
			// (the status's) for the first, 100+i after.
			var got []int
			for _, p := range fd.points {
				if p.SnapshotRevision == 50 {
					got = append(got, 0)
				} else {
					got = append(got, int(p.SnapshotRevision-100))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("drilled before snapshots %v, want %v", got, tc.want)
			}
		})
	}
}
