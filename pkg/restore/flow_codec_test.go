package restore

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
)

// A restore of an encrypted, compressed backup: verified with the key from the
// restore's Secret, recorded in the plan as stored (sha256 of the stored bytes),
// and the seed's fetch-backup gets the Secret's key, and the flag to read it.
func TestEncryptedBackupIsVerifiedAndItsKeyGivenToTheSeed(t *testing.T) {
	srv, store := startS3(t)
	key := bytes.Repeat([]byte{9}, backup.KeySize)
	stored := encodeAll(t, backup.Codec{Compression: backup.CompressionGzip, Key: key}, snapshot)
	putObject(t, store, "sealed.db", stored)
	keySecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "backup-key", Namespace: testNamespace},
		Data: map[string][]byte{api.EncryptionKeySecretKey: key}}
	er := newRestore(testCluster, "sealed.db", srv)
	er.Spec.Encryption = &api.BackupEncryption{KeySecret: "backup-key"}
	f := newFixture(t, []k8sruntime.Object{awsSecretObject(), keySecret}, newCluster(), er)
	f.mustSync(testCluster)
	plan, ok, err := PlanOf(f.restore(testCluster))
	if !ok || err != nil {
		t.Fatalf("no plan (%v); status %+v", err, f.restore(testCluster).Status)
	}
	if !plan.Backup.Encrypted || plan.Backup.Compression != backup.CompressionGzip ||
		plan.Backup.Size != int64(len(stored)) || plan.Backup.SHA256 != sha256Hex(stored) {
		t.Fatalf("plan's backup %+v", plan.Backup)
	}
	f.mustSync(testCluster)
	seed, err := f.kube.CoreV1().Pods(testNamespace).Get(context.Background(), SeedMemberName(testCluster, restoreUID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var fetch *corev1.Container
	for i, c := range seed.Spec.InitContainers {
		if c.Name == FetchContainerName {
			fetch = &seed.Spec.InitContainers[i]
		}
	}
	if fetch == nil || !strings.Contains(strings.Join(fetch.Command, " "), "--"+FetchFlagKeyFile+"="+KeyFile) {
		t.Fatalf("fetch-backup is not told where the key is: %+v", fetch)
	}
	found := false
	for _, v := range seed.Spec.Volumes {
		found = found || v.Secret != nil && v.Secret.SecretName == "backup-key"
	}
	if !found {
		t.Fatalf("the seed does not mount Secret backup-key: %+v", seed.Spec.Volumes)
	}
}

func TestEncryptedBackupWithoutAKeyFailsBeforeTheClusterIsTouched(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "sealed.db", encodeAll(t, backup.Codec{Key: bytes.Repeat([]byte{9}, backup.KeySize)}, snapshot))
	f := newFixture(t, []k8sruntime.Object{awsSecretObject()}, newCluster(), newRestore(testCluster, "sealed.db", srv))
	f.mustSync(testCluster)
	st := f.restore(testCluster).Status
	if st.Phase != api.RestorePhaseFailed || !strings.Contains(st.Reason, "is encrypted: name the Secret holding its key") {
		t.Fatalf("status %+v", st)
	}
	if f.cluster() == nil {
		t.Fatal("the cluster was deleted")
	}
}
