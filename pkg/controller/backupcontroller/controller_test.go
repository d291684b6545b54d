package backupcontroller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil/statustest"
)

func hasFinalizer(eb *api.EtcdBackup) bool {
	return slices.Contains(eb.Finalizers, api.BackupPeriodicFinalizer)
}

// Whoever sees status.succeeded finds the BackupSucceeded event already
// there, as a failure's event comes before its status.
func TestTheSuccessEventComesBeforeTheStatusSaysSo(t *testing.T) {
	var statusFirst atomic.Bool
	f := newFixture(t, []*api.EtcdBackup{newBackup("once", 0)}, func(f *fixture, _ *Config) {
		f.client.PrependReactor("update", "etcdbackups", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
			if u, ok := a.(clienttesting.UpdateAction); ok {
				if eb, ok := u.GetObject().(*api.EtcdBackup); ok && eb.Status.Succeeded && f.events.count("Normal BackupSucceeded") == 0 {
					statusFirst.Store(true)
				}
			}
			return false, nil, nil
		})
	})
	f.waitStatus("once", "succeeded", func(s api.BackupStatus) bool { return s.Succeeded })
	if statusFirst.Load() {
		t.Errorf("the status said succeeded before the BackupSucceeded event was recorded; events: %v", f.events.list())
	}
}

func TestOneShotBackupRunsOnceAndNeverAgain(t *testing.T) {
	f := newFixture(t, []*api.EtcdBackup{newBackup("once", 0)})

	st := f.waitStatus("once", "succeeded", func(s api.BackupStatus) bool { return s.Succeeded })
	if st.Reason != "" || st.EtcdVersion != "3.5.21" || st.EtcdRevision != 101 || st.BackupPath != "bucket/once" ||
		st.BackupSize != 1101 || st.SHA256 != strings.Repeat("0", 61)+"101" || st.LastSuccessDate.IsZero() || st.Encoding != nil {
		t.Fatalf("status %+v does not describe the backup", st)
	}
	if hasFinalizer(f.get("once")) {
		t.Error("a one-shot backup got the periodic finalizer")
	}
	if got := f.events.count("Normal BackupSucceeded stored revision 101"); got != 1 {
		t.Errorf("success events: %v", f.events.list())
	}
	if v := f.metric("etcd_backup_operator_backups_total", map[string]string{"storage_type": "S3"}); v != 1 {
		t.Errorf("backups_total = %v, want 1", v)
	}
	if v := f.metric("etcd_backup_operator_last_success_timestamp_seconds", map[string]string{"namespace": testNamespace, "name": "once"}); v <= 0 {
		t.Errorf("last_success_timestamp_seconds = %v", v)
	}
	for _, h := range []string{"etcd_backup_operator_backup_duration_seconds", "etcd_backup_operator_backup_bytes"} {
		if v := f.metric(h, map[string]string{}); v != 1 {
			t.Errorf("%s has %v observations, want 1", h, v)
		}
	}
	if v := f.metric("etcd_backup_operator_backups_failed_total", map[string]string{"storage_type": "S3"}); v > 0 {
		t.Errorf("backups_failed_total = %v after a success", v)
	}

	// Any later event, here a label change, must not run it again.
	eb := f.get("once")
	eb.Labels = map[string]string{"touched": "yes"}
	f.update(eb)
	f.resync("once", func(eb *api.EtcdBackup) bool { return eb.Labels["touched"] == "yes" })
	if n := f.backups.callCount("once"); n != 1 {
		t.Fatalf("backup ran %d times, want once", n)
	}
}

func TestStatusRecordsHowTheBackupWasEncoded(t *testing.T) {
	both := newBackup("sealed", 0)
	both.Spec.Compression = api.BackupCompressionZstd
	both.Spec.Encryption = &api.BackupEncryption{KeySecret: "backup-key"}
	gz := newBackup("gzipped", 0)
	gz.Spec.Compression = api.BackupCompressionGzip
	enc := newBackup("encrypted", 0)
	enc.Spec.Encryption = &api.BackupEncryption{KeySecret: "other-key"}
	f := newFixture(t, []*api.EtcdBackup{both, gz, enc})

	for name, want := range map[string]api.BackupEncoding{
		"sealed":    {Compression: api.BackupCompressionZstd, Encryption: api.BackupEncryptionAESGCM, KeySecret: "backup-key", KeyID: fakeKeyID},
		"gzipped":   {Compression: api.BackupCompressionGzip},
		"encrypted": {Encryption: api.BackupEncryptionAESGCM, KeySecret: "other-key", KeyID: fakeKeyID},
	} {
		st := f.waitStatus(name, "succeeded", func(s api.BackupStatus) bool { return s.Succeeded })
		if st.Encoding == nil || *st.Encoding != want {
			t.Errorf("%s: status.encoding %+v, want %+v", name, st.Encoding, want)
		}
	}
}

func TestOneShotPermanentFailureIsFinalAtOnce(t *testing.T) {
	f := newFixture(t, []*api.EtcdBackup{newBackup("bad", 0)},
		withOutcomes("bad", outcome{err: failure.Permanent(errors.New("the AWS config in secret ns/aws has no region"))}))

	st := f.waitStatus("bad", "a reason", func(s api.BackupStatus) bool { return s.Reason != "" })
	if st.Succeeded || st.Reason != "the AWS config in secret ns/aws has no region" {
		t.Fatalf("status %+v", st)
	}
	if got := f.events.count("Warning BackupFailed the AWS config in secret ns/aws has no region"); got != 1 {
		t.Errorf("events %v, want one BackupFailed with the reason", f.events.list())
	}
	f.resync("bad", func(eb *api.EtcdBackup) bool { return eb.Status.Reason != "" })
	if n := f.backups.callCount("bad"); n != 1 {
		t.Fatalf("a permanent failure ran %d times", n)
	}
	if v := f.metric("etcd_backup_operator_backups_failed_total", map[string]string{"storage_type": "S3"}); v != 1 {
		t.Errorf("backups_failed_total = %v, want 1", v)
	}
}

func TestOneShotTransientFailureIsRetried(t *testing.T) {
	unreachable := outcome{err: errors.New("none of the etcd endpoints answered")}
	f := newFixture(t, []*api.EtcdBackup{newBackup("flaky", 0)}, withMaxRetries(5),
		withOutcomes("flaky", unreachable, unreachable, outcome{}))

	st := f.waitStatus("flaky", "succeeded", func(s api.BackupStatus) bool { return s.Succeeded })
	if st.Reason != "" {
		t.Fatalf("reason %q left after the retry succeeded", st.Reason)
	}
	if n := f.backups.callCount("flaky"); n != 3 {
		t.Fatalf("backup ran %d times, want 2 failures and 1 success", n)
	}
	if got := f.events.count("Warning BackupFailed none of the etcd endpoints answered"); got != 2 {
		t.Errorf("want a warning per failed attempt, got %v", f.events.list())
	}
}

func TestOneShotGivesUpAfterMaxRetries(t *testing.T) {
	f := newFixture(t, []*api.EtcdBackup{newBackup("down", 0)}, withMaxRetries(3),
		withOutcomes("down", outcome{err: errors.New("connection refused")}))

	st := f.waitStatus("down", "a final reason", func(s api.BackupStatus) bool { return s.Reason != "" })
	if st.Succeeded || st.Reason != "connection refused" {
		t.Fatalf("status %+v", st)
	}
	if n := f.backups.callCount("down"); n != 4 {
		t.Fatalf("backup ran %d times, want 1 + 3 retries", n)
	}
	f.resync("down", func(eb *api.EtcdBackup) bool { return eb.Status.Reason != "" })
	if n := f.backups.callCount("down"); n != 4 {
		t.Fatalf("a finished backup ran again (%d calls)", n)
	}
}

func TestPeriodicBackupRunsAtOnceThenEveryInterval(t *testing.T) {
	f := newFixture(t, []*api.EtcdBackup{newBackup("every", 60)})

	eventually(t, "the first backup, without waiting an interval", func() bool { return f.backups.callCount("every") == 1 })
	f.waitStatus("every", "first success", func(s api.BackupStatus) bool { return s.Succeeded && s.EtcdRevision == 101 })
	if !hasFinalizer(f.get("every")) {
		t.Fatal("no finalizer on a periodic backup with a runner")
	}
	for want := 2; want <= 3; want++ {
		eventually(t, "the ticker is waiting", f.clock.HasWaiters)
		f.clock.Step(60 * time.Second)
		eventually(t, "the next backup", func() bool { return f.backups.callCount("every") == want })
	}
	f.waitStatus("every", "third success", func(s api.BackupStatus) bool { return s.EtcdRevision == 103 })
	if n := f.ctrl.LiveRunners(); n != 1 {
		t.Fatalf("%d runners, want 1", n)
	}
}

func TestPeriodicFailureIsReportedAndTheNextPeriodClearsIt(t *testing.T) {
	f := newFixture(t, []*api.EtcdBackup{newBackup("wobbly", 30)},
		withOutcomes("wobbly", outcome{err: errors.New("store unreachable")}, outcome{}))

	st := f.waitStatus("wobbly", "the failure", func(s api.BackupStatus) bool { return s.Reason != "" })
	if st.Succeeded || st.Reason != "store unreachable" {
		t.Fatalf("status %+v", st)
	}
	eventually(t, "the ticker is waiting", f.clock.HasWaiters)
	f.clock.Step(30 * time.Second)
	st = f.waitStatus("wobbly", "the next success", func(s api.BackupStatus) bool { return s.Succeeded })
	if st.Reason != "" {
		t.Fatalf("reason %q kept after a success", st.Reason)
	}
}

func TestPeriodicBackupOnACRDWithoutTheStatusSubresourceIsNotRestartedByItsOwnStatus(t *testing.T) {
	// Without the subresource every status write moves the generation.
	f := newFixture(t, []*api.EtcdBackup{newBackup("old-crd", 60)}, func(f *fixture, _ *Config) {
		statustest.WithoutStatusSubresource(f.client, api.EtcdBackupResourcePlural, false)
	})
	f.waitStatus("old-crd", "first success", func(s api.BackupStatus) bool { return s.Succeeded && s.EtcdRevision == 101 })
	f.resync("old-crd", func(eb *api.EtcdBackup) bool { return eb.Status.Succeeded && eb.Generation > 1 })
	if n := f.backups.callCount("old-crd"); n != 1 {
		t.Fatalf("%d backups before the first interval ended: the status write restarted the schedule", n)
	}
	eventually(t, "the ticker is waiting", f.clock.HasWaiters)
	f.clock.Step(60 * time.Second)
	f.waitStatus("old-crd", "the second success", func(s api.BackupStatus) bool { return s.EtcdRevision == 102 })
}

// A status the server does not store (a CRD serving the status subresource
// to a role without etcdbackups/status) is the writer's to report: the
// backup went well, and is not retried for it.
func TestABackupWhoseStatusIsNotStoredIsNotRetriedForIt(t *testing.T) {
	f := newFixture(t, []*api.EtcdBackup{newBackup("unstored", 0)}, func(f *fixture, _ *Config) {
		statustest.ForbidServedStatus(f.client, api.EtcdBackupResourcePlural)
	})
	eventually(t, "the sync that took the backup", func() bool { return f.syncCount("unstored") > 0 })
	if got := f.events.count("Warning " + statusutil.ReasonStatusNotStored); got != 1 {
		t.Errorf("events %v, want one %s", f.events.list(), statusutil.ReasonStatusNotStored)
	}
	if errs := f.syncErrors("unstored"); len(errs) > 0 {
		t.Errorf("the sync failed, and the backup is retried: %v", errs)
	}
	if n := f.backups.callCount("unstored"); n != 1 {
		t.Errorf("backup ran %d times, want once", n)
	}
}

func TestAFailingPeriodicBackupBacksOffUpToItsCap(t *testing.T) {
	b := failure.Backoff{Min: time.Minute, Max: 5 * time.Minute}
	transient := errors.New("store unreachable")
	permanent := failure.Permanent(errors.New("bucket missing"))
	for _, step := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"a success waits the interval", nil, time.Minute},
		{"a first failure waits the interval", transient, time.Minute},
		{"a second failure waits twice as long", transient, 2 * time.Minute},
		{"a third failure doubles again", transient, 4 * time.Minute},
		{"a fourth failure is held at the cap", transient, 5 * time.Minute},
		{"a success goes back to the interval", nil, time.Minute},
		{"a permanent failure waits the cap at once", permanent, 5 * time.Minute},
		{"a failure after it starts from the interval", transient, time.Minute},
	} {
		if got := nextAttempt(&b, step.err); got != step.want {
			t.Errorf("%s: waits %v, want %v", step.name, got, step.want)
		}
	}
}

func TestAPermanentPeriodicFailureIsReportedOnceAndRetriedOnlyAtTheCap(t *testing.T) {
	f := newFixture(t, []*api.EtcdBackup{newBackup("nobucket", 60)},
		withOutcomes("nobucket", outcome{err: failure.Permanent(errors.New("bucket \"b\" does not exist"))}),
		func(_ *fixture, c *Config) { c.MaxFailureBackoff = 10 * time.Minute })
	f.waitStatus("nobucket", "the failure", func(s api.BackupStatus) bool { return s.Reason != "" })
	f.resync("nobucket", func(eb *api.EtcdBackup) bool { return eb.Status.Reason != "" })
	eventually(t, "the runner waits", f.clock.HasWaiters)
	// The whole wait at once: a runner that waited only the interval would
	// have run on the way, and the count below would be off.
	f.clock.Step(10 * time.Minute)
	eventually(t, "the retry at the cap", func() bool { return f.backups.callCount("nobucket") == 2 })
	eventually(t, "the runner waits again", f.clock.HasWaiters)
	if n := f.events.count("Warning " + ReasonBackupFailed); n != 1 {
		t.Errorf("%d BackupFailed events for one permanent cause, want 1", n)
	}
}

func TestAPanickingPeriodicRunnerIsReportedAndStartsAgain(t *testing.T) {
	// A backup function that answers neither a result nor an error makes the
	// runner panic while recording the success, outside the backup itself.
	var calls atomic.Int32
	f := newFixture(t, []*api.EtcdBackup{newBackup("odd", 60)},
		withBackupFunc(func(context.Context, *api.EtcdBackup, bool) (*backup.Result, error) {
			calls.Add(1)
			return nil, nil
		}),
		func(_ *fixture, c *Config) { c.MaxFailureBackoff = 10 * time.Minute })
	eventually(t, "the panic is reported on the EtcdBackup", func() bool {
		return f.events.count("Warning "+ReasonBackupFailed+" internal error: the periodic backup runner panicked") == 1
	})
	eventually(t, "the runner waits to start again", f.clock.HasWaiters)
	f.clock.Step(10 * time.Minute)
	eventually(t, "the runner starts again", func() bool { return calls.Load() == 2 })
	if n := f.ctrl.LiveRunners(); n != 1 {
		t.Errorf("%d runners, want 1", n)
	}
}

func TestPeriodicSpecChangeRestartsTheSchedule(t *testing.T) {
	f := newFixture(t, []*api.EtcdBackup{newBackup("changing", 60)})
	eventually(t, "the first backup", func() bool { return f.backups.callCount("changing") == 1 })

	eb := f.get("changing")
	eb.Spec.BackupPolicy.BackupIntervalInSecond = 120
	eb.Generation = 2 // the apiserver bumps it on a spec change; the fake does not
	f.update(eb)

	eventually(t, "a backup at once for the new spec", func() bool { return f.backups.callCount("changing") == 2 })
	eventually(t, "only the new runner left", func() bool { return f.ctrl.LiveRunners() == 1 && runnerGoroutines() == 1 })

	// The new schedule counts 120 s from the restart; the old 60 s one is gone.
	eventually(t, "the new ticker is waiting", f.clock.HasWaiters)
	f.clock.Step(60 * time.Second)
	f.resync("changing", func(eb *api.EtcdBackup) bool { return eb.Generation == 2 })
	if n := f.backups.callCount("changing"); n != 2 {
		t.Fatalf("a backup 60 s into a 120 s interval (%d calls)", n)
	}
	f.clock.Step(60 * time.Second)
	eventually(t, "the backup after 120 s", func() bool { return f.backups.callCount("changing") == 3 })
}

func TestDeletingAPeriodicBackupStopsItsRunnerThenRemovesTheFinalizer(t *testing.T) {
	// The first backup of "doomed" hangs, so the runner is stopped in the middle of one.
	f := newFixture(t, []*api.EtcdBackup{newBackup("doomed", 60), newBackup("other", 60)},
		withOutcomes("doomed", outcome{hang: true}))
	eventually(t, "both runners are backing up", func() bool {
		return f.backups.callCount("doomed") == 1 && f.backups.callCount("other") == 1
	})
	eventually(t, "the finalizer", func() bool { return hasFinalizer(f.get("doomed")) })
	if n := runnerGoroutines(); n != 2 {
		t.Fatalf("%d runner goroutines, want 2", n)
	}
	f.waitStatus("other", "success", func(s api.BackupStatus) bool { return s.Succeeded })

	// What the apiserver does on delete when a finalizer is present.
	eb := f.get("doomed")
	now := metav1.NewTime(f.clock.Now())
	eb.DeletionTimestamp = &now
	f.update(eb)

	eventually(t, "the finalizer is removed", func() bool { return !hasFinalizer(f.get("doomed")) })
	if n := f.ctrl.LiveRunners(); n != 1 {
		t.Fatalf("%d runners alive after the delete, want 1 (the other backup's)", n)
	}
	if n := runnerGoroutines(); n != 1 {
		t.Fatalf("%d runner goroutines after the delete, want 1", n)
	}
	if st := f.get("doomed").Status; st.Reason != "" {
		t.Errorf("the cancelled backup was reported as failed: %q", st.Reason)
	}
	if f.events.count("Warning BackupFailed") != 0 {
		t.Errorf("events %v", f.events.list())
	}
	if v := f.metric("etcd_backup_operator_last_success_timestamp_seconds", map[string]string{"namespace": testNamespace, "name": "other"}); v <= 0 {
		t.Errorf("the other backup lost its last-success series")
	}

	// The other backup keeps its schedule.
	eventually(t, "the ticker is waiting", f.clock.HasWaiters)
	f.clock.Step(60 * time.Second)
	eventually(t, "the other backup's next period", func() bool { return f.backups.callCount("other") == 2 })
	if n := f.backups.callCount("doomed"); n != 1 {
		t.Fatalf("the deleted backup ran again (%d calls)", n)
	}
}

func TestDeletedBackupLosesItsMetrics(t *testing.T) {
	f := newFixture(t, []*api.EtcdBackup{newBackup("gone", 0)})
	f.waitStatus("gone", "succeeded", func(s api.BackupStatus) bool { return s.Succeeded })
	labels := map[string]string{"namespace": testNamespace, "name": "gone"}
	if v := f.metric("etcd_backup_operator_last_success_timestamp_seconds", labels); v <= 0 {
		t.Fatalf("last_success_timestamp_seconds = %v", v)
	}
	if err := f.client.EtcdV1beta2().EtcdBackups(testNamespace).Delete(t.Context(), "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the series is deleted", func() bool {
		return f.metric("etcd_backup_operator_last_success_timestamp_seconds", labels) == -1
	})
}

func TestShutdownStopsRunnersButKeepsFinalizers(t *testing.T) {
	f := newFixture(t, []*api.EtcdBackup{newBackup("kept", 60)})
	eventually(t, "the first backup", func() bool { return f.backups.callCount("kept") == 1 })
	eventually(t, "the finalizer", func() bool { return hasFinalizer(f.get("kept")) })
	f.stop()
	if n := runnerGoroutines(); n != 0 {
		t.Fatalf("%d runner goroutines after shutdown", n)
	}
	if !hasFinalizer(f.get("kept")) {
		t.Fatal("shutdown removed the finalizer; the next leader would lose track of a deletion")
	}
}

func TestPeriodicTurnedOneShotStopsTheRunner(t *testing.T) {
	f := newFixture(t, []*api.EtcdBackup{newBackup("turned", 60)})
	eventually(t, "the finalizer", func() bool { return hasFinalizer(f.get("turned")) })
	eb := f.get("turned")
	eb.Spec.BackupPolicy.BackupIntervalInSecond = 0
	eb.Generation = 2
	f.update(eb)
	eventually(t, "the runner is gone and the finalizer removed", func() bool {
		return f.ctrl.LiveRunners() == 0 && runnerGoroutines() == 0 && !hasFinalizer(f.get("turned"))
	})
}

func TestRefusedSpecs(t *testing.T) {
	abs := newBackup("abs", 60)
	abs.Spec.StorageType = api.BackupStorageTypeABS
	abs.Spec.S3 = nil
	abs.Spec.ABS = &api.ABSBackupSource{Path: "container-without-blob", ABSSecret: "azure"}

	gcs := newBackup("gcs", 0)
	gcs.Spec.StorageType = api.BackupStorageTypeGCS
	gcs.Spec.S3 = nil

	unknown := newBackup("unknown", 0)
	unknown.Spec.StorageType = "FTP"

	noS3 := newBackup("nos3", 0)
	noS3.Spec.S3 = nil

	negative := newBackup("negative", 0)
	negative.Spec.BackupPolicy = &api.BackupPolicy{BackupIntervalInSecond: -5}

	noEndpoints := newBackup("noendpoints", 30)
	noEndpoints.Spec.EtcdEndpoints = nil

	// The CRD checks a schedule's shape only; these pass it.
	badCron := newScheduledBackup("badcron", "61 * * * *")
	unknownZone := newScheduledBackup("unknownzone", "@daily")
	unknownZone.Spec.BackupPolicy.TimeZone = "Mars/Olympus_Mons"

	tests := []struct {
		eb     *api.EtcdBackup
		reason string
		label  string
	}{
		{abs, `spec.abs.path: Invalid value: "container-without-blob"`, "ABS"},
		{gcs, "spec.gcs: Required value", "GCS"},
		{unknown, `unknown storage type "FTP"`, "unknown"},
		{noS3, "spec.s3: Required value", "S3"},
		{negative, "spec.backupPolicy.backupIntervalInSecond: Invalid value: -5: must not be negative", "S3"},
		{noEndpoints, "spec.etcdEndpoints: Required value", "S3"},
		{badCron, `spec.backupPolicy.schedule: Invalid value: "61 * * * *": must be a cron schedule`, "S3"},
		{unknownZone, `spec.backupPolicy.timeZone: Invalid value: "Mars/Olympus_Mons": is not an IANA time zone name`, "S3"},
	}
	var objs []*api.EtcdBackup
	for _, tc := range tests {
		objs = append(objs, tc.eb)
	}
	good := newBackup("good", 0)
	f := newFixture(t, append(objs, good))

	for _, tc := range tests {
		t.Run(tc.eb.Name, func(t *testing.T) {
			st := f.waitStatus(tc.eb.Name, "a reason", func(s api.BackupStatus) bool { return s.Reason != "" })
			if st.Succeeded || !strings.Contains(st.Reason, tc.reason) {
				t.Fatalf("reason %q, want one containing %q", st.Reason, tc.reason)
			}
			if n := f.events.count("Warning BackupFailed " + st.Reason); n != 1 {
				t.Errorf("want one warning with the reason, got %v", f.events.list())
			}
			// Seen again (the status update comes back as an event): not reported again.
			f.resync(tc.eb.Name, func(eb *api.EtcdBackup) bool { return eb.Status.Reason != "" })
			if n := f.events.count("Warning BackupFailed " + st.Reason); n != 1 {
				t.Errorf("reported %d times", n)
			}
			if n := f.backups.callCount(tc.eb.Name); n != 0 {
				t.Errorf("the backup function ran %d times for a refused spec", n)
			}
			if hasFinalizer(f.get(tc.eb.Name)) {
				t.Error("a refused spec got the periodic finalizer")
			}
		})
	}
	if v := f.metric("etcd_backup_operator_backups_failed_total", map[string]string{"storage_type": "unknown"}); v != 1 {
		t.Errorf("failed{storage_type=unknown} = %v", v)
	}
	// The operator kept serving the valid one.
	f.waitStatus("good", "succeeded", func(s api.BackupStatus) bool { return s.Succeeded })
	if n := f.ctrl.LiveRunners(); n != 0 {
		t.Errorf("%d runners for refused specs", n)
	}
}

func TestFixingARefusedPeriodicSpecStartsIt(t *testing.T) {
	abs := newBackup("later", 60)
	abs.Spec.StorageType = api.BackupStorageTypeABS
	f := newFixture(t, []*api.EtcdBackup{abs})
	f.waitStatus("later", "refused", func(s api.BackupStatus) bool { return s.Reason != "" })

	eb := f.get("later")
	eb.Spec.StorageType = api.BackupStorageTypeS3
	eb.Generation = 2
	f.update(eb)
	st := f.waitStatus("later", "succeeded", func(s api.BackupStatus) bool { return s.Succeeded })
	if st.Reason != "" {
		t.Fatalf("reason %q kept", st.Reason)
	}
}

func TestAPanickingBackupIsAFailureNotACrash(t *testing.T) {
	f := newFixture(t, []*api.EtcdBackup{newBackup("boom", 0), newBackup("fine", 0)},
		withOutcomes("boom", outcome{panic: true}))
	st := f.waitStatus("boom", "a reason", func(s api.BackupStatus) bool { return s.Reason != "" })
	if !strings.Contains(st.Reason, "internal error: the backup panicked: injected panic") {
		t.Fatalf("reason %q", st.Reason)
	}
	f.waitStatus("fine", "succeeded", func(s api.BackupStatus) bool { return s.Succeeded })
}

func TestBackupsRunNoMoreThanTheConcurrencyLimitAtOnce(t *testing.T) {
	var objs []*api.EtcdBackup
	names := []string{"a", "b", "c", "d"}
	for _, n := range names {
		objs = append(objs, newBackup(n, 60))
	}
	var opts []fixtureOption
	for _, n := range names {
		opts = append(opts, withOutcomes(n, outcome{hang: true}))
	}
	f := newFixture(t, objs, opts...)
	eventually(t, "two backups running", func() bool {
		total := 0
		for _, n := range names {
			total += f.backups.callCount(n)
		}
		return total == DefaultMaxConcurrentBackups
	})
	// Give the other runners every chance to start a third backup.
	f.resync("a", func(*api.EtcdBackup) bool { return true })
	total := 0
	for _, n := range names {
		total += f.backups.callCount(n)
	}
	if total != DefaultMaxConcurrentBackups {
		t.Fatalf("%d backups running at once, want %d", total, DefaultMaxConcurrentBackups)
	}
}

func TestScopeAnnotationDecidesWhichOperatorRunsABackup(t *testing.T) {
	annotated := func(name string) *api.EtcdBackup {
		eb := newBackup(name, 0)
		eb.Annotations = map[string]string{api.ScopeAnnotation: api.ScopeClusterWide}
		return eb
	}
	tests := []struct {
		name        string
		clusterWide bool
		runs, skips string
	}{
		{"a namespaced operator runs only unannotated backups", false, "plain", "annotated"},
		{"a cluster-wide operator runs only clusterwide-annotated backups", true, "annotated", "plain"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []*api.EtcdBackup{newBackup("plain", 0), annotated("annotated")},
				func(_ *fixture, cfg *Config) { cfg.ClusterWide = tc.clusterWide })
			f.waitStatus(tc.runs, "succeeded", func(s api.BackupStatus) bool { return s.Succeeded })
			eventually(t, tc.skips+" is synced", func() bool { return f.syncCount(tc.skips) > 0 })
			if n := f.backups.callCount(tc.skips); n != 0 {
				t.Fatalf("%s ran %d times; it belongs to the other kind of operator", tc.skips, n)
			}
			if st := f.get(tc.skips).Status; st.Succeeded || st.Reason != "" {
				t.Fatalf("%s got a status %+v from the wrong operator", tc.skips, st)
			}
		})
	}
}

// The staleness alert compares the last success with the period; a one-shot
// backup has no period, so it must not look like a stale periodic one.
func TestPeriodicBackupExposesItsIntervalUntilItTurnsOneShot(t *testing.T) {
	f := newFixture(t, []*api.EtcdBackup{newBackup("timed", 90)})
	labels := map[string]string{"namespace": testNamespace, "name": "timed"}
	eventually(t, "the interval series", func() bool {
		return f.metric("etcd_backup_operator_backup_interval_seconds", labels) == 90
	})

	eb := f.get("timed")
	eb.Spec.BackupPolicy.BackupIntervalInSecond = 0
	eb.Generation = 2
	f.update(eb)
	eventually(t, "the interval series is deleted", func() bool {
		return f.metric("etcd_backup_operator_backup_interval_seconds", labels) == -1
	})
}

func TestLastSuccessIsRestoredFromStatusSoAStaleBackupAlertsAfterARestart(t *testing.T) {
	// An operator that restarts while the backup keeps failing: only the status
	// still knows when the last success was.
	last := time.Date(2023, 12, 31, 20, 0, 0, 0, time.UTC)
	eb := newBackup("crashlooped", 3600)
	eb.Status = api.BackupStatus{Succeeded: true, LastSuccessDate: metav1.NewTime(last), EtcdRevision: 7}
	f := newFixture(t, []*api.EtcdBackup{eb}, withOutcomes("crashlooped", outcome{err: errors.New("etcd unreachable")}))

	f.waitStatus("crashlooped", "the failure", func(s api.BackupStatus) bool { return !s.Succeeded })
	labels := map[string]string{"namespace": testNamespace, "name": "crashlooped"}
	if v := f.metric("etcd_backup_operator_last_success_timestamp_seconds", labels); v != float64(last.Unix()) {
		t.Fatalf("last_success_timestamp_seconds = %v, want %d from status.lastSuccessDate", v, last.Unix())
	}
	if v := f.metric("etcd_backup_operator_backup_interval_seconds", labels); v != 3600 {
		t.Fatalf("backup_interval_seconds = %v, want 3600", v)
	}
}

func TestAStatusNeverMovesALastSuccessThisProcessSaw(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.succeeded(testNamespace, "b", 2000, 1)
	// The informer's cache may still hold the status from before that success.
	m.restoreLastSuccess(testNamespace, "b", time.Unix(1000, 0))
	f := &fixture{t: t, reg: reg}
	labels := map[string]string{"namespace": testNamespace, "name": "b"}
	if v := f.metric("etcd_backup_operator_last_success_timestamp_seconds", labels); v != 2000 {
		t.Fatalf("last_success_timestamp_seconds = %v, want 2000", v)
	}
	m.forget(testNamespace, "b")
	m.restoreLastSuccess(testNamespace, "b", time.Unix(1000, 0))
	if v := f.metric("etcd_backup_operator_last_success_timestamp_seconds", labels); v != 1000 {
		t.Fatalf("after forget, last_success_timestamp_seconds = %v, want 1000 from the status", v)
	}
}
