package backupcontroller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
)

func TestSnapshotAfter(t *testing.T) {
	tests := []struct {
		name   string
		status api.BackupStatus
		want   int64
	}{
		{"a periodic snapshot under the path is continued", api.BackupStatus{EtcdRevision: 42, BackupPath: "bucket/a_v42_20240101T000000Z"}, 42},
		{"no snapshot yet means one is taken first", api.BackupStatus{}, 0},
		{"a snapshot under another path (the path changed) is not continued", api.BackupStatus{EtcdRevision: 42, BackupPath: "bucket/old_v42_20240101T000000Z"}, 0},
		{"a path that only begins like the spec's is another path", api.BackupStatus{EtcdRevision: 42, BackupPath: "bucket/ab_v42_20240101T000000Z"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eb := archivedBackup("a")
			eb.Status = tc.status
			if got := snapshotAfter(eb); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// fakeArchives is an injected ArchiveFunc. Each opened archive runs until its
// context ends or the test ends it with stop; it reports progress as set.
type fakeArchives struct {
	mu      sync.Mutex
	afters  map[string][]int64
	running map[string]int
	most    map[string]int
	// stops end the running archive of a backup with an error.
	stops    map[string]chan error
	progress archive.Progress
}

func newFakeArchives() *fakeArchives {
	return &fakeArchives{afters: map[string][]int64{}, running: map[string]int{}, most: map[string]int{}, stops: map[string]chan error{}}
}

func (f *fakeArchives) open(_ context.Context, eb *api.EtcdBackup, after int64) (Archive, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.afters[eb.Name] = append(f.afters[eb.Name], after)
	stop := make(chan error, 1)
	f.stops[eb.Name] = stop
	return &fakeArchive{f: f, name: eb.Name, prefix: eb.Spec.S3.Path + api.ArchivePathSuffix, stop: stop}, nil
}

func (f *fakeArchives) opened(name string) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.afters[name])
}

func (f *fakeArchives) now(name string) (running, most int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running[name], f.most[name]
}

// end stops the archive of name that runs now with err.
func (f *fakeArchives) end(name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops[name] <- err
}

func (f *fakeArchives) setProgress(p archive.Progress) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.progress = p
}

type fakeArchive struct {
	f      *fakeArchives
	name   string
	prefix string
	stop   chan error
}

func (a *fakeArchive) Run(ctx context.Context) error {
	a.f.mu.Lock()
	a.f.running[a.name]++
	a.f.most[a.name] = max(a.f.most[a.name], a.f.running[a.name])
	a.f.mu.Unlock()
	defer func() {
		a.f.mu.Lock()
		a.f.running[a.name]--
		a.f.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-a.stop:
		return err
	}
}

func (a *fakeArchive) Progress() archive.Progress {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	return a.f.progress
}

func (a *fakeArchive) Prefix() string { return a.prefix }
func (a *fakeArchive) Close()         {}

// withArchives runs fa's archives, beside snapshots named as periodic ones
// are, so that the status tells the archive which snapshot it continues.
func withArchives(fa *fakeArchives) fixtureOption {
	return func(f *fixture, c *Config) {
		c.Archive = fa.open
		c.Backup = func(ctx context.Context, eb *api.EtcdBackup, verify bool) (*backup.Result, error) {
			res, err := f.backups.backup(ctx, eb, verify)
			if err == nil {
				res.Path = backup.PeriodicKey(res.Path, res.Revision, f.clock.Now())
			}
			return res, err
		}
	}
}

// archivedBackup is a periodic backup every hour with the archive on, whose
// status holds a snapshot at revision 50 under its path.
func archivedBackup(name string) *api.EtcdBackup {
	eb := newBackup(name, 3600)
	eb.Spec.BackupPolicy.Archive = &api.BackupArchive{}
	eb.Status = api.BackupStatus{Succeeded: true, EtcdRevision: 50, BackupPath: "bucket/" + name + "_v50_20240101T000000Z"}
	return eb
}

func TestAnArchiveRunsOnceForABackupAndStopsWhenItIsDeleted(t *testing.T) {
	fa := newFakeArchives()
	f := newFixture(t, []*api.EtcdBackup{archivedBackup("a")}, withArchives(fa))
	eventually(t, "the archive runs", func() bool { r, _ := fa.now("a"); return r == 1 })
	// After the status's snapshot at 50, or the runner's first at 101 when
	// it was recorded first: never a snapshot of its own.
	if got := fa.opened("a"); !slices.Equal(got, []int64{50}) && !slices.Equal(got, []int64{101}) {
		t.Fatalf("opened after %v, want after the newest snapshot in the status", got)
	}
	// Syncs of the same spec leave the archive alone.
	for range 3 {
		f.resync("a", func(*api.EtcdBackup) bool { return true })
	}
	if got := fa.opened("a"); len(got) != 1 || f.ctrl.LiveArchivers() != 1 {
		t.Fatalf("opened %d times, %d archivers live; want one", len(got), f.ctrl.LiveArchivers())
	}

	eb := f.get("a")
	now := metav1.NewTime(f.clock.Now())
	eb.DeletionTimestamp = &now
	f.update(eb)
	eventually(t, "the finalizer is removed", func() bool { return !hasFinalizer(f.get("a")) })
	if r, most := fa.now("a"); r != 0 || most != 1 || f.ctrl.LiveArchivers() != 0 {
		t.Fatalf("after the delete %d archives run (at most %d at once), %d archivers live", r, most, f.ctrl.LiveArchivers())
	}
}

func TestAChangedSpecRestartsTheArchiveNeverTwoAtOnce(t *testing.T) {
	fa := newFakeArchives()
	f := newFixture(t, []*api.EtcdBackup{archivedBackup("a")}, withArchives(fa))
	eventually(t, "the archive runs", func() bool { r, _ := fa.now("a"); return r == 1 })

	eb := f.get("a")
	eb.Spec.BackupPolicy.Archive.IntervalInSecond = 2
	eb.Generation = 2
	f.update(eb)
	eventually(t, "the archive is opened again for the new spec", func() bool {
		r, _ := fa.now("a")
		return len(fa.opened("a")) == 2 && r == 1
	})
	if _, most := fa.now("a"); most != 1 {
		t.Fatalf("%d archives ran at once", most)
	}

	// Without archive the runner goes on, its archive does not.
	eb = f.get("a")
	eb.Spec.BackupPolicy.Archive = nil
	eb.Generation = 3
	f.update(eb)
	eventually(t, "the archive stops", func() bool { r, _ := fa.now("a"); return r == 0 && f.ctrl.LiveArchivers() == 0 })
	if f.ctrl.LiveRunners() != 1 {
		t.Fatalf("%d runners; the periodic snapshots stopped with the archive", f.ctrl.LiveRunners())
	}
}

func TestAnArchiveWithoutASnapshotTakesOneFirstAndContinuesIt(t *testing.T) {
	fa := newFakeArchives()
	eb := archivedBackup("a")
	eb.Status = api.BackupStatus{}
	newFixture(t, []*api.EtcdBackup{eb}, withArchives(fa))
	eventually(t, "the archive runs", func() bool { r, _ := fa.now("a"); return r == 1 })
	after := fa.opened("a")[0]
	// Revisions of the fake's snapshots start at 101; the runner's first
	// backup may come before or after the archive's.
	if after <= 100 {
		t.Fatalf("the archive continues revision %d, not a snapshot it took", after)
	}
}

func TestAGapTakesASnapshotAndTheArchiveContinuesAfterIt(t *testing.T) {
	fa := newFakeArchives()
	f := newFixture(t, []*api.EtcdBackup{archivedBackup("a")}, withArchives(fa))
	eventually(t, "the archive runs", func() bool { r, _ := fa.now("a"); return r == 1 && len(fa.opened("a")) == 1 })

	// The fake's next snapshot has the next revision: the compaction is just below it.
	f.backups.mu.Lock()
	next := f.backups.revision + 1
	f.backups.mu.Unlock()
	fa.end("a", &archive.GapError{From: 51, CompactedTo: next - 1})
	eventually(t, "the archive is opened again", func() bool { return len(fa.opened("a")) == 2 })
	if got := fa.opened("a")[1]; got != next {
		t.Fatalf("the archive continues after %d, want after the snapshot at %d", got, next)
	}
	st := f.waitStatus("a", "the gap and its snapshot", func(s api.BackupStatus) bool {
		return s.Archive != nil && s.Archive.LastGap != nil && s.Archive.LastGap.SnapshotRevision == next
	})
	if g := st.Archive.LastGap; g.From != 51 || g.CompactedTo != next-1 || g.When.IsZero() {
		t.Errorf("last gap %+v", g)
	}
	if st.EtcdRevision != next {
		t.Errorf("the snapshot after the gap is not the newest in status: revision %d", st.EtcdRevision)
	}
	if n := f.events.count("Warning " + ReasonArchiveGap); n != 1 {
		t.Errorf("%d gap events: %v", n, f.events.list())
	}
	if v := f.metric("etcd_backup_operator_archive_gaps_total", map[string]string{"storage_type": "S3"}); v != 1 {
		t.Errorf("archive_gaps_total = %v", v)
	}
}

func TestAGapWhoseSnapshotFailsTakesAnotherNotAnOlderOne(t *testing.T) {
	fa := newFakeArchives()
	f := newFixture(t, []*api.EtcdBackup{archivedBackup("a")}, withArchives(fa),
		withOutcomes("a", outcome{}, outcome{err: errors.New("the store is down")}, outcome{}))
	eventually(t, "the archive runs beside the first snapshot", func() bool {
		r, _ := fa.now("a")
		return r == 1 && f.backups.callCount("a") == 1
	})
	f.backups.mu.Lock()
	compacted := f.backups.revision + 1 // newer than the runner's snapshot
	f.backups.mu.Unlock()
	fa.end("a", &archive.GapError{From: 51, CompactedTo: compacted})
	eventually(t, "the archive is opened again", func() bool { return len(fa.opened("a")) == 2 })
	// The failed snapshot had revision compacted, the next one compacted+1.
	if got := fa.opened("a")[1]; got != compacted+1 {
		t.Fatalf("the archive continues after %d, want after the snapshot taken once the failed one failed (%d)", got, compacted+1)
	}
}

func TestAStoppedArchiveStartsAgainAfterAWait(t *testing.T) {
	fa := newFakeArchives()
	f := newFixture(t, []*api.EtcdBackup{archivedBackup("a")}, withArchives(fa))
	eventually(t, "the archive runs", func() bool { r, _ := fa.now("a"); return r == 1 })
	fa.end("a", archive.ErrBacklog)
	eventually(t, "the failure is reported", func() bool { return f.events.count("Warning "+ReasonArchiveFailed) == 1 })
	eventually(t, "the wait", f.clock.HasWaiters)
	f.clock.Step(time.Second)
	eventually(t, "the archive is opened again", func() bool { return len(fa.opened("a")) == 2 })
	if got := fa.opened("a"); got[1] != got[0] {
		t.Fatalf("started after %v, want after the same revision: the archiver resumes from its chunks", got)
	}
}

func TestArchiveProgressGoesIntoStatusAndMetricsEveryFewSeconds(t *testing.T) {
	fa := newFakeArchives()
	f := newFixture(t, []*api.EtcdBackup{archivedBackup("a")}, withArchives(fa))
	eventually(t, "the archive runs", func() bool { r, _ := fa.now("a"); return r == 1 })
	at := time.Date(2024, 1, 1, 0, 0, 3, 500, time.UTC)
	fa.setProgress(archive.Progress{Revision: 77, Time: at, Newest: 80, LagRevisions: 3, Lag: 2500 * time.Millisecond})

	eventually(t, "the status ticker", f.clock.HasWaiters)
	f.clock.Step(archiveStatusEvery)
	st := f.waitStatus("a", "archive progress", func(s api.BackupStatus) bool { return s.Archive != nil && s.Archive.LastRevision == 77 })
	want := api.BackupArchiveStatus{Prefix: "bucket/a.archive/", LastRevision: 77, LastTime: &metav1.Time{Time: at.Truncate(time.Second)},
		LagSeconds: 2, LagRevisions: 3}
	if got := *st.Archive; got.Prefix != want.Prefix || got.LagSeconds != want.LagSeconds || got.LagRevisions != want.LagRevisions ||
		got.LastTime == nil || !got.LastTime.Equal(want.LastTime) {
		t.Errorf("status.archive = %+v, want %+v", got, want)
	}
	labels := map[string]string{"namespace": testNamespace, "name": "a"}
	if v := f.metric("etcd_backup_operator_archive_last_revision", labels); v != 77 {
		t.Errorf("archive_last_revision = %v", v)
	}
	if v := f.metric("etcd_backup_operator_archive_lag_seconds", labels); v != 2.5 {
		t.Errorf("archive_lag_seconds = %v", v)
	}
	// The next periodic snapshot rewrites the status, but not the archive's.
	calls := f.backups.callCount("a")
	f.clock.Step(time.Hour)
	eventually(t, "the next snapshot", func() bool { return f.backups.callCount("a") == calls+1 })
	f.waitStatus("a", "the next snapshot with the archive's status", func(s api.BackupStatus) bool {
		return s.EtcdRevision > 101 && s.Archive != nil && s.Archive.LastRevision == 77
	})

	if err := f.client.EtcdV1beta2().EtcdBackups(testNamespace).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the archive's series go with it", func() bool {
		return f.metric("etcd_backup_operator_archive_last_revision", labels) == -1
	})
}

func TestRecoveryPoint(t *testing.T) {
	named := time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC)
	received := func(rev int64) time.Time { return named.Add(time.Duration(rev)*time.Second + 300*time.Millisecond) }
	span := func(first, last int64) archive.Span {
		return archive.Span{First: first, Last: last, Time: received(last)}
	}
	snapshotAt := func(rev int64) api.BackupStatus {
		return api.BackupStatus{EtcdRevision: rev, BackupPath: backup.PeriodicKey("bucket/a", rev, named)}
	}
	point := func(rev int64, at time.Time, snapshot int64) *api.BackupRecoveryPoint {
		t := metav1.NewTime(at.Truncate(time.Second))
		return &api.BackupRecoveryPoint{Revision: rev, Time: &t, SnapshotRevision: snapshot}
	}
	for _, tc := range []struct {
		name   string
		status api.BackupStatus
		spans  []archive.Span
		want   *api.BackupRecoveryPoint
	}{
		{
			name:   "the archive carries the newest snapshot to its last stored change",
			status: snapshotAt(100), spans: []archive.Span{span(1, 240)},
			want: point(240, received(240), 100),
		},
		{
			name:   "a gap after the newest snapshot stops the point at the gap",
			status: snapshotAt(100), spans: []archive.Span{span(1, 150), span(181, 240)},
			want: point(150, received(150), 100),
		},
		{
			name:   "the snapshot taken after a gap is carried on by the archive that continues it",
			status: snapshotAt(180), spans: []archive.Span{span(1, 150), span(181, 240)},
			want: point(240, received(240), 180),
		},
		{
			name:   "a snapshot newer than the archive's end is the point, at the time its name records",
			status: snapshotAt(300), spans: []archive.Span{span(1, 240)},
			want: point(300, named, 300),
		},
		{
			name:   "an archive that stored nothing yet leaves the point at the snapshot",
			status: snapshotAt(100),
			want:   point(100, named, 100),
		},
		{
			name:   "a snapshot whose name does not record a time gives a point without one",
			status: api.BackupStatus{EtcdRevision: 100, BackupPath: "bucket/a_v100_20240101T000000Z"},
			want:   &api.BackupRecoveryPoint{Revision: 100, SnapshotRevision: 100},
		},
		{
			name:   "no point without a snapshot to start from, whatever the archive holds",
			status: api.BackupStatus{}, spans: []archive.Span{span(1, 240)},
		},
		{
			name:   "no point from a snapshot under another path: a restore of this path cannot start from it",
			status: api.BackupStatus{EtcdRevision: 100, BackupPath: backup.PeriodicKey("bucket/old", 100, named)}, spans: []archive.Span{span(1, 240)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eb := archivedBackup("a")
			got := recoveryPoint(&eb.Spec, &tc.status, tc.spans)
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("recovery point %s, want %s", describePoint(got), describePoint(tc.want))
			}
		})
	}
}

func describePoint(p *api.BackupRecoveryPoint) string {
	if p == nil {
		return "none"
	}
	at := "no time"
	if p.Time != nil {
		at = p.Time.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("revision %d (%s) from snapshot %d", p.Revision, at, p.SnapshotRevision)
}

func TestTheRecoveryPointFollowsTheArchiveAndTheNewestSnapshot(t *testing.T) {
	fa := newFakeArchives()
	f := newFixture(t, []*api.EtcdBackup{archivedBackup("a")}, withArchives(fa))
	eventually(t, "the archive runs beside the first snapshot", func() bool {
		r, _ := fa.now("a")
		return r == 1 && f.backups.callCount("a") == 1
	})
	snap := f.waitStatus("a", "the first snapshot", func(s api.BackupStatus) bool { return s.EtcdRevision > 50 }).EtcdRevision
	received := f.clock.Now().Add(3 * time.Second)
	// The archive holds an old run, a hole, and a run that continues the
	// snapshot and goes on past it.
	fa.setProgress(archive.Progress{Revision: snap + 40, Time: received, Newest: snap + 40,
		Spans: []archive.Span{{First: 1, Last: 30}, {First: snap - 5, Last: snap + 40, Time: received}}})

	eventually(t, "the status ticker", f.clock.HasWaiters)
	f.clock.Step(archiveStatusEvery)
	st := f.waitStatus("a", "the recovery point", func(s api.BackupStatus) bool {
		return s.Archive != nil && s.Archive.RecoveryPoint != nil
	})
	want := &api.BackupRecoveryPoint{Revision: snap + 40, Time: &metav1.Time{Time: received.Truncate(time.Second)}, SnapshotRevision: snap}
	if got := st.Archive.RecoveryPoint; !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("recovery point %s, want %s", describePoint(got), describePoint(want))
	}
	labels := map[string]string{"namespace": testNamespace, "name": "a"}
	if v := f.metric("etcd_backup_operator_archive_recovery_point_revision", labels); v != float64(snap+40) {
		t.Errorf("archive_recovery_point_revision = %v, want %d", v, snap+40)
	}
	if v := f.metric("etcd_backup_operator_archive_recovery_point_timestamp_seconds", labels); v != float64(received.Unix()) {
		t.Errorf("archive_recovery_point_timestamp_seconds = %v, want %d", v, received.Unix())
	}

	// A newer snapshot past the archive's end (the archive lags) is the
	// point at the next publication.
	f.backups.mu.Lock()
	f.backups.revision = snap + 100 // the cluster moved on past the archive
	f.backups.mu.Unlock()
	calls := f.backups.callCount("a")
	f.clock.Step(time.Hour)
	eventually(t, "the next snapshot", func() bool { return f.backups.callCount("a") == calls+1 })
	next := f.waitStatus("a", "the next snapshot", func(s api.BackupStatus) bool { return s.EtcdRevision > snap }).EtcdRevision
	eventually(t, "the status ticker", f.clock.HasWaiters)
	f.clock.Step(archiveStatusEvery)
	st = f.waitStatus("a", "the recovery point at the new snapshot", func(s api.BackupStatus) bool {
		return s.Archive != nil && s.Archive.RecoveryPoint != nil && s.Archive.RecoveryPoint.Revision == next
	})
	if p := st.Archive.RecoveryPoint; p.SnapshotRevision != next || p.Time == nil {
		t.Errorf("recovery point %s, want the snapshot at %d with its name's time", describePoint(p), next)
	}

	if err := f.client.EtcdV1beta2().EtcdBackups(testNamespace).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the recovery point's series go with the archive", func() bool {
		return f.metric("etcd_backup_operator_archive_recovery_point_revision", labels) == -1
	})
}
