package backupcontroller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
)

func at(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func schedule(t *testing.T, spec, zone string) *api.BackupSchedule {
	t.Helper()
	s, err := api.ParseBackupSchedule(spec, zone)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNextScheduledRun(t *testing.T) {
	tests := []struct {
		name       string
		spec, zone string
		last, now  string
		want       string
	}{
		{name: "the next time after the last run, when it is still ahead", spec: "0 3 * * *",
			last: "2024-01-01T03:00:07Z", now: "2024-01-01T10:00:00Z", want: "2024-01-02T03:00:00Z"},
		{name: "a week of missed times runs once, now", spec: "0 3 * * *",
			last: "2023-12-25T03:00:00Z", now: "2024-01-01T10:00:00Z", want: "2024-01-01T10:00:00Z"},
		{name: "*/15 after a run at a quarter hour", spec: "*/15 * * * *",
			last: "2024-01-01T10:15:00Z", now: "2024-01-01T10:15:40Z", want: "2024-01-01T10:30:00Z"},
		{name: "@daily in Berlin is 23:00 UTC in winter", spec: "@daily", zone: "Europe/Berlin",
			last: "2024-01-01T12:00:00Z", now: "2024-01-01T12:00:00Z", want: "2024-01-01T23:00:00Z"},
		{name: "03:00 in Berlin on the night clocks go forward is 01:00 UTC", spec: "0 3 * * *", zone: "Europe/Berlin",
			last: "2024-03-30T02:00:00Z", now: "2024-03-30T02:00:00Z", want: "2024-03-31T01:00:00Z"},
		{name: "February 29th after a leap day waits four years", spec: "0 0 29 2 *",
			last: "2024-02-29T00:00:03Z", now: "2024-03-01T00:00:00Z", want: "2028-02-29T00:00:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := nextScheduledRun(schedule(t, tc.spec, tc.zone), at(t, tc.last), at(t, tc.now))
			if want := at(t, tc.want); !got.Equal(want) {
				t.Fatalf("got %s, want %s", got.UTC().Format(time.RFC3339), tc.want)
			}
		})
	}
}

func TestScheduleStartSurvivesARestart(t *testing.T) {
	created := metav1.NewTime(at(t, "2023-06-01T00:00:00Z"))
	success := metav1.NewTime(at(t, "2024-01-01T03:00:05Z"))
	now := at(t, "2024-01-01T10:00:00Z")
	tests := []struct {
		name        string
		created     metav1.Time
		lastSuccess metav1.Time
		lastRun     time.Time
		want        time.Time
	}{
		{"the status's last success, after a restart", created, success, time.Time{}, success.Time},
		{"this process's last run when the status in the cache is older", created, success, at(t, "2024-01-01T09:00:00Z"), at(t, "2024-01-01T09:00:00Z")},
		{"the creation when nothing succeeded yet", created, metav1.Time{}, time.Time{}, created.Time},
		{"now without even a creation time", metav1.Time{}, metav1.Time{}, time.Time{}, now},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eb := newScheduledBackup("s", "0 3 * * *")
			eb.CreationTimestamp = tc.created
			eb.Status.LastSuccessDate = tc.lastSuccess
			if got := scheduleStart(eb, tc.lastRun, now); !got.Equal(tc.want) {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestLongestGapIsWhatTheStaleAlertWaitsFor(t *testing.T) {
	from := at(t, "2024-01-03T12:00:00Z")
	tests := []struct {
		spec string
		want time.Duration
	}{
		{"*/15 * * * *", 15 * time.Minute},
		{"@daily", 24 * time.Hour},
		{"0 9 * * 1-5", 3 * 24 * time.Hour},
		{"0 */6 * * *", 6 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			if got := longestGap(schedule(t, tc.spec, ""), from); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// newScheduledBackup is a valid S3 EtcdBackup on a schedule, in UTC.
func newScheduledBackup(name, spec string) *api.EtcdBackup {
	eb := newBackup(name, 0)
	eb.Spec.BackupPolicy = &api.BackupPolicy{Schedule: spec}
	return eb
}

// The fixture's clock starts at 2024-01-01T00:00:00Z.

func TestAScheduledBackupWaitsForItsTimeAfterARestart(t *testing.T) {
	eb := newScheduledBackup("nightly", "0 3 * * *")
	// What the previous operator recorded: last night's backup.
	eb.Status = api.BackupStatus{Succeeded: true, LastSuccessDate: metav1.NewTime(at(t, "2023-12-31T03:00:04Z"))}
	f := newFixture(t, []*api.EtcdBackup{eb})

	eventually(t, "the runner waits", f.clock.HasWaiters)
	if n := f.backups.callCount("nightly"); n != 0 {
		t.Fatalf("%d backups at start; the next time is 03:00", n)
	}
	labels := map[string]string{"namespace": testNamespace, "name": "nightly"}
	eventually(t, "backup_interval_seconds says a day", func() bool {
		return f.metric("etcd_backup_operator_backup_interval_seconds", labels) == 24*60*60
	})
	f.clock.Step(2*time.Hour + 59*time.Minute)
	eventually(t, "the runner waits", f.clock.HasWaiters)
	if n := f.backups.callCount("nightly"); n != 0 {
		t.Fatalf("%d backups at 02:59", n)
	}
	f.clock.Step(time.Minute)
	eventually(t, "the 03:00 backup", func() bool { return f.backups.callCount("nightly") == 1 })
	f.waitStatus("nightly", "03:00 recorded", func(s api.BackupStatus) bool {
		return s.LastSuccessDate.Time.Equal(at(t, "2024-01-01T03:00:00Z"))
	})
	eventually(t, "the runner waits", f.clock.HasWaiters)
	f.clock.Step(24 * time.Hour)
	eventually(t, "the next night's backup", func() bool { return f.backups.callCount("nightly") == 2 })
	if !hasFinalizer(f.get("nightly")) {
		t.Fatal("no finalizer on a scheduled backup with a runner")
	}
}

func TestScheduledTimesMissedWhileNoOperatorRanAreMadeUpOnce(t *testing.T) {
	eb := newScheduledBackup("missed", "0 * * * *")
	// Down for a day and a half: 35 hourly times went by.
	eb.Status = api.BackupStatus{Succeeded: true, LastSuccessDate: metav1.NewTime(at(t, "2023-12-30T12:00:00Z"))}
	f := newFixture(t, []*api.EtcdBackup{eb})

	eventually(t, "the backup made up at start", func() bool { return f.backups.callCount("missed") == 1 })
	eventually(t, "the runner waits for 01:00", f.clock.HasWaiters)
	if n := f.backups.callCount("missed"); n != 1 {
		t.Fatalf("%d backups at start, want one for all the missed times", n)
	}
	f.clock.Step(time.Hour)
	eventually(t, "the 01:00 backup", func() bool { return f.backups.callCount("missed") == 2 })
}

func TestAFailedScheduledBackupIsTriedAgainAtALaterTime(t *testing.T) {
	eb := newScheduledBackup("flaky", "*/15 * * * *")
	f := newFixture(t, []*api.EtcdBackup{eb},
		withOutcomes("flaky", outcome{err: context.DeadlineExceeded}, outcome{}))

	eventually(t, "the runner waits", f.clock.HasWaiters)
	f.clock.Step(15 * time.Minute)
	f.waitStatus("flaky", "the failure", func(s api.BackupStatus) bool { return s.Reason != "" })
	eventually(t, "the runner waits", f.clock.HasWaiters)
	f.clock.Step(15 * time.Minute)
	st := f.waitStatus("flaky", "the success at 00:30", func(s api.BackupStatus) bool { return s.Succeeded })
	if !st.LastSuccessDate.Time.Equal(at(t, "2024-01-01T00:30:00Z")) {
		t.Fatalf("succeeded at %s, want 00:30", st.LastSuccessDate.Time)
	}
}

// TestScheduledBackupsIntoARealStoreKeepWhatRetentionSays runs the real backup
// path (etcd, secrets, versitygw) on a schedule with a fake clock, and checks the
// bucket after each run: retention deletes this EtcdBackup's older backups and
// nothing else.
func TestScheduledBackupsIntoARealStoreKeepWhatRetentionSays(t *testing.T) {
	ctx := context.Background()
	e := startEtcd(t)
	if err := e.Fill(ctx, "/registry/", 10, 128); err != nil {
		t.Fatal(err)
	}
	vgw, store := startVersityGW(t)
	const base = "clusters/nightly"
	put := func(key string) {
		t.Helper()
		if _, _, err := store.Put(ctx, key, strings.NewReader("old backup")); err != nil {
			t.Fatal(err)
		}
	}
	// What earlier runs left, one a night at 02:00 in Berlin (01:00 UTC in
	// winter), with revisions below etcd's so that the order by revision
	// agrees with the order by time.
	older := []string{
		backup.PeriodicKey(base, 1, at(t, "2023-12-27T01:00:00Z")),
		backup.PeriodicKey(base, 2, at(t, "2023-12-28T01:00:00Z")),
		backup.PeriodicKey(base, 3, at(t, "2023-12-29T01:00:00Z")),
		backup.PeriodicKey(base, 4, at(t, "2023-12-30T01:00:00Z")),
		backup.PeriodicKey(base, 5, at(t, "2023-12-31T01:00:00Z")),
	}
	for _, k := range older {
		put(k)
	}
	// Not this EtcdBackup's periodic backups: never touched.
	others := []string{base, "clusters/nightly-other_v1_2023-12-27-01:00:00", "clusters/other_v1_2023-12-27-01:00:00", base + "_v1_not-a-time"}
	for _, k := range others {
		put(k)
	}

	kube := kubefake.NewSimpleClientset(awsSecret("aws", backuptest.AWSSecretData()))
	backuper := &Backuper{Secrets: kube.CoreV1(), DialTimeout: time.Second}
	eb := newScheduledBackup("nightly", "0 2 * * *")
	eb.Spec.EtcdEndpoints = []string{e.Endpoint}
	eb.Spec.S3 = &api.S3BackupSource{Path: "backups/" + base, AWSSecret: "aws", Endpoint: vgw.URL, ForcePathStyle: true}
	eb.Spec.BackupPolicy.TimeZone = "Europe/Berlin"
	eb.Spec.BackupPolicy.Retention = &api.BackupRetention{Daily: 3}
	eb.Status = api.BackupStatus{Succeeded: true, LastSuccessDate: metav1.NewTime(at(t, "2023-12-31T01:00:09Z"))}
	f := newFixture(t, []*api.EtcdBackup{eb}, func(f *fixture, c *Config) {
		backuper.Now = f.clock.Now
		c.Backup = backuper.Backup
	})

	periodicKeys := func() []string {
		t.Helper()
		objs, err := store.List(ctx, "clusters/")
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
		slices.Sort(keys)
		return keys
	}
	want := func(keys ...string) []string {
		keys = append(keys, others...)
		slices.Sort(keys)
		return keys
	}

	// The clock starts at midnight UTC, an hour before 02:00 in Berlin.
	var firstRun string
	for i, run := range []struct {
		step time.Duration
		at   string
		// kept are the older backups still there after the run.
		kept []string
	}{
		// The newest of Jan 1st (this run), Dec 31st and Dec 30th.
		{time.Hour, "2024-01-01T01:00:00Z", []string{older[3], older[4]}},
		// The newest of Jan 2nd (this run), Jan 1st (the first run) and Dec 31st.
		{24 * time.Hour, "2024-01-02T01:00:00Z", []string{older[4]}},
	} {
		eventually(t, "the runner waits", f.clock.HasWaiters)
		f.clock.Step(run.step)
		st := f.waitStatus("nightly", "run "+run.at, func(s api.BackupStatus) bool {
			return s.LastSuccessDate.Time.Equal(at(t, run.at)) || (!s.Succeeded && s.Reason != "")
		})
		if !st.Succeeded {
			t.Fatalf("run %d failed: %s", i+1, st.Reason)
		}
		newKey := strings.TrimPrefix(st.BackupPath, "backups/")
		if newKey != backup.PeriodicKey(base, st.EtcdRevision, at(t, run.at)) {
			t.Fatalf("run %d stored %q", i+1, newKey)
		}
		kept := append(slices.Clone(run.kept), newKey)
		if firstRun != "" {
			kept = append(kept, firstRun)
		}
		firstRun = newKey
		if got := periodicKeys(); !slices.Equal(got, want(kept...)) {
			t.Fatalf("after run %d the bucket holds\n%q\nwant\n%q", i+1, got, want(kept...))
		}
	}
}

func TestChangingAScheduledBackupKeepsItsNextTime(t *testing.T) {
	eb := newScheduledBackup("edited", "0 3 * * *")
	eb.Status = api.BackupStatus{Succeeded: true, LastSuccessDate: metav1.NewTime(at(t, "2023-12-31T03:00:04Z"))}
	f := newFixture(t, []*api.EtcdBackup{eb})
	eventually(t, "the runner waits", f.clock.HasWaiters)

	edited := f.get("edited")
	edited.Spec.BackupPolicy.Retention = &api.BackupRetention{Daily: 7}
	f.update(edited)
	f.resync("edited", func(eb *api.EtcdBackup) bool { return eb.Spec.BackupPolicy.Retention != nil })
	eventually(t, "the new runner waits", f.clock.HasWaiters)
	if n := f.backups.callCount("edited"); n != 0 {
		t.Fatalf("%d backups after an edit; a schedule is not restarted by one", n)
	}
	f.clock.Step(3 * time.Hour)
	eventually(t, "the 03:00 backup", func() bool { return f.backups.callCount("edited") == 1 })
}
