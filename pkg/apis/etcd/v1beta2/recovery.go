package v1beta2

import (
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DisasterRecoveryPolicy lets the operator bring back a cluster whose quorum
// is lost for good, accepting the loss of what only the lost members held.
// Without it (the default, as in the original) the operator reports the loss
// and waits for the members, or for a user's EtcdRestore.
type DisasterRecoveryPolicy struct {
	// Enabled turns recovery on.
	Enabled bool `json:"enabled,omitempty"`
	// GracePeriodInSecond is how long the quorum must have been lost, with
	// the missing members unable to come back, before the operator recovers;
	// 0 means 300.
	GracePeriodInSecond int64 `json:"gracePeriodInSecond,omitempty"`
	// FromBackup restores a cluster left without any member's data (members
	// on emptyDir volumes, all gone) from the newest successful EtcdBackup
	// of this cluster, through the restore operator.
	FromBackup bool `json:"fromBackup,omitempty"`
}

// DisasterRecoveryAnnotation marks an EtcdRestore that etcd-operator created
// to recover a cluster from a backup; its value is the highest store revision
// the operator had seen before ("0" when it saw none). The restore operator
// deletes and re-creates the cluster, which loses the status.recovery written
// on the old one: from this mark it records the recovery again on the
// re-created cluster, with the revision the cluster came back with.
const DisasterRecoveryAnnotation = "etcd.database.coreos.com/disaster-recovery"

// DefaultRecoveryGracePeriod is the grace period when none is given.
const DefaultRecoveryGracePeriod = 5 * time.Minute

// MaxRecoveryGracePeriodInSecond is a week.
const MaxRecoveryGracePeriodInSecond = 7 * 24 * 60 * 60

// GracePeriod is the policy's grace period, with its default.
func (p *DisasterRecoveryPolicy) GracePeriod() time.Duration {
	if p == nil || p.GracePeriodInSecond <= 0 {
		return DefaultRecoveryGracePeriod
	}
	return time.Duration(p.GracePeriodInSecond) * time.Second
}

// RecoveryEnabled tells whether the spec opts into disaster recovery.
func (s *ClusterSpec) RecoveryEnabled() bool {
	return s.DisasterRecovery != nil && s.DisasterRecovery.Enabled
}

func (p *DisasterRecoveryPolicy) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p.GracePeriodInSecond < 0 || p.GracePeriodInSecond > MaxRecoveryGracePeriodInSecond {
		errs = append(errs, field.Invalid(path.Child("gracePeriodInSecond"), p.GracePeriodInSecond, "must be between 0 and 604800 (a week)"))
	}
	return errs
}

// RecoveryStatus records the last disaster recovery: when, from what, and
// how much may have been lost.
type RecoveryStatus struct {
	// Time is when the recovery started.
	Time metav1.Time `json:"time"`
	// FromMember is the surviving member the cluster was recovered from;
	// FromBackup the backup path, when it was restored from a backup.
	FromMember string `json:"fromMember,omitempty"`
	// FromBackup is the backup path the cluster was restored from, if any.
	FromBackup string `json:"fromBackup,omitempty"`
	// RecoveredRevision is the store revision the cluster came back with;
	// LastSeenRevision the highest the operator had seen before (0 when it
	// saw none since it started). Writes between the two may be lost.
	RecoveredRevision int64 `json:"recoveredRevision,omitempty"`
	// LastSeenRevision is the highest revision seen before the recovery.
	LastSeenRevision int64 `json:"lastSeenRevision,omitempty"`
	// Message says what was done and what may be lost.
	Message string `json:"message,omitempty"`
}

// TargetsCluster tells whether the backup snapshots the EtcdCluster name of
// its own namespace: by spec.clusterName, or through the cluster's client
// service (any scheme, port or DNS suffix).
func (b *EtcdBackup) TargetsCluster(name string) bool {
	if b.Spec.ClusterName != "" {
		return b.Spec.ClusterName == name
	}
	for _, ep := range b.Spec.EtcdEndpoints {
		u, err := url.Parse(ep)
		if err != nil {
			continue
		}
		host, rest, _ := strings.Cut(u.Hostname(), ".")
		// "<name>-client.<other namespace>..." is a namesake elsewhere.
		if ns, _, _ := strings.Cut(rest, "."); host == name+"-client" && (ns == "" || b.Namespace == "" || ns == b.Namespace) {
			return true
		}
	}
	return false
}

// RestoreSourceOf is where an EtcdRestore reads the backup's latest stored
// snapshot: the backup's store, at the path its status records. ok is false
// for a backup that never succeeded.
func RestoreSourceOf(b *EtcdBackup) (BackupStorageType, RestoreSource, bool) {
	path := b.Status.BackupPath
	if !b.Status.Succeeded || path == "" {
		return "", RestoreSource{}, false
	}
	var src RestoreSource
	switch {
	case b.Spec.S3 != nil:
		src.S3 = &S3RestoreSource{Path: path, AWSSecret: b.Spec.S3.AWSSecret, Endpoint: b.Spec.S3.Endpoint, ForcePathStyle: b.Spec.S3.ForcePathStyle}
	case b.Spec.OSS != nil:
		src.OSS = &OSSRestoreSource{Path: path, OSSSecret: b.Spec.OSS.OSSSecret, Endpoint: b.Spec.OSS.Endpoint}
	case b.Spec.ABS != nil:
		src.ABS = &ABSRestoreSource{Path: path, ABSSecret: b.Spec.ABS.ABSSecret, Endpoint: b.Spec.ABS.Endpoint}
	case b.Spec.GCS != nil:
		src.GCS = &GCSRestoreSource{Path: path, GCPSecret: b.Spec.GCS.GCPSecret, Endpoint: b.Spec.GCS.Endpoint}
	default:
		return "", RestoreSource{}, false
	}
	if b.Spec.Encryption != nil {
		src.Encryption = &BackupEncryption{KeySecret: b.Spec.Encryption.KeySecret}
	}
	return b.Spec.StorageType, src, true
}

// KeepsArchive tells whether the backup keeps a continuous archive beside its
// periodic snapshots (backupPolicy.archive).
func (b *EtcdBackup) KeepsArchive() bool {
	return b.Spec.IsPeriodic() && b.Spec.BackupPolicy != nil && b.Spec.BackupPolicy.Archive != nil
}

// ArchiveSourceOf is where an EtcdRestore to a point (spec.pointInTime)
// reads the backup: its store, at the backup's own path, the base of its
// periodic snapshots and of its archive. ok is false for a backup that never
// succeeded or keeps no archive.
func ArchiveSourceOf(b *EtcdBackup) (BackupStorageType, RestoreSource, bool) {
	storage, src, ok := RestoreSourceOf(b)
	if !ok || !b.KeepsArchive() {
		return "", RestoreSource{}, false
	}
	path := b.Spec.Path()
	switch {
	case src.S3 != nil:
		src.S3.Path = path
	case src.OSS != nil:
		src.OSS.Path = path
	case src.ABS != nil:
		src.ABS.Path = path
	case src.GCS != nil:
		src.GCS.Path = path
	}
	return storage, src, true
}

// Path is the "bucket/key" the backup writes to, the base of its periodic
// snapshots' names, from its store's block as RestoreSourceOf picks it.
func (s *BackupSpec) Path() string {
	switch {
	case s.S3 != nil:
		return s.S3.Path
	case s.OSS != nil:
		return s.OSS.Path
	case s.ABS != nil:
		return s.ABS.Path
	case s.GCS != nil:
		return s.GCS.Path
	}
	return ""
}
