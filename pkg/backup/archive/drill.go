package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/scratch"
)

// DrillOptions say what a drill restores and where it compares.
type DrillOptions struct {
	// Store, Prefix and Key (the encryption key, nil when not encrypted) are
	// where the snapshot and the chunks are.
	Store  backup.Store
	Prefix string
	Key    []byte
	// Snapshot is the key of the full snapshot a restore starts from, and
	// SnapshotRevision the revision its name records.
	Snapshot         string
	SnapshotRevision int64
	// Revision is the point to restore: archive.Reach's, for the newest.
	Revision int64
	// Dir holds the snapshot while etcd restores it, then the scratch etcd's
	// data directory ("" is the system's temporary directory); it needs room
	// for the snapshot and its restored database at once, and for what the
	// archive adds to it.
	Dir string
	// Client reads the live cluster at Revision.
	Client *clientv3.Client
}

// Drilled is what a drill found.
type Drilled struct {
	// Revision is the point restored and compared; Keys how many keys the
	// cluster held there, and Revisions how many the archive replayed.
	// Revision is past the point asked for only when the snapshot itself
	// holds changes past it (see Drill).
	Revision  int64
	Keys      int
	Revisions int64
	// Compacted says the live cluster compacted Revision away, so nothing
	// could be compared: the drill neither passed nor failed.
	Compacted bool
}

// ErrDrillMismatch marks (wrapped) a restore that does not give what the
// cluster held at the point: the snapshot or the archive is wrong.
var ErrDrillMismatch = errors.New("the restored point differs from the cluster")

// Drill restores a point as a restore to it does and compares every key and
// value with the live cluster at that revision (a read WithRev). The
// snapshot is restored with etcd's own restore (etcdutl's code, which checks
// its sha256 trailer) into a scratch etcd under opts.Dir, embedded in this
// process and listening on the loopback interface only; the archive's chunks
// after it, up to opts.Revision, are replayed onto it through a client by
// ApplyChunks, as the restore's seed replays them. It proves more than the
// snapshot's verification: that etcd starts on the snapshot, that the
// archive's chunks hold every change and replay through etcd, and that the
// snapshot and the chunks meet without a change lost or counted twice.
//
// Both sides are read in key order, a page at a time, and merged: the
// drill holds two pages, not the keyspace. The scratch etcd holds the
// restored keys as a member does, its index in memory and its database
// under opts.Dir; it is stopped and its directory removed before Drill
// returns, whatever happened.
//
// A snapshot holds the changes made until its stream opened, a little past
// the revision its name records; the replay starts after the revision the
// restored snapshot is at, as the restore's does. When that is past
// opts.Revision (the archive had not caught up with the snapshot), the point
// a restore of the newest change gives is the snapshot itself: it is
// compared with the cluster at its own revision, which Drilled.Revision
// then says.
//
// A revision the cluster has compacted cannot be read: Compacted is set and
// the error is nil.
func Drill(ctx context.Context, opts DrillOptions) (Drilled, error) {
	done := Drilled{Revision: opts.Revision}
	// A point the cluster has already compacted is not worth a restore.
	if _, err := (&keyPages{client: opts.Client, rev: opts.Revision}).count(ctx); err != nil {
		return liveReadFailed(done, err)
	}
	all, err := List(ctx, opts.Store, opts.Prefix)
	if err != nil {
		return done, err
	}
	var chunks []Chunk
	if opts.Revision > opts.SnapshotRevision {
		if chunks, err = Covering(all, opts.SnapshotRevision, opts.Revision); err != nil {
			return done, err
		}
	}
	// The snapshot's file is removed once restored: the two are on disk
	// together only while etcd's restore copies it.
	var member *scratch.Member
	err = backup.WithSnapshotFile(ctx, opts.Store, opts.Snapshot, opts.Key, opts.Dir, func(path string) error {
		var err error
		member, err = scratch.Start(ctx, path, scratch.Options{Dir: opts.Dir})
		return err
	})
	if err != nil {
		return done, err
	}
	defer func() { _ = member.Close() }()
	return drillOnto(ctx, member.Client, opts, chunks)
}

// drillOnto replays chunks onto the restored snapshot the client serves and
// compares the result with the live cluster.
func drillOnto(ctx context.Context, restored *clientv3.Client, opts DrillOptions, chunks []Chunk) (Drilled, error) {
	done := Drilled{Revision: opts.Revision}
	at, err := RestoredRevision(ctx, restored, 0, opts.SnapshotRevision)
	if err != nil {
		return done, err
	}
	switch {
	case at < opts.SnapshotRevision:
		return done, fmt.Errorf("%w: the restored snapshot %s is at revision %d, but its name records revision %d", ErrDrillMismatch, opts.Snapshot, at, opts.SnapshotRevision)
	case at >= opts.Revision:
		done.Revision = at
	default:
		replayed, err := ApplyChunks(ctx, restored, ReplayOptions{After: at, Revision: opts.Revision}, chunks,
			func(ctx context.Context, c Chunk) ([]Event, error) { return ReadChunk(ctx, opts.Store, c, opts.Key) })
		done.Revisions = int64(replayed.Revisions)
		if err != nil {
			return done, fmt.Errorf("replay the archive onto the restored snapshot: %w", err)
		}
		if replayed.Revision != opts.Revision {
			return done, fmt.Errorf("%w: the archive's chunks up to revision %d hold changes up to revision %d only", ErrDrillMismatch, opts.Revision, replayed.Revision)
		}
	}
	live := &keyPages{client: opts.Client, rev: done.Revision}
	diff, err := firstDifference(ctx, &keyPages{client: restored}, live)
	if errors.Is(err, errRestoredRead) {
		return done, err
	}
	if err != nil {
		return liveReadFailed(done, err)
	}
	done.Keys = live.read
	if diff != "" {
		return done, fmt.Errorf("%w at revision %d (snapshot %s at revision %d, then the archive): %s", ErrDrillMismatch, done.Revision, opts.Snapshot, opts.SnapshotRevision, diff)
	}
	return done, nil
}

// liveReadFailed is the drill's end when err stopped a read: a compacted
// revision is no failure.
func liveReadFailed(done Drilled, err error) (Drilled, error) {
	if errors.Is(err, rpctypes.ErrCompacted) {
		done.Compacted = true
		return done, nil
	}
	return done, fmt.Errorf("read the cluster at revision %d: %w", done.Revision, err)
}

// Bounds of one page of a drill's reads. A page asks for a number of keys,
// since etcd bounds a range by count only; the count shrinks when the
// values are large, so that a page stays about drillPageBytes.
const (
	drillPage      = 1000
	drillPageBytes = 8 << 20
)

// keyPages reads every key of a cluster in key order, a page at a time: at
// revision rev, or at the head when rev is 0.
type keyPages struct {
	client *clientv3.Client
	rev    int64
	// from is the next key to ask for, page what is left of the last page,
	// and read how many keys were taken.
	from  string
	page  []*mvccpb.KeyValue
	limit int64
	more  bool
	read  int
}

// next is the next key, or nil after the last.
func (p *keyPages) next(ctx context.Context) (*mvccpb.KeyValue, error) {
	if len(p.page) == 0 {
		if p.from != "" && !p.more {
			return nil, nil
		}
		if err := p.fetch(ctx); err != nil {
			return nil, err
		}
		if len(p.page) == 0 {
			return nil, nil
		}
	}
	kv := p.page[0]
	p.page = p.page[1:]
	p.read++
	return kv, nil
}

func (p *keyPages) fetch(ctx context.Context) error {
	if p.from == "" {
		p.from, p.limit = "\x00", drillPage
	}
	opts := []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithLimit(p.limit),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
	if p.rev > 0 {
		opts = append(opts, clientv3.WithRev(p.rev))
	}
	resp, err := p.client.Get(ctx, p.from, opts...)
	if err != nil {
		return err
	}
	p.page, p.more = resp.Kvs, resp.More
	if len(resp.Kvs) == 0 {
		p.more = false
		return nil
	}
	p.from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	size := 0
	for _, kv := range resp.Kvs {
		size += len(kv.Key) + len(kv.Value)
	}
	if size > drillPageBytes {
		p.limit = max(1, p.limit*drillPageBytes/int64(size))
	}
	return nil
}

// count is how many keys the cluster holds (at p.rev).
func (p *keyPages) count(ctx context.Context) (int64, error) {
	opts := []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithCountOnly()}
	if p.rev > 0 {
		opts = append(opts, clientv3.WithRev(p.rev))
	}
	resp, err := p.client.Get(ctx, "\x00", opts...)
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// errRestoredRead marks (wrapped) a failed read of the restored point.
var errRestoredRead = errors.New("read the restored point")

// firstDifference names the first key, in key order, that differs between
// the restored and the live keys; "" when none does. An error reading the
// restored side is wrapped; one reading the live side is returned as it is,
// so that a compaction can be told.
func firstDifference(ctx context.Context, restored, live *keyPages) (string, error) {
	readRestored := func() (*mvccpb.KeyValue, error) {
		kv, err := restored.next(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errRestoredRead, err)
		}
		return kv, nil
	}
	r, err := readRestored()
	if err != nil {
		return "", err
	}
	l, err := live.next(ctx)
	if err != nil {
		return "", err
	}
	for r != nil || l != nil {
		var which string
		switch {
		case l == nil || (r != nil && bytes.Compare(r.Key, l.Key) < 0):
			which = fmt.Sprintf("key %q is restored but the cluster did not hold it", r.Key)
		case r == nil || bytes.Compare(l.Key, r.Key) < 0:
			which = fmt.Sprintf("key %q is not restored but the cluster held it", l.Key)
		case !bytes.Equal(r.Value, l.Value):
			return fmt.Sprintf("key %q is restored with another value than the cluster held", r.Key), nil
		}
		if which != "" {
			nr, err := restored.count(ctx)
			if err != nil {
				return "", fmt.Errorf("%w: %w", errRestoredRead, err)
			}
			nl, err := live.count(ctx)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s (%d keys restored, %d in the cluster)", which, nr, nl), nil
		}
		if r, err = readRestored(); err != nil {
			return "", err
		}
		if l, err = live.next(ctx); err != nil {
			return "", err
		}
	}
	return "", nil
}
