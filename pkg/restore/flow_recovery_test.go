package restore

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// The hand-over deletes the cluster and creates it again, and with it the
// status.recovery etcd-operator wrote when it started a disaster recovery
// from a backup: the restored cluster must carry the record, completed, and
// keep the record of an earlier recovery through a user's restore.
func TestTheRestoredClusterKeepsTheRecordOfItsRecovery(t *testing.T) {
	created := metav1.NewTime(time.Date(2023, 12, 31, 23, 55, 0, 0, time.UTC))
	const backupRevision, lastSeen = 1200, 1500
	path := testBucket + "/good.db"
	// What etcd-operator writes on the old cluster when it creates the restore.
	operatorsRecord := &api.RecoveryStatus{
		Time: metav1.NewTime(created.Add(time.Second)), FromBackup: path,
		RecoveredRevision: backupRevision, LastSeenRevision: lastSeen,
		Message: "Disaster recovery: no member's data is left; EtcdRestore example restores the cluster from EtcdBackup nightly",
	}
	earlier := &api.RecoveryStatus{
		Time: metav1.NewTime(time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC)), FromMember: "example-aaaaaaaaaa",
		RecoveredRevision: 800, LastSeenRevision: 900, Message: "Disaster recovery: the quorum was lost for good",
	}
	for _, tc := range []struct {
		name string
		// version of the cluster; recovery is its status.recovery before the restore.
		version  string
		recovery *api.RecoveryStatus
		// byDisasterRecovery: etcd-operator created the restore to recover the cluster.
		byDisasterRecovery bool
		want               *api.RecoveryStatus
	}{{
		name:    "a disaster recovery from a backup is recorded with the revision the cluster came back with",
		version: "3.5.21", recovery: operatorsRecord, byDisasterRecovery: true,
		want: &api.RecoveryStatus{Time: created, FromBackup: path, RecoveredRevision: backupRevision + RevisionBump, LastSeenRevision: lastSeen},
	}, {
		name:    "a disaster recovery is recorded even when etcd-operator's record of it was never stored",
		version: "3.5.21", byDisasterRecovery: true,
		want: &api.RecoveryStatus{Time: created, FromBackup: path, RecoveredRevision: backupRevision + RevisionBump, LastSeenRevision: lastSeen},
	}, {
		name:    "a disaster recovery onto an etcd whose restore keeps the backup's revision records that revision",
		version: "3.5.9", recovery: operatorsRecord, byDisasterRecovery: true,
		want: &api.RecoveryStatus{Time: created, FromBackup: path, RecoveredRevision: backupRevision, LastSeenRevision: lastSeen},
	}, {
		name:    "a user's restore keeps the record of an earlier disaster recovery",
		version: "3.5.21", recovery: earlier,
		want: earlier,
	}, {
		name:    "a user's restore of a cluster never recovered records none",
		version: "3.5.21",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, store := startS3(t)
			putObject(t, store, "good.db", snapshot)
			recorded := &api.EtcdBackup{
				ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: testNamespace},
				Status: api.BackupStatus{Succeeded: true, BackupPath: path, EtcdRevision: backupRevision,
					BackupSize: int64(len(snapshot)), SHA256: sha256Hex(snapshot)},
			}
			cl := newCluster()
			cl.Spec.Version = tc.version
			cl.Status.Recovery = tc.recovery.DeepCopy()
			er := newRestore(testCluster, "good.db", srv)
			er.CreationTimestamp = created
			if tc.byDisasterRecovery {
				er.Annotations = map[string]string{api.DisasterRecoveryAnnotation: "1500"}
			}
			f := newFixture(t, []k8sruntime.Object{awsSecretObject()}, cl, er, recorded)

			f.mustSync(testCluster) // verified, planned, the old cluster deleted
			if f.cluster() != nil {
				t.Fatal("the old cluster was not deleted")
			}
			// Nothing the operator kept in memory may be needed: one that
			// restarts here finds the record where it left it.
			cfg := f.flow.cfg
			cfg.Tokens = nil
			f.flow = NewFlow(cfg)
			f.mustSync(testCluster) // re-created, phase Running, seeded, unpaused

			restored := f.cluster()
			if restored == nil || restored.UID == oldUID {
				t.Fatalf("the cluster was not re-created: %+v", restored)
			}
			expectRecovery(t, "on the restored cluster", restored.Status.Recovery, tc.want)

			// etcd-operator grows the cluster; the record stays to the end.
			f.setClusterStatus(3, true)
			f.mustSync(testCluster)
			if st := f.restore(testCluster).Status; st.Phase != api.RestorePhaseCompleted {
				t.Fatalf("the restore did not complete: %+v", st)
			}
			expectRecovery(t, "after the restore completed", f.cluster().Status.Recovery, tc.want)
		})
	}
}

// expectRecovery compares a record with want; the message is only required
// to be there when want is.
func expectRecovery(t *testing.T, when string, got, want *api.RecoveryStatus) {
	t.Helper()
	if got == nil || want == nil {
		if got != want {
			t.Errorf("status.recovery %s = %+v, want %+v", when, got, want)
		}
		return
	}
	if got.Message == "" {
		t.Errorf("status.recovery %s has no message: %+v", when, got)
	}
	cmp := *got.DeepCopy()
	if want.Message == "" {
		cmp.Message = ""
	}
	if !equality.Semantic.DeepEqual(cmp, *want) {
		t.Errorf("status.recovery %s = %+v, want %+v", when, got, want)
	}
}
