package backupcontroller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
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

func TestADrillBeforeAVerifiedSnapshotIsReportedInStatusAndAnEvent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		done   archive.Drilled
		err    error
		result api.BackupArchiveDrillResult
		event  string
		reason string
	}{
		{"a restored point that is what the cluster held passes", archive.Drilled{Revision: 80, Keys: 12, Revisions: 30},
			nil, api.BackupArchiveDrillPassed, corev1.EventTypeNormal + " " + ReasonArchiveDrilled, ""},
		{"a restored point that differs fails, saying how",
			archive.Drilled{Revision: 80}, errors.New(`the restored point differs from the cluster: key "k" is not restored`),
			api.BackupArchiveDrillFailed, corev1.EventTypeWarning + " " + ReasonArchiveDrillFailed, `key "k" is not restored`},
		{"a point the cluster compacted is said to be so, neither passed nor failed", archive.Drilled{Revision: 80, Compacted: true},
			nil, api.BackupArchiveDrillCompacted, corev1.EventTypeNormal + " " + ReasonArchiveDrillCompacted, "compacted revision 80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd := &fakeDrills{done: tc.done, err: tc.err}
			f := newFixture(t, []*api.EtcdBackup{drilledBackup("a")}, func(_ *fixture, c *Config) { c.DrillArchive = fd.drill })
			st := f.waitStatus("a", "the drill", func(s api.BackupStatus) bool { return s.Archive != nil && s.Archive.Drill != nil })
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
