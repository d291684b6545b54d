package restore

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

func TestCheckRecordedUsesTheNewestRecord(t *testing.T) {
	v := VerifiedBackup{Path: "b/k", Size: 10, SHA256: "new"}
	at := func(min int) metav1.Time { return metav1.NewTime(time.Date(2024, 1, 1, 0, min, 0, 0, time.UTC)) }
	rec := func(name string, path string, size int64, sum string, when metav1.Time) api.EtcdBackup {
		return api.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: api.BackupStatus{BackupPath: path, BackupSize: size, SHA256: sum, LastSuccessDate: when}}
	}
	tests := []struct {
		name    string
		backups []api.EtcdBackup
		by      string
		wantErr bool
	}{
		{"no record", nil, "", false},
		{"records of other paths only", []api.EtcdBackup{rec("a", "b/other", 1, "x", at(1))}, "", false},
		{"matching record", []api.EtcdBackup{rec("a", "b/k", 10, "new", at(1))}, "a", false},
		{"an older record of an overwritten one-shot path does not count", []api.EtcdBackup{
			rec("old", "b/k", 99, "old", at(1)), rec("new", "b/k", 10, "new", at(2))}, "new", false},
		{"the newest record disagrees", []api.EtcdBackup{
			rec("old", "b/k", 10, "new", at(1)), rec("new", "b/k", 10, "other", at(2))}, "new", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckRecorded(v, tc.backups)
			if (err != nil) != tc.wantErr || got.RecordedBy != tc.by {
				t.Fatalf("CheckRecorded = %+v, %v", got, err)
			}
			if err != nil && !failure.IsPermanent(err) {
				t.Error("a mismatch is not something a retry fixes")
			}
		})
	}
}
