package backup_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"testing"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
)

// A real etcd's snapshot, backed up through every codec into the in-process S3
// server: the status's sha256 is that of the stored bytes, and decoding them
// gives back a snapshot that passes its trailer check and opens with bbolt.
func TestEncodedBackupsRestoreToTheSnapshot(t *testing.T) {
	e := startEtcd(t)
	const keys = 200
	if err := e.Fill(context.Background(), "/codec/", keys, 2048); err != nil {
		t.Fatal(err)
	}
	_, store := startS3(t, nil, "backups")
	for _, c := range backuptest.Codecs() {
		t.Run(backuptest.CodecName(c), func(t *testing.T) {
			key := "codec/" + backuptest.CodecName(c)
			res, err := backup.Run(context.Background(), backup.Job{
				Source: backup.Source{Endpoints: []string{e.Endpoint}, DialTimeout: dialTimeout},
				Store:  store, Bucket: "backups", Key: key, Codec: c,
			})
			if err != nil {
				t.Fatal(err)
			}
			stored := readObject(t, store, key)
			if res.Size != int64(len(stored)) || res.SHA256 != backuptest.SHA256Hex(stored) {
				t.Fatalf("result says %d bytes sha256 %s; stored %d bytes sha256 %s", res.Size, res.SHA256, len(stored), backuptest.SHA256Hex(stored))
			}
			rc, form, err := backup.Decode(bytes.NewReader(stored), c.Key)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := io.ReadAll(rc)
			_ = rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			if form.Compression != c.Compression || form.Encrypted != (c.Key != nil) {
				t.Errorf("stored as %v", form)
			}
			// The result says what the object is, for status.encoding.
			wantKeyID := ""
			if c.Key != nil {
				wantKeyID = hex.EncodeToString(backup.KeyID(c.Key))
			}
			if res.Compression != c.Compression || res.KeyID != wantKeyID {
				t.Errorf("result says compression %q key id %q, want %q %q", res.Compression, res.KeyID, c.Compression, wantKeyID)
			}
			if c.Compression != "" && len(stored) >= len(snap) {
				t.Errorf("compressed to %d bytes from %d", len(stored), len(snap))
			}
			if n, err := backuptest.CheckSnapshot(t.TempDir(), snap); err != nil || n != keys {
				t.Fatalf("decoded snapshot: %d keys, %v", n, err)
			}
		})
	}
}
