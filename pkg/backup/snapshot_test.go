package backup_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/version"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// dialTimeout keeps tests with dead endpoints short; loopback connects at once.
const dialTimeout = time.Second

func startEtcd(t testing.TB) *backuptest.Etcd {
	t.Helper()
	e, err := backuptest.StartEtcd(backuptest.EtcdOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func startS3(t testing.TB, backend *backuptest.DiscardBackend, bucket string) (*backuptest.S3, *s3store.Store) {
	t.Helper()
	var srv *backuptest.S3
	var err error
	if backend != nil {
		srv, err = backuptest.StartS3(backend, bucket)
	} else {
		srv, err = backuptest.StartS3(nil, bucket)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	store, err := s3store.New(srv.StoreConfig(bucket))
	if err != nil {
		t.Fatal(err)
	}
	return srv, store
}

func deadEndpoint(t testing.TB) string {
	t.Helper()
	ep, err := backuptest.DeadEndpoint()
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func readObject(t *testing.T, store backup.Store, key string) []byte {
	t.Helper()
	rc, size, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	body, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(body)) != size {
		t.Fatalf("Get said %d bytes, read %d", size, len(body))
	}
	return body
}

func TestOneShotBackupStoresAValidSnapshot(t *testing.T) {
	e := startEtcd(t)
	const keys = 300
	if err := e.Fill(context.Background(), "/test/", keys, 1024); err != nil {
		t.Fatal(err)
	}
	_, store := startS3(t, nil, "backups")

	res, err := backup.Run(context.Background(), backup.Job{
		Source: backup.Source{Endpoints: []string{e.Endpoint}, DialTimeout: dialTimeout},
		Store:  store,
		Bucket: "backups",
		Key:    "clusters/one",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != "backups/clusters/one" || res.Key != "clusters/one" {
		t.Errorf("stored at %q (key %q), want backups/clusters/one", res.Path, res.Key)
	}
	if res.EtcdVersion != version.Version {
		t.Errorf("etcd version %q, want %q", res.EtcdVersion, version.Version)
	}
	if res.Revision < keys+1 {
		t.Errorf("revision %d, want at least %d after %d puts", res.Revision, keys+1, keys)
	}

	body := readObject(t, store, "clusters/one")
	if int64(len(body)) != res.Size {
		t.Errorf("stored %d bytes, result says %d", len(body), res.Size)
	}
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != res.SHA256 {
		t.Errorf("stored sha256 %x, result says %s", sum, res.SHA256)
	}
	n, err := backuptest.CheckSnapshot(t.TempDir(), body)
	if err != nil {
		t.Fatalf("the stored object is not a valid snapshot: %v", err)
	}
	if n != keys {
		t.Fatalf("the snapshot's key bucket has %d entries, want %d", n, keys)
	}
}

func TestBackupSkipsADeadEndpoint(t *testing.T) {
	e := startEtcd(t)
	_, store := startS3(t, nil, "backups")
	dead := deadEndpoint(t)
	res, err := backup.Run(context.Background(), backup.Job{
		Source: backup.Source{Endpoints: []string{dead, e.Endpoint}, DialTimeout: dialTimeout},
		Store:  store,
		Bucket: "backups",
		Key:    "snap",
	})
	if err != nil {
		t.Fatalf("one dead endpoint out of two failed the backup: %v", err)
	}
	if res.Endpoint != e.Endpoint {
		t.Fatalf("snapshot taken from %s, want the live %s", res.Endpoint, e.Endpoint)
	}
}

func TestBackupWithAllEndpointsDeadNamesThem(t *testing.T) {
	_, store := startS3(t, nil, "backups")
	dead1, dead2 := deadEndpoint(t), deadEndpoint(t)
	_, err := backup.Run(context.Background(), backup.Job{
		Source: backup.Source{Endpoints: []string{dead1, dead2}, DialTimeout: dialTimeout},
		Store:  store,
		Bucket: "backups",
		Key:    "snap",
	})
	if err == nil {
		t.Fatal("backup of dead endpoints succeeded")
	}
	for _, ep := range []string{dead1, dead2} {
		if !strings.Contains(err.Error(), ep) {
			t.Errorf("error %q does not name %s", err, ep)
		}
	}
	if failure.IsPermanent(err) {
		t.Errorf("unreachable etcd marked permanent; it may come back: %v", err)
	}
	objs, lerr := store.List(context.Background(), "")
	if lerr != nil || len(objs) != 0 {
		t.Fatalf("objects left after a failed backup: %v (%v)", objs, lerr)
	}
}

func TestBackupWithoutEndpointsIsPermanent(t *testing.T) {
	_, store := startS3(t, nil, "backups")
	_, err := backup.Run(context.Background(), backup.Job{Store: store, Bucket: "backups", Key: "snap"})
	if err == nil || !failure.IsPermanent(err) {
		t.Fatalf("got %v, want a permanent error", err)
	}
}

func TestBackupToAnUnreachableStoreFails(t *testing.T) {
	e := startEtcd(t)
	store, err := s3store.New(s3store.Config{
		Bucket: "backups", Region: backuptest.Region, Endpoint: deadEndpoint(t), ForcePathStyle: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = backup.Run(ctx, backup.Job{
		Source: backup.Source{Endpoints: []string{e.Endpoint}, DialTimeout: dialTimeout},
		Store:  store, Bucket: "backups", Key: "snap",
	})
	if err == nil || !strings.Contains(err.Error(), "s3://backups/snap") {
		t.Fatalf("got %v, want an error naming the object", err)
	}
	if failure.IsPermanent(err) {
		t.Errorf("an unreachable store was marked permanent: %v", err)
	}
}

func TestPeriodicBackupsAreNamedAndPruned(t *testing.T) {
	e := startEtcd(t)
	_, store := startS3(t, nil, "backups")
	ctx := context.Background()
	src := backup.Source{Endpoints: []string{e.Endpoint}, DialTimeout: dialTimeout}

	// A one-shot backup at the same path as the periodic ones must survive pruning.
	if _, err := backup.Run(ctx, backup.Job{Source: src, Store: store, Bucket: "backups", Key: "c/snap"}); err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	var names []string
	for i := range 4 {
		// A new revision each time, and a second between backups.
		if err := e.Fill(ctx, "/round"+strconv.Itoa(i)+"/", 1, 10); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(time.Second)
		at := clock
		res, err := backup.Run(ctx, backup.Job{
			Source: src, Store: store, Bucket: "backups", Key: "c/snap",
			Periodic: true, MaxBackups: 2, Now: func() time.Time { return at },
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.PruneErr != nil {
			t.Fatal(res.PruneErr)
		}
		want := backup.PeriodicKey("c/snap", res.Revision, at)
		if res.Key != want || res.Path != "backups/"+want {
			t.Fatalf("periodic backup stored as %q (%q), want %q", res.Key, res.Path, want)
		}
		names = append(names, res.Key)
	}
	objs, err := store.List(ctx, "c/")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Key)
	}
	want := []string{"c/snap", names[2], names[3]}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("left in the bucket: %v, want %v", got, want)
	}
}

// BenchmarkBackup measures the snapshot-to-S3 path. The database size is
// BACKUP_BENCH_MB (default 64); hack/bench/backup/run.sh runs the 512 MiB case with
// etcd in another process, so that peak memory is the backup path's alone.
func BenchmarkBackup(b *testing.B) {
	mb, e := benchEtcd(b)
	defer e.Close()
	const valueSize = 256 << 10
	if err := e.Fill(context.Background(), "/bench/", mb<<20/valueSize, valueSize); err != nil {
		b.Fatal(err)
	}
	_, store := startS3(b, backuptest.NewDiscardBackend(), "bench")
	job := backup.Job{
		Source: backup.Source{Endpoints: []string{e.Endpoint}},
		Store:  store, Bucket: "bench", Key: "snap",
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := backup.Run(context.Background(), job)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(res.Size)
	}
}

// benchEtcd starts the etcd of a backup benchmark, with room for a database of
// BACKUP_BENCH_MB (default 64) MiB, and returns that size.
func benchEtcd(b *testing.B) (int, *backuptest.Etcd) {
	b.Helper()
	mb := 64
	if v := os.Getenv("BACKUP_BENCH_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("BACKUP_BENCH_MB=%q: %v", v, err)
		}
		mb = n
	}
	e, err := backuptest.StartEtcd(backuptest.EtcdOptions{Dir: b.TempDir(), QuotaBytes: int64(mb+256) << 20})
	if err != nil {
		b.Fatal(err)
	}
	return mb, e
}
