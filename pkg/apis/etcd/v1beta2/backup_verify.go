package v1beta2

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// DefaultVerifyEveryNthBackup: a periodic backup without spec.verify has its
	// first backup after the schedule (re)starts verified, and every tenth after
	// that; reading a snapshot back costs as much as storing it, so not every run.
	DefaultVerifyEveryNthBackup = 10
	// MaxVerifyEveryNthBackup keeps the schema's bound far from any overflow.
	MaxVerifyEveryNthBackup = 1000000
)

// BackupVerify says which stored backups the backup operator reads back and
// proves restorable.
type BackupVerify struct {
	// Enabled defaults to true: periodic backups are verified without a verify
	// block, one-shot backups only with one.
	Enabled *bool `json:"enabled,omitempty"`
	// EveryNthBackup: of a periodic backup, the first backup after the schedule
	// (re)starts is verified and then every Nth; 1 verifies every backup, 0 means
	// DefaultVerifyEveryNthBackup. A backup whose verification failed is followed
	// by verified ones until one passes.
	EveryNthBackup int64 `json:"everyNthBackup,omitempty"`
}

// BackupVerification is what reading the latest verified backup back found.
type BackupVerification struct {
	// Time is when the verification ended.
	Time metav1.Time `json:"time"`
	// Succeeded: the backup is an intact snapshot that etcd can restore.
	Succeeded bool `json:"succeeded"`
	// Reason is why it failed, if it did.
	Reason string `json:"reason,omitempty"`
	// BackupPath is the "bucket/key" that was read back.
	BackupPath string `json:"backupPath,omitempty"`
	// Revision is what `etcdutl snapshot status` prints as REVISION.
	Revision int64 `json:"revision,omitempty"`
	// TotalKeys is what `etcdutl snapshot status` prints as TOTAL KEYS.
	TotalKeys int64 `json:"totalKeys,omitempty"`
	// Size is the number of bytes read back from the store.
	Size int64 `json:"size,omitempty"`
	// SHA256 is the hex sha256 of the bytes read back from the store.
	SHA256 string `json:"sha256,omitempty"`
}

// VerifyEvery is how often backups of this spec are verified: 0 never, 1 every
// backup, N the first of each N. Periodic backups are verified unless
// spec.verify.enabled is false; one-shot backups when spec.verify is given, unless
// its enabled is false.
func (s *BackupSpec) VerifyEvery() int64 {
	periodic := s.IsPeriodic()
	enabled := periodic || s.Verify != nil
	if s.Verify != nil && s.Verify.Enabled != nil {
		enabled = *s.Verify.Enabled
	}
	switch {
	case !enabled:
		return 0
	case !periodic:
		return 1
	case s.Verify != nil && s.Verify.EveryNthBackup > 0:
		return s.Verify.EveryNthBackup
	}
	return DefaultVerifyEveryNthBackup
}

func (v *BackupVerify) validate(p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.EveryNthBackup < 0 || v.EveryNthBackup > MaxVerifyEveryNthBackup {
		return field.ErrorList{field.Invalid(p.Child("everyNthBackup"), v.EveryNthBackup,
			fmt.Sprintf("must be between 0 and %d", MaxVerifyEveryNthBackup))}
	}
	return nil
}
