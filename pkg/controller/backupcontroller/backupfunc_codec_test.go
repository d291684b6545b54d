package backupcontroller

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

func keySecret(name string, data []byte) *corev1.Secret {
	return awsSecret(name, map[string][]byte{api.EncryptionKeySecretKey: data})
}

// An EtcdBackup with compression and encryption, through the Backuper into the
// in-process S3 server: the key comes from the secret, base64 as openssl prints it.
func TestBackuperCompressesAndEncrypts(t *testing.T) {
	e := startEtcd(t)
	const keys = 100
	if err := e.Fill(context.Background(), "/k/", keys, 1024); err != nil {
		t.Fatal(err)
	}
	srv := startS3(t)
	key := bytes.Repeat([]byte{7}, backup.KeySize)
	kube := kubefake.NewSimpleClientset(awsSecret("aws", backuptest.AWSSecretData()),
		keySecret("backup-key", []byte(base64.StdEncoding.EncodeToString(key)+"\n")))
	b := &Backuper{Secrets: kube.CoreV1(), DialTimeout: time.Second, VerifyDir: t.TempDir()}
	eb := s3Backup("sealed", srv, e.Endpoint)
	eb.Spec.Compression = api.BackupCompressionZstd
	eb.Spec.Encryption = &api.BackupEncryption{KeySecret: "backup-key"}
	// Verified as well: the read-back decodes with the backup's own key.
	res, err := b.Backup(context.Background(), eb, true)
	if err != nil {
		t.Fatal(err)
	}
	// The status records the codec and the id of the key the header carries.
	wantEncoding := api.BackupEncoding{Compression: api.BackupCompressionZstd, Encryption: api.BackupEncryptionAESGCM,
		KeySecret: "backup-key", KeyID: hex.EncodeToString(backup.KeyID(key))}
	if got := encodingStatus(eb, res); got == nil || *got != wantEncoding {
		t.Errorf("status.encoding %+v, want %+v", got, wantEncoding)
	}
	if res.VerifyErr != nil || res.Verified == nil || res.Verified.TotalKeys < keys {
		t.Fatalf("verification of the compressed and encrypted backup: %+v, %v", res.Verified, res.VerifyErr)
	}
	store, _ := s3store.New(srv.StoreConfig("backups"))
	rc, _, err := store.Get(context.Background(), "clusters/sealed")
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := io.ReadAll(rc)
	_ = rc.Close()
	if res.SHA256 != backuptest.SHA256Hex(stored) || res.Size != int64(len(stored)) {
		t.Fatalf("result %d bytes %s, stored %d bytes %s", res.Size, res.SHA256, len(stored), backuptest.SHA256Hex(stored))
	}
	dec, form, err := backup.Decode(bytes.NewReader(stored), key)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := io.ReadAll(dec)
	if err != nil || !form.Encrypted || form.Compression != backup.CompressionZstd {
		t.Fatalf("%v %v", form, err)
	}
	if n, err := backuptest.CheckSnapshot(t.TempDir(), snap); err != nil || n != keys {
		t.Fatalf("%d keys, %v", n, err)
	}
}

func TestBackuperRefusals(t *testing.T) {
	srv := startS3(t)
	kube := kubefake.NewSimpleClientset(awsSecret("aws", backuptest.AWSSecretData()), keySecret("short-key", []byte("too short")))
	clusters := fake.NewSimpleClientset(&api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "elsewhere"}})
	tests := []struct {
		name        string
		clusterWide bool
		change      func(*api.EtcdBackup)
		want        string
		permanent   bool
	}{
		{"a key secret that does not exist yet is retried", false,
			func(eb *api.EtcdBackup) { eb.Spec.Encryption = &api.BackupEncryption{KeySecret: "nope"} },
			"secret ns/nope (spec.encryption.keySecret) not found", false},
		{"a key of the wrong size is final", false,
			func(eb *api.EtcdBackup) { eb.Spec.Encryption = &api.BackupEncryption{KeySecret: "short-key"} },
			`secret ns/short-key (spec.encryption.keySecret): "encryption-key" must hold 32 bytes`, true},
		{"a cluster that does not exist yet is retried", false,
			func(eb *api.EtcdBackup) { eb.Spec.EtcdEndpoints, eb.Spec.ClusterName = nil, "other" },
			"EtcdCluster ns/other (spec.clusterName) not found", false},
		{"cluster-wide, another namespace's service is refused", true,
			func(eb *api.EtcdBackup) { eb.Spec.EtcdEndpoints = []string{"http://other-client.elsewhere.svc:2379"} },
			`"http://other-client.elsewhere.svc:2379" names namespace elsewhere; a cluster-wide backup operator backs up only clusters of the EtcdBackup's own namespace ns`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &Backuper{Secrets: kube.CoreV1(), Clusters: clusters, ClusterWide: tc.clusterWide, DialTimeout: time.Second}
			eb := s3Backup("case", srv, "http://example-client.ns.svc:2379")
			tc.change(eb)
			_, err := b.Backup(context.Background(), eb, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if failure.IsPermanent(err) != tc.permanent {
				t.Errorf("permanent = %v, want %v", failure.IsPermanent(err), tc.permanent)
			}
		})
	}
}
