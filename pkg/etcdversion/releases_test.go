package etcdversion

import (
	"strings"
	"testing"
)

func mustParse(t *testing.T, s string) Version {
	t.Helper()
	v, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestReleaseOfAVersion(t *testing.T) {
	tests := []struct {
		name    string
		version string
		minor   string
	}{
		{"a known minor version has its own row", "3.5.21", "3.5"},
		{"a pre-release has its release's row", "3.6.0-rc.1", "3.6"},
		{"a version older than every row is read as the oldest", "3.1.0", "3.2"},
		{"a newer minor version is read as the newest known", "3.9.1", "3.7"},
		{"a newer major version is read as the newest known", "4.0.0", "3.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustParse(t, tt.version).Release()
			if got := New(r.Major, r.Minor, 0).MinorString(); got != tt.minor {
				t.Fatalf("Release(%s) is the row of %s, want %s", tt.version, got, tt.minor)
			}
		})
	}
}

// TestWhatEachVersionCanDo pins the features other packages ask about, at
// the versions where they change.
func TestWhatEachVersionCanDo(t *testing.T) {
	type can struct {
		learners, maxLearners, shell, readOnlyRoot, etcdutl, bumpRevision bool
		probes                                                            Probes
	}
	tests := []struct {
		name    string
		version string
		want    can
	}{
		{"3.2 probes with etcdctl in its shell and has no learners", "3.2.32",
			can{shell: true, probes: ProbeEtcdctl}},
		{"3.3 has a metrics listener but no serializable /health", "3.3.27",
			can{shell: true, probes: ProbeHealthTCP}},
		{"3.4 brings learners and a read-only root", "3.4.23",
			can{learners: true, shell: true, readOnlyRoot: true, probes: ProbeHealthTCP}},
		{"3.5 is distroless, has etcdutl and the serializable /health", "3.5.9",
			can{learners: true, readOnlyRoot: true, etcdutl: true, probes: ProbeHealth}},
		{"3.5.10 bumps the revision on restore", "3.5.10",
			can{learners: true, readOnlyRoot: true, etcdutl: true, bumpRevision: true, probes: ProbeHealth}},
		{"3.6 reads the learner limit", "3.6.0",
			can{learners: true, maxLearners: true, readOnlyRoot: true, etcdutl: true, bumpRevision: true, probes: ProbeHealth}},
		{"3.7 can do what 3.6 can", "3.7.0",
			can{learners: true, maxLearners: true, readOnlyRoot: true, etcdutl: true, bumpRevision: true, probes: ProbeHealth}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := mustParse(t, tt.version)
			r := v.Release()
			got := can{r.Learners, r.MaxLearners, r.Shell, r.ReadOnlyRootFilesystem, r.Etcdutl, r.BumpRevision.In(v), r.Probes}
			if got != tt.want {
				t.Fatalf("%s can %+v, want %+v", tt.version, got, tt.want)
			}
		})
	}
}

func TestMaintenanceFlagsByVersion(t *testing.T) {
	tests := []struct {
		name             string
		version          string
		mode             bool
		corrupt          CorruptCheckFlags
		compactHash      bool
		featureGates     bool
		snapshotCount    uint64
		healthWritesV2   bool
		refusesV2Entries bool
	}{
		{"3.2 compacts by hours and checks nothing", "3.2.0", false, CorruptCheckNone, false, false, 100000, true, false},
		{"3.3 has the experimental checks", "3.3.0", true, CorruptCheckExperimental, false, false, 100000, true, false},
		{"3.5.4 has no compact hash check yet", "3.5.4", true, CorruptCheckExperimental, false, false, 100000, false, false},
		{"3.5.5 has the compact hash check", "3.5.5", true, CorruptCheckExperimental, true, false, 100000, false, false},
		{"3.6 accepts both names and snapshots ten times as often", "3.6.6", true, CorruptCheckExperimental, true, true, 10000, false, true},
		{"3.7 has only the feature gates", "3.7.0", true, CorruptCheckFeatureGates, false, true, 10000, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := mustParse(t, tt.version)
			r := v.Release()
			if r.AutoCompactionMode != tt.mode || r.CorruptCheckFlags != tt.corrupt || r.ExperimentalCompactHashCheck.In(v) != tt.compactHash ||
				r.FeatureGates != tt.featureGates || r.DefaultSnapshotCount != tt.snapshotCount ||
				r.HealthWritesV2 != tt.healthWritesV2 || r.RefusesV2Entries != tt.refusesV2Entries {
				t.Fatalf("%s: %+v", tt.version, r)
			}
		})
	}
}

func TestVersionMoveRules(t *testing.T) {
	tests := []struct {
		name      string
		version   string
		supported bool
		downgrade bool
		fromPatch int
	}{
		{"3.5 cannot be downgraded", "3.5.21", true, false, 0},
		{"3.6 goes back to 3.5 and asks for a current 3.5 first", "3.6.6", true, true, 32},
		{"3.7 asks for 3.6.11 first and goes back to 3.6 by the downgrade API", "3.7.0", true, true, 11},
		{"3.1 is not driven", "3.1.0", false, false, 0},
		{"another major version is not driven", "4.0.0", false, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := mustParse(t, tt.version)
			if v.Supported() != tt.supported {
				t.Fatalf("Supported = %v", v.Supported())
			}
			if r := v.Release(); v.Supported() && (r.Downgrade != tt.downgrade || r.UpgradeFromPatch != tt.fromPatch) {
				t.Fatalf("Downgrade %v UpgradeFromPatch %d", r.Downgrade, r.UpgradeFromPatch)
			}
		})
	}
	if Downgrades() != "3.6 to 3.5, 3.7 to 3.6" || Oldest() != New(3, 2, 0) {
		t.Errorf("Downgrades %q, Oldest %q", Downgrades(), Oldest())
	}
}

func TestMoveBetweenVersions(t *testing.T) {
	tests := []struct {
		name     string
		from, to string
		want     Move
	}{
		{"patch releases go up", "3.5.17", "3.5.21", MovePatch},
		{"patch releases go down", "3.5.21", "3.5.17", MovePatch},
		{"one minor version up", "3.5.21", "3.6.6", MoveUp},
		{"two minor versions up skip one", "3.4.23", "3.6.6", MoveSkip},
		{"3.6 goes down to 3.5 through the downgrade API", "3.6.6", "3.5.32", MoveDown},
		{"3.5 does not go down to 3.4", "3.5.21", "3.4.23", MoveDownRefused},
		{"3.6 does not go down two minor versions", "3.6.6", "3.4.23", MoveDownRefused},
		{"the major version does not change", "3.6.6", "4.0.0", MoveMajor},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MoveBetween(mustParse(t, tt.from), mustParse(t, tt.to)); got != tt.want {
				t.Fatalf("MoveBetween(%s, %s) = %d, want %d", tt.from, tt.to, got, tt.want)
			}
		})
	}
}

func TestReleasesAreOrderedMinorVersions(t *testing.T) {
	for i := 1; i < len(releases); i++ {
		prev, cur := releases[i-1], releases[i]
		if cur.Major != prev.Major || cur.Minor != prev.Minor+1 {
			t.Errorf("row %d.%d follows %d.%d: rows are consecutive minor versions, oldest first", cur.Major, cur.Minor, prev.Major, prev.Minor)
		}
	}
}

func TestSupportPolicy(t *testing.T) {
	tests := []struct {
		version string
		refused bool
		advice  string
	}{
		{"3.2.13", false, "set spec.version to a 3.3 release next"},
		{"3.4.23", false, "set spec.version to a 3.5 release next"},
		{"3.5.0", true, ""},
		{"3.5.2", true, ""},
		{"3.5.3", false, ""},
		{"3.5.21", false, ""},
		{"3.6.0", false, ""},
		{"3.7.3", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			v := mustParse(t, tt.version)
			if got := v.RefusedBecause(); (got != "") != tt.refused {
				t.Errorf("RefusedBecause = %q, want refused %v", got, tt.refused)
			}
			if got := v.UpgradeAwayAdvice(); tt.advice == "" && got != "" || !strings.Contains(got, tt.advice) {
				t.Errorf("UpgradeAwayAdvice = %q, want %q in it", got, tt.advice)
			}
		})
	}
	if Newest() != New(3, 7, 0) {
		t.Errorf("Newest = %s", Newest())
	}
}
