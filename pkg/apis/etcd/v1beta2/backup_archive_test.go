package v1beta2_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		{"a daily drill is valid", &api.BackupPolicy{BackupIntervalInSecond: 60,
			Archive: &api.BackupArchive{Drill: &api.BackupArchiveDrillPolicy{IntervalInSecond: 86400}}}, ""},
		{"drills switched off are valid", &api.BackupPolicy{Schedule: "@hourly",
			Archive: &api.BackupArchive{Drill: &api.BackupArchiveDrillPolicy{Enabled: new(bool)}}}, ""},
		{"a negative drill interval is refused", &api.BackupPolicy{BackupIntervalInSecond: 60,
			Archive: &api.BackupArchive{Drill: &api.BackupArchiveDrillPolicy{IntervalInSecond: -1}}},
			"spec.backupPolicy.archive.drill.intervalInSecond: Invalid value: -1: must be between 0 (before each verified snapshot) and 31536000 (a year)"},
		{"a drill interval past a year is refused", &api.BackupPolicy{BackupIntervalInSecond: 60,
			Archive: &api.BackupArchive{Drill: &api.BackupArchiveDrillPolicy{IntervalInSecond: api.MaxArchiveDrillIntervalInSecond + 1}}},
			"spec.backupPolicy.archive.drill.intervalInSecond: Invalid value: 31536001"},
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

func TestBackupArchiveDrills(t *testing.T) {
	no, yes := false, true
	tests := []struct {
		name     string
		archive  *api.BackupArchive
		interval time.Duration
		enabled  bool
	}{
		{"without an archive nothing is drilled", nil, 0, false},
		{"an archive without a drill setting drills with the verified snapshots", &api.BackupArchive{}, 0, true},
		{"an empty drill setting drills with the verified snapshots", &api.BackupArchive{Drill: &api.BackupArchiveDrillPolicy{}}, 0, true},
		{"an interval gives drills a clock of their own", &api.BackupArchive{Drill: &api.BackupArchiveDrillPolicy{IntervalInSecond: 86400}}, 24 * time.Hour, true},
		{"enabled true with an interval drills on the interval",
			&api.BackupArchive{Drill: &api.BackupArchiveDrillPolicy{Enabled: &yes, IntervalInSecond: 60}}, time.Minute, true},
		{"enabled false drills nothing, whatever the interval",
			&api.BackupArchive{Drill: &api.BackupArchiveDrillPolicy{Enabled: &no, IntervalInSecond: 60}}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			interval, enabled := tc.archive.Drills()
			if interval != tc.interval || enabled != tc.enabled {
				t.Fatalf("Drills() = %v, %v; want %v, %v", interval, enabled, tc.interval, tc.enabled)
			}
		})
	}
}

func TestBackupArchiveDrillLastPassed(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name  string
		drill *api.BackupArchiveDrill
		want  *metav1.Time
	}{
		{"no drill has no pass", nil, nil},
		{"a failed drill after a pass keeps that pass", &api.BackupArchiveDrill{Time: now, Result: api.BackupArchiveDrillFailed, LastPassedTime: &then}, &then},
		{"a compacted drill before any pass has none", &api.BackupArchiveDrill{Time: now, Result: api.BackupArchiveDrillCompacted}, nil},
		{"a passed drill written before lastPassedTime was is its own pass", &api.BackupArchiveDrill{Time: now, Result: api.BackupArchiveDrillPassed}, &now},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.drill.LastPassed(); !got.Equal(tc.want) {
				t.Fatalf("LastPassed() = %v, want %v", got, tc.want)
			}
		})
	}
}
