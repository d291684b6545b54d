package backup

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Verification is what reading a stored backup back found.
type Verification struct {
	Key string
	// Size and SHA256 are of the stored bytes, trailer included.
	Size   int64
	SHA256 string
	// Revision and TotalKeys are what `etcdutl snapshot status` prints as
	// REVISION and TOTAL KEYS: the main revision of the newest entry of etcd's
	// "key" bucket, and the number of entries in all buckets.
	Revision  int64
	TotalKeys int64
}

// ErrVerification marks (wrapped) a stored object that is not a restorable
// snapshot, as opposed to a store that could not be read.
var ErrVerification = errors.New("the stored backup is not a restorable etcd snapshot")

// Verify reads the object at key back and proves that it restores as etcd's own
// tools would: it ends with the sha256 of everything before it (the trailer that
// `etcdutl snapshot restore` checks), its length is what the store announces, and
// the database before the trailer opens in bbolt, reads through page by page (as
// `etcdutl snapshot status` reads it) and holds etcd's "key" and "meta" buckets.
//
// A compressed or encrypted object (codec.go) is decoded on the way, with
// decodeKey for an encrypted one; the trailer and the database are checked on
// the decoded snapshot, the size and sha256 on the stored bytes.
//
// The object is streamed to a temporary file under dir, never held in memory, and
// the file is removed before Verify returns; dir needs room for one snapshot.
// bbolt maps the file rather than reading it, so the pages it touches are page
// cache, not heap. Errors about the object's content wrap ErrVerification.
func Verify(ctx context.Context, store Store, key string, decodeKey []byte, dir string) (*Verification, error) {
	var out *Verification
	err := withSnapshotDB(ctx, store, key, decodeKey, dir, "verify-*.db", "verify the backup in", func(path string, v *Verification) error {
		if err := inspectDB(ctx, path, v); err != nil {
			return err
		}
		out = v
		return nil
	})
	return out, err
}

// WithSnapshotFile streams the object at key, decoded and its trailer
// checked as Verify does, into a temporary file under dir, and calls use
// with the file's path: the snapshot as etcd sent it, trailer included, for
// etcd's own restore, which checks the trailer again. The file is removed
// before WithSnapshotFile returns; dir needs room for one snapshot.
func WithSnapshotFile(ctx context.Context, store Store, key string, decodeKey []byte, dir string, use func(path string) error) error {
	return withSnapshotFile(ctx, store, key, decodeKey, dir, "restore-*.db", "restore the snapshot from", false,
		func(path string, _ *Verification) error { return use(path) })
}

// withSnapshotDB is withSnapshotFile for bbolt, which wants the bare
// database: the sha256 trailer is stripped.
func withSnapshotDB(ctx context.Context, store Store, key string, decodeKey []byte, dir, pattern, what string, use func(path string, v *Verification) error) error {
	return withSnapshotFile(ctx, store, key, decodeKey, dir, pattern, what, true, use)
}

// withSnapshotFile streams the object at key, decoded and its trailer
// checked (download), into a temporary file under dir named after pattern,
// strips the sha256 trailer when bare is set, and calls use with the file's
// path and what download found; the file is removed before it returns. what
// says, in the error, what the file is for.
func withSnapshotFile(ctx context.Context, store Store, key string, decodeKey []byte, dir, pattern, what string, bare bool, use func(path string, v *Verification) error) error {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return fmt.Errorf("create a temporary file to %s (it needs room for one snapshot): %w", what, err)
	}
	path := f.Name()
	defer func() { _ = os.Remove(path) }()
	v, snapshotSize, err := download(ctx, store, key, decodeKey, f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write %s: %w", path, cerr)
	}
	if err != nil {
		return err
	}
	if bare {
		if err := os.Truncate(path, snapshotSize-sha256.Size); err != nil {
			return fmt.Errorf("strip the sha256 trailer from %s: %w", path, err)
		}
	}
	return use(path, v)
}

// download decodes the object into f, checking the snapshot's trailer and
// hashing the stored bytes on the way; it returns the decoded snapshot's size.
func download(ctx context.Context, store Store, key string, decodeKey []byte, f *os.File) (*Verification, int64, error) {
	rc, size, err := store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, 0, fmt.Errorf("%w: %q does not exist", ErrVerification, key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read %q back: %w", key, err)
	}
	defer func() { _ = rc.Close() }()
	stored := NewStoredBytes(rc)
	decoded, _, err := Decode(stored, decodeKey)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %q cannot be decoded: %v", ErrVerification, key, err)
	}
	check := NewSnapshotCheck()
	n, err := io.Copy(io.MultiWriter(f, check), decoded)
	if cerr := decoded.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// The decoder may stop short of bytes after its end; they are stored
		// bytes all the same, and count in the size and the sha256.
		_, err = io.Copy(io.Discard, stored)
	}
	if err != nil {
		if stored.ReadErr() != nil {
			return nil, 0, fmt.Errorf("read %q back (after %d of %d bytes): %w", key, stored.Count(), size, stored.ReadErr())
		}
		return nil, 0, fmt.Errorf("%w: %q does not decode (after %d of %d bytes): %v", ErrVerification, key, stored.Count(), size, err)
	}
	if size >= 0 && stored.Count() != size {
		return nil, 0, fmt.Errorf("%w: the store announces %d bytes at %q but %d arrived", ErrVerification, size, key, stored.Count())
	}
	if err := check.Verify(); err != nil {
		return nil, 0, fmt.Errorf("%w: %s", ErrVerification, err)
	}
	return &Verification{Key: key, Size: stored.Count(), SHA256: stored.SHA256()}, n, nil
}

// StoredBytes reads a stored object through, counting and hashing (sha256)
// the stored bytes as they pass, and keeping the store's read error apart
// from what a decoder reading through it returns: a store that broke off may
// pass, stored bytes that do not decode will not. The backup operator's read
// back, the restore operator's check and the seed's download all read an
// object this way, so their sizes and sums are those of the same bytes.
type StoredBytes struct {
	r   io.Reader
	h   hash.Hash
	n   int64
	err error
}

// NewStoredBytes reads r through.
func NewStoredBytes(r io.Reader) *StoredBytes {
	return &StoredBytes{r: r, h: sha256.New()}
}

func (c *StoredBytes) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		c.err = err
	}
	return n, err
}

// Count is how many bytes were read.
func (c *StoredBytes) Count() int64 { return c.n }

// ReadErr is the store's error, if reading it failed (io.EOF is no error).
func (c *StoredBytes) ReadErr() error { return c.err }

// SHA256 is the hex sha256 of the bytes read.
func (c *StoredBytes) SHA256() string { return hex.EncodeToString(c.h.Sum(nil)) }

// inspectDB opens the database at path read-only and fills in v. A damaged
// database can make bbolt panic, or fault on its memory map; both become errors
// of this backup instead of taking the operator down.
func inspectDB(ctx context.Context, path string, v *Verification) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: bbolt failed on it: %v", ErrVerification, r)
		}
	}()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("%w: not a bbolt database: %v", ErrVerification, err)
	}
	defer func() { _ = db.Close() }()
	// Every page of every bucket is read: bbolt asserts that each page it reads
	// identifies itself, which catches damaged pages. bbolt's own Check is not
	// used: it runs in goroutines of its own that panic on a damaged database,
	// where no recover can reach them.
	return db.View(func(tx *bolt.Tx) error {
		for _, name := range []string{"key", "meta"} {
			if tx.Bucket([]byte(name)) == nil {
				return fmt.Errorf("%w: the database has no %q bucket, so etcd did not write it", ErrVerification, name)
			}
		}
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			isKey := string(name) == "key"
			return b.ForEach(func(k, _ []byte) error {
				v.TotalKeys++
				if v.TotalKeys%4096 == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
				// Keys of the "key" bucket are revisions: 8 bytes of main
				// revision, '_', 8 bytes of sub revision, in order.
				if isKey && len(k) >= 8 {
					v.Revision = int64(binary.BigEndian.Uint64(k[:8]))
				}
				return nil
			})
		})
	})
}

// verifyStored verifies the snapshot a job just stored, and that the store
// returns the very bytes that were sent.
func verifyStored(ctx context.Context, job Job, snap *Snapshot) (*Verification, error) {
	v, err := Verify(ctx, job.Store, snap.Key, job.Codec.Key, job.VerifyDir)
	if err != nil {
		return nil, err
	}
	if v.SHA256 != snap.SHA256 || v.Size != snap.Size {
		return v, fmt.Errorf("%w: the store returns %d bytes with sha256 %s, but %d bytes with sha256 %s were stored",
			ErrVerification, v.Size, v.SHA256, snap.Size, snap.SHA256)
	}
	return v, nil
}
