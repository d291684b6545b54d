package v1beta2

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// DefaultArchiveIntervalInSecond: a total loss of the cluster loses at most
	// about this much of its writes, plus one upload.
	DefaultArchiveIntervalInSecond = 5
	// MaxArchiveIntervalInSecond: past an hour the archive no longer does what
	// it is for, and a periodic snapshot does as well.
	MaxArchiveIntervalInSecond = 3600
	// ArchivePathSuffix follows the backup's path to make the prefix of its
	// chunks: a path "bucket/etcd/prod" archives into "bucket/etcd/prod.archive/".
	// It keeps the chunks beside the snapshots yet outside "<path>_v", the
	// prefix that maxBackups and retention list and prune.
	ArchivePathSuffix = ".archive/"
	// BackupArchiveNeedsPeriodicMessage refuses an archive of a one-shot backup:
	// the archive continues snapshots that keep coming.
	BackupArchiveNeedsPeriodicMessage = "archive needs a periodic backup: set schedule or backupIntervalInSecond"
	// MaxArchiveDrillIntervalInSecond is the longest period a periodic
	// backup may have: drills come with its snapshots.
	MaxArchiveDrillIntervalInSecond = MaxBackupIntervalInSecond
)

// BackupArchive asks for the continuous archive: besides the periodic
// snapshots, every change the cluster commits is stored in small chunks next
// to them, so that a restore can reach any point after the oldest snapshot.
type BackupArchive struct {
	// IntervalInSecond bounds how long a change waits before the chunk that
	// holds it is stored: about what a total loss of the cluster loses. 0
	// means DefaultArchiveIntervalInSecond.
	IntervalInSecond int64 `json:"intervalInSecond,omitempty"`
	// Drill says when the archive's recovery point is restored and compared
	// with the live cluster; without it, before each verified snapshot.
	Drill *BackupArchiveDrillPolicy `json:"drill,omitempty"`
}

// BackupArchiveDrillPolicy says when the archive is drilled. A drill runs
// before a periodic snapshot, when the recovery point replays the most
// chunks it ever does.
type BackupArchiveDrillPolicy struct {
	// Enabled defaults to true; false drills nothing.
	Enabled *bool `json:"enabled,omitempty"`
	// IntervalInSecond: 0 drills before each verified snapshot (spec.verify's
	// cadence; no drill when verification is off). N drills before the first
	// periodic snapshot N seconds or more after the previous drill, verified
	// or not: drills then keep a clock of their own, rounded up to whole
	// periods of the backup.
	IntervalInSecond int64 `json:"intervalInSecond,omitempty"`
}

// Interval is IntervalInSecond with its default.
func (a *BackupArchive) Interval() time.Duration {
	if a == nil || a.IntervalInSecond <= 0 {
		return DefaultArchiveIntervalInSecond * time.Second
	}
	return time.Duration(a.IntervalInSecond) * time.Second
}

// Drills says whether the archive is drilled, and how long apart: 0 with
// the verified snapshots, which VerifyEvery says how often come. A nil
// archive is not drilled.
func (a *BackupArchive) Drills() (interval time.Duration, enabled bool) {
	if a == nil {
		return 0, false
	}
	d := a.Drill
	if d == nil {
		return 0, true
	}
	if d.Enabled != nil && !*d.Enabled {
		return 0, false
	}
	return time.Duration(max(d.IntervalInSecond, 0)) * time.Second, true
}

// BackupArchiveStatus is how far the continuous archive is.
type BackupArchiveStatus struct {
	// Prefix is the "bucket/key" prefix the chunks are stored under.
	Prefix string `json:"prefix,omitempty"`
	// LastRevision is the newest revision stored in the archive.
	LastRevision int64 `json:"lastRevision,omitempty"`
	// LastTime is when the archiver received that revision's changes.
	LastTime *metav1.Time `json:"lastTime,omitempty"`
	// LagSeconds is how long the oldest change not yet stored has waited.
	LagSeconds int64 `json:"lagSeconds,omitempty"`
	// LagRevisions is how many revisions the cluster is ahead of the archive.
	LagRevisions int64 `json:"lagRevisions,omitempty"`
	// LastGap is the latest hole in the archive, if there was one.
	LastGap *BackupArchiveGap `json:"lastGap,omitempty"`
	// RecoveryPoint is the newest point a restore to the backup's latest
	// change (pointInTime: {latest: true}) would reach now: the newest
	// snapshot's revision, carried on by the chunks that follow it without a
	// hole. Absent while no snapshot under the backup's path is known.
	RecoveryPoint *BackupRecoveryPoint `json:"recoveryPoint,omitempty"`
	// Drill is the latest drill of the archive: the recovery point restored
	// and compared with the live cluster, before a periodic snapshot as
	// spec.backupPolicy.archive.drill says.
	Drill *BackupArchiveDrill `json:"drill,omitempty"`
}

// BackupArchiveDrillResult is what a drill of the archive found.
type BackupArchiveDrillResult string

const (
	// BackupArchiveDrillPassed: the restored point holds every key and value
	// the cluster held at that revision, and nothing else.
	BackupArchiveDrillPassed BackupArchiveDrillResult = "Passed"
	// BackupArchiveDrillFailed: it differs, or could not be restored.
	BackupArchiveDrillFailed BackupArchiveDrillResult = "Failed"
	// BackupArchiveDrillCompacted: the cluster compacted the revision away
	// before it could be read, so nothing was compared.
	BackupArchiveDrillCompacted BackupArchiveDrillResult = "Compacted"
)

// BackupArchiveDrill is a restore of the recovery point, the snapshot and
// the chunks after it, compared with the live cluster read at its revision.
type BackupArchiveDrill struct {
	// Time is when the drill ended.
	Time metav1.Time `json:"time"`
	// Result is Passed, Failed or Compacted.
	Result BackupArchiveDrillResult `json:"result"`
	// Reason says why, when the result is not Passed.
	Reason string `json:"reason,omitempty"`
	// BackupPath is the "bucket/key" of the snapshot restored.
	BackupPath string `json:"backupPath,omitempty"`
	// SnapshotRevision is the revision of that snapshot.
	SnapshotRevision int64 `json:"snapshotRevision,omitempty"`
	// Revision is the point restored and compared.
	Revision int64 `json:"revision,omitempty"`
	// Revisions is how many revisions the archive replayed onto the snapshot.
	Revisions int64 `json:"revisions,omitempty"`
	// Keys is how many keys the cluster held at the point, each compared.
	Keys int64 `json:"keys,omitempty"`
	// LastPassedTime is when the latest drill that passed ended, this one or
	// an earlier one; absent while none has. It is what the alert on drills
	// that stopped passing reads, after a restart of the operator too.
	LastPassedTime *metav1.Time `json:"lastPassedTime,omitempty"`
}

// LastPassed is LastPassedTime, or, in a status written before that field
// was, the drill's own time when it passed; nil while none is known.
func (d *BackupArchiveDrill) LastPassed() *metav1.Time {
	switch {
	case d == nil:
		return nil
	case d.LastPassedTime != nil:
		return d.LastPassedTime
	case d.Result == BackupArchiveDrillPassed:
		return &d.Time
	}
	return nil
}

// BackupRecoveryPoint is a point of the source cluster's history a restore
// can bring it back to.
type BackupRecoveryPoint struct {
	// Revision is the last revision such a restore holds.
	Revision int64 `json:"revision"`
	// Time is when the cluster was at that revision: when the archiver
	// received it, or, for a snapshot's own revision, when that revision was
	// read (the second its name records). Absent when neither is known.
	Time *metav1.Time `json:"time,omitempty"`
	// SnapshotRevision is the revision of the snapshot such a restore starts
	// from; Revision is past it by what the archive replays.
	SnapshotRevision int64 `json:"snapshotRevision"`
}

// BackupArchiveGap is a hole in the archive: revisions compacted away before
// they were stored. A restore to a point inside it is not possible; a full
// snapshot taken when it was found continues the archive.
type BackupArchiveGap struct {
	// From is the first revision the archive lacks.
	From int64 `json:"from"`
	// CompactedTo is the cluster's compaction revision when the gap was found.
	CompactedTo int64 `json:"compactedTo"`
	// When is when the gap was found.
	When metav1.Time `json:"when"`
	// SnapshotRevision is the revision of the snapshot the archive continues
	// after the gap; 0 while it is not taken yet.
	SnapshotRevision int64 `json:"snapshotRevision,omitempty"`
}

// validateArchive checks spec.backupPolicy.archive.
func (pol *BackupPolicy) validateArchive(pp *field.Path, periodic bool) field.ErrorList {
	a := pol.Archive
	if a == nil {
		return nil
	}
	ap := pp.Child("archive")
	var errs field.ErrorList
	if !periodic {
		errs = append(errs, field.Forbidden(ap, BackupArchiveNeedsPeriodicMessage))
	}
	if a.IntervalInSecond < 0 || a.IntervalInSecond > MaxArchiveIntervalInSecond {
		errs = append(errs, field.Invalid(ap.Child("intervalInSecond"), a.IntervalInSecond,
			fmt.Sprintf("must be between 0 and %d (an hour)", MaxArchiveIntervalInSecond)))
	}
	if d := a.Drill; d != nil && (d.IntervalInSecond < 0 || d.IntervalInSecond > MaxArchiveDrillIntervalInSecond) {
		errs = append(errs, field.Invalid(ap.Child("drill", "intervalInSecond"), d.IntervalInSecond,
			fmt.Sprintf("must be between 0 (before each verified snapshot) and %d (a year)", MaxArchiveDrillIntervalInSecond)))
	}
	return errs
}
