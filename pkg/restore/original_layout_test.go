package restore

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// Backups the original's backup operator wrote are restored from the path it
// wrote them to. Its one-shot backups are the object spec.<store>.path names;
// its periodic ones append "_v<revision>_<UTC time as 2006-01-02-15:04:05>"
// to that path (pkg/backup/backup_manager.go in v0.9.4). The user copies the
// object's name into the EtcdRestore, colons and all.
func TestBackupsTheOriginalWroteAreRestoredFromTheirPath(t *testing.T) {
	// What the original's EtcdBackup status held: no path, size or checksum,
	// so there is nothing to compare the object with.
	originalRecord := func(name string) *api.EtcdBackup {
		return &api.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
			Status: api.BackupStatus{Succeeded: true, EtcdVersion: "3.2.13", EtcdRevision: 1234,
				LastSuccessDate: metav1.NewTime(time.Date(2019, 2, 27, 10, 15, 0, 0, time.UTC))},
		}
	}
	for _, tc := range []struct {
		name, key string
	}{
		{"a one-shot backup, at the path as given", "example-etcd-cluster-backup"},
		{"a periodic backup, with the revision and time appended", "example-etcd-cluster_v1234_2019-02-27-10:15:00"},
		{"a periodic backup under folders", "prod/eu-west/etcd_v98765_2019-12-31-23:59:59"},
		{"a periodic backup of revision 1, the first of a new cluster", "example-etcd-cluster_v1_2019-02-27-10:15:00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, store := startS3(t)
			putObject(t, store, tc.key, snapshot)
			f := newFixture(t, kubeObjects(), newCluster(), newRestore(testCluster, tc.key, srv),
				originalRecord("example-etcd-cluster-periodic-backup"))

			f.mustSync(testCluster)
			er := f.restore(testCluster)
			if er.Status.Phase != api.RestorePhaseRestoring {
				t.Fatalf("the backup %s was not accepted: phase %q, reason %q", tc.key, er.Status.Phase, er.Status.Reason)
			}
			plan, ok, err := PlanOf(er)
			if !ok || err != nil {
				t.Fatalf("no plan: %v", err)
			}
			if want := testBucket + "/" + tc.key; plan.Backup.Path != want {
				t.Errorf("the plan restores %q, want %q", plan.Backup.Path, want)
			}
			if plan.Backup.Size != int64(len(snapshot)) || plan.Backup.SHA256 != sha256Hex(snapshot) {
				t.Errorf("the plan's backup is %d bytes with sha256 %s, want the object put: %d bytes, %s",
					plan.Backup.Size, plan.Backup.SHA256, len(snapshot), sha256Hex(snapshot))
			}
			if plan.Backup.RecordedBy != "" {
				t.Errorf("the original's EtcdBackup recorded no path, yet the plan says %s recorded it", plan.Backup.RecordedBy)
			}
		})
	}
}
