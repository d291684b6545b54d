package archive

import (
	"context"
	"slices"
	"testing"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/absstore"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/gcsstore"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
)

// archiveStores are the real servers of every kind of store a backup may
// name, as the snapshots' tests run them; each opens an empty bucket (or
// container). S3 and ABS list in pages of two keys, so that listing the
// chunks crosses pages; fake-gcs-server has no page size to set. A machine
// without a server fails the test saying how to get it.
var archiveStores = []struct {
	name string
	open func(t testing.TB) backup.Store
}{
	{"S3 (versitygw)", func(t testing.TB) backup.Store {
		ctx := context.Background()
		vgw, err := backuptest.StartVersityGW(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(vgw.Close)
		if err := vgw.CreateBucket(ctx, "archive"); err != nil {
			t.Fatal(err)
		}
		cfg := vgw.StoreConfig("archive")
		cfg.ListPageSize = 2
		s, err := s3store.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"ABS (Azurite)", func(t testing.TB) backup.Store {
		az, err := backuptest.StartAzurite(context.Background(), t.TempDir(), "archive")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(az.Close)
		cfg := az.StoreConfig("archive")
		cfg.ListPageSize = 2
		s, err := absstore.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"GCS (fake-gcs-server)", func(t testing.TB) backup.Store {
		srv, err := backuptest.StartGCS("archive")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		s, err := gcsstore.New(context.Background(), srv.StoreConfig("archive"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

// TestTheArchiveRoundTripsOnEveryStore stores an archive of a real etcd in
// each kind of store, compressed and encrypted as a backup may ask, and
// reads it back the ways its users do: the chunks written are listed in
// order and hold every change the cluster made; an archiver started again
// resumes after the last stored chunk; pruning after a snapshot deletes the
// chunks that end before it and leaves those a restore from it replays.
func TestTheArchiveRoundTripsOnEveryStore(t *testing.T) {
	codec := backuptest.Codecs()[len(backuptest.Codecs())-1]
	for _, st := range archiveStores {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			e := startEtcd(t)
			c := newClient(t, e.endpoint)
			store := st.open(t)
			cfg := small(c, store)
			cfg.Codec = codec

			// Written, listed and read back.
			first := archiveOnce(t, cfg, 150)
			before, evs := archived(t, store, cfg.Prefix, 0, codec.Key)
			if len(before) < 3 {
				t.Fatalf("%d chunks; the bounds should have closed more", len(before))
			}
			if end := before[len(before)-1].Last; end != first {
				t.Fatalf("the archive ends at %d, the cluster at %d", end, first)
			}
			sameEvents(t, evs, history(t, c, 0, first))

			// Resumed after the last archived revision: what was written while
			// no archiver ran is watched again, nothing twice, nothing skipped.
			write(t, c, "offline", 100)
			r := runArchiver(t, cfg)
			chunks, last := r.finish(t, c, 0)
			if next := chunks[len(before)]; next.First != first+1 {
				t.Fatalf("the first chunk after the restart starts at %d, not %d", next.First, first+1)
			}
			if p := r.a.Progress(); len(p.Spans) != 1 || p.Spans[0].Last != last {
				t.Fatalf("spans after the restart %+v, want one to revision %d", p.Spans, last)
			}

			// Pruned by retention: with the oldest snapshot kept at a chunk's
			// last revision, that chunk and those after it stay.
			keptAt := chunks[len(chunks)/2].Last
			e2, deleted, err := Prune(ctx, store, cfg.Prefix, kept(keptAt))
			mustOK(t, err)
			var want []string
			for _, ch := range chunks {
				if ch.Last < keptAt {
					want = append(want, ch.Key)
				}
			}
			if len(want) == 0 || !slices.Equal(deleted, want) {
				t.Fatalf("pruning deleted %d chunks (%v), want the %d ending before revision %d (%s)", len(deleted), deleted, len(want), keptAt, e2.Reason)
			}
			left, err := List(ctx, store, cfg.Prefix)
			mustOK(t, err)
			if len(left) != len(chunks)-len(want) {
				t.Fatalf("%d chunks left after pruning %d of %d", len(left), len(want), len(chunks))
			}
			// A restore from the kept snapshot still replays to the end.
			_, evs = archived(t, store, cfg.Prefix, keptAt, codec.Key)
			sameEvents(t, evs, history(t, c, keptAt, last))
			if reached, hole := Reach(Point{Revision: keptAt}, Spans(left)); reached.Revision != last || hole != nil {
				t.Fatalf("after pruning a restore from revision %d reaches %d (%v), want %d", keptAt, reached.Revision, hole, last)
			}
		})
	}
}
