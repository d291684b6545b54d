package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// TestDisasterRecovery covers the opt-in disaster recovery over passes.
func TestDisasterRecovery(t *testing.T) {
	lost := func(cl *api.EtcdCluster) {
		at := testStart.Add(-time.Hour).Format(time.RFC3339)
		cl.Status.Conditions = []api.ClusterCondition{{Type: api.ClusterConditionAvailable, Status: corev1.ConditionFalse,
			Reason: "LostQuorum", LastTransitionTime: at, LastUpdateTime: at}}
	}
	t.Run("the survivor on its claim becomes a one-member cluster, then runs without the flag, and the loss is recorded", func(t *testing.T) {
		f := newFixture(t, newTestCluster(withPVC, lost, func(cl *api.EtcdCluster) {
			cl.Spec.DisasterRecovery = &api.DisasterRecoveryPolicy{Enabled: true}
		}))
		f.withMembers(memberA, memberB, memberC)
		f.pod(memberA)
		f.claim(memberA) // the claims of B and C are gone with their node
		f.etcd.noQuorum = true
		f.c.lastRevision = 120
		f.etcd.revision = 100
		f.seeQuorumLost()
		f.mustPass() // reads etcd, forces
		f.mustPass()
		expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberA, "create pods " + memberA})
		pod := f.createdPod(memberA)
		if !slices.Contains(pod.Spec.Containers[0].Command, "--force-new-cluster") {
			t.Fatalf("the survivor restarted without --force-new-cluster: %q", pod.Spec.Containers[0].Command)
		}
		s := f.mustStatus()
		if s.Recovery == nil || s.Recovery.FromMember != memberA || s.Recovery.RecoveredRevision != 100 || s.Recovery.LastSeenRevision != 120 {
			t.Errorf("status.recovery = %+v", s.Recovery)
		}
		if !hasEvent(f.events(), "Warning DisasterRecovery") {
			t.Error("no DisasterRecovery event")
		}

		// etcd made the survivor a one-member cluster.
		f.etcd.noQuorum = false
		f.etcd.members = f.etcd.members[:1]
		f.etcd.leader = memberID(memberA)
		f.showCreatedPods()
		f.kube.ClearActions()
		f.mustPass()
		f.mustPass()
		expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberA, "create pods " + memberA})
		if cmd := f.createdPod(memberA).Spec.Containers[0].Command; slices.Contains(cmd, "--force-new-cluster") {
			t.Errorf("the survivor kept --force-new-cluster: %q", cmd)
		}
	})
	fromBackup := func(t *testing.T, objs ...runtime.Object) *fixture {
		f := newFixture(t, newTestCluster(lost, func(cl *api.EtcdCluster) {
			cl.Spec.DisasterRecovery = &api.DisasterRecoveryPolicy{Enabled: true, FromBackup: true}
		}))
		f.withMembers(memberA, memberB, memberC)
		b := &api.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Name: "backup", Namespace: testNS},
			Spec: api.BackupSpec{EtcdEndpoints: []string{"http://example-client:2379"}, StorageType: api.BackupStorageTypeS3,
				BackupSource: api.BackupSource{S3: &api.S3BackupSource{Path: "bucket/key", AWSSecret: "aws"}}},
			Status: api.BackupStatus{Succeeded: true, BackupPath: "bucket/key", LastSuccessDate: metav1.NewTime(testStart.Add(-time.Hour)), EtcdRevision: 50},
		}
		for _, o := range append(objs, b) {
			if err := f.crs.Tracker().Add(o); err != nil {
				t.Fatal(err)
			}
		}
		return f
	}
	t.Run("the EtcdRestore is one admission takes: named like the cluster", func(t *testing.T) {
		f := fromBackup(t)
		f.seeQuorumLost()
		f.mustPass()
		r, err := f.crs.EtcdV1beta2().EtcdRestores(testNS).Get(context.Background(), testName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(); err != nil {
			t.Errorf("admission refuses the operator's EtcdRestore: %v", err)
		}
	})
	t.Run("the EtcdRestore is marked as a disaster recovery, for the restored cluster to record it", func(t *testing.T) {
		f := fromBackup(t)
		f.seeQuorumLost()
		f.mustPass()
		r, err := f.crs.EtcdV1beta2().EtcdRestores(testNS).Get(context.Background(), testName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.Annotations[api.DisasterRecoveryAnnotation]; !ok {
			t.Errorf("annotations %v: the restore operator cannot tell the restore is a disaster recovery", r.Annotations)
		}
	})
	t.Run("a finished EtcdRestore of the cluster's name makes way for the recovery", func(t *testing.T) {
		old := &api.EtcdRestore{
			ObjectMeta: metav1.ObjectMeta{Name: testName, Namespace: testNS, UID: "earlier"},
			Spec:       api.RestoreSpec{EtcdCluster: api.EtcdClusterRef{Name: testName}},
			Status:     api.RestoreStatus{Phase: api.RestorePhaseCompleted, Succeeded: true},
		}
		f := fromBackup(t, old)
		f.seeQuorumLost()
		f.mustPass()
		f.mustPass()
		r, err := f.crs.EtcdV1beta2().EtcdRestores(testNS).Get(context.Background(), testName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.UID == "earlier" || r.Status.Phase != "" || r.Spec.S3 == nil || r.Spec.S3.Path != "bucket/key" {
			t.Errorf("restore %+v, want a new one from the backup", r)
		}
	})
	t.Run("with no member's data left, an EtcdRestore restores the newest successful backup of the cluster", func(t *testing.T) {
		f := newFixture(t, newTestCluster(lost, func(cl *api.EtcdCluster) {
			cl.Spec.DisasterRecovery = &api.DisasterRecoveryPolicy{Enabled: true, FromBackup: true}
		}))
		f.withMembers(memberA, memberB, memberC)
		for i, taken := range []time.Duration{2 * time.Hour, time.Hour} {
			b := &api.EtcdBackup{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("backup-%d", i), Namespace: testNS},
				Spec: api.BackupSpec{EtcdEndpoints: []string{"http://example-client:2379"}, StorageType: api.BackupStorageTypeS3,
					BackupSource: api.BackupSource{S3: &api.S3BackupSource{Path: "bucket/key", AWSSecret: "aws"}}},
				Status: api.BackupStatus{Succeeded: true, BackupPath: fmt.Sprintf("bucket/key-%d", i), LastSuccessDate: metav1.NewTime(testStart.Add(-taken)), EtcdRevision: int64(50 + i)},
			}
			if err := f.crs.Tracker().Add(b); err != nil {
				t.Fatal(err)
			}
		}
		f.seeQuorumLost()
		f.mustPass()
		restores, err := f.crs.EtcdV1beta2().EtcdRestores(testNS).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(restores.Items) != 1 {
			t.Fatalf("restores %v, %v", restores, err)
		}
		r := restores.Items[0]
		if r.Spec.EtcdCluster.Name != testName || r.Spec.S3 == nil || r.Spec.S3.Path != "bucket/key-1" || r.Spec.S3.AWSSecret != "aws" {
			t.Errorf("restore %+v, want the newest backup", r.Spec)
		}
		f.mustPass()
		again, _ := f.crs.EtcdV1beta2().EtcdRestores(testNS).List(context.Background(), metav1.ListOptions{})
		if len(again.Items) != 1 {
			t.Errorf("%d restores after another pass, want the one in progress only", len(again.Items))
		}
	})
}
