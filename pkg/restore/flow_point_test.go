package restore

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
)

// storePointBackup stores what a periodic EtcdBackup with an archive leaves
// under "<bucket>/etcd": a snapshot at revision 100 (taken at 10:00), and
// chunks of revisions 101-110 and 111-120, one put a revision, received a
// second apart from 10:10.
func storePointBackup(t *testing.T, store *s3store.Store) {
	t.Helper()
	putObject(t, store, backup.PeriodicKey("etcd", 100, time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)), snapshot)
	at := time.Date(2026, 11, 28, 10, 10, 0, 0, time.UTC)
	for _, r := range [][2]int64{{101, 110}, {111, 120}} {
		var evs []archive.Event
		for rev := r[0]; rev <= r[1]; rev++ {
			evs = append(evs, archive.Event{
				Event:    mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(fmt.Sprintf("/k/%d", rev%4)), Value: []byte(fmt.Sprint(rev)), ModRevision: rev}},
				Received: at.Add(time.Duration(rev-101) * time.Second),
			})
		}
		c, stored, err := archive.BuildChunk("etcd"+api.ArchivePathSuffix, backup.Codec{}, r[0], evs)
		if err != nil {
			t.Fatal(err)
		}
		putObject(t, store, c.Key, stored)
	}
}

func pointRestore(srv *backuptest.S3, point api.RestorePointInTime) *api.EtcdRestore {
	return pointRestoreFrom(srv, "etcd", point)
}

func pointRestoreFrom(srv *backuptest.S3, key string, point api.RestorePointInTime) *api.EtcdRestore {
	er := newRestore(testCluster, key, srv)
	er.Spec.PointInTime = &point
	return er
}

// A restore to a point plans before it touches anything: the snapshot, the
// revision, and what the replay must leave are in the signed plan and the
// status, an event says it, and the seed replays.
func TestRestoreToAPointPlansTheReplayAndTheSeedRunsIt(t *testing.T) {
	srv, store := startS3(t)
	storePointBackup(t, store)
	// 10:10:14.5 is after revision 115 (received 10:10:14) and before 116.
	f := newFixture(t, []k8sruntime.Object{awsSecretObject()}, newCluster(), pointRestore(srv, api.RestorePointInTime{Time: "2026-11-28T10:10:14.5Z"}))
	f.mustSync(testCluster)
	er := f.restore(testCluster)
	plan, ok, err := PlanOf(er)
	if !ok || err != nil {
		t.Fatalf("no plan: %v", err)
	}
	p := plan.Point
	if p == nil || p.SnapshotRevision != 100 || p.Revision != 115 || p.Revisions != 15 || p.Events != 15 || p.Keys != 4 ||
		!strings.HasSuffix(plan.Backup.Path, "/etcd_v100_2026-11-28-10:00:00") {
		t.Fatalf("plan of the point %+v from backup %s, want snapshot 100 replayed to 115: 15 revisions of 4 keys", p, plan.Backup.Path)
	}
	st := er.Status.PointInTime
	if st == nil || st.Snapshot != plan.Backup.Path || st.Revision != 115 || st.Time == nil || !st.Time.Equal(&metav1.Time{Time: time.Date(2026, 11, 28, 10, 10, 14, 0, time.UTC)}) || st.Replayed {
		t.Errorf("status.pointInTime %+v", st)
	}
	if !f.events.has("Normal", ReasonPointChosen) {
		t.Errorf("no %s event: %v", ReasonPointChosen, f.events.list())
	}
	f.mustSync(testCluster)
	seed, err := f.kube.CoreV1().Pods(testNamespace).Get(context.Background(), SeedMemberName(testCluster, restoreUID), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no seed: %v", err)
	}
	last := seed.Spec.InitContainers[len(seed.Spec.InitContainers)-1]
	if last.Name != ReplayContainerName || !strings.Contains(strings.Join(last.Command, " "), "--revision=115") {
		t.Errorf("the seed's last step is %s %v, want the replay to revision 115", last.Name, last.Command)
	}
}

// A point the archive cannot reach fails the restore with the reason, and the
// cluster is never touched.
func TestRestoreToAPointTheArchiveCannotReachLeavesTheClusterAlone(t *testing.T) {
	srv, store := startS3(t)
	storePointBackup(t, store)
	tests := []struct {
		name  string
		point api.RestorePointInTime
		want  string
		key   string // the path's key; "etcd", the EtcdBackup's, by default
	}{
		{"a revision past the archive", api.RestorePointInTime{Revision: 130}, "the archive ends before revision 121", ""},
		{"a revision before every snapshot", api.RestorePointInTime{Revision: 90}, "no periodic snapshot is at or before revision 90", ""},
		{"a path that names a snapshot, not a periodic backup", api.RestorePointInTime{Revision: 110}, "the path is that of a periodic EtcdBackup", "etcd_v100_2026-11-28-10:00:00"},
		{"a time after the archive's last change", api.RestorePointInTime{Time: "2026-11-28T11:00:00Z"}, "nothing shows what the cluster held at 2026-11-28T11:00:00Z", ""},
		{"a time and a revision", api.RestorePointInTime{Time: "2026-11-28T11:00:00Z", Revision: 110}, "names one of a time, a revision or latest", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := cmp.Or(tc.key, "etcd")
			f := newFixture(t, kubeObjects(), []k8sruntime.Object{newCluster(), pointRestoreFrom(srv, key, tc.point)}...)
			if _, err := f.sync(testCluster, 0); err != nil {
				t.Fatal(err)
			}
			er := f.restore(testCluster)
			if er.Status.Phase != api.RestorePhaseFailed || !strings.Contains(er.Status.Reason, tc.want) || !strings.Contains(er.Status.Reason, "was not touched") {
				t.Errorf("phase %s, reason %q; want Failed saying %q", er.Status.Phase, er.Status.Reason, tc.want)
			}
			f.expectUntouched()
		})
	}
}

// A restore to the latest change finds the archive's newest change itself,
// and goes as far as the archive can be replayed: a hole or a chunk that
// cannot be read stop it before them, which its status and a Warning say,
// instead of failing a restore that no later attempt would do better.
func TestRestoreToTheLatestChangeFindsTheNewestArchivedChange(t *testing.T) {
	latest := api.RestorePointInTime{Latest: true}
	// storeChunk stores a chunk of revisions first to last, received a
	// second apart from 10:11; damaged stores other bytes than its name's.
	storeChunk := func(t *testing.T, store *s3store.Store, first, last int64, damaged bool) {
		t.Helper()
		var evs []archive.Event
		for rev := first; rev <= last; rev++ {
			evs = append(evs, archive.Event{
				Event:    mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("/later"), Value: []byte(fmt.Sprint(rev)), ModRevision: rev}},
				Received: time.Date(2026, 11, 28, 10, 11, 0, 0, time.UTC).Add(time.Duration(rev-first) * time.Second),
			})
		}
		c, stored, err := archive.BuildChunk("etcd"+api.ArchivePathSuffix, backup.Codec{}, first, evs)
		if err != nil {
			t.Fatal(err)
		}
		if damaged {
			stored[len(stored)/2] ^= 0xff
		}
		putObject(t, store, c.Key, stored)
	}
	tests := []struct {
		name      string
		store     func(t *testing.T, store *s3store.Store)
		revision  int64 // what the restore replays to
		archived  int64 // the archive's newest change
		shortfall string
	}{
		{name: "an archive without a hole is replayed to its last change",
			store: func(*testing.T, *s3store.Store) {}, revision: 120, archived: 120},
		{name: "a hole after the snapshot stops the restore before it",
			store:    func(t *testing.T, s *s3store.Store) { storeChunk(t, s, 131, 140, false) },
			revision: 120, archived: 140, shortfall: "the archive lacks revisions 121 to 130"},
		{name: "a chunk that cannot be read stops the restore before it",
			store:    func(t *testing.T, s *s3store.Store) { storeChunk(t, s, 121, 130, true) },
			revision: 120, archived: 130, shortfall: "cannot be read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, store := startS3(t)
			storePointBackup(t, store)
			tc.store(t, store)
			f := newFixture(t, []k8sruntime.Object{awsSecretObject()}, newCluster(), pointRestore(srv, latest))
			f.mustSync(testCluster)
			er := f.restore(testCluster)
			plan, ok, err := PlanOf(er)
			if !ok || err != nil {
				t.Fatalf("no plan (phase %s, reason %q): %v", er.Status.Phase, er.Status.Reason, err)
			}
			p := plan.Point
			if p.SnapshotRevision != 100 || p.Revision != tc.revision || p.ArchiveRevision != tc.archived || !p.Point.Latest {
				t.Errorf("plan %+v, want snapshot 100 replayed to %d of the archive's %d", p, tc.revision, tc.archived)
			}
			st := er.Status.PointInTime
			if st == nil || st.Revision != tc.revision || st.ArchiveRevision != tc.archived || st.Time == nil ||
				(tc.shortfall == "") != (st.Shortfall == "") || !strings.Contains(st.Shortfall, tc.shortfall) {
				t.Errorf("status.pointInTime %+v, want revision %d of %d, short because %q", st, tc.revision, tc.archived, tc.shortfall)
			}
			if warned := f.events.has("Warning", ReasonPointShortOfNewest); warned != (tc.shortfall != "") {
				t.Errorf("Warning %s: %v, want %v: %v", ReasonPointShortOfNewest, warned, tc.shortfall != "", f.events.list())
			}
			f.mustSync(testCluster)
			seed, err := f.kube.CoreV1().Pods(testNamespace).Get(context.Background(), SeedMemberName(testCluster, restoreUID), metav1.GetOptions{})
			if err != nil {
				t.Fatalf("no seed: %v", err)
			}
			cmd := strings.Join(seed.Spec.InitContainers[len(seed.Spec.InitContainers)-1].Command, " ")
			if !strings.Contains(cmd, fmt.Sprintf("--revision=%d", tc.revision)) || !strings.Contains(cmd, "--newest") {
				t.Errorf("the seed replays with %s, want up to revision %d as the newest", cmd, tc.revision)
			}
		})
	}
}
