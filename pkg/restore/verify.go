package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// VerifiedBackup is a backup that was read through once and found to be an intact
// etcd snapshot. Size and SHA256 cover the whole object, trailer included: the seed
// pod's fetch checks the bytes it downloads against them, so it restores exactly
// what was verified.
type VerifiedBackup struct {
	// Path is "<bucket>/<key>".
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// RecordedBy is the EtcdBackup whose status recorded this object, if any;
	// Revision the store revision that record says the snapshot holds (0
	// when no record says), for the record of a disaster recovery.
	RecordedBy string `json:"recordedBy,omitempty"`
	Revision   int64  `json:"revision,omitempty"`
	// Encrypted and Compression are how the snapshot is stored (backup.Codec);
	// the seed's fetch decodes it after checking Size and SHA256.
	Encrypted   bool   `json:"encrypted,omitempty"`
	Compression string `json:"compression,omitempty"`
}

// VerifySnapshot proves that the object at loc can be restored before anything is
// deleted (the original deleted the cluster first, defect 21): it exists (Head), it
// reads through to the end, its length is what the store announced, and it ends
// with the sha256 of everything before it, which etcd's Snapshot RPC appends and
// `etcdutl snapshot restore` checks. Nothing is buffered beyond that 32-byte trailer.
// A compressed or encrypted backup (backup.Codec) is decoded on the way, with key
// for an encrypted one, and the trailer checked on what decoding gives; Size and
// SHA256 stay those of the stored bytes, which EtcdBackup recorded.
//
// Errors that the user must fix (no such object, a damaged snapshot, a missing or
// wrong key) are marked backup.Permanent; others (the store unreachable) may pass.
func VerifySnapshot(ctx context.Context, store backup.Store, loc storage.Location, key []byte) (VerifiedBackup, error) {
	url := loc.Path()
	info, err := store.Head(ctx, loc.Key)
	if errors.Is(err, backup.ErrNotFound) {
		return VerifiedBackup{}, failure.Permanent(fmt.Errorf("backup %s does not exist", url))
	}
	if err != nil {
		return VerifiedBackup{}, fmt.Errorf("look up backup %s: %w", url, err)
	}
	rc, _, err := store.Get(ctx, loc.Key)
	if errors.Is(err, backup.ErrNotFound) {
		return VerifiedBackup{}, failure.Permanent(fmt.Errorf("backup %s does not exist (it went away while being checked)", url))
	}
	if err != nil {
		return VerifiedBackup{}, fmt.Errorf("read backup %s: %w", url, err)
	}
	defer func() { _ = rc.Close() }()

	stored := backup.NewStoredBytes(rc)
	decoded, form, err := backup.Decode(stored, key)
	if err != nil {
		return VerifiedBackup{}, decodeError(url, stored, err)
	}
	defer func() { _ = decoded.Close() }()
	check := backup.NewSnapshotCheck()
	if _, err := io.Copy(check, decoded); err != nil {
		return VerifiedBackup{}, decodeError(url, stored, err)
	}
	// Decoding may stop before the last stored byte; the record covers them all.
	if _, err := io.Copy(io.Discard, stored); err != nil {
		return VerifiedBackup{}, fmt.Errorf("read backup %s (after %d of %d bytes): %w", url, stored.Count(), info.Size, err)
	}
	n := stored.Count()
	if n != info.Size {
		return VerifiedBackup{}, failure.Permanent(fmt.Errorf("backup %s is truncated: the store announces %d bytes but %d arrived", url, info.Size, n))
	}
	if err := check.Verify(); err != nil {
		return VerifiedBackup{}, failure.Permanent(fmt.Errorf("backup %s is not an intact etcd snapshot: %w", url, err))
	}
	return VerifiedBackup{Path: loc.Path(), Size: n, SHA256: stored.SHA256(),
		Encrypted: form.Encrypted, Compression: form.Compression}, nil
}

// decodeError tells a store that broke off (may pass) from stored bytes that do
// not decode (final), and says what to do about a key.
func decodeError(url string, stored *backup.StoredBytes, err error) error {
	if stored.ReadErr() != nil {
		return fmt.Errorf("read backup %s (after %d bytes): %w", url, stored.Count(), stored.ReadErr())
	}
	switch {
	case errors.Is(err, backup.ErrKeyRequired):
		return failure.Permanent(fmt.Errorf("backup %s is encrypted: name the Secret holding its key in spec.encryption.keySecret", url))
	case errors.Is(err, backup.ErrWrongKey):
		return failure.Permanent(fmt.Errorf("backup %s was encrypted with a different key than the one in spec.encryption.keySecret (%v; the EtcdBackup's status.encoding.keyID names the key of its latest backup)", url, err))
	case errors.Is(err, backup.ErrNotEncrypted):
		return failure.Permanent(fmt.Errorf("backup %s is not encrypted, but spec.encryption names a key: a backup that should be encrypted and is not may have been replaced; remove spec.encryption if it was stored unencrypted", url))
	}
	return failure.Permanent(fmt.Errorf("backup %s cannot be decoded: %w", url, err))
}

// CheckRecorded compares a verified backup with what the backup operator recorded
// when it stored the object. An object overwritten or damaged since then passes its
// own trailer check only if it is another intact snapshot, which is just as wrong
// to restore: the record is the user's word for what the path holds.
//
// Only EtcdBackups whose status.backupPath is the restore's path count; the newest
// success among them (several may have written the same one-shot path) is the one
// that must match. With none, there is nothing to compare and v is returned as is.
func CheckRecorded(v VerifiedBackup, backups []api.EtcdBackup) (VerifiedBackup, error) {
	var recorded []api.EtcdBackup
	for _, b := range backups {
		if b.Status.BackupPath == v.Path && b.Status.SHA256 != "" {
			recorded = append(recorded, b)
		}
	}
	if len(recorded) == 0 {
		return v, nil
	}
	sort.SliceStable(recorded, func(i, j int) bool {
		return recorded[j].Status.LastSuccessDate.Before(&recorded[i].Status.LastSuccessDate)
	})
	b := recorded[0]
	v.RecordedBy = b.Name
	v.Revision = b.Status.EtcdRevision
	if b.Status.BackupSize != v.Size || b.Status.SHA256 != v.SHA256 {
		return v, failure.Permanent(fmt.Errorf("backup %s does not match what EtcdBackup %s recorded when it stored it: recorded %d bytes with sha256 %s, found %d bytes with sha256 %s; it was overwritten or damaged since",
			v.Path, b.Name, b.Status.BackupSize, b.Status.SHA256, v.Size, v.SHA256))
	}
	return v, nil
}
