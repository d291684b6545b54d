package archive

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

func TestDrillComparesTheRestoredPointWithTheCluster(t *testing.T) {
	ctx := t.Context()
	e := startEtcd(t)
	src := newClient(t, e.endpoint)
	store := startStore(t)
	r := runArchiver(t, small(src, store))

	write(t, src, "a", 100)
	snap, _ := saveSnapshot(t, e.endpoint, store)
	newest := write(t, src, "b", 150)
	r.waitArchived(t, newest)
	mustOK(t, r.stopped())
	chunks, err := List(ctx, store, "archive/")
	mustOK(t, err)
	point, hole := Reach(Point{Revision: snap.Revision}, Spans(chunks))
	if point.Revision != newest || hole != nil {
		t.Fatalf("the newest point is %d (%v), want %d", point.Revision, hole, newest)
	}
	scratchDir := t.TempDir()
	opts := func(rev int64) DrillOptions {
		return DrillOptions{Store: store, Prefix: "archive/", Snapshot: snap.Key, SnapshotRevision: snap.Revision,
			Revision: rev, Dir: scratchDir, Client: src}
	}

	for _, tc := range []struct {
		name     string
		revision int64
	}{
		{"the newest point, the snapshot and every chunk after it, is what the cluster held there", newest},
		{"a point inside the archive is what the cluster held there", snap.Revision + 37},
		{"the snapshot's own revision needs no chunk", snap.Revision},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, err := Drill(ctx, opts(tc.revision))
			mustOK(t, err)
			if want := len(keyValues(t, src, tc.revision)); done.Keys != want || done.Compacted {
				t.Fatalf("compared %d keys (compacted %v), the cluster held %d", done.Keys, done.Compacted, want)
			}
			if done.Revisions != tc.revision-snap.Revision {
				t.Fatalf("replayed %d revisions, want %d", done.Revisions, tc.revision-snap.Revision)
			}
		})
	}

	t.Run("a snapshot etcd cannot start on fails, though every key in it is right", func(t *testing.T) {
		// A lease record the member's database held damaged: the snapshot's
		// trailer is right, since etcd hashes what it sends, and its "key"
		// bucket reads as the cluster's, but etcd's restore of it does not
		// serve. Only a drill through etcd tells.
		damaged := damageLease(t, store, snap.Key)
		o := opts(snap.Revision)
		o.Snapshot = damaged
		_, err := Drill(ctx, o)
		if err == nil || !strings.Contains(err.Error(), "lease") {
			t.Fatalf("a snapshot with a damaged lease record gave %v, want etcd's failure on it", err)
		}
	})

	// The last put of a key nothing after it touches again, in the last
	// chunk: not the chunk's last event, so that the chunk still ends at
	// the same revision.
	last := chunks[len(chunks)-1]
	evs, err := ReadChunk(ctx, store, last, nil)
	mustOK(t, err)
	target, changed := -1, ""
	later := map[string]bool{}
	for i := len(evs) - 1; i >= 0 && changed == ""; i-- {
		k := string(evs[i].Kv.Key)
		if i < len(evs)-1 && evs[i].Type == mvccpb.PUT && !later[k] {
			target, changed = i, k
		}
		later[k] = true
	}
	if changed == "" {
		t.Fatal("the last chunk has no put to change")
	}
	for _, tc := range []struct {
		name   string
		forged func() []Event
	}{
		{"a chunk that lost a change fails, naming the key", func() []Event {
			return append(slices.Clone(evs[:target]), evs[target+1:]...)
		}},
		{"a chunk that says another value than the cluster wrote fails, naming the key", func() []Event {
			forged := slices.Clone(evs)
			kv := *forged[target].Kv
			kv.Value = append(bytes.Clone(kv.Value), "-not-written"...)
			forged[target].Kv = &kv
			return forged
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replaceChunk(t, store, last, tc.forged())
			defer replaceChunk(t, store, last, evs)
			_, err := Drill(ctx, opts(newest))
			if !errors.Is(err, ErrDrillMismatch) || !strings.Contains(err.Error(), changed) {
				t.Fatalf("a forged chunk gave %v, want a mismatch naming %q", err, changed)
			}
		})
	}

	t.Run("a snapshot holding more than its named revision is compared with the cluster at its own revision", func(t *testing.T) {
		write(t, src, "c", 20)
		later, _ := saveSnapshot(t, e.endpoint, store)
		if later.Revision <= newest {
			t.Fatalf("the second snapshot is at %d, not past %d", later.Revision, newest)
		}
		// Named as if taken at newest, as a snapshot taken while the
		// writes of c went on would be: a restore of the newest change
		// keeps it as it is.
		o := opts(newest)
		o.Snapshot, o.SnapshotRevision = later.Key, newest
		done, err := Drill(ctx, o)
		mustOK(t, err)
		if want := len(keyValues(t, src, later.Revision)); done.Revision != later.Revision || done.Keys != want || done.Revisions != 0 {
			t.Fatalf("drilled %+v, want revision %d with %d keys and nothing replayed", done, later.Revision, want)
		}
	})

	t.Run("a point the cluster compacted is said to be so, neither passed nor failed", func(t *testing.T) {
		resp, err := src.Put(ctx, "after-the-point", "x")
		mustOK(t, err)
		_, err = src.Compact(ctx, resp.Header.Revision)
		mustOK(t, err)
		done, err := Drill(ctx, opts(newest))
		mustOK(t, err)
		if !done.Compacted || done.Keys != 0 {
			t.Fatalf("drilled %+v, want compacted", done)
		}
	})
	entries, err := os.ReadDir(scratchDir)
	mustOK(t, err)
	if len(entries) != 0 {
		t.Fatalf("the drills left %d entries in their directory, want none", len(entries))
	}
}

// replaceChunk stores in place of c a chunk of evs, under the name they give.
func replaceChunk(t *testing.T, store backup.Store, c Chunk, evs []Event) {
	t.Helper()
	ctx := t.Context()
	all, err := List(ctx, store, "archive/")
	mustOK(t, err)
	for _, old := range all {
		if old.First == c.First {
			mustOK(t, store.Delete(ctx, old.Key))
		}
	}
	forged, stored, err := BuildChunk("archive/", backup.Codec{}, c.First, evs)
	mustOK(t, err)
	_, _, err = store.Put(ctx, forged.Key, bytes.NewReader(stored))
	mustOK(t, err)
}

// damageLease stores, next to the snapshot at key, a copy whose first lease
// record does not decode, with a trailer that matches it, and returns the
// copy's key.
func damageLease(t *testing.T, store backup.Store, key string) string {
	t.Helper()
	ctx := t.Context()
	rc, _, err := store.Get(ctx, key)
	mustOK(t, err)
	data, err := io.ReadAll(rc)
	_ = rc.Close()
	mustOK(t, err)
	path := filepath.Join(t.TempDir(), "db")
	mustOK(t, os.WriteFile(path, data[:len(data)-sha256.Size], 0o600))
	db, err := bolt.Open(path, 0o600, nil)
	mustOK(t, err)
	mustOK(t, db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("lease"))
		if b == nil {
			return errors.New("the snapshot has no lease bucket")
		}
		k, _ := b.Cursor().First()
		if k == nil {
			return errors.New("the snapshot holds no lease")
		}
		return b.Put(bytes.Clone(k), []byte{0xff, 0xff, 0xff})
	}))
	mustOK(t, db.Close())
	damaged, err := os.ReadFile(path)
	mustOK(t, err)
	sum := sha256.Sum256(damaged)
	_, _, err = store.Put(ctx, key+"-damaged-lease", bytes.NewReader(append(damaged, sum[:]...)))
	mustOK(t, err)
	return key + "-damaged-lease"
}
