package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/openetcd/etcd-operator/pkg/backup"
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
	// Dir holds the snapshot while it is read ("" is the system's temporary
	// directory); it needs room for one snapshot.
	Dir string
	// Client reads the live cluster at Revision.
	Client *clientv3.Client
}

// Drilled is what a drill found.
type Drilled struct {
	// Revision is the point restored and compared; Keys how many keys the
	// cluster held there, and Revisions how many the archive replayed.
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

// Drill restores a point as a restore to it would, the snapshot read at its
// named revision and the chunks after it applied up to opts.Revision, and
// compares every key and value with the live cluster at that revision
// (a read WithRev). It proves more than the snapshot's verification: that
// the archive's chunks hold every change, and that the snapshot and the
// chunks meet without a change lost or counted twice.
//
// The restore is made in memory from the snapshot's "key" bucket (one
// sha256 per key), not by an etcd server: the backup operator runs none, and
// etcd's own restore of a snapshot is what the seed's restore-datadir step
// and the snapshot's verification answer for.
//
// A revision the cluster has compacted cannot be read: Compacted is set and
// the error is nil.
func Drill(ctx context.Context, opts DrillOptions) (Drilled, error) {
	done := Drilled{Revision: opts.Revision}
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
	restored, err := backup.SnapshotKeys(ctx, opts.Store, opts.Snapshot, opts.Key, opts.Dir, opts.SnapshotRevision)
	if err != nil {
		return done, err
	}
	last := opts.SnapshotRevision
	for _, c := range chunks {
		evs, err := ReadChunk(ctx, opts.Store, c, opts.Key)
		if err != nil {
			return done, err
		}
		for i := range evs {
			ev := &evs[i]
			r := ev.Revision()
			if r <= opts.SnapshotRevision || r > opts.Revision {
				continue
			}
			if r != last {
				done.Revisions++
				last = r
			}
			if ev.Type == mvccpb.DELETE {
				delete(restored, string(ev.Kv.Key))
			} else {
				restored[string(ev.Kv.Key)] = sha256.Sum256(ev.Kv.Value)
			}
		}
	}
	if last != opts.Revision {
		return done, fmt.Errorf("%w: the archive's chunks up to revision %d hold changes up to revision %d only", ErrDrillMismatch, opts.Revision, last)
	}
	live, err := liveKeys(ctx, opts.Client, opts.Revision)
	if errors.Is(err, rpctypes.ErrCompacted) {
		done.Compacted = true
		return done, nil
	}
	if err != nil {
		return done, fmt.Errorf("read the cluster at revision %d: %w", opts.Revision, err)
	}
	done.Keys = len(live)
	if diff := firstDifference(restored, live); diff != "" {
		return done, fmt.Errorf("%w at revision %d (snapshot %s at revision %d, then the archive): %s", ErrDrillMismatch, opts.Revision, opts.Snapshot, opts.SnapshotRevision, diff)
	}
	return done, nil
}

// drillPage bounds one read of the live cluster.
const drillPage = 1000

// liveKeys is every key of the cluster at revision rev, read in pages.
func liveKeys(ctx context.Context, c *clientv3.Client, rev int64) (backup.KeyHashes, error) {
	out := backup.KeyHashes{}
	from := "\x00"
	for {
		resp, err := c.Get(ctx, from, clientv3.WithFromKey(), clientv3.WithRev(rev), clientv3.WithLimit(drillPage),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		if err != nil {
			return nil, err
		}
		for _, kv := range resp.Kvs {
			out[string(kv.Key)] = sha256.Sum256(kv.Value)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// firstDifference names the first key, in key order, that differs between
// the restored and the live keys; "" when none does.
func firstDifference(restored, live backup.KeyHashes) string {
	keys := make([]string, 0, len(restored)+len(live))
	for k := range restored {
		keys = append(keys, k)
	}
	for k := range live {
		if _, ok := restored[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		r, inRestore := restored[k]
		l, inLive := live[k]
		switch {
		case !inLive:
			return fmt.Sprintf("key %q is restored but the cluster did not hold it (%d keys restored, %d in the cluster)", k, len(restored), len(live))
		case !inRestore:
			return fmt.Sprintf("key %q is not restored but the cluster held it (%d keys restored, %d in the cluster)", k, len(restored), len(live))
		case !bytes.Equal(r[:], l[:]):
			return fmt.Sprintf("key %q is restored with another value than the cluster held", k)
		}
	}
	return ""
}
