package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// What a disaster recovery from a backup asks the restore operator for, and
// what it tells: the newest backup's snapshot alone, or, when that backup
// keeps an archive, its newest change, which the restore operator finds.
func TestDisasterRecoveryRestoresTheNewestArchivedChange(t *testing.T) {
	lost := func(cl *api.EtcdCluster) {
		at := testStart.Add(-time.Hour).Format(time.RFC3339)
		cl.Status.Conditions = []api.ClusterCondition{{Type: api.ClusterConditionAvailable, Status: corev1.ConditionFalse,
			Reason: "LostQuorum", LastTransitionTime: at, LastUpdateTime: at}}
	}
	archived := metav1.NewTime(testStart.Add(-3 * time.Second))
	// backup is a succeeded periodic EtcdBackup of the cluster at path.
	backup := func(name, path string, taken time.Duration, archive *api.BackupArchive, status *api.BackupArchiveStatus) *api.EtcdBackup {
		return &api.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
			Spec: api.BackupSpec{EtcdEndpoints: []string{"http://example-client:2379"}, StorageType: api.BackupStorageTypeS3,
				BackupSource: api.BackupSource{S3: &api.S3BackupSource{Path: path, AWSSecret: "aws"}},
				BackupPolicy: &api.BackupPolicy{BackupIntervalInSecond: 600, Archive: archive}},
			Status: api.BackupStatus{Succeeded: true, BackupPath: path + "_v50_2026-11-28-10:00:00",
				LastSuccessDate: metav1.NewTime(testStart.Add(-taken)), EtcdRevision: 50, Archive: status},
		}
	}
	every := &api.BackupArchive{IntervalInSecond: 1}
	tests := []struct {
		name    string
		backups []*api.EtcdBackup
		// path the restore reads, and whether it goes to the newest change.
		path   string
		latest bool
		// revision status.recovery says the cluster comes back with, and
		// what its message must say.
		revision int64
		says     []string
	}{{
		name:    "a backup without an archive is restored from its snapshot, and the writes after it are lost",
		backups: []*api.EtcdBackup{backup("nightly", "bucket/nightly", time.Hour, nil, nil)},
		path:    "bucket/nightly_v50_2026-11-28-10:00:00", revision: 50,
		says: []string{"from EtcdBackup nightly (bucket/nightly_v50_2026-11-28-10:00:00", "writes after it are lost"},
	}, {
		name:    "a backup with an archive is restored to the newest change the restore operator finds in it",
		backups: []*api.EtcdBackup{backup("archived", "bucket/archived", time.Hour, every, &api.BackupArchiveStatus{LastRevision: 340, LastTime: &archived})},
		path:    "bucket/archived", latest: true, revision: 340,
		says: []string{"up to the newest change in its archive", "last reported revision 340", "the writes the archive had not stored yet, those of about the last 1s, are lost", "status.pointInTime.shortfall"},
	}, {
		name:    "an archive that reported nothing yet is still the newest the restore operator can find",
		backups: []*api.EtcdBackup{backup("archived", "bucket/archived", time.Hour, every, nil)},
		path:    "bucket/archived", latest: true, revision: 50,
		says: []string{"has not reported an archived change yet"},
	}, {
		name: "the newest backup decides: an older one's archive is not used when a newer one keeps none",
		backups: []*api.EtcdBackup{
			backup("archived", "bucket/archived", 2*time.Hour, every, &api.BackupArchiveStatus{LastRevision: 340}),
			backup("nightly", "bucket/nightly", time.Hour, nil, nil),
		},
		path: "bucket/nightly_v50_2026-11-28-10:00:00", revision: 50,
		says: []string{"writes after it are lost"},
	}, {
		name: "the newest backup decides: its archive is used over an older backup's snapshot",
		backups: []*api.EtcdBackup{
			backup("nightly", "bucket/nightly", 2*time.Hour, nil, nil),
			backup("archived", "bucket/archived", time.Hour, every, &api.BackupArchiveStatus{LastRevision: 340}),
		},
		path: "bucket/archived", latest: true, revision: 340,
		says: []string{"EtcdBackup archived (bucket/archived) up to the newest change in its archive"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, newTestCluster(lost, func(cl *api.EtcdCluster) {
				cl.Spec.DisasterRecovery = &api.DisasterRecoveryPolicy{Enabled: true, FromBackup: true}
			}))
			f.withMembers(memberA, memberB, memberC)
			for _, b := range tc.backups {
				if err := f.crs.Tracker().Add(b); err != nil {
					t.Fatal(err)
				}
			}
			f.seeQuorumLost()
			f.mustPass()
			r, err := f.crs.EtcdV1beta2().EtcdRestores(testNS).Get(context.Background(), testName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Validate(); err != nil {
				t.Errorf("admission refuses the operator's EtcdRestore: %v", err)
			}
			if r.Spec.S3 == nil || r.Spec.S3.Path != tc.path || r.Spec.S3.AWSSecret != "aws" {
				t.Errorf("the restore reads %+v, want %s", r.Spec.S3, tc.path)
			}
			if latest := r.Spec.PointInTime != nil && r.Spec.PointInTime.Latest; latest != tc.latest ||
				r.Spec.PointInTime != nil && (r.Spec.PointInTime.Time != "" || r.Spec.PointInTime.Revision != 0) {
				t.Errorf("spec.pointInTime %+v, want latest %v", r.Spec.PointInTime, tc.latest)
			}
			s := f.mustStatus()
			if s.Recovery == nil || s.Recovery.RecoveredRevision != tc.revision {
				t.Fatalf("status.recovery %+v, want revision %d", s.Recovery, tc.revision)
			}
			events := f.events()
			for _, want := range tc.says {
				if !strings.Contains(s.Recovery.Message, want) {
					t.Errorf("status.recovery.message %q does not say %q", s.Recovery.Message, want)
				}
				if !hasEvent(events, "Warning DisasterRecovery") || !strings.Contains(strings.Join(events, "\n"), want) {
					t.Errorf("events %q do not say %q", events, want)
				}
			}
			if tc.latest && strings.Contains(s.Recovery.Message, "writes after it are lost") {
				t.Errorf("status.recovery.message %q says the writes after the snapshot are lost", s.Recovery.Message)
			}
		})
	}
}
