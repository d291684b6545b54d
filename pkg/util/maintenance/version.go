package maintenance

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// MinPatchBefore36 is the 3.5 release every member must run before the
// cluster moves to 3.6, per etcd's upgrade guide (docs/v3.6/upgrades/
// upgrade_3_6, as of July 2026: "make sure that all of your 3.5 members are
// updated to 3.5.32 or later"). 3.5.20 fixed promoted learners reverting to
// learners in 3.6 (etcd issue 19557), 3.5.26 the "zombie" members removed
// long ago that 3.6 brought back (etcd issue 20967), and the releases up to
// 3.5.32 further upgrade blockers. The operator uses learners for every
// join, so the first of these is not hypothetical here.
const MinPatchBefore36 = 32

// Default --snapshot-count of etcd: 100 000 up to 3.5, 10 000 from 3.6.
const (
	DefaultSnapshotCount   = 100000
	DefaultSnapshotCount36 = 10000
)

// VersionMoveKind is the verdict on moving to spec.version.
type VersionMoveKind string

const (
	// MovePatches: members may be patched to the target one at a time (a
	// patch release, the next minor, or back to the cluster version after
	// an unfinished upgrade or an enabled downgrade).
	MovePatches VersionMoveKind = "Patch"
	// MoveEnableDowngrade: first etcdutil.DowngradeValidate and then
	// etcdutil.DowngradeEnable with DowngradeTarget; members are patched
	// once the cluster version has dropped.
	MoveEnableDowngrade VersionMoveKind = "EnableDowngrade"
	// MoveWait: the facts needed are missing (a member does not answer, the
	// cluster version is not decided); ask again later.
	MoveWait VersionMoveKind = "Wait"
	// MoveRefused: the move must not start; Reason says what to do instead.
	MoveRefused VersionMoveKind = "Refused"
)

// VersionMove is CheckVersionMove's verdict.
type VersionMove struct {
	Kind VersionMoveKind
	// DowngradeTarget is the "major.minor" to pass to DowngradeEnable.
	DowngradeTarget string
	Reason          string
}

// VersionMoveInput is what CheckVersionMove judges.
type VersionMoveInput struct {
	// Target is spec.version.
	Target string
	// Health gives each member's version and applied index, and a 3.6
	// member's downgrade state.
	Health etcdutil.Health
	// ClusterVersion is etcdutil.ClusterVersion's answer, "3.5.0".
	ClusterVersion string
	// V2EntriesUntilIndex is status.maintenance.v2EntriesUntilIndex.
	V2EntriesUntilIndex uint64
	// SnapshotCount is the members' --snapshot-count (SnapshotCount).
	SnapshotCount uint64
}

// CheckVersionMove says whether the members may be moved to in.Target, by
// etcd's rules for version moves:
//
//   - the cluster version (the lowest minor all members have agreed on)
//     moves one minor at a time; patches within it move freely, and so does
//     a return to it (rolling back an upgrade that has not finished);
//   - to 3.6: every 3.5 member at MinPatchBefore36 or later, the cluster
//     fully on 3.5, and every 3.5 member snapshotted past the v2 requests
//     its log may hold from when the cluster ran 3.4 (measured: 3.6 panics
//     on them with "detected disallowed v2 WAL", see
//     hack/version-move/measure.sh);
//   - down one minor only from 3.6 to 3.5 (etcd's downgrade API), to a 3.5
//     release at MinPatchBefore36 or later; enabling the downgrade drops the
//     cluster version, after which members are patched one at a time.
func CheckVersionMove(in VersionMoveInput) VersionMove {
	target, ok := parseVersion(in.Target)
	if !ok {
		return refused(fmt.Sprintf("spec.version %q is not an etcd version", in.Target))
	}
	if gone := missing(in.Health); gone != "" {
		return VersionMove{Kind: MoveWait, Reason: "waiting for " + gone + " to answer before judging a version move"}
	}
	cluster, ok := parseVersion(in.ClusterVersion)
	if !ok {
		return VersionMove{Kind: MoveWait, Reason: fmt.Sprintf("the cluster version is not decided yet (%q)", in.ClusterVersion)}
	}
	switch {
	case target.minorOf() == cluster.minorOf():
		return VersionMove{Kind: MovePatches, Reason: fmt.Sprintf("the cluster runs at %s; members move to %s one at a time", cluster.minorOf(), in.Target)}
	case target.major == cluster.major && target.minor == cluster.minor+1:
		if target.major == 3 && target.minor == 6 {
			if why := notReadyFor36(in); why != "" {
				return refused(why)
			}
		}
		return VersionMove{Kind: MovePatches, Reason: fmt.Sprintf("upgrading from %s to %s one member at a time", cluster.minorOf(), in.Target)}
	case target.major == 3 && target.minor == 5 && cluster.major == 3 && cluster.minor == 6:
		if target.patch < MinPatchBefore36 {
			return refused(fmt.Sprintf("downgrading to %s: etcd's 3.6 downgrade guide asks for a current 3.5 release; use 3.5.%d or later",
				in.Target, MinPatchBefore36))
		}
		return VersionMove{Kind: MoveEnableDowngrade, DowngradeTarget: "3.5",
			Reason: "downgrading from 3.6 to 3.5: enabling etcd's downgrade first, then members move to " + in.Target + " one at a time"}
	case target.major == cluster.major && target.minor < cluster.minor:
		return refused(fmt.Sprintf("the cluster runs at %s and cannot go down to %s: etcd downgrades only one minor version, from 3.6 to 3.5; restore a backup into a new cluster instead",
			cluster.minorOf(), in.Target))
	default:
		return refused(fmt.Sprintf("the cluster runs at %s and cannot skip to %s: move one minor version at a time (to %d.%d first)",
			cluster.minorOf(), in.Target, cluster.major, cluster.minor+1))
	}
}

// notReadyFor36 checks the 3.5 members against etcd's 3.6 upgrade guide.
func notReadyFor36(in VersionMoveInput) string {
	var old, unsnapshotted []string
	var behind uint64
	for _, m := range in.Health.Members {
		v, ok := parseVersion(m.Version)
		if !ok || v.major != 3 || v.minor != 5 {
			continue
		}
		if v.patch < MinPatchBefore36 {
			old = append(old, fmt.Sprintf("%s runs %s", m.Name, m.Version))
		}
		if in.V2EntriesUntilIndex > 0 {
			// A snapshot is taken whenever the applied index passes the last
			// snapshot's by more than the snapshot count, so past this
			// index one is certain to have been taken after the v2 entries.
			safe := in.V2EntriesUntilIndex + in.SnapshotCount + 1
			if m.RaftAppliedIndex <= safe {
				unsnapshotted = append(unsnapshotted, m.Name)
				behind = max(behind, safe-m.RaftAppliedIndex+1)
			}
		}
	}
	switch {
	case len(old) > 0:
		return fmt.Sprintf("etcd's 3.6 upgrade guide requires every member on 3.5.%d or later first (%s): set spec.version to a 3.5 release of at least 3.5.%d, let every member move to it, then set 3.6",
			MinPatchBefore36, strings.Join(old, ", "), MinPatchBefore36)
	case len(unsnapshotted) > 0:
		return fmt.Sprintf("the logs of %s may still hold etcd v2 requests written while the cluster ran etcd 3.4 (its /health answers each probe with one, up to raft index %d); etcd 3.6 refuses to start on them (\"detected disallowed v2 WAL\") until a snapshot has passed them, which needs about %d more writes at --snapshot-count=%d. The upgrade can go ahead once the cluster has written that much",
			strings.Join(unsnapshotted, ", "), in.V2EntriesUntilIndex, behind, in.SnapshotCount)
	}
	return ""
}

// SnapshotCount is the --snapshot-count members of version run with: the
// ETCD_SNAPSHOT_COUNT of pod.etcdEnv if it is a number, else etcd's default
// for the version. A member keeps the environment it was created with, so
// after a change of pod.etcdEnv older members may still use the old value.
func SnapshotCount(spec *v1beta2.ClusterSpec, version string) uint64 {
	if spec.Pod != nil {
		for _, e := range spec.Pod.EtcdEnv {
			if e.Name == "ETCD_SNAPSHOT_COUNT" {
				if n, err := strconv.ParseUint(e.Value, 10, 64); err == nil && n > 0 {
					return n
				}
			}
		}
	}
	if v, ok := parseVersion(version); ok && (v.major > 3 || v.major == 3 && v.minor >= 6) {
		return DefaultSnapshotCount36
	}
	return DefaultSnapshotCount
}

// TrackV2Entries keeps status.maintenance.v2EntriesUntilIndex and
// v2EntriesPending up to date from one observation. While a member of etcd
// 3.4 or older runs (its readiness probe makes it write a v2 QGET through
// raft every 2 s) the index follows the commit index; at the first
// observation after the last such member has gone it is set once more,
// which covers every entry such a member wrote, and then stays. A member
// that does not answer while entries are pending keeps them pending: it may
// be one of the old ones.
func TrackV2Entries(prev v1beta2.MaintenanceStatus, h etcdutil.Health) (untilIndex uint64, pending bool) {
	var commit uint64
	oldRunning, unknown := false, false
	for _, m := range h.Members {
		if m.Err != nil {
			unknown = true
			continue
		}
		commit = max(commit, m.RaftIndex)
		if v, ok := parseVersion(m.Version); ok && v.major == 3 && v.minor < 5 {
			oldRunning = true
		}
	}
	switch {
	case oldRunning:
		return max(commit, prev.V2EntriesUntilIndex), true
	case prev.V2EntriesPending:
		return max(commit, prev.V2EntriesUntilIndex), unknown
	default:
		return prev.V2EntriesUntilIndex, false
	}
}

func refused(reason string) VersionMove { return VersionMove{Kind: MoveRefused, Reason: reason} }

type version struct{ major, minor, patch int }

func (v version) minorOf() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

// parseVersion reads "3.5.21", "v3.5.21" or "3.6.0-rc.1" (as 3.6.0).
func parseVersion(s string) (version, bool) {
	parts := strings.SplitN(strings.TrimLeft(s, "v"), ".", 3)
	if len(parts) != 3 {
		return version{}, false
	}
	patch, _, _ := strings.Cut(parts[2], "-")
	var v version
	var err error
	if v.major, err = strconv.Atoi(parts[0]); err != nil {
		return version{}, false
	}
	if v.minor, err = strconv.Atoi(parts[1]); err != nil {
		return version{}, false
	}
	if v.patch, err = strconv.Atoi(patch); err != nil {
		return version{}, false
	}
	return v, true
}
