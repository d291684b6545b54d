package maintenance

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/etcdversion"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
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
// etcd's rules for version moves, as etcdversion's releases table and
// MoveBetween give them:
//
//   - the cluster version (the lowest minor all members have agreed on)
//     moves one minor at a time; patches within it move freely, and so does
//     a return to it (rolling back an upgrade that has not finished);
//   - to the next minor: every member of the current one at the target
//     release's UpgradeFromPatch or later and, where the target refuses v2
//     entries (3.6), every member snapshotted past the v2 requests its log
//     may hold from when the cluster ran 3.4 (3.6 panics on them with
//     "detected disallowed v2 WAL", see hack/version-move/measure.sh);
//   - down one minor only where the cluster's release allows a downgrade
//     (3.6 to 3.5, etcd's downgrade API), to a release at UpgradeFromPatch or
//     later; enabling the downgrade drops the cluster version, after which
//     members are patched one at a time.
func CheckVersionMove(in VersionMoveInput) VersionMove {
	target, err := etcdversion.Parse(in.Target)
	if err != nil {
		return refused(fmt.Sprintf("spec.version %q is not an etcd version", in.Target))
	}
	if gone := missing(in.Health); gone != "" {
		return VersionMove{Kind: MoveWait, Reason: "waiting for " + gone + " to answer before judging a version move"}
	}
	cluster, err := etcdversion.Parse(in.ClusterVersion)
	if err != nil {
		return VersionMove{Kind: MoveWait, Reason: fmt.Sprintf("the cluster version is not decided yet (%q)", in.ClusterVersion)}
	}
	next := etcdversion.New(cluster.Major, cluster.Minor+1, 0)
	switch etcdversion.MoveBetween(cluster, target) {
	case etcdversion.MovePatch:
		return VersionMove{Kind: MovePatches, Reason: fmt.Sprintf("the cluster runs at %s; members move to %s one at a time", cluster.MinorString(), in.Target)}
	case etcdversion.MoveUp:
		if why := notReadyFor(target, in); why != "" {
			return refused(why)
		}
		return VersionMove{Kind: MovePatches, Reason: fmt.Sprintf("upgrading from %s to %s one member at a time", cluster.MinorString(), in.Target)}
	case etcdversion.MoveDown:
		if min := cluster.Release().UpgradeFromPatch; target.Patch < min {
			return refused(fmt.Sprintf("downgrading to %s: etcd's %s downgrade guide asks for a current %s release; use %s.%d or later",
				in.Target, cluster.MinorString(), target.MinorString(), target.MinorString(), min))
		}
		return VersionMove{Kind: MoveEnableDowngrade, DowngradeTarget: target.MinorString(),
			Reason: fmt.Sprintf("downgrading from %s to %s: enabling etcd's downgrade first, then members move to %s one at a time", cluster.MinorString(), target.MinorString(), in.Target)}
	case etcdversion.MoveDownRefused:
		return refused(fmt.Sprintf("the cluster runs at %s and cannot go down to %s: etcd downgrades only one minor version, from %s; restore a backup into a new cluster instead",
			cluster.MinorString(), in.Target, etcdversion.Downgrades()))
	default:
		return refused(fmt.Sprintf("the cluster runs at %s and cannot skip to %s: move one minor version at a time (to %s first)",
			cluster.MinorString(), in.Target, next.MinorString()))
	}
}

// notReadyFor checks the members of the previous minor version against what
// target's release asks of them before a cluster moves to it.
func notReadyFor(target etcdversion.Version, in VersionMoveInput) string {
	r := target.Release()
	previous := etcdversion.New(target.Major, target.Minor-1, 0)
	var old, unsnapshotted []string
	var behind uint64
	for _, m := range in.Health.Members {
		v, err := etcdversion.Parse(m.Version)
		if err != nil || !v.SameMinor(previous) {
			continue
		}
		if v.Patch < r.UpgradeFromPatch {
			old = append(old, fmt.Sprintf("%s runs %s", m.Name, m.Version))
		}
		if r.RefusesV2Entries && in.V2EntriesUntilIndex > 0 {
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
		return fmt.Sprintf("etcd's %s upgrade guide requires every member on %s.%d or later first (%s): set spec.version to a %s release of at least %s.%d, let every member move to it, then set %s",
			target.MinorString(), previous.MinorString(), r.UpgradeFromPatch, strings.Join(old, ", "), previous.MinorString(), previous.MinorString(), r.UpgradeFromPatch, target.MinorString())
	case len(unsnapshotted) > 0:
		return fmt.Sprintf("the logs of %s may still hold etcd v2 requests written while the cluster ran etcd 3.4 (its /health answers each probe with one, up to raft index %d); etcd %s refuses to start on them (\"detected disallowed v2 WAL\") until a snapshot has passed them, which needs about %d more writes at --snapshot-count=%d. The upgrade can go ahead once the cluster has written that much",
			strings.Join(unsnapshotted, ", "), in.V2EntriesUntilIndex, target.MinorString(), behind, in.SnapshotCount)
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
	if v, err := etcdversion.Parse(version); err == nil {
		return v.Release().DefaultSnapshotCount
	}
	// An unknown version gets the larger default of older releases: it asks
	// for more writes before an upgrade that needs snapshots, never fewer.
	return etcdversion.Oldest().Release().DefaultSnapshotCount
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
		if v, err := etcdversion.Parse(m.Version); err == nil && v.Release().HealthWritesV2 {
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
