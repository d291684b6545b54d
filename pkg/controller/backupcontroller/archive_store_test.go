package backupcontroller

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/absstore"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/gcsstore"
)

// liveStores are the real servers of every kind of store, as an EtcdBackup
// names them: start starts one with the bucket (or container) "backups",
// points spec at "backups/<key>" on it, and returns the Secret the spec
// names (nil when it names none) and the bucket opened directly, for the
// test to look in. A machine without a server fails the test saying how to
// get it.
var liveStores = []struct {
	name  string
	start func(t *testing.T, spec *api.BackupSpec, key string) (*corev1.Secret, backup.Store)
}{
	{"S3 (versitygw)", func(t *testing.T, spec *api.BackupSpec, key string) (*corev1.Secret, backup.Store) {
		vgw, store := startVersityGW(t)
		spec.StorageType = api.BackupStorageTypeS3
		spec.BackupSource = api.BackupSource{S3: &api.S3BackupSource{Path: "backups/" + key, AWSSecret: "aws", Endpoint: vgw.URL, ForcePathStyle: true}}
		return awsSecret("aws", backuptest.AWSSecretData()), store
	}},
	{"ABS (Azurite)", func(t *testing.T, spec *api.BackupSpec, key string) (*corev1.Secret, backup.Store) {
		az, err := backuptest.StartAzurite(t.Context(), t.TempDir(), "backups")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(az.Close)
		store, err := absstore.New(az.StoreConfig("backups"))
		if err != nil {
			t.Fatal(err)
		}
		spec.StorageType = api.BackupStorageTypeABS
		spec.BackupSource = api.BackupSource{ABS: &api.ABSBackupSource{Path: "backups/" + key, ABSSecret: "azure", Endpoint: az.URL}}
		return awsSecret("azure", backuptest.ABSSecretData()), store
	}},
	{"GCS (fake-gcs-server)", func(t *testing.T, spec *api.BackupSpec, key string) (*corev1.Secret, backup.Store) {
		srv, err := backuptest.StartGCS("backups")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		store, err := gcsstore.New(t.Context(), srv.StoreConfig("backups"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		spec.StorageType = api.BackupStorageTypeGCS
		spec.BackupSource = api.BackupSource{GCS: &api.GCSBackupSource{Path: "backups/" + key, Endpoint: srv.URL}}
		return nil, store
	}},
}

// secrets are the objects of a fake clientset holding secret, if any.
func secrets(secret *corev1.Secret) []runtime.Object {
	if secret == nil {
		return nil
	}
	return []runtime.Object{secret}
}

// TestAnArchivedBackupIntoARealStoreCoversEveryRevisionAfterItsSnapshot runs
// the controller with the real Backuper over a real etcd and each kind of
// store: the snapshot and the chunks after it hold every change written,
// with the snapshots' compression, and the status follows the archive.
func TestAnArchivedBackupIntoARealStoreCoversEveryRevisionAfterItsSnapshot(t *testing.T) {
	for _, ls := range liveStores {
		t.Run(ls.name, func(t *testing.T) { testAnArchivedBackupCoversEveryRevision(t, ls.start) })
	}
}

func testAnArchivedBackupCoversEveryRevision(t *testing.T, start func(*testing.T, *api.BackupSpec, string) (*corev1.Secret, backup.Store)) {
	ctx := context.Background()
	e := startEtcd(t)
	client, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })

	eb := newBackup("live", 3600)
	secret, store := start(t, &eb.Spec, "clusters/live")
	kube := kubefake.NewSimpleClientset(secrets(secret)...)
	backuper := &Backuper{Secrets: kube.CoreV1(), DialTimeout: time.Second, VerifyDir: t.TempDir()}
	eb.Spec.EtcdEndpoints = []string{e.Endpoint}
	eb.Spec.Compression = api.BackupCompressionGzip
	eb.Spec.BackupPolicy.Archive = &api.BackupArchive{IntervalInSecond: 1}
	f := newFixture(t, []*api.EtcdBackup{eb}, func(f *fixture, c *Config) {
		backuper.Now = f.clock.Now
		c.Backup = backuper.Backup
		c.Archive = backuper.Archive
	})
	st := f.waitStatus("live", "the first snapshot", func(s api.BackupStatus) bool { return s.Succeeded || s.Reason != "" })
	if !st.Succeeded {
		t.Fatalf("the snapshot failed: %s", st.Reason)
	}

	// Writes after the snapshot, some in one transaction, some deleted.
	var head int64
	for i := range 30 {
		key := fmt.Sprintf("/registry/k%02d", i%10)
		switch i % 3 {
		case 0:
			resp, err := client.Put(ctx, key, strings.Repeat("v", i))
			if err != nil {
				t.Fatal(err)
			}
			head = resp.Header.Revision
		case 1:
			resp, err := client.Txn(ctx).Then(clientv3.OpPut(key, "a"), clientv3.OpPut(key+"-b", "b")).Commit()
			if err != nil {
				t.Fatal(err)
			}
			head = resp.Header.Revision
		default:
			resp, err := client.Delete(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			head = max(head, resp.Header.Revision)
		}
	}

	const prefix = "clusters/live" + api.ArchivePathSuffix
	var chunks []archive.Chunk
	eventually(t, fmt.Sprintf("chunks up to revision %d", head), func() bool {
		all, err := archive.List(ctx, store, prefix)
		if err != nil {
			t.Fatal(err)
		}
		chunks, err = archive.Covering(all, f.get("live").Status.EtcdRevision, head)
		return err == nil
	})
	// Every revision after the snapshot is in exactly one chunk, stored as
	// the snapshots are: gzip.
	seen := map[int64]bool{}
	for _, c := range chunks {
		rc, _, err := store.Get(ctx, c.Key)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(rc)
		_ = rc.Close()
		if !bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
			t.Errorf("chunk %s is not gzip, as the snapshots are", c.Key)
		}
		events, err := archive.ReadChunk(ctx, store, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			seen[ev.Revision()] = true
		}
	}
	for rev := f.get("live").Status.EtcdRevision + 1; rev <= head; rev++ {
		if !seen[rev] {
			t.Errorf("revision %d is in no chunk", rev)
		}
	}

	// The status follows within one status period.
	f.clock.Step(archiveStatusEvery)
	st = f.waitStatus("live", "the archive's progress", func(s api.BackupStatus) bool {
		return s.Archive != nil && s.Archive.LastRevision >= head
	})
	if st.Archive.Prefix != "backups/"+prefix || st.Archive.LastTime == nil {
		t.Errorf("status.archive = %+v", st.Archive)
	}
	// Nothing breaks the archive after the snapshot: a restore to the latest
	// change reaches its end.
	if p := st.Archive.RecoveryPoint; p == nil || p.Revision != st.Archive.LastRevision || p.SnapshotRevision != st.EtcdRevision || p.Time == nil {
		t.Errorf("status.archive.recoveryPoint = %s, want revision %d from snapshot %d", describePoint(p), st.Archive.LastRevision, st.EtcdRevision)
	}

	// A drill of that point, the snapshot read back from the store and the
	// chunks applied, is what the cluster held there.
	eb = f.get("live")
	point, ok := drillPoint(eb)
	if !ok {
		t.Fatalf("no point to drill in %+v", eb.Status)
	}
	done, err := backuper.DrillArchive(ctx, eb, point)
	if err != nil {
		t.Fatal(err)
	}
	live, err := client.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(point.Revision), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if done.Compacted || int64(done.Keys) != live.Count || done.Revisions != point.Revision-point.SnapshotRevision {
		t.Errorf("drilled %+v, want %d keys and %d revisions", done, live.Count, point.Revision-point.SnapshotRevision)
	}
}

// TestArchiveChunksGoWithTheSnapshotsTheyFollowedInARealStore runs the
// controller with the real Backuper over a real etcd and each kind of
// store, keeping two snapshots: once the third is stored and the first
// pruned, the chunks ending before the second snapshot are gone, and those
// from it on, which a restore from it replays, are all there.
func TestArchiveChunksGoWithTheSnapshotsTheyFollowedInARealStore(t *testing.T) {
	for _, ls := range liveStores {
		t.Run(ls.name, func(t *testing.T) { testArchiveChunksGoWithTheSnapshots(t, ls.start) })
	}
}

func testArchiveChunksGoWithTheSnapshots(t *testing.T, start func(*testing.T, *api.BackupSpec, string) (*corev1.Secret, backup.Store)) {
	ctx := context.Background()
	e := startEtcd(t)
	client, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })

	eb := newBackup("live", 3600)
	secret, store := start(t, &eb.Spec, "clusters/live")
	kube := kubefake.NewSimpleClientset(secrets(secret)...)
	backuper := &Backuper{Secrets: kube.CoreV1(), DialTimeout: time.Second, VerifyDir: t.TempDir()}
	eb.Spec.EtcdEndpoints = []string{e.Endpoint}
	eb.Spec.BackupPolicy.MaxBackups = 2
	eb.Spec.BackupPolicy.Archive = &api.BackupArchive{IntervalInSecond: 1}
	f := newFixture(t, []*api.EtcdBackup{eb}, func(f *fixture, c *Config) {
		backuper.Now = f.clock.Now
		c.Backup = backuper.Backup
		c.Archive = backuper.Archive
		c.PruneArchive = backuper.PruneArchive
	})
	first := f.waitStatus("live", "the first snapshot", func(s api.BackupStatus) bool { return s.Succeeded || s.Reason != "" })
	if !first.Succeeded {
		t.Fatalf("the snapshot failed: %s", first.Reason)
	}

	const prefix = "clusters/live" + api.ArchivePathSuffix
	// burst writes n keys and waits until the archive holds them, so that
	// each burst ends a chunk of its own.
	burst := func(tag string, n int) int64 {
		var head int64
		for i := range n {
			resp, err := client.Put(ctx, fmt.Sprintf("/registry/%s-%02d", tag, i), tag)
			if err != nil {
				t.Fatal(err)
			}
			head = resp.Header.Revision
		}
		eventually(t, fmt.Sprintf("chunks up to revision %d", head), func() bool {
			all, err := archive.List(ctx, store, prefix)
			if err != nil {
				t.Fatal(err)
			}
			_, err = archive.Covering(all, first.EtcdRevision, head)
			return err == nil
		})
		return head
	}
	// nextSnapshot moves the clock on until the runner stores a snapshot past
	// revision rev, one step at a time so that it rarely takes two.
	nextSnapshot := func(rev int64) api.BackupStatus {
		var st api.BackupStatus
		var stepped time.Time
		eventually(t, fmt.Sprintf("a snapshot after revision %d", rev), func() bool {
			st = f.get("live").Status
			if st.EtcdRevision > rev {
				return true
			}
			if time.Since(stepped) > 500*time.Millisecond {
				f.clock.Step(time.Hour)
				stepped = time.Now()
			}
			return false
		})
		return st
	}

	headA := burst("a", 10)
	headB := burst("b", 10)
	// A snapshot after the second burst: the runner may have stored
	// another one meanwhile (a retried attempt on a loaded machine), which
	// retention then prunes as the older one.
	second := nextSnapshot(headB - 1)
	headC := burst("c", 10)
	before, err := archive.List(ctx, store, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if before[0].Last > headA {
		t.Fatalf("the first chunk %s does not end within the first burst (up to %d): nothing to prune", before[0].Key, headA)
	}
	nextSnapshot(headC - 1)

	// The snapshots left decide; with maxBackups 2, the first is gone and the
	// second (or a later one, had the clock made two) is the oldest.
	var oldest int64
	var chunks []archive.Chunk
	eventually(t, "the chunks before the oldest kept snapshot are pruned", func() bool {
		oldest = 0
		for _, k := range listKeys(t, store, "clusters/live_v") {
			if r := snapshotRevision("clusters/live", k); r > 0 && (oldest == 0 || r < oldest) {
				oldest = r
			}
		}
		if chunks, err = archive.List(ctx, store, prefix); err != nil {
			t.Fatal(err)
		}
		return oldest >= second.EtcdRevision && len(chunks) > 0 && chunks[0].Last >= oldest
	})
	if oldest < headB {
		t.Fatalf("the oldest kept snapshot is at %d, before the second burst ended (%d)", oldest, headB)
	}
	// A restore from the oldest kept snapshot still replays to the last write.
	if _, err := archive.Covering(chunks, oldest, headC); err != nil {
		t.Errorf("a restore from the snapshot at %d lacks chunks: %v", oldest, err)
	}
	left := map[string]bool{}
	for _, c := range chunks {
		left[c.Key] = true
	}
	var pruned int
	for _, c := range before {
		switch {
		case c.Last >= oldest && !left[c.Key]:
			t.Errorf("chunk %s (to %d) was deleted, yet a restore from the snapshot at %d needs it", c.Key, c.Last, oldest)
		case c.Last < oldest && left[c.Key]:
			t.Errorf("chunk %s (to %d) stayed, though it ends before the oldest kept snapshot at %d", c.Key, c.Last, oldest)
		case c.Last < oldest:
			pruned++
		}
	}
	if pruned == 0 {
		t.Error("no chunk of the first burst went")
	}
	// Counted once the deletions returned, a moment after they are seen.
	eventually(t, fmt.Sprintf("archive_chunks_pruned_total counts the %d chunks", pruned), func() bool {
		return f.metric("etcd_backup_operator_archive_chunks_pruned_total", map[string]string{"storage_type": string(eb.Spec.StorageType)}) >= float64(pruned)
	})
	if n := f.events.count("Warning " + ReasonPruneFailed); n != 0 {
		t.Errorf("%d prune warnings: %v", n, f.events.list())
	}
}
