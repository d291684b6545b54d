package v1beta2

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTargetsClusterByName(t *testing.T) {
	byName := &EtcdBackup{Spec: BackupSpec{ClusterName: "example"}}
	byURL := &EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: BackupSpec{EtcdEndpoints: []string{"https://example-client.ns.svc:2379"}}}
	for _, tc := range []struct {
		name string
		b    *EtcdBackup
		want bool
	}{
		{"spec.clusterName names the cluster", byName, true},
		{"spec.clusterName names only that cluster", &EtcdBackup{Spec: BackupSpec{ClusterName: "other"}}, false},
		{"an endpoint through the client service names the cluster", byURL, true},
		{"the client service of another namespace is a namesake",
			&EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: BackupSpec{EtcdEndpoints: []string{"http://example-client.other.svc:2379"}}}, false},
	} {
		if got := tc.b.TargetsCluster("example"); got != tc.want {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
}

func TestRestoreSourceOfCarriesEncryption(t *testing.T) {
	b := &EtcdBackup{
		Spec: BackupSpec{ClusterName: "example", StorageType: BackupStorageTypeS3,
			BackupSource: BackupSource{S3: &S3BackupSource{Path: "b/k", AWSSecret: "aws"}},
			Encryption:   &BackupEncryption{KeySecret: "backup-key"}},
		Status: BackupStatus{Succeeded: true, BackupPath: "b/k_v1"},
	}
	_, src, ok := RestoreSourceOf(b)
	if !ok || src.Encryption == nil || src.Encryption.KeySecret != "backup-key" || src.S3.Path != "b/k_v1" {
		t.Fatalf("%v %+v", ok, src)
	}
}
