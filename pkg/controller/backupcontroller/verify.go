package backupcontroller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
)

// Event reasons of verification (spec.verify).
const (
	ReasonBackupVerified = "BackupVerified"
	// ReasonVerificationFailed: the backup was stored but could not be proven
	// restorable; it does not count as a success.
	ReasonVerificationFailed = "BackupVerificationFailed"
)

// verifyDue says whether the next backup of eb is read back, after stored
// backups of the same schedule: the first and every Nth of spec.verify, and
// each one after a verification that did not pass, until one passes.
func verifyDue(eb *api.EtcdBackup, stored int64) bool {
	n := eb.Spec.VerifyEvery()
	if n <= 0 {
		return false
	}
	if v := eb.Status.Verified; v != nil && !v.Succeeded {
		return true
	}
	return stored%n == 0
}

// verificationStatus is status.verified for a backup that was read back, or nil.
func verificationStatus(res *backup.Result, now time.Time) *api.BackupVerification {
	if res.Verified == nil && res.VerifyErr == nil {
		return nil
	}
	st := &api.BackupVerification{Time: metav1.NewTime(now.Truncate(time.Second)), BackupPath: res.Path}
	if v := res.Verified; v != nil {
		st.Revision, st.TotalKeys, st.Size, st.SHA256 = v.Revision, v.TotalKeys, v.Size, v.SHA256
	}
	if res.VerifyErr != nil {
		st.Reason = res.VerifyErr.Error()
		return st
	}
	st.Succeeded = true
	return st
}

// verifyFailureReason is the status reason and event message of a backup that
// was stored but failed its verification.
func verifyFailureReason(res *backup.Result) string {
	what := "could not be read back to verify it"
	if errors.Is(res.VerifyErr, backup.ErrVerification) {
		what = "failed verification"
	}
	return fmt.Sprintf("the backup stored at %s (revision %d) %s, so older backups were kept: %v", res.Path, res.Revision, what, res.VerifyErr)
}

// recordVerifyFailure writes a backup that was stored but failed verification:
// not a success (lastSuccessDate and the stale-backup alert stay where the last
// sound backup left them), with the finding in status.verified.
func (c *Controller) recordVerifyFailure(ctx context.Context, eb *api.EtcdBackup, res *backup.Result) error {
	reason := verifyFailureReason(res)
	verified := verificationStatus(res, c.clock.Now())
	c.logFor(eb).WithField("path", res.Path).Warn(reason)
	c.recorder.Event(eb, corev1.EventTypeWarning, ReasonVerificationFailed, reason)
	return c.updateStatus(ctx, eb, func(st *api.BackupStatus) {
		st.Succeeded = false
		st.Reason = reason
		st.Verified = verified
	})
}
