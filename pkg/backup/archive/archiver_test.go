package archive

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
)

// small makes many chunks of few writes: both the time and the size bound
// close some.
func small(c *clientv3.Client, store backup.Store) Config {
	return Config{Client: c, Store: store, Prefix: "archive/", Interval: 100 * time.Millisecond, MaxChunkBytes: 2 << 10}
}

func TestArchiveHoldsEveryWrite(t *testing.T) {
	for _, codec := range []backup.Codec{{}, backuptest.Codecs()[len(backuptest.Codecs())-1]} {
		t.Run(backuptest.CodecName(codec), func(t *testing.T) {
			e := startEtcd(t)
			c := newClient(t, e.endpoint)
			store := startStore(t)
			cfg := small(c, store)
			cfg.Codec = codec
			r := runArchiver(t, cfg)

			written := write(t, c, "a", 300)
			r.waitArchived(t, written)
			p := r.a.Progress()
			if p.Revision != written || p.LagRevisions != 0 || p.PendingBytes != 0 || p.Time.IsZero() {
				t.Fatalf("progress once every write is stored: %+v", p)
			}

			chunks, last := r.finish(t, c, 0)
			if len(chunks) < 3 {
				t.Fatalf("%d chunks; the bounds should have closed more", len(chunks))
			}
			if chunks[len(chunks)-1].Last != last {
				t.Fatalf("the archive ends at %d, the cluster at %d", chunks[len(chunks)-1].Last, last)
			}
		})
	}
}

func TestArchiveResumesAfterItsLastChunk(t *testing.T) {
	e := startEtcd(t)
	c := newClient(t, e.endpoint)
	store := startStore(t)

	first := archiveOnce(t, small(c, store), 100)
	before, _ := archived(t, store, "archive/", 0, nil)

	write(t, c, "b", 100) // while no archiver runs
	r := runArchiver(t, small(c, store))
	chunks, last := r.finish(t, c, 0)
	if next := chunks[len(before)]; next.First != first+1 {
		t.Fatalf("the first chunk after the restart starts at %d, not %d", next.First, first+1)
	}
	// The chunks listed at the start and those stored since are one run,
	// which a restore from any snapshot in it replays to the end.
	if p := r.a.Progress(); len(p.Spans) != 1 || p.Spans[0].First != before[0].First || p.Spans[0].Last != last || !p.Spans[0].Time.Equal(p.Time) {
		t.Fatalf("spans %+v, want one from revision %d to %d", p.Spans, before[0].First, last)
	}
}

func TestArchiveGoesOnAfterEtcdIsKilled(t *testing.T) {
	e := startEtcd(t)
	c := newClient(t, e.endpoint)
	store := startStore(t)
	r := runArchiver(t, small(c, store))

	r.waitArchived(t, write(t, c, "a", 100))
	e.kill()
	e.start()
	r.finish(t, c, 0)
}

// A member that loses its leader ends the watches that require one: the
// archiver makes its watch again until the cluster has a leader, then goes on
// from the next revision.
func TestArchiveGoesOnAfterItsMemberLostTheLeader(t *testing.T) {
	ms := startCluster(t, 3)
	c := newClient(t, ms[0].endpoint)
	store := startStore(t)
	r := runArchiver(t, small(c, store))

	r.waitArchived(t, write(t, c, "a", 100))
	ms[1].kill()
	ms[2].kill()
	// etcd cancels a stream that requires a leader only after several
	// election timeouts without one; wait for the archiver to see it.
	eventually(t, "the loss of the leader ends the archiver's watch", func() bool { return r.a.Progress().Rewatches > 0 })
	ms[1].launch()
	ms[2].launch()
	ms[1].waitServing()
	r.finish(t, c, 0)
}

func TestArchiveStopsAtACompactedGap(t *testing.T) {
	ctx := t.Context()
	e := startEtcd(t)
	c := newClient(t, e.endpoint)
	store := startStore(t)

	archivedTo := archiveOnce(t, small(c, store), 50)

	compacted := write(t, c, "b", 50)
	if _, err := c.Compact(ctx, compacted); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Client: c, Store: store, Prefix: "archive/", Log: testLog(t)})
	mustOK(t, err)
	err = a.Run(ctx)
	var gap *GapError
	if !errors.As(err, &gap) || gap.From != archivedTo+1 || gap.CompactedTo != compacted {
		t.Fatalf("Run over a compacted gap returned %v, want a gap from %d to %d", err, archivedTo+1, compacted)
	}

	if _, err := gap.RestartAfter(&backup.Snapshot{Revision: compacted - 1}); err == nil {
		t.Fatal("a snapshot older than the compaction was taken to fill the gap")
	}
	snap, err := backup.SaveSnapshot(ctx, backup.Source{Endpoints: []string{e.endpoint}}, store, func(rev int64) string { return "snapshots/full" })
	mustOK(t, err)
	after, err := gap.RestartAfter(snap)
	mustOK(t, err)
	cfg := small(c, store)
	cfg.After = after
	runArchiver(t, cfg).finish(t, c, after)
}

func TestReadChunkFindsDamage(t *testing.T) {
	ctx := t.Context()
	e := startEtcd(t)
	c := newClient(t, e.endpoint)
	store := startStore(t)
	codec := backup.Codec{Compression: backup.CompressionGzip}
	cfg := small(c, store)
	cfg.Codec = codec
	cfg.MaxChunkBytes = 1 << 20
	archiveOnce(t, cfg, 20)
	chunks, err := List(ctx, store, "archive/")
	mustOK(t, err)
	good := chunks[0]
	rc, _, err := store.Get(ctx, good.Key)
	mustOK(t, err)
	stored, err := io.ReadAll(rc)
	_ = rc.Close()
	mustOK(t, err)
	dr, _, err := backup.Decode(bytes.NewReader(stored), nil)
	mustOK(t, err)
	plain, err := io.ReadAll(dr)
	mustOK(t, err)

	// put stores b under a chunk's name with b's own sha256, so that only the
	// chunk's own trailer can tell.
	put := func(b []byte, named Chunk) Chunk {
		enc, sum, err := encodeChunk(codec, b)
		mustOK(t, err)
		named.SHA256 = sum
		named.Key = ChunkName("damaged/", named)
		_, _, err = store.Put(ctx, named.Key, bytes.NewReader(enc))
		mustOK(t, err)
		return named
	}
	flipped := append([]byte(nil), plain...)
	flipped[len(magic)+20] ^= 1
	truncatedStored := good
	truncatedStored.Key = "damaged/truncated"
	_, _, err = store.Put(ctx, truncatedStored.Key, bytes.NewReader(stored[:len(stored)-8]))
	mustOK(t, err)
	renamed := good
	renamed.Last++

	for _, tc := range []struct {
		name  string
		chunk Chunk
	}{
		{"a stored object cut short fails its name's sha256", truncatedStored},
		{"a chunk cut before its trailer, stored whole, fails its trailer", put(plain[:len(plain)-trailerSize-1], good)},
		{"a chunk with a byte changed, stored whole, fails its trailer", put(flipped, good)},
		{"a chunk whose name claims other revisions fails", put(plain, renamed)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadChunk(ctx, store, tc.chunk, nil); !errors.Is(err, ErrDamaged) {
				t.Fatalf("read returned %v, want ErrDamaged", err)
			}
		})
	}
	if _, err := ReadChunk(ctx, store, good, nil); err != nil {
		t.Fatalf("the chunk as stored: %v", err)
	}
}

// failingStore is a real store whose Puts fail while down is set: an outage.
type failingStore struct {
	backup.Store
	down chan struct{} // closed: the store is back
}

func (f *failingStore) Put(ctx context.Context, key string, r io.Reader) (int64, string, error) {
	select {
	case <-f.down:
		return f.Store.Put(ctx, key, r)
	default:
		return 0, "", errors.New("the store is down")
	}
}

func TestArchiveWaitsOutAStoreOutage(t *testing.T) {
	e := startEtcd(t)
	c := newClient(t, e.endpoint)
	store := &failingStore{Store: startStore(t), down: make(chan struct{})}
	r := runArchiver(t, small(c, store))

	written := write(t, c, "a", 100)
	eventually(t, "the archiver holds the writes while the store is down", func() bool {
		p := r.a.Progress()
		return p.Newest >= written && p.PendingBytes > 0
	})
	if p := r.a.Progress(); p.Revision != 0 || p.LagRevisions != written || p.Lag <= 0 {
		t.Fatalf("progress while the store is down: %+v", p)
	}
	close(store.down)
	r.finish(t, c, 0)
}

func TestArchiveStopsWhenItsBacklogPassesItsBound(t *testing.T) {
	e := startEtcd(t)
	c := newClient(t, e.endpoint)
	store := &failingStore{Store: startStore(t), down: make(chan struct{})}
	cfg := small(c, store)
	cfg.MaxPendingBytes = 8 << 10
	cfg.StopFlush = 100 * time.Millisecond
	r := runArchiver(t, cfg)
	write(t, c, "a", 200)
	select {
	case err := <-r.done:
		r.done <- err
		if !errors.Is(err, ErrBacklog) {
			t.Fatalf("Run returned %v, want ErrBacklog", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the archiver holds %d bytes and goes on", r.a.Progress().PendingBytes)
	}
}

// Stopping the archiver cancels its watch too, so the watch's channel closes
// at the same moment: which of the two the loop sees first is chance, and a
// stop must be told as a stop either way, not as a broken watch.
func TestAStoppedArchiveSaysItWasStoppedWhateverItSeesFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	closed := make(chan clientv3.WatchResponse)
	close(closed)
	for range 200 {
		_, err := (&watchLoop{}).receive(ctx, closed, nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a stopped archive reported %v, want %v", err, context.Canceled)
		}
	}
}
