package crds

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// The apiserver drops every field its schema does not name from what it
// stores, silently: a status field the operators write but the schema lacks
// is lost on a real cluster while fake clientsets keep it.
func TestTheApiserverKeepsEveryFieldOfTheArchiveStatus(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 28, 14, 32, 10, 0, time.UTC))
	for _, tc := range []struct {
		name    string
		archive api.BackupArchiveStatus
	}{
		{"progress and a gap", api.BackupArchiveStatus{Prefix: "b/k.archive/", LastRevision: 9, LastTime: &at, LagSeconds: 1, LagRevisions: 2,
			LastGap: &api.BackupArchiveGap{From: 3, CompactedTo: 4, When: at, SnapshotRevision: 5}}},
		{"the recovery point", api.BackupArchiveStatus{RecoveryPoint: &api.BackupRecoveryPoint{Revision: 9, Time: &at, SnapshotRevision: 5}}},
		{"a drill", api.BackupArchiveStatus{Drill: &api.BackupArchiveDrill{Time: at, Result: api.BackupArchiveDrillFailed, Reason: "r",
			BackupPath: "b/k_v5_x", SnapshotRevision: 5, Revision: 9, Revisions: 4, Keys: 7, LastPassedTime: &at}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eb := api.EtcdBackup{TypeMeta: metav1.TypeMeta{APIVersion: "etcd.database.coreos.com/v1beta2", Kind: api.EtcdBackupResourceKind},
				ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: api.BackupStatus{Archive: &tc.archive}}
			raw, err := json.Marshal(eb)
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := utiljson.Unmarshal(raw, &obj); err != nil {
				t.Fatal(err)
			}
			before, _ := json.Marshal(obj)
			a := admissions(t)[api.EtcdBackupResourceKind]
			pruning.Prune(obj, a.structural, true)
			after, _ := json.Marshal(obj)
			if diff := cmp.Diff(string(before), string(after)); diff != "" {
				t.Fatalf("the apiserver would drop fields the operator writes (-written +stored):\n%s", diff)
			}
		})
	}
}
