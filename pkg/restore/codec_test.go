package restore

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/absstore"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/gcsstore"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// A real etcd backed up through every codec into every real store server;
// each backup is then verified as a restore does (with the key, on the stored
// bytes) and fetched as the seed does, and the file fetch-backup writes is the
// snapshot that etcd sent.
func TestEncodedBackupsVerifyAndFetchOnEveryStore(t *testing.T) {
	ctx := context.Background()
	e, err := backuptest.StartEtcd(backuptest.EtcdOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	const keys = 150
	if err := e.Fill(ctx, "/enc/", keys, 1024); err != nil {
		t.Fatal(err)
	}
	vgw, az, gcs := startStoreServers(ctx, t)
	stores := map[string]func() (backup.Store, error){
		"S3 (versitygw)": func() (backup.Store, error) { return openS3(vgw) },
		"ABS (Azurite)":  func() (backup.Store, error) { return openABS(az) },
		"GCS (fake-gcs)": func() (backup.Store, error) { return openGCS(ctx, gcs) },
	}
	src := backup.Source{Endpoints: []string{e.Endpoint}, DialTimeout: time.Second}
	for name, open := range stores {
		store, err := open()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range backuptest.Codecs() {
			t.Run(name+"/"+backuptest.CodecName(c), func(t *testing.T) {
				key := "enc/" + strings.ReplaceAll(backuptest.CodecName(c), " ", "")
				res, err := backup.Run(ctx, backup.Job{Source: src, Store: store, Bucket: "backups", Key: key, Codec: c})
				if err != nil {
					t.Fatal(err)
				}
				vb, err := VerifySnapshot(ctx, store, storage.Location{Bucket: "backups", Key: key}, c.Key)
				if err != nil {
					t.Fatal(err)
				}
				if vb.Size != res.Size || vb.SHA256 != res.SHA256 || vb.Encrypted != (c.Key != nil) || vb.Compression != c.Compression {
					t.Fatalf("verified %+v; the backup recorded %d bytes, sha256 %s", vb, res.Size, res.SHA256)
				}
				rc, _, err := store.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				stored, _ := io.ReadAll(rc)
				_ = rc.Close()
				code, msg, file := fetchFrom(t, serve(stored), func(o *FetchOptions) {
					o.Size, o.SHA256, o.Key = vb.Size, vb.SHA256, c.Key
				})
				if code != 0 {
					t.Fatalf("fetch: %s", msg)
				}
				if n, err := backuptest.CheckSnapshot(t.TempDir(), file); err != nil || n != keys {
					t.Fatalf("fetched file: %d keys, %v", n, err)
				}
			})
		}
	}
}

func TestVerifySnapshotRefusesKeysAndDamage(t *testing.T) {
	ctx := context.Background()
	gcs, err := backuptest.StartGCS("backups")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gcs.Close)
	store, err := openGCS(ctx, gcs)
	if err != nil {
		t.Fatal(err)
	}
	key, other := bytes.Repeat([]byte{1}, backup.KeySize), bytes.Repeat([]byte{2}, backup.KeySize)
	put := func(name string, data []byte) {
		if _, _, err := store.Put(ctx, name, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	encrypted := encodeAll(t, backup.Codec{Key: key, ChunkSize: 4096, Compression: backup.CompressionGzip}, snapshot)
	put("encrypted", encrypted)
	put("plain", snapshot)
	put("truncated", encrypted[:len(encrypted)/2])
	tampered := bytes.Clone(encrypted)
	tampered[len(tampered)/2] ^= 1
	put("tampered", tampered)
	// A snapshot damaged before it was encrypted: every chunk authenticates,
	// and the trailer check inside catches it.
	damaged := bytes.Clone(snapshot)
	damaged[100] ^= 1
	put("damaged-inside", encodeAll(t, backup.Codec{Key: key}, damaged))

	for _, tc := range []struct {
		name, object string
		key          []byte
		want         string
	}{
		{"no key for an encrypted backup", "encrypted", nil, "is encrypted: name the Secret holding its key in spec.encryption.keySecret"},
		{"the wrong key", "encrypted", other, "was encrypted with a different key"},
		{"a key for a backup that is not encrypted", "plain", key, "is not encrypted, but spec.encryption names a key"},
		{"a truncated encrypted backup", "truncated", key, "cannot be decoded"},
		{"a tampered encrypted backup", "tampered", key, "fails authentication"},
		{"a snapshot damaged before encryption", "damaged-inside", key, "not an intact etcd snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifySnapshot(ctx, store, storage.Location{Bucket: "backups", Key: tc.object}, tc.key)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !failure.IsPermanent(err) {
				t.Fatalf("got %v, want a permanent error containing %q", err, tc.want)
			}
		})
	}
}

func TestFetchDecodesAndRefusesBadStreams(t *testing.T) {
	key := bytes.Repeat([]byte{3}, backup.KeySize)
	stored := encodeAll(t, backup.Codec{Key: key, Compression: backup.CompressionZstd, ChunkSize: 4096}, snapshot)
	withKey := func(k []byte) func(*FetchOptions) {
		return func(o *FetchOptions) { o.Size, o.SHA256, o.Key = int64(len(stored)), sha256Hex(stored), k }
	}
	code, msg, file := fetchFrom(t, serve(stored), withKey(key))
	if code != 0 || !bytes.Equal(file, snapshot) {
		t.Fatalf("exit %d (%s), %d bytes written", code, msg, len(file))
	}
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		key  []byte
		want string
	}{
		{"the wrong key", serve(stored), bytes.Repeat([]byte{4}, backup.KeySize), "encrypted with a different key"},
		{"no key", serve(stored), nil, "no encryption key was given"},
		// The size and sha256 are checked first: whatever the bytes decode to,
		// they are not the verified backup.
		{"other bytes of the same length", serve(append(bytes.Clone(stored[:len(stored)-1]), stored[len(stored)-1]^1)), key, "the downloaded backup has sha256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg, file := fetchFrom(t, tc.h, withKey(tc.key))
			if code == 0 || !strings.Contains(msg, tc.want) || file != nil {
				t.Fatalf("exit %d, %q, file of %d bytes; want a failure saying %q and no file", code, msg, len(file), tc.want)
			}
		})
	}
}

func encodeAll(t *testing.T, c backup.Codec, data []byte) []byte {
	t.Helper()
	rc := c.Encode(bytes.NewReader(data))
	defer func() { _ = rc.Close() }()
	out, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func openS3(v *backuptest.VersityGW) (backup.Store, error) {
	return s3store.New(v.StoreConfig("backups"))
}
func openABS(a *backuptest.Azurite) (backup.Store, error) {
	return absstore.New(a.StoreConfig("backups"))
}
func openGCS(ctx context.Context, g *backuptest.GCS) (backup.Store, error) {
	return gcsstore.New(ctx, g.StoreConfig("backups"))
}
