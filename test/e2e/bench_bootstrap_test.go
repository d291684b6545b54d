//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/hack/bench/benchreport"
	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// bootstrapVersions are the releases a new cluster may be made on, the
// newest patch of each minor version: the bootstrap part measures each one
// against its own floor.
var bootstrapVersions = []string{"3.4.23", "3.5.35", "3.6.16", "3.7.3"}

// The rows of the bootstrap part, per version.
func bootstrapFloorRow(version string) string {
	return "floor: 3 × " + version + " pods, static initial cluster, created together"
}

func bootstrapTogetherRow(version string) string {
	return "bootstrap 3 × " + version + ", members started together (the default)"
}

func bootstrapSeedAndJoinRow(version string) string {
	return "bootstrap 3 × " + version + ", seed and join"
}

// TestMeasureBootstrap measures, in one run, how long a new cluster of three
// members takes to be ready on each version a new cluster may be made on:
// the floor (three pods of that version made at once, no operator), the
// default start (members started together) and the original's seed and
// join, alternating, E2E_BENCH_BOOTSTRAP runs each. Run it alone on the
// node: hack/bench/run.sh (BENCH_ONLY=bootstrap).
func TestMeasureBootstrap(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("E2E_BENCH_BOOTSTRAP"))
	if runs <= 0 {
		t.Skip("the bootstrap bench runs only on request: E2E_BENCH_BOOTSTRAP=<runs> (hack/bench/run.sh)")
	}
	started := time.Now()
	results := map[string][]float64{}
	floorNS := newNamespace(t, "bench-boot-floor")
	for i := range runs {
		for _, v := range bootstrapVersions {
			t.Run(fmt.Sprintf("%s-%d", v, i), func(t *testing.T) {
				results[bootstrapFloorRow(v)] = append(results[bootstrapFloorRow(v)], measureFloor(t, floorNS, 3, v))
				benchBootstrapMode(t, results, v, api.BootstrapTogether, bootstrapTogetherRow(v))
				benchBootstrapMode(t, results, v, api.BootstrapSeedAndJoin, bootstrapSeedAndJoinRow(v))
			})
		}
		t.Logf("run %d of %d done", i+1, runs)
		writeBootstrap(t, started, results, i+1, runs)
	}
}

// benchBootstrapMode measures a new cluster of three members of version
// started in mode, to status 3 ready and 3 pods Ready; the default mode is
// left unnamed in the spec, as users leave it.
func benchBootstrapMode(t *testing.T, results map[string][]float64, version string, mode api.BootstrapMode, row string) {
	name := framework.UniqueName("benchboot")
	cl := framework.NewCluster(name, 3, version)
	if mode != api.BootstrapTogether {
		cl.Spec.Bootstrap = &api.BootstrapPolicy{Mode: mode}
	}
	start := time.Now()
	createCluster(t, cl)
	record(results, measure(t, name, start, nil, probe{row, func(cl *api.EtcdCluster, pods []corev1.Pod) bool {
		return statusReady(3)(cl, pods) && podsReady(3)(cl, pods)
	}}))
	deleteAndWait(t, name)
}

// writeBootstrap writes the bootstrap report of the runs done so far.
func writeBootstrap(t *testing.T, started time.Time, results map[string][]float64, done, runs int) {
	rep := benchReport{Header: benchreport.Header{Kind: "bootstrap"}, Runs: done, started: started}
	if done < runs {
		rep.Notes = append(rep.Notes, fmt.Sprintf("Partial: %d of %d runs done.", done, runs))
	}
	for _, v := range bootstrapVersions {
		floor := bootstrapFloorRow(v)
		rows := []benchRow{}
		for _, name := range []string{floor, bootstrapTogetherRow(v), bootstrapSeedAndJoinRow(v)} {
			if len(results[name]) > 0 {
				rows = append(rows, newBenchRow(name, "s", results[name]))
			}
		}
		for i := range rows {
			if rows[i].Scenario != floor && len(results[floor]) > 0 {
				rows[i].Floor, rows[i].FloorFactor = floor, 1
				rows[i].RatioToFloor = rows[i].Median / newBenchRow(floor, "s", results[floor]).Median
			}
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	writeBench(t, &rep)
}

// bootstrapTable is the markdown table of a bootstrap report: one line per
// version, each start beside that version's floor.
func bootstrapTable(rep benchReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Bootstrap, %s, %s; seconds to 3 members ready, median of %d (min–max), polled every 0.25 s\n\n", rep.Date, rep.Machine, rep.Runs)
	fmt.Fprintln(&b, "| etcd | floor: 3 pods created together | members started together (the default) | × floor | seed and join | × floor |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|")
	rows := map[string]benchRow{}
	for _, r := range rep.Rows {
		rows[r.Scenario] = r
	}
	cell := func(name string) (string, string) {
		r, ok := rows[name]
		switch {
		case !ok:
			return "–", "–"
		case r.Floor == "":
			return spread(r, 1), "–"
		}
		return spread(r, 1), fmt.Sprintf("%.2f", r.RatioToFloor)
	}
	for _, v := range bootstrapVersions {
		floor, _ := cell(bootstrapFloorRow(v))
		together, xTogether := cell(bootstrapTogetherRow(v))
		seed, xSeed := cell(bootstrapSeedAndJoinRow(v))
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", v, floor, together, xTogether, seed, xSeed)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	return b.String()
}
