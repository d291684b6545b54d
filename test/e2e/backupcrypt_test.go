//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestEncryptedBackupByNameRestores: an EtcdBackup that names its cluster by
// spec.clusterName stores a zstd-compressed, AES-256-GCM encrypted snapshot;
// a restore without the key fails and leaves the cluster alone; a restore with
// it brings back exactly the backed-up keys, the seed's fetch-backup decrypting
// with the key mounted from the Secret.
func TestEncryptedBackupByNameRestores(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bed := newBackupBed(t, "backupcrypt", true)
	ns, srv, bucket, s3Secret := bed.ns, bed.srv, bed.bucket, bed.secret
	key := make([]byte, backup.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	keySecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "backup-key"},
		StringData: map[string]string{api.EncryptionKeySecretKey: base64.StdEncoding.EncodeToString(key) + "\n"}}
	if _, err := f.Kube.CoreV1().Secrets(ns).Create(ctx, keySecret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	name := framework.UniqueName("crypt")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 1, "3.5.21"))
	_, oldPods := waitReady(t, ns, name, 1, bootstrapTimeout(1))
	putKeys(t, ns, name, "/e2e/before/", 300)

	objKey := "backups/" + name + ".db"
	eb := &api.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-backup"},
		Spec: api.BackupSpec{
			ClusterName: name,
			StorageType: api.BackupStorageTypeS3,
			BackupSource: api.BackupSource{S3: &api.S3BackupSource{
				Path: bucket + "/" + objKey, AWSSecret: s3Secret, Endpoint: srv.Endpoint, ForcePathStyle: true,
			}},
			Compression: api.BackupCompressionZstd,
			Encryption:  &api.BackupEncryption{KeySecret: keySecret.Name},
		},
	}
	if _, err := f.Etcd.EtcdV1beta2().EtcdBackups(ns).Create(ctx, eb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var st api.BackupStatus
	err := framework.WaitFor(ctx, 2*time.Minute, framework.Poll, "EtcdBackup "+eb.Name+" to succeed", func(ctx context.Context) (bool, string, error) {
		got, err := f.Etcd.EtcdV1beta2().EtcdBackups(ns).Get(ctx, eb.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		st = got.Status
		if !st.Succeeded && st.Reason != "" {
			return false, "", fmt.Errorf("backup failed: %s", st.Reason)
		}
		return st.Succeeded, fmt.Sprintf("%+v", st), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stored := download(t, srv, bucket, objKey)
	if !bytes.HasPrefix(stored, []byte("ETCDBKP\x00")) || int64(len(stored)) != st.BackupSize || backuptest.SHA256Hex(stored) != st.SHA256 {
		t.Fatalf("the stored object (%d bytes, starting %q) is not the encrypted one the status records (%d bytes, sha256 %s)",
			len(stored), stored[:min(8, len(stored))], st.BackupSize, st.SHA256)
	}
	wantEncoding := api.BackupEncoding{Compression: api.BackupCompressionZstd, Encryption: api.BackupEncryptionAESGCM,
		KeySecret: keySecret.Name, KeyID: hex.EncodeToString(backup.KeyID(key))}
	if st.Encoding == nil || *st.Encoding != wantEncoding {
		t.Errorf("status.encoding %+v, want %+v", st.Encoding, wantEncoding)
	}
	putKeys(t, ns, name, "/e2e/after/", 50)

	restore := func(enc *api.BackupEncryption) *api.EtcdRestore {
		t.Helper()
		er := &api.EtcdRestore{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: api.RestoreSpec{
				BackupStorageType: api.BackupStorageTypeS3,
				RestoreSource: api.RestoreSource{S3: &api.S3RestoreSource{
					Path: bucket + "/" + objKey, AWSSecret: s3Secret, Endpoint: srv.Endpoint, ForcePathStyle: true,
				}, Encryption: enc},
				EtcdCluster: api.EtcdClusterRef{Name: name},
			},
		}
		er, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Create(ctx, er, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return er
	}

	restore(nil)
	failed := waitRestore(t, ns, name, refusedTimeout, api.RestorePhaseFailed)
	if !strings.Contains(failed.Reason, "is encrypted: name the Secret holding its key in spec.encryption.keySecret") ||
		!strings.Contains(failed.Reason, "was not touched") {
		t.Fatalf("a restore without the key: %+v", failed)
	}
	deleteRestore(t, ns, name)

	restore(&api.BackupEncryption{KeySecret: keySecret.Name})
	waitRestore(t, ns, name, restoreTimeout, api.RestorePhaseCompleted)
	waitReady(t, ns, name, 1, changeTimeout, oldPods...)
	if n := countKeys(t, ns, name, "/e2e/before/"); n != 300 {
		t.Errorf("%d of the 300 backed-up keys are back", n)
	}
	if n := countKeys(t, ns, name, "/e2e/after/"); n != 0 {
		t.Errorf("%d keys written after the backup are there; the cluster was not restored from it", n)
	}
}
