package backuptest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// CheckSnapshot proves that data is a snapshot as etcd sends it: a bbolt database
// followed by the sha256 of that database. It returns the number of entries in
// etcd's "key" bucket, one per revision written (and not compacted). dir receives a
// temporary copy of the database, since bbolt opens only files.
func CheckSnapshot(dir string, data []byte) (keys int, err error) {
	if len(data) < sha256.Size {
		return 0, fmt.Errorf("%d bytes is shorter than the sha256 trailer", len(data))
	}
	db, trailer := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if sum := sha256.Sum256(db); !bytes.Equal(sum[:], trailer) {
		return 0, errors.New("the trailing sha256 does not match the database bytes")
	}
	path := filepath.Join(dir, "snapshot.db")
	if err := os.WriteFile(path, db, 0o600); err != nil {
		return 0, err
	}
	defer func() { _ = os.Remove(path) }()
	bdb, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("not a bbolt database: %w", err)
	}
	defer func() { _ = bdb.Close() }()
	err = bdb.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return errors.New(`no "key" bucket`)
		}
		keys = b.Stats().KeyN
		return nil
	})
	return keys, err
}
