package v1beta2_test

import (
	"strings"
	"testing"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func TestBackupScheduleNextTimes(t *testing.T) {
	tests := []struct {
		name     string
		schedule string
		timeZone string
		from     string
		// want are the next times, each after the one before.
		want []string
	}{
		{"@daily runs at midnight UTC without a time zone", "@daily", "",
			"2024-01-01T10:00:00Z", []string{"2024-01-02T00:00:00Z", "2024-01-03T00:00:00Z"}},
		{"@daily runs at midnight of its time zone", "@daily", "Europe/Berlin",
			"2024-01-01T10:00:00Z", []string{"2024-01-01T23:00:00Z", "2024-01-02T23:00:00Z"}},
		{"*/15 runs on the quarter hours", "*/15 * * * *", "",
			"2024-01-01T10:07:30Z", []string{"2024-01-01T10:15:00Z", "2024-01-01T10:30:00Z", "2024-01-01T10:45:00Z", "2024-01-01T11:00:00Z"}},
		{"a time exactly on the schedule is not next again", "0 */6 * * *", "",
			"2024-01-01T06:00:00Z", []string{"2024-01-01T12:00:00Z", "2024-01-01T18:00:00Z"}},
		{"03:00 in Berlin stays 03:00 across the spring change, 23 hours apart", "0 3 * * *", "Europe/Berlin",
			"2024-03-30T03:00:00+01:00", []string{"2024-03-31T03:00:00+02:00", "2024-04-01T03:00:00+02:00"}},
		{"03:00 in Berlin stays 03:00 across the autumn change, 25 hours apart", "0 3 * * *", "Europe/Berlin",
			"2024-10-26T03:00:00+02:00", []string{"2024-10-27T03:00:00+01:00", "2024-10-28T03:00:00+01:00"}},
		{"02:30 in Berlin does not happen on the spring Sunday, which skips it", "30 2 * * *", "Europe/Berlin",
			"2024-03-30T03:00:00+01:00", []string{"2024-04-01T02:30:00+02:00"}},
		{"02:30 in Berlin happens twice on the autumn Sunday, which repeats it", "30 2 * * *", "Europe/Berlin",
			"2024-10-26T03:00:00+02:00", []string{"2024-10-27T02:30:00+02:00", "2024-10-27T02:30:00+01:00", "2024-10-28T02:30:00+01:00"}},
		{"hourly runs the repeated hour of the autumn change twice", "@hourly", "Europe/Berlin",
			"2024-10-27T01:30:00+02:00", []string{"2024-10-27T02:00:00+02:00", "2024-10-27T02:00:00+01:00", "2024-10-27T03:00:00+01:00"}},
		{"weekdays only skip the weekend", "0 9 * * 1-5", "America/New_York",
			"2024-01-05T15:00:00Z", []string{"2024-01-08T14:00:00Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := api.ParseBackupSchedule(tc.schedule, tc.timeZone)
			if err != nil {
				t.Fatal(err)
			}
			at := mustTime(t, tc.from)
			for i, w := range tc.want {
				at = s.Next(at)
				if want := mustTime(t, w); !at.Equal(want) {
					t.Fatalf("time %d: got %s, want %s", i+1, at.Format(time.RFC3339), want.Format(time.RFC3339))
				}
			}
		})
	}
}

func TestBackupPolicyValidation(t *testing.T) {
	tests := []struct {
		name   string
		policy api.BackupPolicy
		// wantErr is a substring of the error; empty means valid.
		wantErr string
	}{
		{"a schedule in a time zone with retention", api.BackupPolicy{Schedule: "0 */6 * * *", TimeZone: "Europe/Berlin",
			Retention: &api.BackupRetention{Hourly: 24, Daily: 7, Weekly: 4}}, ""},
		{"a shorthand schedule", api.BackupPolicy{Schedule: "@hourly"}, ""},
		{"retention with an interval", api.BackupPolicy{BackupIntervalInSecond: 3600, Retention: &api.BackupRetention{Daily: 7}, MaxBackups: 3}, ""},
		{"UTC by name", api.BackupPolicy{Schedule: "@daily", TimeZone: "UTC"}, ""},
		{"both schedule and interval", api.BackupPolicy{Schedule: "@daily", BackupIntervalInSecond: 60},
			"spec.backupPolicy.schedule: Invalid value: \"@daily\": " + api.BackupScheduleOrIntervalMessage},
		{"six fields", api.BackupPolicy{Schedule: "0 0 */6 * * *"}, api.BackupScheduleMessage + ": expected exactly 5 fields"},
		{"a minute out of range", api.BackupPolicy{Schedule: "61 * * * *"}, "spec.backupPolicy.schedule: Invalid value: \"61 * * * *\": " + api.BackupScheduleMessage},
		{"words, not a schedule", api.BackupPolicy{Schedule: "every six hours"}, api.BackupScheduleMessage},
		{"a day that never comes", api.BackupPolicy{Schedule: "0 0 30 2 *"}, "names a day that never comes"},
		{"February 29th comes", api.BackupPolicy{Schedule: "0 0 29 2 *"}, ""},
		{"@every is the interval's job", api.BackupPolicy{Schedule: "@every 6h"}, "backupIntervalInSecond"},
		{"a time zone inside the schedule", api.BackupPolicy{Schedule: "CRON_TZ=Europe/Berlin 0 3 * * *"}, "names its time zone in timeZone"},
		{"an unknown time zone", api.BackupPolicy{Schedule: "@daily", TimeZone: "Mars/Olympus_Mons"},
			"spec.backupPolicy.timeZone: Invalid value: \"Mars/Olympus_Mons\": is not an IANA time zone name"},
		{"the operator host's zone", api.BackupPolicy{Schedule: "@daily", TimeZone: "Local"}, "depends on the operator's host"},
		{"a negative tier", api.BackupPolicy{Schedule: "@daily", Retention: &api.BackupRetention{Weekly: -1}},
			"spec.backupPolicy.retention.weekly: Invalid value: -1: must not be negative"},
		{"a schedule too long for the CRD's rule", api.BackupPolicy{Schedule: "0 0 * * " + strings.Repeat("1,", 70) + "2"}, "Too long"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := api.BackupSpec{
				ClusterName:  "example",
				StorageType:  api.BackupStorageTypeS3,
				BackupSource: api.BackupSource{S3: &api.S3BackupSource{Path: "bucket/key", AWSSecret: "aws"}},
				BackupPolicy: &tc.policy,
			}
			err := spec.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted; want an error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestScheduledBackupIsPeriodic(t *testing.T) {
	spec := api.BackupSpec{BackupPolicy: &api.BackupPolicy{Schedule: "@daily"}}
	if !spec.IsPeriodic() {
		t.Fatal("a backup with a schedule is not periodic")
	}
}
