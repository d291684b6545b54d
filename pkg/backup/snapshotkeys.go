package backup

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// KeyHashes are the keys of a cluster at one revision, each with the sha256
// of its value: what a drill compares, in memory bounded by the keys rather
// than their values.
type KeyHashes map[string][sha256.Size]byte

// SnapshotKeys reads the stored snapshot at key back, decoded and its
// trailer checked as Verify does, through a temporary file under dir, and
// returns what each key held at revision atRevision, from etcd's "key"
// bucket. A snapshot holds the changes made until its stream opened, a
// little past the revision its name records; reading the bucket at that
// revision leaves those out, so the result is the cluster at atRevision
// exactly. An atRevision past every entry is the snapshot's newest state.
func SnapshotKeys(ctx context.Context, store Store, key string, decodeKey []byte, dir string, atRevision int64) (KeyHashes, error) {
	var keys KeyHashes
	err := withSnapshotDB(ctx, store, key, decodeKey, dir, "drill-*.db", "read the snapshot in", func(path string, _ *Verification) error {
		var err error
		keys, err = keysAt(ctx, path, atRevision)
		return err
	})
	return keys, err
}

// keysAt reads etcd's "key" bucket of the database at path up to revision
// rev. Its keys are revisions, in order: 8 bytes of main revision, '_', 8
// bytes of sub revision, and a 't' after them for a deletion (a tombstone);
// its values are the mvccpb.KeyValue written then.
func keysAt(ctx context.Context, path string, rev int64) (out KeyHashes, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: bbolt failed on it: %v", ErrVerification, r)
		}
	}()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("%w: not a bbolt database: %v", ErrVerification, err)
	}
	defer func() { _ = db.Close() }()
	out = KeyHashes{}
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return fmt.Errorf("%w: the database has no \"key\" bucket", ErrVerification)
		}
		// A compaction drops every version a later one replaced up to its
		// revision: past rev, what the keys held at rev is partly gone.
		if meta := tx.Bucket([]byte("meta")); meta != nil {
			if c := meta.Get([]byte("finishedCompactRev")); len(c) >= 8 && int64(binary.BigEndian.Uint64(c[:8])) > rev {
				return fmt.Errorf("the snapshot was compacted up to revision %d, past revision %d: what the keys held then is not in it", binary.BigEndian.Uint64(c[:8]), rev)
			}
		}
		n := 0
		return b.ForEach(func(k, v []byte) error {
			if n++; n%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			if len(k) < 17 || k[8] != '_' {
				return fmt.Errorf("%w: an entry of the \"key\" bucket is not a revision: %x", ErrVerification, k)
			}
			if int64(binary.BigEndian.Uint64(k[:8])) > rev {
				return nil // later than asked; the bucket goes on in order, but a tombstone's length differs
			}
			var kv mvccpb.KeyValue
			if err := kv.Unmarshal(v); err != nil {
				return fmt.Errorf("%w: the entry at %x does not decode: %v", ErrVerification, k, err)
			}
			if len(k) == 18 && k[17] == 't' {
				delete(out, string(kv.Key))
				return nil
			}
			out[string(kv.Key)] = sha256.Sum256(kv.Value)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
