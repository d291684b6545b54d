package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
)

// SnapshotCheck is an io.Writer that checks an etcd snapshot streamed through
// it: etcd's Snapshot RPC appends the sha256 of the database bytes, and
// `etcdutl snapshot restore` refuses a snapshot whose last 32 bytes are not
// the sha256 of the bytes before them. The backup checks each snapshot before
// its upload commits, the restore each backup before it deletes anything.
//
// It hashes everything written to it except the last sha256.Size bytes, which
// it holds back to compare at the end, so it needs no more memory than that;
// once they have matched, the same hash goes on over them, so the sha256 of
// the whole stream costs no second pass.
type SnapshotCheck struct {
	h    hash.Hash
	tail [sha256.Size]byte
	held int // bytes held in tail
	n    int64
	// verified: the trailer matched and has been hashed too.
	verified bool
}

// NewSnapshotCheck returns an empty check.
func NewSnapshotCheck() *SnapshotCheck { return &SnapshotCheck{h: sha256.New()} }

// Write never fails.
func (c *SnapshotCheck) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	total := len(p)
	// Keep the last len(tail) bytes seen; whatever is pushed out of them is
	// the database.
	if c.held+len(p) <= len(c.tail) {
		c.held += copy(c.tail[c.held:], p)
		return total, nil
	}
	if out := c.held + len(p) - len(c.tail); out <= c.held {
		c.h.Write(c.tail[:out])
		c.held = copy(c.tail[:], c.tail[out:c.held])
		c.held += copy(c.tail[c.held:], p)
		return total, nil
	}
	c.h.Write(c.tail[:c.held])
	c.h.Write(p[:len(p)-len(c.tail)])
	c.held = copy(c.tail[:], p[len(p)-len(c.tail):])
	return total, nil
}

// Verify says whether what was written is a snapshot with a matching
// trailer. A reader may report io.EOF more than once: a second Verify after a
// match is a no-op.
func (c *SnapshotCheck) Verify() error {
	if c.verified {
		return nil
	}
	if c.held < len(c.tail) {
		return fmt.Errorf("it is %d bytes long, shorter than the %d-byte sha256 trailer of a snapshot", c.n, len(c.tail))
	}
	if !bytes.Equal(c.h.Sum(nil), c.tail[:]) {
		return errors.New("its trailing sha256 does not match its content (damaged, truncated, or not a snapshot taken with etcd's Snapshot API)")
	}
	c.h.Write(c.tail[:])
	c.verified = true
	return nil
}

// Size is the number of bytes written.
func (c *SnapshotCheck) Size() int64 { return c.n }

// SHA256 is the hex sha256 of everything written, trailer included, once
// Verify has passed; "" before.
func (c *SnapshotCheck) SHA256() string {
	if !c.verified {
		return ""
	}
	return hex.EncodeToString(c.h.Sum(nil))
}
