package maintenance

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

func versions(vs ...string) func(*etcdutil.Health) {
	return func(h *etcdutil.Health) {
		for i, v := range vs {
			h.Members[i].Version = v
		}
	}
}

func applied(index uint64) func(*etcdutil.Health) {
	return func(h *etcdutil.Health) {
		for i := range h.Members {
			h.Members[i].RaftAppliedIndex, h.Members[i].RaftIndex = index, index
		}
	}
}

func TestCheckVersionMove(t *testing.T) {
	on := func(vs ...string) etcdutil.Health { return cluster(versions(vs...)) }
	tests := []struct {
		name      string
		in        VersionMoveInput
		kind      VersionMoveKind
		reasonHas string
	}{
		{"a patch release moves freely", VersionMoveInput{Target: "3.5.35", ClusterVersion: "3.5.0", Health: on("3.5.21", "3.5.21", "3.5.21")},
			MovePatches, "members move to 3.5.35"},
		{"3.4 to 3.5 is the next minor", VersionMoveInput{Target: "3.5.35", ClusterVersion: "3.4.0", Health: on("3.4.23", "3.4.23", "3.4.23")},
			MovePatches, "upgrading from 3.4"},
		{"3.5 to 3.6 from a current 3.5 release goes ahead", VersionMoveInput{Target: "3.6.6", ClusterVersion: "3.5.0", Health: on("3.5.35", "3.5.32", "3.5.35")},
			MovePatches, "upgrading from 3.5 to 3.6.6"},
		{"3.5 to 3.6 from an older 3.5 release is refused with the way forward",
			VersionMoveInput{Target: "3.6.6", ClusterVersion: "3.5.0", Health: on("3.5.21", "3.5.35", "3.5.21")},
			MoveRefused, "requires every member on 3.5.32 or later first (m1 runs 3.5.21, m3 runs 3.5.21): set spec.version to a 3.5 release"},
		{"members already on 3.6 during the upgrade are not judged",
			VersionMoveInput{Target: "3.6.6", ClusterVersion: "3.5.0", Health: on("3.6.6", "3.5.35", "3.5.35")}, MovePatches, ""},
		{"3.5 to 3.6 with v2 entries not yet snapshotted is refused with the writes it takes",
			VersionMoveInput{Target: "3.6.6", ClusterVersion: "3.5.0", Health: cluster(applied(5000)), V2EntriesUntilIndex: 4000, SnapshotCount: 10000},
			MoveRefused, "may still hold etcd v2 requests written while the cluster ran etcd 3.4 (its /health answers each probe with one, up to raft index 4000); etcd 3.6 refuses to start on them (\"detected disallowed v2 WAL\") until a snapshot has passed them, which needs about 9002 more writes at --snapshot-count=10000"},
		{"3.5 to 3.6 once every member has applied past a snapshot of the v2 entries goes ahead",
			VersionMoveInput{Target: "3.6.6", ClusterVersion: "3.5.0", Health: cluster(applied(14002)), V2EntriesUntilIndex: 4000, SnapshotCount: 10000},
			MovePatches, ""},
		{"a cluster still at 3.4 cannot skip to 3.6", VersionMoveInput{Target: "3.6.6", ClusterVersion: "3.4.0", Health: on("3.4.23", "3.5.35", "3.5.35")},
			MoveRefused, "cannot skip to 3.6.6: move one minor version at a time (to 3.5 first)"},
		{"an unfinished 3.6 upgrade can be rolled back by patching", VersionMoveInput{Target: "3.5.35", ClusterVersion: "3.5.0", Health: on("3.6.6", "3.5.35", "3.5.35")},
			MovePatches, ""},
		{"a finished 3.6 cluster goes back to 3.5 through etcd's downgrade",
			VersionMoveInput{Target: "3.5.35", ClusterVersion: "3.6.0", Health: on("3.6.6", "3.6.6", "3.6.6")}, MoveEnableDowngrade, "enabling etcd's downgrade first"},
		{"once the downgrade is enabled the cluster version is 3.5 and members are patched",
			VersionMoveInput{Target: "3.5.35", ClusterVersion: "3.5.0", Health: on("3.6.6", "3.6.6", "3.5.35")}, MovePatches, ""},
		{"a downgrade to an old 3.5 release is refused", VersionMoveInput{Target: "3.5.21", ClusterVersion: "3.6.0", Health: on("3.6.6", "3.6.6", "3.6.6")},
			MoveRefused, "use 3.5.32 or later"},
		{"a finished 3.7 cluster goes back to 3.6 through etcd's downgrade",
			VersionMoveInput{Target: "3.6.16", ClusterVersion: "3.7.0", Health: on("3.7.3", "3.7.3", "3.7.3")}, MoveEnableDowngrade, "from 3.7 to 3.6"},
		{"a downgrade of 3.7 to a 3.6 release its guide does not name is refused",
			VersionMoveInput{Target: "3.6.6", ClusterVersion: "3.7.0", Health: on("3.7.3", "3.7.3", "3.7.3")}, MoveRefused, "use 3.6.11 or later"},
		{"3.7 cannot go down two minor versions", VersionMoveInput{Target: "3.5.35", ClusterVersion: "3.7.0", Health: on("3.7.3", "3.7.3", "3.7.3")},
			MoveRefused, "3.7 to 3.6"},
		{"3.5 cannot go down to 3.4", VersionMoveInput{Target: "3.4.23", ClusterVersion: "3.5.0", Health: on("3.5.35", "3.5.35", "3.5.35")},
			MoveRefused, "etcd downgrades only one minor version, from 3.6 to 3.5"},
		{"a member that does not answer makes it wait",
			VersionMoveInput{Target: "3.6.6", ClusterVersion: "3.5.0", Health: cluster(member(2, func(m *etcdutil.MemberHealth) { m.Err = errors.New("down") }))},
			MoveWait, "waiting for [m2]"},
		{"an undecided cluster version makes it wait", VersionMoveInput{Target: "3.6.6", ClusterVersion: "not_decided", Health: cluster()}, MoveWait, "not decided"},
		{"a target that is not a version is refused", VersionMoveInput{Target: "latest", ClusterVersion: "3.5.0", Health: cluster()}, MoveRefused, "not an etcd version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckVersionMove(tt.in)
			if got.Kind != tt.kind || !strings.Contains(got.Reason, tt.reasonHas) {
				t.Fatalf("CheckVersionMove = %s: %s\nwant %s with reason containing %q", got.Kind, got.Reason, tt.kind, tt.reasonHas)
			}
			if got.Kind == MoveEnableDowngrade {
				if want := tt.in.Target[:strings.LastIndex(tt.in.Target, ".")]; got.DowngradeTarget != want {
					t.Errorf("downgrade target %q, want %s", got.DowngradeTarget, want)
				}
			}
		})
	}
}

func TestTrackV2Entries(t *testing.T) {
	down := member(3, func(m *etcdutil.MemberHealth) { m.Err = errors.New("down") })
	tests := []struct {
		name        string
		prev        v1beta2.MaintenanceStatus
		h           etcdutil.Health
		wantIndex   uint64
		wantPending bool
	}{
		{"a cluster born on 3.5 records nothing", v1beta2.MaintenanceStatus{}, cluster(), 0, false},
		{"a 3.4 member keeps the index at the commit index", v1beta2.MaintenanceStatus{}, cluster(versions("3.4.23", "3.5.35", "3.5.35"), applied(700)), 700, true},
		{"the first observation after the last 3.4 member covers what it wrote last",
			v1beta2.MaintenanceStatus{V2EntriesUntilIndex: 700, V2EntriesPending: true}, cluster(applied(760)), 760, false},
		{"after that the index stays", v1beta2.MaintenanceStatus{V2EntriesUntilIndex: 760}, cluster(applied(9000)), 760, false},
		{"a member that does not answer keeps entries pending, it may be an old one",
			v1beta2.MaintenanceStatus{V2EntriesUntilIndex: 700, V2EntriesPending: true}, cluster(applied(760), down), 760, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx, pending := TrackV2Entries(tt.prev, tt.h)
			if idx != tt.wantIndex || pending != tt.wantPending {
				t.Fatalf("TrackV2Entries = %d, %v; want %d, %v", idx, pending, tt.wantIndex, tt.wantPending)
			}
		})
	}
}

func TestSnapshotCount(t *testing.T) {
	env := func(v string) *v1beta2.ClusterSpec {
		return &v1beta2.ClusterSpec{Pod: &v1beta2.PodPolicy{EtcdEnv: []corev1.EnvVar{{Name: "ETCD_SNAPSHOT_COUNT", Value: v}}}}
	}
	tests := []struct {
		name    string
		spec    *v1beta2.ClusterSpec
		version string
		want    uint64
	}{
		{"etcd 3.5's default", &v1beta2.ClusterSpec{}, "3.5.35", 100000},
		{"etcd 3.6's default", &v1beta2.ClusterSpec{}, "3.6.6", 10000},
		{"the user's variable", env("10"), "3.5.35", 10},
		{"a variable that is not a number is etcd's business; the default is assumed", env("many"), "3.5.35", 100000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SnapshotCount(tt.spec, tt.version); got != tt.want {
				t.Fatalf("SnapshotCount = %d, want %d", got, tt.want)
			}
		})
	}
}
