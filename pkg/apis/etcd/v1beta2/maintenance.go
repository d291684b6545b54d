package v1beta2

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaintenancePolicy is the day-2 care of a cluster's data: how big its
// database may grow, how old history is discarded, when the database file is
// defragmented and how corruption is detected. Every field is optional; a
// nil policy means the defaults of each field.
type MaintenancePolicy struct {
	// Quota is the size etcd's database may reach (--quota-backend-bytes).
	// Past it etcd raises the NOSPACE alarm and refuses writes until space is
	// reclaimed and the alarm disarmed, which the operator does. Default:
	// with pod.persistentVolumeClaimSpec, derived from the claim's size (see
	// QuotaForClaim); without, etcd's own default (2 GiB).
	Quota *resource.Quantity `json:"quota,omitempty"`
	// AutoCompaction makes etcd discard old revisions by itself. Default:
	// off, as in etcd; the operator still compacts when NOSPACE strikes.
	AutoCompaction *AutoCompaction `json:"autoCompaction,omitempty"`
	// Defragmentation gives the space freed by compaction back to the file
	// system, one member at a time, followers first and the leader last
	// after moving leadership away.
	Defragmentation *Defragmentation `json:"defragmentation,omitempty"`
	// CorruptionCheck configures etcd's corruption detection; on by default.
	CorruptionCheck *CorruptionCheck `json:"corruptionCheck,omitempty"`
}

// AutoCompactionMode is etcd's --auto-compaction-mode.
type AutoCompactionMode string

const (
	// AutoCompactionPeriodic keeps the history of the last retention period.
	AutoCompactionPeriodic AutoCompactionMode = "periodic"
	// AutoCompactionRevision keeps the last retention revisions.
	AutoCompactionRevision AutoCompactionMode = "revision"
)

// AutoCompaction is etcd's automatic compaction of the key-value history.
type AutoCompaction struct {
	// Mode is periodic (default) or revision.
	Mode AutoCompactionMode `json:"mode,omitempty"`
	// Retention is how much history to keep: a duration such as "1h" or
	// "30m" in periodic mode (a bare number means hours, as in etcd), a
	// number of revisions such as "10000" in revision mode.
	Retention string `json:"retention"`
}

// Defragmentation says when a member's database file is rewritten without
// its free pages. A defragmentation blocks the member for its duration (about
// a second per few hundred MB), which is why members go one at a time.
type Defragmentation struct {
	// Schedule is a cron schedule in UTC ("0 3 * * *", or "@daily") at which
	// every member is defragmented once. Empty: no scheduled runs.
	Schedule string `json:"schedule,omitempty"`
	// FreeSpacePercent defragments a member as soon as at least this
	// percentage of its database file is free (and MinFreeSpace is
	// reached). Default 50; 0 turns threshold-driven defragmentation off.
	FreeSpacePercent *int32 `json:"freeSpacePercent,omitempty"`
	// MinFreeSpace is the least free space worth a defragmentation, so that
	// small databases are left alone. Default 100Mi.
	MinFreeSpace *resource.Quantity `json:"minFreeSpace,omitempty"`
}

// CorruptionCheck configures etcd's own corruption detection. Each check
// that finds a mismatch either stops the member before it serves (initial)
// or raises a CORRUPT alarm (periodic ones); the operator replaces the
// member then.
type CorruptionCheck struct {
	// Initial makes a member compare its data with its peers' before
	// serving, and exit on a mismatch (etcd 3.3+). Default true.
	Initial *bool `json:"initial,omitempty"`
	// PeriodicInterval is the time between the leader's comparisons of every
	// member's latest hash (etcd 3.3+); it reads the whole database, hence
	// hours rather than minutes. Default 4h; "0s" turns it off.
	PeriodicInterval *metav1.Duration `json:"periodicInterval,omitempty"`
	// CompactHashCheck makes the leader compare the members' hashes at each
	// compaction, which is cheap (etcd 3.5.5+). Default true.
	CompactHashCheck *bool `json:"compactHashCheck,omitempty"`
}

// Defaults of the maintenance settings.
const (
	DefaultDefragFreeSpacePercent = 50
	// DefaultDefragMinFreeSpaceBytes (100 MiB): below it a defragmentation
	// is not worth a member's pause.
	DefaultDefragMinFreeSpaceBytes = 100 << 20
	DefaultCorruptCheckInterval    = 4 * time.Hour
	// MaxDerivedQuotaBytes (8 GiB) is etcd's suggested maximum database
	// size; a quota derived from a larger claim stops there.
	MaxDerivedQuotaBytes = 8 << 30
	// walReserveBytes is the room a member's volume needs besides the
	// database: etcd keeps up to 5 WAL files of 64 MiB, plus snapshot files.
	walReserveBytes = 384 << 20
)

// QuotaForClaim is the database quota of members whose volume holds claim
// bytes: half of what remains after the WAL's reserve, since defragmenting a
// full database and receiving a snapshot from the leader both write a second
// copy of it next to the first; at least a quarter of the claim, at most
// MaxDerivedQuotaBytes. A quota any larger lets the volume fill up before etcd
// raises NOSPACE, and a full disk is a crash, not an alarm.
func QuotaForClaim(claim resource.Quantity) int64 {
	size := claim.Value()
	q := (size - walReserveBytes) / 2
	if q < size/4 {
		q = size / 4
	}
	if q > MaxDerivedQuotaBytes {
		q = MaxDerivedQuotaBytes
	}
	return q
}

// ResolvedMaintenance is a cluster's maintenance settings with every default
// filled in, as the operator applies them.
type ResolvedMaintenance struct {
	// QuotaBytes is 0 when etcd's own default applies.
	QuotaBytes int64
	// QuotaExplicit: the user wrote the quota (rather than it being derived).
	QuotaExplicit bool
	// AutoCompaction is nil when etcd does not compact by itself.
	AutoCompaction *AutoCompaction
	// DefragSchedule is the cron schedule, "" for none.
	DefragSchedule string
	// DefragFreeSpacePercent 0 turns threshold-driven defragmentation off.
	DefragFreeSpacePercent  int32
	DefragMinFreeSpaceBytes int64
	InitialCorruptCheck     bool
	// CorruptCheckInterval 0 turns the periodic check off.
	CorruptCheckInterval time.Duration
	CompactHashCheck     bool
	// Explicit* record which corruption settings the user wrote, so that a
	// default never overrides the same setting given through pod.etcdEnv.
	ExplicitInitialCorruptCheck  bool
	ExplicitCorruptCheckInterval bool
	ExplicitCompactHashCheck     bool
}

// ResolvedMaintenance fills in the maintenance defaults. It works on the
// spec as written (it needs no WithDefaults) and never changes it.
func (s *ClusterSpec) ResolvedMaintenance() ResolvedMaintenance {
	r := ResolvedMaintenance{
		DefragFreeSpacePercent:  DefaultDefragFreeSpacePercent,
		DefragMinFreeSpaceBytes: DefaultDefragMinFreeSpaceBytes,
		InitialCorruptCheck:     true,
		CorruptCheckInterval:    DefaultCorruptCheckInterval,
		CompactHashCheck:        true,
	}
	if s.Pod != nil && s.Pod.PersistentVolumeClaimSpec != nil {
		if claim, ok := s.Pod.PersistentVolumeClaimSpec.Resources.Requests["storage"]; ok && claim.Sign() > 0 {
			r.QuotaBytes = QuotaForClaim(claim)
		}
	}
	m := s.Maintenance
	if m == nil {
		return r
	}
	if m.Quota != nil {
		r.QuotaBytes, r.QuotaExplicit = m.Quota.Value(), true
	}
	if ac := m.AutoCompaction; ac != nil {
		cp := *ac
		if cp.Mode == "" {
			cp.Mode = AutoCompactionPeriodic
		}
		r.AutoCompaction = &cp
	}
	if d := m.Defragmentation; d != nil {
		r.DefragSchedule = d.Schedule
		if d.FreeSpacePercent != nil {
			r.DefragFreeSpacePercent = *d.FreeSpacePercent
		}
		if d.MinFreeSpace != nil {
			r.DefragMinFreeSpaceBytes = d.MinFreeSpace.Value()
		}
	}
	if c := m.CorruptionCheck; c != nil {
		if c.Initial != nil {
			r.InitialCorruptCheck, r.ExplicitInitialCorruptCheck = *c.Initial, true
		}
		if c.PeriodicInterval != nil {
			r.CorruptCheckInterval, r.ExplicitCorruptCheckInterval = c.PeriodicInterval.Duration, true
		}
		if c.CompactHashCheck != nil {
			r.CompactHashCheck, r.ExplicitCompactHashCheck = *c.CompactHashCheck, true
		}
	}
	return r
}

// MemberRole is a member's part in the raft group.
type MemberRole string

const (
	MemberRoleLeader   MemberRole = "Leader"
	MemberRoleFollower MemberRole = "Follower"
	MemberRoleLearner  MemberRole = "Learner"
	// MemberRoleUnknown: the member did not answer.
	MemberRoleUnknown MemberRole = "Unknown"
)

// MemberDetail is what the operator last learned from one etcd member.
type MemberDetail struct {
	// Name is the member (and pod) name.
	Name string `json:"name"`
	// ID is etcd's member ID in hexadecimal, as etcdctl prints it.
	ID string `json:"id"`
	// Role is Leader, Follower, Learner, or Unknown when the member did not answer.
	Role MemberRole `json:"role"`
	// Version is the etcd server version the member runs.
	Version string `json:"version,omitempty"`
	// DBSize is the size of the database file in bytes; DBSizeInUse the part
	// holding data. Defragmentation gives back the difference.
	DBSize int64 `json:"dbSize,omitempty"`
	// DBSizeInUse is the part of the database file holding data, in bytes.
	DBSizeInUse int64 `json:"dbSizeInUse,omitempty"`
	// Alarms are the alarm types (NOSPACE, CORRUPT) raised by this member.
	Alarms []string `json:"alarms,omitempty"`
	// LastDefragmentation is when the operator last defragmented the member.
	LastDefragmentation *metav1.Time `json:"lastDefragmentation,omitempty"`
	// Error says why the member did not answer, when it did not.
	Error string `json:"error,omitempty"`
	// Restarts counts the member's restarts in place after failures within
	// the repair window (10 minutes): by the kubelet in its pod after its
	// etcd exited, or by the operator in a new pod on its claim after its
	// pod ended. A pod deleted is no failure.
	Restarts int32 `json:"restarts,omitempty"`
	// Repair is the step of the repair ladder the member is on: "" while it
	// runs, "restart in place" while it is brought back on its own data,
	// "replace" once it is to be replaced by a new member on a fresh claim
	// (it failed again after every restart, or etcd refuses its data).
	Repair string `json:"repair,omitempty"`
}

// MaintenanceStatus is the operator's record of maintenance over time.
type MaintenanceStatus struct {
	// LastCompaction is when the operator last compacted the history, and
	// LastCompactedRevision the revision it compacted to.
	LastCompaction *metav1.Time `json:"lastCompaction,omitempty"`
	// LastCompactedRevision is the revision of the last compaction.
	LastCompactedRevision int64 `json:"lastCompactedRevision,omitempty"`
	// V2EntriesUntilIndex is the raft index up to which the members' logs
	// may hold etcd v2 requests that etcd 3.6 refuses to replay: etcd 3.4
	// and older answer every GET /health (the readiness probe) with a v2
	// QGET through raft. It is set when the cluster stops running such
	// versions; a member is safe for 3.6 once it has taken a snapshot past
	// it. 0 means no such entries are known.
	V2EntriesUntilIndex uint64 `json:"v2EntriesUntilIndex,omitempty"`
	// V2EntriesPending is true while a member of etcd 3.4 or older may
	// still be writing such entries, so V2EntriesUntilIndex keeps moving.
	V2EntriesPending bool `json:"v2EntriesPending,omitempty"`
}

// Cluster condition types of day-2 care.
const (
	// ClusterConditionNoSpace is True while a NOSPACE alarm is active: the
	// cluster refuses writes until the operator has reclaimed space and
	// disarmed it.
	ClusterConditionNoSpace ClusterConditionType = "NoSpace"
	// ClusterConditionCorrupt is True while a CORRUPT alarm is active or a
	// member's data is refused by etcd's checks.
	ClusterConditionCorrupt ClusterConditionType = "DataCorrupt"
)
