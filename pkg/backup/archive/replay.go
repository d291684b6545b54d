package archive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

// Defaults of ReplayOptions' bounds on one transaction: etcd's own defaults
// of --max-txn-ops and --max-request-bytes, with room for the request's
// framing.
const (
	DefaultMaxTxnOps   = 128
	DefaultMaxTxnBytes = 1 << 20
)

// ReplayOptions say what to replay.
type ReplayOptions struct {
	// Store, Prefix and Key (the encryption key, nil when chunks are not
	// encrypted) are where the archive is.
	Store  backup.Store
	Prefix string
	Key    []byte
	// After is the revision the target cluster holds: that of the snapshot it
	// was restored from. Only events after it are applied. A snapshot's
	// content may be a little newer than the revision recorded when it was
	// taken; that is harmless, since applying again a change the cluster holds
	// leaves the same keys and values.
	After int64
	// Revision is the last revision to apply; 0 means no bound.
	Revision int64
	// Time is the newest receipt time to apply; zero means no bound. Events
	// are received in revision order, so the first one received after Time
	// ends the replay.
	Time time.Time
	// MaxTxnOps and MaxTxnBytes bound one transaction, as the target cluster
	// does (0 means the defaults). A revision that needs more, one delete of
	// many keys, is applied in several transactions.
	MaxTxnOps   int
	MaxTxnBytes int
	Log         *logrus.Entry
}

// Replayed is what a replay applied.
type Replayed struct {
	// Revision is the last revision applied (After when none was), and Time
	// when its event was received. A replay to a time after the archive's
	// last event ends at that event: Time says how close to the target the
	// cluster is.
	Revision int64
	Time     time.Time
	// Revisions and Events count what was applied.
	Revisions int
	Events    int
}

// Replay applies the archived changes after opts.After up to opts.Revision or
// opts.Time onto the cluster of client, one transaction per original
// revision, so that what a transaction changed at once appears at once. The
// keys get the values they had; their revisions, versions and leases are the
// target cluster's own (a lease of the source does not exist there).
//
// Every chunk read is checked (ReadChunk), and the chunks must follow each
// other from opts.After+1 without a hole (a *HoleError), up to opts.Revision
// when it is set.
func Replay(ctx context.Context, client *clientv3.Client, opts ReplayOptions) (Replayed, error) {
	done := Replayed{Revision: opts.After}
	if opts.Revision != 0 && opts.Revision <= opts.After {
		return done, nil
	}
	all, err := List(ctx, opts.Store, opts.Prefix)
	if err != nil {
		return done, err
	}
	chunks, err := Covering(all, opts.After, opts.Revision)
	if err != nil {
		return done, err
	}
	return ApplyChunks(ctx, client, opts, chunks, func(ctx context.Context, c Chunk) ([]Event, error) {
		return ReadChunk(ctx, opts.Store, c, opts.Key)
	})
}

// RestoredRevision is the revision of the snapshot a member just restored
// from it serves, read through client, less bump (the revision its restore
// moved the store by). named is the revision the snapshot's name records.
func RestoredRevision(ctx context.Context, client *clientv3.Client, bump, named int64) (int64, error) {
	resp, err := client.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("read the restored snapshot's revision: %w", err)
	}
	rev := resp.Header.Revision - bump
	if rev == 0 && named == 1 {
		// A keyspace nothing was ever written to: etcd counts its store
		// from revision 1, which a backup taken then records, and etcd's
		// restore gives revision 0. The two are the same empty state.
		rev = 1
	}
	return rev, nil
}

// ApplyChunks is Replay's second half, for a reader that finds the chunks
// elsewhere than in a store it lists (a restore's seed gets them from the
// restore operator): it applies the events of chunks, which Covering chose,
// after opts.After up to opts.Revision or opts.Time, reading each with read,
// which must check it as ReadChunk does. opts.Store, Prefix and Key are not
// used.
func ApplyChunks(ctx context.Context, client *clientv3.Client, opts ReplayOptions, chunks []Chunk, read func(context.Context, Chunk) ([]Event, error)) (Replayed, error) {
	done := Replayed{Revision: opts.After}
	if opts.MaxTxnOps <= 0 {
		opts.MaxTxnOps = DefaultMaxTxnOps
	}
	if opts.MaxTxnBytes <= 0 {
		opts.MaxTxnBytes = DefaultMaxTxnBytes
	}
	if opts.Log == nil {
		opts.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	if opts.Revision != 0 && opts.Revision <= opts.After {
		return done, nil
	}
	for _, c := range chunks {
		evs, err := read(ctx, c)
		if err != nil {
			return done, err
		}
		stop, err := applyChunk(ctx, client, opts, evs, &done)
		if err != nil {
			return done, err
		}
		opts.Log.WithFields(logrus.Fields{"chunk": c.Key, "revision": done.Revision, "events": done.Events}).Debug("archive chunk replayed")
		if stop {
			break
		}
	}
	return done, nil
}

// applyChunk applies a chunk's events within opts' bounds; stop says a bound
// was reached.
func applyChunk(ctx context.Context, client *clientv3.Client, opts ReplayOptions, evs []Event, done *Replayed) (stop bool, err error) {
	for i := 0; i < len(evs); {
		rev := evs[i].Revision()
		j := i
		for j < len(evs) && evs[j].Revision() == rev {
			j++
		}
		group := evs[i:j]
		i = j
		if rev <= opts.After {
			continue
		}
		if opts.Revision != 0 && rev > opts.Revision {
			return true, nil
		}
		// A revision's events were received together; the last one's time is
		// the revision's.
		received := group[len(group)-1].Received
		if !opts.Time.IsZero() && received.After(opts.Time) {
			return true, nil
		}
		if err := applyRevision(ctx, client, opts, group); err != nil {
			return true, fmt.Errorf("apply revision %d: %w", rev, err)
		}
		done.Revision, done.Time = rev, received
		done.Revisions++
		done.Events += len(group)
	}
	return false, nil
}

// applyRevision applies one revision's events in as few transactions as the
// bounds allow: one, unless the revision is too large for the target.
func applyRevision(ctx context.Context, client *clientv3.Client, opts ReplayOptions, group []Event) error {
	var ops []clientv3.Op
	size := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		if _, err := client.Txn(ctx).Then(ops...).Commit(); err != nil {
			return err
		}
		ops, size = ops[:0], 0
		return nil
	}
	for i := range group {
		ev := &group[i]
		n := len(ev.Kv.Key) + len(ev.Kv.Value) + 16
		if len(ops) == opts.MaxTxnOps || (len(ops) > 0 && size+n > opts.MaxTxnBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		switch ev.Type {
		case mvccpb.PUT:
			ops = append(ops, clientv3.OpPut(string(ev.Kv.Key), string(ev.Kv.Value)))
		case mvccpb.DELETE:
			ops = append(ops, clientv3.OpDelete(string(ev.Kv.Key)))
		default:
			return errors.New("unknown event type " + ev.Type.String())
		}
		size += n
	}
	return flush()
}
