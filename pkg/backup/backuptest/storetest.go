package backuptest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

// StoreOptions describe the store under test to TestStore.
type StoreOptions struct {
	// Open returns an empty store on a fresh container or bucket. It should use
	// parts (blocks, chunks) of PartSize bytes and list pages of at most 2 keys,
	// so that the tests below cross both boundaries.
	Open     func(t *testing.T) backup.Store
	PartSize int
}

// TestStore checks what every backup.Store must do, against the real server
// behind opts.Open: the same tests run on S3, ABS and GCS.
func TestStore(t *testing.T, opts StoreOptions) {
	ctx := t.Context()
	t.Run("put, head, get and delete objects of every shape", func(t *testing.T) {
		store := opts.Open(t)
		for _, size := range []int{0, 1000, 2*opts.PartSize + 12345} {
			data := RandomBytes(size)
			key := fmt.Sprintf("dir/obj-%d", size)
			n, sum, err := store.Put(ctx, key, OnlyReader{bytes.NewReader(data)})
			if err != nil {
				t.Fatalf("put %d bytes: %v", size, err)
			}
			if n != int64(size) || sum != SHA256Hex(data) {
				t.Fatalf("put %d bytes: returned size %d sha %s, want %s", size, n, sum, SHA256Hex(data))
			}
			info, err := store.Head(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if info.Key != key || info.Size != int64(size) || info.LastModified.IsZero() {
				t.Fatalf("Head = %+v", info)
			}
			if got := mustGet(t, store, key); !bytes.Equal(got, data) {
				t.Fatalf("get returned %d bytes, want the %d put", len(got), size)
			}
			if err := store.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			if _, err := store.Head(ctx, key); !errors.Is(err, backup.ErrNotFound) {
				t.Fatalf("head after delete: %v, want ErrNotFound", err)
			}
		}
	})

	t.Run("put replaces an existing object", func(t *testing.T) {
		store := opts.Open(t)
		for _, body := range []string{"first version", "second"} {
			if _, _, err := store.Put(ctx, "k", strings.NewReader(body)); err != nil {
				t.Fatal(err)
			}
		}
		if got := mustGet(t, store, "k"); string(got) != "second" {
			t.Fatalf("got %q", got)
		}
	})

	t.Run("a failed upload leaves the object it would have replaced", func(t *testing.T) {
		store := opts.Open(t)
		good := RandomBytes(1000)
		if _, _, err := store.Put(ctx, "snap", bytes.NewReader(good)); err != nil {
			t.Fatal(err)
		}
		for _, failAt := range []int{10, opts.PartSize + 10, 2*opts.PartSize + 10} {
			failure := errors.New("stream broke")
			_, _, err := store.Put(ctx, "snap", &FailingReader{R: bytes.NewReader(RandomBytes(3 * opts.PartSize)), After: failAt, Err: failure})
			if !errors.Is(err, failure) {
				t.Fatalf("put failing after %d bytes returned %v, want the reader's error", failAt, err)
			}
			if got := mustGet(t, store, "snap"); !bytes.Equal(got, good) {
				t.Fatalf("after an upload failing at byte %d the object holds %d bytes, want the good %d", failAt, len(got), len(good))
			}
			// Nor is anything left that a restore or the pruning could pick up.
			objs, err := store.List(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != 1 || objs[0].Key != "snap" {
				t.Fatalf("after a failed upload the store lists %+v", objs)
			}
		}
	})

	t.Run("a failed upload of a new key creates nothing", func(t *testing.T) {
		store := opts.Open(t)
		_, _, err := store.Put(ctx, "new", &FailingReader{R: bytes.NewReader(RandomBytes(2 * opts.PartSize)), After: opts.PartSize + 1, Err: errors.New("x")})
		if err == nil {
			t.Fatal("no error")
		}
		if _, err := store.Head(ctx, "new"); !errors.Is(err, backup.ErrNotFound) {
			t.Fatalf("head of a key whose upload failed: %v, want ErrNotFound", err)
		}
	})

	t.Run("list follows every page and only the prefix", func(t *testing.T) {
		store := opts.Open(t)
		var want []string
		for i := range 5 {
			key := fmt.Sprintf("p/snap_v%d_2024-01-01-00:00:00", i)
			want = append(want, key)
			if _, _, err := store.Put(ctx, key, strings.NewReader(key)); err != nil {
				t.Fatal(err)
			}
		}
		// Not "p": a file system backend (versitygw's posix) cannot hold both p and p/x.
		for _, other := range []string{"p0", "q/snap_v1_2024-01-01-00:00:00"} {
			if _, _, err := store.Put(ctx, other, strings.NewReader("x")); err != nil {
				t.Fatal(err)
			}
		}
		objs, err := store.List(ctx, "p/")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, o.Key)
			if o.Size != int64(len(o.Key)) {
				t.Errorf("%s: size %d, want %d", o.Key, o.Size, len(o.Key))
			}
		}
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("List = %v, want %v", got, want)
		}
	})

	t.Run("prune keeps the newest periodic backups and the one-shot object", func(t *testing.T) {
		store := opts.Open(t)
		for _, k := range []string{"c/snap", "c/snap_v9_2024-01-01-00:00:00", "c/snap_v10_2024-01-01-00:00:00",
			"c/snap_v10_2024-01-01-00:00:05", "c/snap_v8_2024-01-02-00:00:00"} {
			if _, _, err := store.Put(ctx, k, strings.NewReader(k)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := backup.Prune(ctx, store, "c/snap", backup.Retention{MaxBackups: 2}); err != nil {
			t.Fatal(err)
		}
		objs, err := store.List(ctx, "c/")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, o.Key)
		}
		sort.Strings(got)
		want := []string{"c/snap", "c/snap_v10_2024-01-01-00:00:00", "c/snap_v10_2024-01-01-00:00:05"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("left %v, want %v", got, want)
		}
	})

	t.Run("compressed and encrypted uploads round trip", func(t *testing.T) { testCodecs(t, opts) })

	t.Run("missing objects are ErrNotFound and deleting one is no error", func(t *testing.T) {
		store := opts.Open(t)
		if _, _, err := store.Get(ctx, "nope"); !errors.Is(err, backup.ErrNotFound) {
			t.Errorf("Get of a missing key: %v, want ErrNotFound", err)
		}
		if _, err := store.Head(ctx, "nope"); !errors.Is(err, backup.ErrNotFound) {
			t.Errorf("Head of a missing key: %v, want ErrNotFound", err)
		}
		if err := store.Delete(ctx, "nope"); err != nil {
			t.Errorf("Delete of a missing key: %v", err)
		}
	})
}

func mustGet(t *testing.T, store backup.Store, key string) []byte {
	t.Helper()
	rc, n, err := store.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(data)) {
		t.Fatalf("get %s said %d bytes and read %d", key, n, len(data))
	}
	return data
}

// RandomBytes is n reproducible pseudo-random bytes.
func RandomBytes(n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// SHA256Hex is the hex sha256 of b.
func SHA256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// OnlyReader hides every method but Read, as a snapshot stream does, so an
// uploader cannot seek or learn the size in advance.
type OnlyReader struct{ R io.Reader }

func (o OnlyReader) Read(p []byte) (int, error) { return o.R.Read(p) }

// FailingReader yields After bytes of R, then Err: a snapshot stream that breaks.
type FailingReader struct {
	R     io.Reader
	After int
	Err   error
	read  int
}

func (f *FailingReader) Read(p []byte) (int, error) {
	if f.read >= f.After {
		return 0, f.Err
	}
	if len(p) > f.After-f.read {
		p = p[:f.After-f.read]
	}
	n, err := f.R.Read(p)
	f.read += n
	return n, err
}
