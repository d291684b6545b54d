package backupcontroller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	kubefake "k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
)

func TestArchiveChunksArePrunedOnlyWithTheSnapshots(t *testing.T) {
	archiving := func(change func(*api.EtcdBackup)) *api.EtcdBackup {
		eb := archivedBackup("a") // maxBackups 4
		eb.Status.Archive = nil
		change(eb)
		return eb
	}
	for _, tc := range []struct {
		name string
		eb   *api.EtcdBackup
		want bool
	}{
		{"a periodic archived backup with maxBackups prunes its chunks", archiving(func(*api.EtcdBackup) {}), true},
		{"calendar retention alone prunes them too", archiving(func(eb *api.EtcdBackup) {
			eb.Spec.BackupPolicy.MaxBackups = 0
			eb.Spec.BackupPolicy.Retention = &api.BackupRetention{Daily: 7}
		}), true},
		{"snapshots kept forever keep the chunks forever", archiving(func(eb *api.EtcdBackup) { eb.Spec.BackupPolicy.MaxBackups = 0 }), false},
		{"an archive turned off still has its chunks pruned, as its status tells there are some", archiving(func(eb *api.EtcdBackup) {
			eb.Spec.BackupPolicy.Archive = nil
			eb.Status.Archive = &api.BackupArchiveStatus{Prefix: "bucket/a.archive/"}
		}), true},
		{"a backup that never archived lists no chunks", archiving(func(eb *api.EtcdBackup) { eb.Spec.BackupPolicy.Archive = nil }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := prunesArchive(tc.eb); got != tc.want {
				t.Errorf("prunesArchive = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSnapshotRevisionIsReadOnlyFromAPeriodicName(t *testing.T) {
	at := time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, key string
		want      int64
	}{
		{"a name backup.PeriodicKey wrote", backup.PeriodicKey("etcd/prod", 12345, at), 12345},
		{"a revision without a time is not read", "etcd/prod_v12345", 0},
		{"a word is not a revision", "etcd/prod_vlatest_2026-11-28-14:00:00", 0},
		{"another path sharing the prefix is not read as this one's", backup.PeriodicKey("etcd/prod_v2", 12345, at), 0},
		{"revision 0 is no revision", backup.PeriodicKey("etcd/prod", 0, at), 0},
		{"a revision past int64 is not read", "etcd/prod_v99999999999999999999_2026-11-28-14:00:00", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := snapshotRevision("etcd/prod", tc.key); got != tc.want {
				t.Errorf("snapshotRevision(%q) = %d, want %d", tc.key, got, tc.want)
			}
		})
	}
}

// prunedArchive is an archived EtcdBackup into gofakes3 whose store holds
// two periodic snapshots (revisions 200 and 300, what retention kept) and
// chunks from revision 101 on, and a controller with the real PruneArchive
// and a fake backup that stores nothing.
func prunedArchive(t *testing.T, extra ...string) (*fixture, backup.Store) {
	t.Helper()
	ctx := context.Background()
	srv := startS3(t)
	store, err := s3store.New(srv.StoreConfig("backups"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	keys := []string{backup.PeriodicKey("clusters/a", 200, at), backup.PeriodicKey("clusters/a", 300, at.Add(time.Hour))}
	for _, c := range [][2]int64{{101, 150}, {151, 199}, {200, 200}, {201, 240}, {241, 320}} {
		keys = append(keys, archiveChunkKey(c[0], c[1], at))
	}
	for _, k := range append(keys, extra...) {
		if _, _, err := store.Put(ctx, k, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	kube := kubefake.NewSimpleClientset(awsSecret("aws", backuptest.AWSSecretData()))
	backuper := &Backuper{Secrets: kube.CoreV1()}
	eb := archivedBackup("a")
	eb.Spec.S3 = &api.S3BackupSource{Path: "backups/clusters/a", AWSSecret: "aws", Endpoint: srv.URL, ForcePathStyle: true}
	f := newFixture(t, []*api.EtcdBackup{eb}, withArchives(newFakeArchives()), func(_ *fixture, c *Config) {
		c.PruneArchive = backuper.PruneArchive
	})
	return f, store
}

func archiveChunkKey(first, last int64, at time.Time) string {
	return archive.ChunkName("clusters/a"+api.ArchivePathSuffix, archive.Chunk{First: first, Last: last,
		Time: at.Add(time.Duration(last) * time.Second), SHA256: strings.Repeat("0", 64)})
}

func listKeys(t *testing.T, store backup.Store, prefix string) []string {
	t.Helper()
	objs, err := store.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	slices.Sort(keys)
	return keys
}

// TestAfterASnapshotTheChunksBeforeTheOldestKeptSnapshotGo: the chunks
// ending before revision 200 go; the one at 200 and everything after it,
// which a restore from the snapshot at 200 replays, stay, and so does an
// object that is not a chunk.
func TestAfterASnapshotTheChunksBeforeTheOldestKeptSnapshotGo(t *testing.T) {
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	notes := "clusters/a" + api.ArchivePathSuffix + "notes.txt"
	f, store := prunedArchive(t, notes)
	labels := map[string]string{"storage_type": "S3"}
	eventually(t, "two chunks are pruned", func() bool {
		return f.metric("etcd_backup_operator_archive_chunks_pruned_total", labels) == 2
	})
	want := []string{archiveChunkKey(200, 200, at), archiveChunkKey(201, 240, at), archiveChunkKey(241, 320, at), notes}
	slices.Sort(want)
	if got := listKeys(t, store, "clusters/a"+api.ArchivePathSuffix); !slices.Equal(got, want) {
		t.Errorf("left %v, want %v", got, want)
	}
	// A restore from the oldest kept snapshot can still replay to the end.
	chunks, err := archive.List(context.Background(), store, "clusters/a"+api.ArchivePathSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := archive.Covering(chunks, 200, 320); err != nil {
		t.Errorf("a restore from the snapshot at 200 lacks chunks: %v", err)
	}
	if n := f.events.count("Warning " + ReasonPruneFailed); n != 0 {
		t.Errorf("%d prune warnings: %v", n, f.events.list())
	}
}

// TestASnapshotOfUnknownRevisionKeepsEveryChunk: an object under the
// snapshots' prefix whose revision cannot be read may be the oldest
// snapshot, so nothing goes, and the user is told why.
func TestASnapshotOfUnknownRevisionKeepsEveryChunk(t *testing.T) {
	f, store := prunedArchive(t, "clusters/a_vlatest.db")
	before := listKeys(t, store, "clusters/a"+api.ArchivePathSuffix)
	eventually(t, "the warning", func() bool { return f.events.count("Warning "+ReasonPruneFailed) > 0 })
	if got := listKeys(t, store, "clusters/a"+api.ArchivePathSuffix); !slices.Equal(got, before) {
		t.Errorf("left %v, want every chunk %v", got, before)
	}
	if ev := f.events.list(); !slices.ContainsFunc(ev, func(e string) bool { return strings.Contains(e, "clusters/a_vlatest.db") }) {
		t.Errorf("no event names the snapshot of unknown revision: %v", ev)
	}
	if v := f.metric("etcd_backup_operator_archive_chunks_pruned_total", map[string]string{"storage_type": "S3"}); v > 0 {
		t.Errorf("archive_chunks_pruned_total = %v", v)
	}
}
