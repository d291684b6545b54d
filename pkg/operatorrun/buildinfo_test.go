package operatorrun

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// gatherBuildInfo returns the labels and the value of the one build-info
// series reg holds.
func gatherBuildInfo(t *testing.T, reg prometheus.Gatherer) (map[string]string, float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != BuildInfoMetric {
			continue
		}
		if len(mf.GetMetric()) != 1 {
			t.Fatalf("%s has %d series, want 1", BuildInfoMetric, len(mf.GetMetric()))
		}
		m := mf.GetMetric()[0]
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		return labels, m.GetGauge().GetValue()
	}
	t.Fatalf("no %s on the registry", BuildInfoMetric)
	return nil, 0
}

func TestBuildInfoSaysWhichBuildRuns(t *testing.T) {
	for _, tc := range []struct {
		name            string
		version, gitSHA string
	}{
		{"a release says its tag and commit", "v0.2.0", "1a2b3c4"},
		{"a build between tags says how far it is from the last one", "v0.2.0-3-g5d6e7f8", "5d6e7f8"},
		{"a build with uncommitted changes says so", "v0.0.0-g5d6e7f8-dirty", "5d6e7f8-dirty"},
		{"an unstamped build says so rather than name a release", "v0.0.0-unknown", "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(NewBuildInfo(tc.version, tc.gitSHA))
			labels, value := gatherBuildInfo(t, reg)
			want := map[string]string{"version": tc.version, "git_sha": tc.gitSHA, "go_version": runtime.Version()}
			if len(labels) != len(want) {
				t.Errorf("labels = %v, want %v", labels, want)
			}
			for k, v := range want {
				if labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, labels[k], v)
				}
			}
			if value != 1 {
				t.Errorf("value = %v, want 1", value)
			}
		})
	}
}

// Each operator's /metrics registry is the server's: the gauge must be on it
// with the version and commit the build stamped (make build sets Version and
// GitSHA with -ldflags -X).
func TestServerRegistryCarriesTheStampedBuild(t *testing.T) {
	stampedVersion, stampedSHA := Version, GitSHA
	t.Cleanup(func() { Version, GitSHA = stampedVersion, stampedSHA })
	Version, GitSHA = "v9.8.7-1-gabcdef0", "abcdef0"

	srv, err := NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.listener.Close() })
	labels, _ := gatherBuildInfo(t, srv.Registry)
	if labels["version"] != Version || labels["git_sha"] != GitSHA {
		t.Errorf("build info = %v, want version %s and git_sha %s", labels, Version, GitSHA)
	}
}
