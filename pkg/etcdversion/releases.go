package etcdversion

import (
	"fmt"
	"strings"
)

// Release is what the releases of one etcd minor version can do, as far as
// the operator relies on it. A feature that arrived in a patch release is a
// Patch: the first patch release of the minor version that has it.
type Release struct {
	Major, Minor int

	// Learners: a member can join as a learner (MemberAddAsLearner) and be
	// promoted once it has caught up.
	Learners bool
	// MaxLearners: etcd reads ETCD_MAX_LEARNERS (--max-learners) and holds
	// that many learners at once; before, it holds one.
	MaxLearners bool

	// Probes are the member pod's readiness and liveness probes.
	Probes Probes
	// Shell: the official image has /bin/sh. From 3.5 the images are
	// distroless, so an exec probe of an older pod cannot run there.
	Shell bool
	// ReadOnlyRootFilesystem: etcd and its snapshot restore write nothing
	// outside the data directory, a volume, so the container's root
	// filesystem can be read-only. Older images were never run that way.
	ReadOnlyRootFilesystem bool

	// Etcdutl: the image has etcdutl, which does `snapshot restore`
	// (etcdctl's is deprecated in 3.5 and gone in 3.6). Before, etcdctl
	// restores, with ETCDCTL_API=3 on 3.2 and 3.3.
	Etcdutl bool
	// BumpRevision: the snapshot restore has --bump-revision and
	// --mark-compacted. An unknown flag fails the restore; 3.4's etcdctl got
	// them in a late patch release, which is not relied on.
	BumpRevision Patch

	// AutoCompactionMode: etcd has --auto-compaction-mode; before, its
	// --auto-compaction-retention is periodic, in whole hours.
	AutoCompactionMode bool
	// CorruptCheckFlags are the names under which the operator passes the
	// corruption checks. A pod keeps the flags it was created with when it
	// is patched to another version, so a release that accepts both the
	// older and the newer names gets the older ones.
	CorruptCheckFlags CorruptCheckFlags
	// ExperimentalCompactHashCheck: etcd accepts
	// --experimental-compact-hash-check-enabled.
	ExperimentalCompactHashCheck Patch
	// FeatureGates: etcd accepts --feature-gates and --corrupt-check-time
	// (which the next minor version's flags rely on).
	FeatureGates bool

	// DefaultSnapshotCount is etcd's default --snapshot-count.
	DefaultSnapshotCount uint64
	// HealthWritesV2: /health puts a v2 QGET through raft, a log entry on
	// every member per probe.
	HealthWritesV2 bool
	// RefusesV2Entries: etcd refuses to start on a log that still holds v2
	// requests ("detected disallowed v2 WAL"), so a cluster moves to this
	// minor version only once every member has snapshotted past the ones
	// written while older members ran.
	RefusesV2Entries bool

	// UpgradeFromPatch is the patch release every member of the previous
	// minor version must run before the cluster moves to this one, and the
	// least a downgrade from this one may go to; 0 when any will do.
	UpgradeFromPatch int
	// Downgrade: a cluster at this minor version can go back to the
	// previous one through etcd's downgrade API (which drops the cluster
	// version first; members are then moved one at a time).
	Downgrade bool

	// UpgradeAwayOnly: etcd no longer fixes this minor version. Clusters
	// that run it are run, repaired and upgraded away from it; a new
	// cluster on it is made, with a Warning that says where to go.
	UpgradeAwayOnly bool
	// Refused are the patch releases of this minor version that no cluster
	// is made on and no member is moved to: a known defect of theirs loses
	// or corrupts data. Clusters that run one already are run, and told to
	// move off it.
	Refused []Refusal
}

// Refusal is a range of patch releases the operator refuses, and why.
type Refusal struct {
	FromPatch, ToPatch int
	Why                string
}

// Probes are the kinds of member probes.
type Probes int

const (
	// ProbeEtcdctl: `etcdctl endpoint status` in a shell, for readiness and
	// liveness. Before 3.3 etcd has no metrics listener to probe over plain
	// HTTP, and its images have a shell.
	ProbeEtcdctl Probes = iota
	// ProbeHealthTCP: readiness is /health on the metrics listener; liveness
	// is a TCP connect to the client port, because /health of these
	// versions has no serializable mode and fails on quorum loss.
	ProbeHealthTCP
	// ProbeHealth: readiness is /health, liveness the serializable /health,
	// which answers without a leader, both on the metrics listener.
	ProbeHealth
)

// CorruptCheckFlags are the ways etcd names its corruption checks.
type CorruptCheckFlags int

const (
	// CorruptCheckNone: etcd has no corruption checks.
	CorruptCheckNone CorruptCheckFlags = iota
	// CorruptCheckExperimental: --experimental-initial-corrupt-check and
	// --experimental-corrupt-check-time.
	CorruptCheckExperimental
	// CorruptCheckFeatureGates: --feature-gates=InitialCorruptCheck=true,
	// CompactHashCheck=true and --corrupt-check-time.
	CorruptCheckFeatureGates
)

// Patch is the first patch release of a minor version that has a feature.
type Patch int

// Never: no patch release of the minor version has the feature.
const Never Patch = -1

// In tells whether the release v has the feature.
func (p Patch) In(v Version) bool { return p != Never && v.Patch >= int(p) }

// releases is what each etcd minor version can do, oldest first. A version
// older than the first row is read as the first row, one newer than the last
// as the last: the operator drives 3.2 and later, and a release it does not
// know yet as the newest it knows. Supporting a new minor version is adding
// its row.
var releases = []Release{
	{
		Major: 3, Minor: 2,
		UpgradeAwayOnly: true,
		Probes:          ProbeEtcdctl, Shell: true,
		BumpRevision:                 Never,
		ExperimentalCompactHashCheck: Never,
		DefaultSnapshotCount:         100000, HealthWritesV2: true,
	},
	{
		Major: 3, Minor: 3,
		UpgradeAwayOnly: true,
		Probes:          ProbeHealthTCP, Shell: true,
		BumpRevision:       Never,
		AutoCompactionMode: true, CorruptCheckFlags: CorruptCheckExperimental, ExperimentalCompactHashCheck: Never,
		DefaultSnapshotCount: 100000, HealthWritesV2: true,
	},
	{
		Major: 3, Minor: 4,
		UpgradeAwayOnly: true,
		Learners:        true,
		Probes:          ProbeHealthTCP, Shell: true, ReadOnlyRootFilesystem: true,
		BumpRevision:       Never,
		AutoCompactionMode: true, CorruptCheckFlags: CorruptCheckExperimental, ExperimentalCompactHashCheck: Never,
		DefaultSnapshotCount: 100000, HealthWritesV2: true,
	},
	{
		Major: 3, Minor: 5,
		Refused: []Refusal{{FromPatch: 0, ToPatch: 2,
			Why: "etcd 3.5.0 to 3.5.2 can leave members with different data after a crash (etcd's data inconsistency advisory, fixed in 3.5.3)"}},
		Learners: true,
		Probes:   ProbeHealth, ReadOnlyRootFilesystem: true,
		Etcdutl: true, BumpRevision: 10,
		AutoCompactionMode: true, CorruptCheckFlags: CorruptCheckExperimental, ExperimentalCompactHashCheck: 5,
		DefaultSnapshotCount: 100000,
	},
	{
		// etcd's 3.6 upgrade guide asks for every 3.5 member on 3.5.32 or
		// later: 3.5.20 stopped promoted learners from reverting to learners
		// in 3.6 (the operator adds every member as a learner), 3.5.26 the
		// members removed long ago that 3.6 brought back, and the releases up
		// to 3.5.32 other upgrade blockers. Its downgrade guide asks for a
		// current 3.5 release too.
		Major: 3, Minor: 6,
		Learners: true, MaxLearners: true,
		Probes: ProbeHealth, ReadOnlyRootFilesystem: true,
		Etcdutl: true, BumpRevision: 0,
		AutoCompactionMode: true, CorruptCheckFlags: CorruptCheckExperimental, ExperimentalCompactHashCheck: 0, FeatureGates: true,
		DefaultSnapshotCount: 10000, RefusesV2Entries: true,
		UpgradeFromPatch: 32, Downgrade: true,
	},
	{
		// The experimental corruption check flags are gone. etcd's 3.7
		// upgrade guide asks for every 3.6 member on 3.6.11 or later first,
		// and its downgrade goes back to 3.6 through the downgrade API, as
		// 3.6's goes to 3.5.
		Major: 3, Minor: 7,
		Learners: true, MaxLearners: true,
		Probes: ProbeHealth, ReadOnlyRootFilesystem: true,
		Etcdutl: true, BumpRevision: 0,
		AutoCompactionMode: true, CorruptCheckFlags: CorruptCheckFeatureGates, ExperimentalCompactHashCheck: Never, FeatureGates: true,
		DefaultSnapshotCount: 10000,
		UpgradeFromPatch:     11, Downgrade: true,
	},
}

// Release is the row of v's minor version in the releases table.
func (v Version) Release() Release {
	r := releases[0]
	for _, row := range releases {
		if v.Compare(New(row.Major, row.Minor, 0)) < 0 {
			break
		}
		r = row
	}
	return r
}

// Supported tells whether the operator drives v: a release of the major
// version it knows, from the oldest minor version in the table on.
func (v Version) Supported() bool {
	oldest := releases[0]
	return v.Major == oldest.Major && v.Minor >= oldest.Minor
}

// RefusedBecause says why the operator makes no cluster on v and moves no
// member to it, "" when it does.
func (v Version) RefusedBecause() string {
	for _, r := range v.Release().Refused {
		if v.Patch >= r.FromPatch && v.Patch <= r.ToPatch {
			return r.Why
		}
	}
	return ""
}

// Newest is the newest minor version the operator knows.
func Newest() Version {
	r := releases[len(releases)-1]
	return New(r.Major, r.Minor, 0)
}

// UpgradeAwayAdvice says, for a version of a minor that etcd no longer
// fixes, where its clusters should go: "" for a version fully supported.
func (v Version) UpgradeAwayAdvice() string {
	if !v.Release().UpgradeAwayOnly {
		return ""
	}
	next := New(v.Major, v.Minor+1, 0)
	return fmt.Sprintf("etcd %s is no longer fixed upstream; the operator runs and repairs it, and moves it on one minor version at a time: set spec.version to a %s release next", v.MinorString(), next.MinorString())
}

// Oldest is the first release of the oldest minor version the operator drives.
func Oldest() Version { return New(releases[0].Major, releases[0].Minor, 0) }

// Downgrades names the downgrades etcd's API allows, as "3.6 to 3.5".
func Downgrades() string {
	var out []string
	for _, r := range releases {
		if r.Downgrade {
			out = append(out, New(r.Major, r.Minor, 0).MinorString()+" to "+New(r.Major, r.Minor-1, 0).MinorString())
		}
	}
	return strings.Join(out, ", ")
}

// Move is how etcd lets data of one version be run by another, by the rules
// both the per-member check and the cluster's version move read: patch
// releases of a minor version go either way; the minor version goes up one
// at a time, never skipping one (etcd keeps the cluster version one minor
// apart at most); it goes down only where the release moved from allows a
// downgrade, and then one minor version (etcd refuses to start on data of a
// newer minor otherwise); the major version never changes in place.
type Move int

const (
	// MovePatch: the same minor version.
	MovePatch Move = iota
	// MoveUp: the next minor version.
	MoveUp
	// MoveDown: the previous minor version, through etcd's downgrade API.
	MoveDown
	// MoveDownRefused: a lower minor version that no downgrade reaches.
	MoveDownRefused
	// MoveSkip: more than one minor version up.
	MoveSkip
	// MoveMajor: another major version.
	MoveMajor
)

// MoveBetween is the move from from to to.
func MoveBetween(from, to Version) Move {
	switch {
	case from.Major != to.Major:
		return MoveMajor
	case to.Minor == from.Minor:
		return MovePatch
	case to.Minor == from.Minor+1:
		return MoveUp
	case to.Minor == from.Minor-1 && from.Release().Downgrade:
		return MoveDown
	case to.Minor < from.Minor:
		return MoveDownRefused
	}
	return MoveSkip
}
