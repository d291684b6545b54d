package backuptest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

// CheckSnapshot proves that data is a snapshot as etcd sends it: a bbolt database
// followed by the sha256 of that database. It returns the number of entries in
// etcd's "key" bucket, one per revision written (and not compacted). dir receives a
// temporary copy of the database, since bbolt opens only files.
func CheckSnapshot(dir string, data []byte) (keys int, err error) {
	check := backup.NewSnapshotCheck()
	_, _ = check.Write(data)
	if err := check.Verify(); err != nil {
		return 0, err
	}
	db := data[:len(data)-sha256.Size]
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
