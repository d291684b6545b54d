package backup_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/absstore"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/gcsstore"
)

// verifyStores are the real servers verification reads back from.
var verifyStores = []struct {
	name string
	open func(t *testing.T) backup.Store
}{
	{"S3", func(t *testing.T) backup.Store {
		_, s := startS3(t, nil, "verify")
		return s
	}},
	{"ABS", func(t *testing.T) backup.Store {
		az, err := backuptest.StartAzurite(context.Background(), t.TempDir(), "verify")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(az.Close)
		s, err := absstore.New(az.StoreConfig("verify"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"GCS", func(t *testing.T) backup.Store {
		srv, err := backuptest.StartGCS("verify")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		s, err := gcsstore.New(context.Background(), srv.StoreConfig("verify"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

// withTrailer appends the sha256 that etcd's Snapshot RPC appends to a database.
func withTrailer(db []byte) []byte {
	sum := sha256.Sum256(db)
	return append(append([]byte(nil), db...), sum[:]...)
}

// boltWithout is a bbolt database with only the given buckets, each with one key.
func boltWithout(t *testing.T, buckets ...string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range buckets {
			b, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			if err := b.Put([]byte("k"), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestVerifyReadsABackupBackFromEveryStore(t *testing.T) {
	ctx := t.Context()
	e := startEtcd(t)
	const keys = 300
	if err := e.Fill(ctx, "k/", keys, 2048); err != nil {
		t.Fatal(err)
	}
	for _, st := range verifyStores {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t)
			snap, err := backup.SaveSnapshot(ctx, backup.Source{Endpoints: []string{e.Endpoint}, DialTimeout: dialTimeout}, store,
				func(int64) string { return "good.db" })
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			v, err := backup.Verify(ctx, store, snap.Key, nil, dir)
			if err != nil {
				t.Fatalf("a good backup failed verification: %v", err)
			}
			if v.SHA256 != snap.SHA256 || v.Size != snap.Size {
				t.Errorf("verified %d bytes with sha256 %s, stored %d with %s", v.Size, v.SHA256, snap.Size, snap.SHA256)
			}
			// Nothing writes after Fill, so the snapshot holds the revision the
			// member reported: one per key, after revision 1 of an empty etcd.
			if v.Revision != snap.Revision || v.Revision != keys+1 {
				t.Errorf("verified revision %d, snapshot taken at %d, want %d", v.Revision, snap.Revision, keys+1)
			}
			if v.TotalKeys <= keys {
				t.Errorf("total keys %d, want more than the %d written (meta, members and the rest come on top)", v.TotalKeys, keys)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("the temporary file stayed behind: %v", left)
			}

			good := getAll(t, store, snap.Key)
			db := good[:len(good)-sha256.Size]
			flipped := bytes.Clone(good)
			flipped[len(flipped)/2] ^= 0xff
			damagedPages := bytes.Clone(db)
			// Pages 0 and 1 are bbolt's meta pages; overwrite the data pages
			// after them, then give the result a matching trailer, as a snapshot
			// damaged before etcd hashed it would have.
			for i := 2 * 4096; i < len(damagedPages) && i < 64*4096; i++ {
				damagedPages[i] = 0xa5
			}
			for _, c := range []struct {
				name, want string
				data       []byte
			}{
				{"a flipped byte", "trailing sha256 does not match", flipped},
				{"cut short", "trailing sha256 does not match", good[:len(good)/2]},
				{"shorter than a trailer", "shorter than the 32-byte sha256 trailer", good[:10]},
				{"not a database, with a matching trailer", "not a bbolt database", withTrailer(bytes.Repeat([]byte("not etcd "), 4000))},
				{"damaged pages, with a matching trailer", "bbolt", withTrailer(damagedPages)},
				{"a bbolt database that etcd did not write", `no "key" bucket`, withTrailer(boltWithout(t, "other"))},
			} {
				t.Run(c.name, func(t *testing.T) {
					key := "bad/" + strings.ReplaceAll(c.name, " ", "-")
					if _, _, err := store.Put(ctx, key, bytes.NewReader(c.data)); err != nil {
						t.Fatal(err)
					}
					_, err := backup.Verify(ctx, store, key, nil, dir)
					if !errors.Is(err, backup.ErrVerification) || !strings.Contains(err.Error(), c.want) {
						t.Fatalf("Verify = %v, want ErrVerification saying %q", err, c.want)
					}
					if left, _ := os.ReadDir(dir); len(left) != 0 {
						t.Errorf("the temporary file stayed behind: %v", left)
					}
				})
			}
			t.Run("missing", func(t *testing.T) {
				_, err := backup.Verify(ctx, store, "no-such-backup", nil, dir)
				if !errors.Is(err, backup.ErrVerification) || !strings.Contains(err.Error(), "does not exist") {
					t.Fatalf("Verify = %v", err)
				}
			})
		})
	}
}

func TestVerifyNeedsAWritableDirectory(t *testing.T) {
	_, store := startS3(t, nil, "verify")
	_, err := backup.Verify(t.Context(), store, "k", nil, filepath.Join(t.TempDir(), "missing"))
	if err == nil || errors.Is(err, backup.ErrVerification) || !strings.Contains(err.Error(), "temporary file") {
		t.Fatalf("Verify = %v, want an error about the temporary file that does not blame the backup", err)
	}
}

func getAll(t *testing.T, store backup.Store, key string) []byte {
	t.Helper()
	rc, _, err := store.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// damagingStore returns every object with one byte flipped, as a store whose
// disk went bad after the upload would.
type damagingStore struct{ backup.Store }

func (d damagingStore) Get(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	rc, size, err := d.Store.Get(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	data, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		return nil, 0, err
	}
	if len(data) > 0 {
		data[len(data)/3] ^= 1
	}
	return io.NopCloser(bytes.NewReader(data)), size, nil
}

func TestRunVerifiesBeforePruning(t *testing.T) {
	ctx := t.Context()
	e := startEtcd(t)
	if err := e.Fill(ctx, "k/", 5, 10); err != nil {
		t.Fatal(err)
	}
	_, store := startS3(t, nil, "bucket")
	tick := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	job := backup.Job{
		Source: backup.Source{Endpoints: []string{e.Endpoint}, DialTimeout: dialTimeout},
		Store:  store, Bucket: "bucket", Key: "etcd.backup",
		Periodic: true, MaxBackups: 1, Verify: true, VerifyDir: t.TempDir(),
		Now: func() time.Time { tick = tick.Add(time.Minute); return tick },
	}
	first, err := backup.Run(ctx, job)
	if err != nil || first.VerifyErr != nil {
		t.Fatalf("Run = %v, verification %v", err, first.VerifyErr)
	}
	if first.Verified == nil || first.Verified.SHA256 != first.SHA256 || first.Verified.Revision != first.Revision {
		t.Fatalf("Verified = %+v, stored %+v", first.Verified, first.Snapshot)
	}
	if err := e.Fill(ctx, "more/", 3, 10); err != nil {
		t.Fatal(err)
	}
	job.Store = damagingStore{store}
	second, err := backup.Run(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(second.VerifyErr, backup.ErrVerification) || len(second.Pruned) != 0 {
		t.Fatalf("a backup that reads back damaged: VerifyErr %v, pruned %v", second.VerifyErr, second.Pruned)
	}
	if _, err := store.Head(ctx, first.Key); err != nil {
		t.Fatalf("the older, verified backup was deleted while the newest was in doubt: %v", err)
	}
}

// BenchmarkVerify measures reading a backup back from Azurite (another process,
// so its memory is not counted) and checking it. The database size is
// BACKUP_BENCH_MB (default 64). It reports the peak Go heap in use while
// verifying, sampled every 10 ms, next to the heap before it: the difference must
// not grow with the database.
func BenchmarkVerify(b *testing.B) {
	mb, e := benchEtcd(b)
	closeEtcd := sync.OnceFunc(e.Close)
	defer closeEtcd()
	const valueSize = 256 << 10
	if err := e.Fill(context.Background(), "/bench/", mb<<20/valueSize, valueSize); err != nil {
		b.Fatal(err)
	}
	az, err := backuptest.StartAzurite(context.Background(), b.TempDir(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer az.Close()
	store, err := absstore.New(az.StoreConfig("bench"))
	if err != nil {
		b.Fatal(err)
	}
	snap, err := backup.SaveSnapshot(context.Background(), backup.Source{Endpoints: []string{e.Endpoint}}, store, func(int64) string { return "snap" })
	if err != nil {
		b.Fatal(err)
	}
	// Only the verification's memory counts: etcd goes before the measurement.
	closeEtcd()
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	dir := b.TempDir()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := backup.Verify(context.Background(), store, "snap", nil, dir)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(v.Size)
	}
	b.StopTimer()
	close(stop)
	<-sampled
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(base.HeapInuse)/(1<<20), "heap-before-MiB")
	b.Logf("verified %d MiB snapshot (revision %d)", snap.Size>>20, snap.Revision)
}
