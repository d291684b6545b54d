// Package backup takes etcd snapshots and keeps them in object stores.
//
// A snapshot is streamed from the member with the highest revision straight into a
// Store, so the operator's memory does not grow with the size of the database; its
// size and sha256 are computed on the way through. Periodic backups are named after
// the revision and time they were taken, and pruned by those, never by string order.
package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"time"
)

// ErrNotFound is returned (wrapped) by stores for a key that does not exist.
var ErrNotFound = errors.New("object not found")

// Store is a flat key space in one bucket. Keys never include the bucket.
type Store interface {
	// Put stores everything r yields under key, replacing an existing object, and
	// returns the number of bytes stored and their hex sha256. r is read once,
	// front to back, and never buffered whole. The object appears (or is replaced)
	// only if r ends with io.EOF: when r returns any other error, Put returns it
	// (wrapped) and leaves what was stored under key as it was.
	Put(ctx context.Context, key string, r io.Reader) (size int64, sha256 string, err error)
	// Get opens an object for reading; the caller closes it.
	Get(ctx context.Context, key string) (rc io.ReadCloser, size int64, err error)
	// Head describes an object without reading it.
	Head(ctx context.Context, key string) (ObjectInfo, error)
	// List returns every object whose key starts with prefix, however many pages
	// the store needs to answer.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes an object; deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error
}

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// DigestReader is a reader that counts and hashes what it yields itself, so that a
// Store need not hash it a second time: the snapshot stream already hashes every
// byte for etcd's trailer check, and one sha256 pass less is a tenth of the CPU
// a plain backup takes.
type DigestReader interface {
	io.Reader
	// Digest is the size and hex sha256 of everything read so far; a Store asks
	// only after the reader ended with io.EOF.
	Digest() (size int64, sha256 string)
}

// Digesting is how a Store's Put learns the size and sha256 of what it stored: r
// itself when it is a DigestReader, else a reader that hashes r on the way.
func Digesting(r io.Reader) DigestReader {
	if d, ok := r.(DigestReader); ok {
		return d
	}
	return &hashingReader{r: r, h: sha256.New()}
}

type hashingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

func (h *hashingReader) Digest() (int64, string) { return h.n, hex.EncodeToString(h.h.Sum(nil)) }
