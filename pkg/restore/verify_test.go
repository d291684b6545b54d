package restore

import (
	"bytes"
	"crypto/sha256"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// The trailer check must not depend on how the stream is cut into writes: the
// S3 body arrives in chunks of any size, some shorter than the trailer.
func TestSnapshotCheckWhateverTheChunks(t *testing.T) {
	for _, chunk := range []int{1, 7, 31, 32, 33, 1000, 4096, len(snapshot)} {
		c := NewSnapshotCheck()
		for data := snapshot; len(data) > 0; {
			n := min(chunk, len(data))
			_, _ = c.Write(data[:n])
			data = data[n:]
		}
		if err := c.Verify(); err != nil {
			t.Errorf("chunks of %d: %v", chunk, err)
		}
		if c.Size() != int64(len(snapshot)) || c.SHA256() != sha256Hex(snapshot) {
			t.Errorf("chunks of %d: size %d sha256 %s", chunk, c.Size(), c.SHA256())
		}
	}
}

func TestSnapshotCheckRefusesDamage(t *testing.T) {
	flipLast := bytes.Clone(snapshot)
	flipLast[len(flipLast)-1] ^= 1
	body := []byte("hello")
	sum := sha256.Sum256(body)
	tests := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"intact", snapshot, true},
		{"trailer damaged", flipLast, false},
		{"truncated", snapshot[:len(snapshot)-1], false},
		{"trailer only", snapshot[len(snapshot)-sha256.Size:], false},
		{"empty", nil, false},
		{"any bytes followed by their sha256", append(bytes.Clone(body), sum[:]...), true},
	}
	for _, tc := range tests {
		c := NewSnapshotCheck()
		_, _ = c.Write(tc.data)
		if err := c.Verify(); (err == nil) != tc.ok {
			t.Errorf("%s: Verify() = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

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
