package backupcontroller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	kubefake "k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
)

func TestVerifyDue(t *testing.T) {
	every := func(n int64) *api.BackupVerify { return &api.BackupVerify{EveryNthBackup: n} }
	failed := &api.BackupVerification{Succeeded: false, Reason: "damaged"}
	passed := &api.BackupVerification{Succeeded: true}
	for _, c := range []struct {
		name     string
		interval int64
		verify   *api.BackupVerify
		verified *api.BackupVerification
		stored   int64
		want     bool
	}{
		{"a one-shot backup without a verify block is not verified", 0, nil, nil, 0, false},
		{"a one-shot backup with one is", 0, every(0), nil, 0, true},
		{"a periodic backup verifies its first backup", 60, nil, passed, 0, true},
		{"and not the ones before the tenth after it", 60, nil, passed, 9, false},
		{"but the eleventh, the first of the next ten", 60, nil, passed, 10, true},
		{"every third, as asked", 60, every(3), passed, 6, true},
		{"not the one after", 60, every(3), passed, 7, false},
		{"after a failed verification, the next backup is verified", 60, every(3), failed, 7, true},
		{"a periodic backup with verification off never is, failure or not", 60, &api.BackupVerify{Enabled: new(bool)}, failed, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			eb := newBackup("b", c.interval)
			eb.Spec.Verify = c.verify
			eb.Status.Verified = c.verified
			if got := verifyDue(eb, c.stored); got != c.want {
				t.Fatalf("verifyDue = %v, want %v", got, c.want)
			}
		})
	}
}

func TestPeriodicBackupIsVerifiedFirstAndThenEveryNth(t *testing.T) {
	eb := newBackup("checked", 60)
	eb.Spec.Verify = &api.BackupVerify{EveryNthBackup: 2}
	f := newFixture(t, []*api.EtcdBackup{eb})

	st := f.waitStatus("checked", "a verified first backup", func(s api.BackupStatus) bool { return s.Verified != nil })
	if v := st.Verified; !v.Succeeded || v.Revision != 101 || v.TotalKeys != 1010 || v.SHA256 != st.SHA256 || v.BackupPath != st.BackupPath || v.Time.IsZero() {
		t.Fatalf("status.verified = %+v after the backup %+v", v, st)
	}
	for want := 2; want <= 3; want++ {
		eventually(t, "the ticker is waiting", f.clock.HasWaiters)
		f.clock.Step(60 * time.Second)
		f.waitStatus("checked", "the next backup", func(s api.BackupStatus) bool { return s.EtcdRevision == int64(100+want) })
	}
	if got := f.backups.verifyCalls("checked"); !slices.Equal(got, []bool{true, false, true}) {
		t.Fatalf("verified backups %v, want the first and the third", got)
	}
	// The second backup was not read back: its status keeps the first one's finding.
	if v := f.get("checked").Status.Verified; v.Revision != 103 {
		t.Fatalf("status.verified.revision = %d, want 103 from the third backup", v.Revision)
	}
	if n := f.events.count("Normal " + ReasonBackupVerified); n != 2 {
		t.Fatalf("%d %s events, want 2: %v", n, ReasonBackupVerified, f.events.list())
	}
	if v := f.metric("etcd_backup_operator_verifications_total", map[string]string{"storage_type": "S3"}); v != 2 {
		t.Fatalf("verifications_total = %v, want 2", v)
	}
}

func TestAFailedVerificationIsNotASuccessAndTheNextBackupIsVerified(t *testing.T) {
	damaged := fmt.Errorf("%w: its trailing sha256 does not match its content", backup.ErrVerification)
	eb := newBackup("doubtful", 60)
	f := newFixture(t, []*api.EtcdBackup{eb}, withOutcomes("doubtful", outcome{verifyErr: damaged}, outcome{}))

	st := f.waitStatus("doubtful", "the failed verification", func(s api.BackupStatus) bool { return s.Reason != "" })
	if st.Succeeded || !st.LastSuccessDate.IsZero() || st.Verified == nil || st.Verified.Succeeded {
		t.Fatalf("status after a failed verification: %+v", st)
	}
	for _, want := range []string{"backup stored at bucket/doubtful (revision 101) failed verification", "older backups were kept", "trailing sha256"} {
		if !strings.Contains(st.Reason, want) || !strings.Contains(st.Verified.Reason, "trailing sha256") {
			t.Fatalf("reason %q (verified.reason %q) does not say %q", st.Reason, st.Verified.Reason, want)
		}
	}
	if n := f.events.count("Warning " + ReasonVerificationFailed); n != 1 {
		t.Fatalf("%d %s events: %v", n, ReasonVerificationFailed, f.events.list())
	}
	if v := f.metric("etcd_backup_operator_verifications_failed_total", map[string]string{"storage_type": "S3"}); v != 1 {
		t.Fatalf("verifications_failed_total = %v, want 1", v)
	}
	if v := f.metric("etcd_backup_operator_last_success_timestamp_seconds", map[string]string{"namespace": testNamespace, "name": "doubtful"}); v != -1 {
		t.Fatalf("a backup that failed verification set the last success to %v", v)
	}

	// The second backup would not be due (every tenth), but the last check failed.
	eventually(t, "the ticker is waiting", f.clock.HasWaiters)
	f.clock.Step(time.Minute)
	st = f.waitStatus("doubtful", "a verified success", func(s api.BackupStatus) bool { return s.Succeeded })
	if st.Reason != "" || st.Verified == nil || !st.Verified.Succeeded || st.Verified.Revision != 102 {
		t.Fatalf("status after a verified backup: %+v", st)
	}
}

func TestAOneShotBackupThatFailsVerificationIsRetriedThenReported(t *testing.T) {
	unreadable := errors.New("read back: connection reset")
	eb := newBackup("once", 0)
	eb.Spec.Verify = &api.BackupVerify{}
	f := newFixture(t, []*api.EtcdBackup{eb}, withMaxRetries(2), withOutcomes("once", outcome{verifyErr: unreadable}))

	st := f.waitStatus("once", "the final failure", func(s api.BackupStatus) bool { return s.Reason != "" })
	if f.backups.callCount("once") != 3 || st.Succeeded || !strings.Contains(st.Reason, "could not be read back to verify it") {
		t.Fatalf("after %d attempts: %+v", f.backups.callCount("once"), st)
	}
	if n := f.events.count("Warning " + ReasonVerificationFailed); n != 3 {
		t.Fatalf("%d %s events, want one per attempt: %v", n, ReasonVerificationFailed, f.events.list())
	}
}

// TestVerifiedBackupThroughTheControllerIntoS3 reads a real backup back from a
// real store through the Backuper.
func TestVerifiedBackupThroughTheControllerIntoS3(t *testing.T) {
	e := startEtcd(t)
	const keys = 120
	if err := e.Fill(context.Background(), "/registry/", keys, 1024); err != nil {
		t.Fatal(err)
	}
	srv := startS3(t)
	kube := kubefake.NewSimpleClientset(awsSecret("aws", backuptest.AWSSecretData()))
	dir := t.TempDir()
	backuper := &Backuper{Secrets: kube.CoreV1(), DialTimeout: time.Second, VerifyDir: dir}
	eb := s3Backup("verified", srv, e.Endpoint)
	eb.Spec.Verify = &api.BackupVerify{}
	f := newFixture(t, []*api.EtcdBackup{eb}, withBackupFunc(backuper.Backup))

	st := f.waitStatus("verified", "done", func(s api.BackupStatus) bool { return s.Succeeded || s.Reason != "" })
	v := st.Verified
	if !st.Succeeded || v == nil || !v.Succeeded {
		t.Fatalf("status %+v, verified %+v", st, v)
	}
	if v.Revision != keys+1 || v.Revision != st.EtcdRevision || v.SHA256 != st.SHA256 || v.Size != st.BackupSize || v.TotalKeys <= keys {
		t.Fatalf("verified %+v of the backup %+v", v, st)
	}
}
