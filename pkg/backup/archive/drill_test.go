package archive

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

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
	opts := func(rev int64) DrillOptions {
		return DrillOptions{Store: store, Prefix: "archive/", Snapshot: snap.Key, SnapshotRevision: snap.Revision,
			Revision: rev, Dir: t.TempDir(), Client: src}
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

	t.Run("a chunk that says another value than the cluster wrote fails, naming the key", func(t *testing.T) {
		last := chunks[len(chunks)-1]
		evs, err := ReadChunk(ctx, store, last, nil)
		mustOK(t, err)
		// The last put of a key nothing after it touches again.
		var changed string
		later := map[string]bool{}
		for i := len(evs) - 1; i >= 0 && changed == ""; i-- {
			k := string(evs[i].Kv.Key)
			if evs[i].Type == mvccpb.PUT && !later[k] {
				evs[i].Kv.Value = append(bytes.Clone(evs[i].Kv.Value), "-not-written"...)
				changed = k
			}
			later[k] = true
		}
		if changed == "" {
			t.Fatal("the last chunk has no put to change")
		}
		forged, stored, err := BuildChunk("archive/", backup.Codec{}, last.First, evs)
		mustOK(t, err)
		_, _, err = store.Put(ctx, forged.Key, bytes.NewReader(stored))
		mustOK(t, err)
		mustOK(t, store.Delete(ctx, last.Key))

		_, err = Drill(ctx, opts(newest))
		if !errors.Is(err, ErrDrillMismatch) || !strings.Contains(err.Error(), changed) {
			t.Fatalf("a forged chunk gave %v, want a mismatch naming %q", err, changed)
		}
	})

	t.Run("a snapshot holding more than its named revision is read as the cluster was at that revision", func(t *testing.T) {
		write(t, src, "c", 20)
		later, _ := saveSnapshot(t, e.endpoint, store)
		if later.Revision <= newest {
			t.Fatalf("the second snapshot is at %d, not past %d", later.Revision, newest)
		}
		for _, rev := range []int64{snap.Revision, snap.Revision + 37, newest} {
			got, err := backup.SnapshotKeys(ctx, store, later.Key, nil, t.TempDir(), rev)
			mustOK(t, err)
			want := keyValues(t, src, rev)
			if len(got) != len(want) {
				t.Fatalf("at revision %d the snapshot holds %d keys, the cluster held %d", rev, len(got), len(want))
			}
			for k, v := range want {
				if got[k] != sha256.Sum256([]byte(v)) {
					t.Fatalf("at revision %d key %q differs from what the cluster held", rev, k)
				}
			}
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
}
