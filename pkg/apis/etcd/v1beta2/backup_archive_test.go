package v1beta2_test

import (
	"strings"
	"testing"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

func TestBackupArchiveValidation(t *testing.T) {
	tests := []struct {
		name   string
		policy *api.BackupPolicy
		// want is part of the error; "" means valid.
		want string
	}{
		{"an archive beside an interval is valid", &api.BackupPolicy{BackupIntervalInSecond: 60, Archive: &api.BackupArchive{}}, ""},
		{"an archive beside a schedule is valid", &api.BackupPolicy{Schedule: "@hourly", Archive: &api.BackupArchive{IntervalInSecond: 10}}, ""},
		{"an archive of a one-shot backup is refused", &api.BackupPolicy{Archive: &api.BackupArchive{}},
			"spec.backupPolicy.archive: Forbidden: " + api.BackupArchiveNeedsPeriodicMessage},
		{"a negative interval is refused", &api.BackupPolicy{BackupIntervalInSecond: 60, Archive: &api.BackupArchive{IntervalInSecond: -1}},
			"spec.backupPolicy.archive.intervalInSecond: Invalid value: -1"},
		{"an interval past an hour is refused", &api.BackupPolicy{BackupIntervalInSecond: 60, Archive: &api.BackupArchive{IntervalInSecond: 3601}},
			"spec.backupPolicy.archive.intervalInSecond: Invalid value: 3601"},
		{"a periodic backup without an archive is valid as before", &api.BackupPolicy{BackupIntervalInSecond: 60}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := api.BackupSpec{StorageType: api.BackupStorageTypeS3, EtcdEndpoints: []string{"http://etcd:2379"},
				BackupSource: api.BackupSource{S3: &api.S3BackupSource{Path: "bucket/key", AWSSecret: "aws"}}, BackupPolicy: tc.policy}
			err := spec.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestBackupArchiveInterval(t *testing.T) {
	tests := []struct {
		name    string
		archive *api.BackupArchive
		want    time.Duration
	}{
		{"an empty archive waits the default", &api.BackupArchive{}, api.DefaultArchiveIntervalInSecond * time.Second},
		{"an interval is in seconds", &api.BackupArchive{IntervalInSecond: 2}, 2 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.archive.Interval(); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
