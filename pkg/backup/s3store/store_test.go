package s3store_test

import (
	"bytes"
	"context"
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
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
)

func newStore(t *testing.T, tweak func(*s3store.Config)) (*s3store.Store, *backuptest.S3) {
	t.Helper()
	srv, err := backuptest.StartS3(nil, "bucket")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cfg := srv.StoreConfig("bucket")
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := s3store.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, srv
}

func randomBytes(n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// onlyReader hides every method but Read, as a snapshot stream does, so the
// uploader cannot seek or learn the size in advance.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestPutGetHeadDelete(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		size int
	}{
		{"an empty object", 0},
		{"a small object in one request", 1000},
		{"a large object in three parts", 11 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, _ := newStore(t, func(c *s3store.Config) { c.PartSize = 5 << 20 })
			data := randomBytes(tc.size)
			size, sum, err := store.Put(ctx, "dir/obj", onlyReader{bytes.NewReader(data)})
			if err != nil {
				t.Fatal(err)
			}
			if size != int64(len(data)) || sum != sha(data) {
				t.Fatalf("Put returned size %d sha %s, want %d %s", size, sum, len(data), sha(data))
			}
			info, err := store.Head(ctx, "dir/obj")
			if err != nil {
				t.Fatal(err)
			}
			if info.Key != "dir/obj" || info.Size != int64(len(data)) || info.LastModified.IsZero() {
				t.Fatalf("Head = %+v", info)
			}
			rc, n, err := store.Get(ctx, "dir/obj")
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			_ = rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(len(data)) || !bytes.Equal(got, data) {
				t.Fatalf("Get returned %d bytes (said %d), want the %d put", len(got), n, len(data))
			}
			if err := store.Delete(ctx, "dir/obj"); err != nil {
				t.Fatal(err)
			}
			if _, err := store.Head(ctx, "dir/obj"); !errors.Is(err, backup.ErrNotFound) {
				t.Fatalf("Head after Delete: %v, want ErrNotFound", err)
			}
		})
	}
}

func TestPutReplacesAnExistingObject(t *testing.T) {
	ctx := context.Background()
	store, _ := newStore(t, nil)
	for _, body := range []string{"first version", "second"} {
		if _, _, err := store.Put(ctx, "k", strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	rc, _, err := store.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	if got, _ := io.ReadAll(rc); string(got) != "second" {
		t.Fatalf("got %q", got)
	}
}

func TestListFollowsEveryPage(t *testing.T) {
	ctx := context.Background()
	store, _ := newStore(t, func(c *s3store.Config) { c.ListPageSize = 2 })
	var want []string
	for i := range 7 {
		key := fmt.Sprintf("p/snap_v%d_2024-01-01-00:00:00", i)
		want = append(want, key)
		if _, _, err := store.Put(ctx, key, strings.NewReader(key)); err != nil {
			t.Fatal(err)
		}
	}
	for _, other := range []string{"p", "q/snap_v1_2024-01-01-00:00:00"} {
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
		t.Fatalf("List over pages of 2 = %v, want %v", got, want)
	}
}

func TestPruneOverS3KeepsTheOneShotObject(t *testing.T) {
	ctx := context.Background()
	store, _ := newStore(t, func(c *s3store.Config) { c.ListPageSize = 2 })
	keys := []string{"c/snap", "c/snap_v9_2024-01-01-00:00:00", "c/snap_v10_2024-01-01-00:00:00", "c/snap_v10_2024-01-01-00:00:05", "c/snap_v8_2024-01-02-00:00:00"}
	for _, k := range keys {
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
}

func TestMissingObjectsAndBuckets(t *testing.T) {
	ctx := context.Background()
	store, srv := newStore(t, nil)
	if _, _, err := store.Get(ctx, "nope"); !errors.Is(err, backup.ErrNotFound) {
		t.Errorf("Get of a missing key: %v, want ErrNotFound", err)
	}
	if _, err := store.Head(ctx, "nope"); !errors.Is(err, backup.ErrNotFound) {
		t.Errorf("Head of a missing key: %v, want ErrNotFound", err)
	}
	if err := store.Delete(ctx, "nope"); err != nil {
		t.Errorf("Delete of a missing key: %v", err)
	}

	cfg := srv.StoreConfig("no-such-bucket")
	other, err := s3store.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = other.Put(ctx, "k", strings.NewReader("x"))
	if err == nil || !strings.Contains(err.Error(), `bucket "no-such-bucket" does not exist`) {
		t.Fatalf("Put into a missing bucket: %v", err)
	}
}

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	if _, err := s3store.New(s3store.Config{Region: "us-east-1"}); err == nil {
		t.Error("no bucket accepted")
	}
	if _, err := s3store.New(s3store.Config{Bucket: "b"}); err == nil {
		t.Error("no region accepted")
	}
}
