package main

import (
	"fmt"
	"slices"
	"strings"
)

// etcdReleasesPackage is the package whose benchmarks set etcd releases side
// by side (pkg/util/etcdutil/releases_bench_test.go): each benchmark's second
// name element is the release it ran, "etcd-3.7.3".
const etcdReleasesPackage = "github.com/openetcd/etcd-operator/pkg/util/etcdutil"

// etcdReleasesData is `make bench-go`'s figures of etcd releases side by side.
type etcdReleasesData struct {
	runInfo
	// Versions are the releases measured, the table's columns.
	Versions []string             `json:"versions"`
	Rows     []etcdReleasesFigure `json:"rows"`
}

// etcdReleasesFigure is one figure of one benchmark case on every release.
type etcdReleasesFigure struct {
	// Benchmark is the benchmark and its case, without the release:
	// "BenchmarkLeaseKeepAliveUnderWrites/saturating/to-leader".
	Benchmark string `json:"benchmark"`
	// Figure is "per op" or the unit the benchmark reported ("p99-ms").
	Figure string `json:"figure"`
	// Values are the figure's range over the runs, by Versions; "–" where
	// a release did not run the case.
	Values []string `json:"values"`
}

// etcdReleasesAbout says what the section's benchmarks measure, above its
// table; the figures say how each release did.
const etcdReleasesAbout = "What etcd 3.7 changes for the operator, and why it changes nothing in it, is in " +
	"[etcd versions](../user-guide/versions.md#what-37-changes-for-the-operator). " +
	"`BenchmarkLearnerPromotion`: the time from etcd accepting a new member as a learner into a cluster of three " +
	"holding 47 MiB (12 000 values of 4 KiB, which the learner gets as a snapshot) until it " +
	"accepts the learner's promotion, asked every 50 ms; refusals are the times it said the learner was not ready. " +
	"`BenchmarkLeaseKeepAliveUnderWrites`: one lease keep-alive's round trip, sent to the leader and to a " +
	"follower, while clients offer 500 writes of 1 KiB a second, or as many as 64 writers in flight get " +
	"through (writes/s is what the cluster took); the largest gap seen between the leader's committed and applied " +
	"index is the wait 3.7 skips on the leader. Members sync their writes to disk. On a shared machine the figures " +
	"move more from run to run than between the releases: compare ranges, not single figures."

// etcdReleasesSection is the data of the etcd release benchmarks in go test
// output; ok is false when the output has none.
func etcdReleasesSection(run runInfo, out string) (d etcdReleasesData, ok bool) {
	results := parseGoBench(out, etcdReleasesPackage)
	if len(results) == 0 {
		return etcdReleasesData{}, false
	}
	runs := 0
	type key struct{ benchmark, version string }
	byKey := map[key]goBenchResult{}
	var benchmarks []string
	for _, r := range results {
		benchmark, version, ok := splitRelease(r.name)
		if !ok {
			continue
		}
		if !slices.Contains(benchmarks, benchmark) {
			benchmarks = append(benchmarks, benchmark)
		}
		if !slices.Contains(d.Versions, version) {
			d.Versions = append(d.Versions, version)
		}
		byKey[key{benchmark, version}] = r
		for _, vs := range r.metrics {
			runs = max(runs, len(vs))
		}
	}
	if len(benchmarks) == 0 {
		return etcdReleasesData{}, false
	}
	for _, benchmark := range benchmarks {
		var figures []string
		for _, v := range d.Versions {
			for unit := range byKey[key{benchmark, v}].metrics {
				if ownFigure(unit) && !slices.Contains(figures, unit) {
					figures = append(figures, unit)
				}
			}
		}
		slices.Sort(figures)
		for _, figure := range append([]string{"per op"}, figures...) {
			row := etcdReleasesFigure{Benchmark: benchmark, Figure: figure}
			for _, v := range d.Versions {
				row.Values = append(row.Values, releaseFigure(byKey[key{benchmark, v}], figure))
			}
			d.Rows = append(d.Rows, row)
		}
	}
	d.runInfo = run
	d.Run = fmt.Sprintf("`make bench-go` (`pkg/util/etcdutil/releases_bench_test.go`, the range of %s runs; "+
		"real etcd processes of each release on loopback, so the figures are as noisy as the machine)", count(runs))
	return d, true
}

// ownFigure tells a figure a benchmark reported itself (b.ReportMetric)
// from those go test reports of every benchmark.
func ownFigure(unit string) bool {
	return unit != "ns/op" && unit != "B/op" && unit != "allocs/op"
}

// splitRelease takes the release out of a benchmark's name:
// "BenchmarkX/etcd-3.7.3/a/b" is "BenchmarkX/a/b" on "3.7.3".
func splitRelease(name string) (benchmark, version string, ok bool) {
	parts := strings.Split(name, "/")
	if len(parts) < 2 || !strings.HasPrefix(parts[1], "etcd-") {
		return "", "", false
	}
	version = strings.TrimPrefix(parts[1], "etcd-")
	return strings.Join(append(parts[:1:1], parts[2:]...), "/"), version, true
}

// releaseFigure is a figure's range over the runs: the time per op in its
// unit, a benchmark's own figure as a number (its unit names the column).
func releaseFigure(r goBenchResult, figure string) string {
	if figure == "per op" {
		if ns := r.metrics["ns/op"]; len(ns) > 0 {
			return spanOf(ns, timeUnits)
		}
		return "–"
	}
	vs := r.metrics[figure]
	if len(vs) == 0 {
		return "–"
	}
	return strings.TrimSuffix(spanOf(vs, units{2, []unit{{"", 1}}}), " ")
}

func etcdReleasesBody(raw []byte) (string, error) {
	var d etcdReleasesData
	if err := strictUnmarshal(raw, &d); err != nil {
		return "", err
	}
	header := []string{"benchmark", "figure"}
	for _, v := range d.Versions {
		header = append(header, "etcd "+v)
	}
	rows := [][]string{header}
	for i, f := range d.Rows {
		rows = append(rows, append([]string{benchmarkCell(d.Rows, i, func(f etcdReleasesFigure) string { return f.Benchmark }), f.Figure}, f.Values...))
	}
	return d.provenance() + "\n" + etcdReleasesAbout + "\n\n" + mdTable(rows), nil
}

// benchmarkCell is the benchmark column of row i of a table of figures,
// several rows per benchmark: its name on its first row only.
func benchmarkCell[R any](rows []R, i int, benchmark func(R) string) string {
	if i > 0 && benchmark(rows[i-1]) == benchmark(rows[i]) {
		return ""
	}
	return "`" + benchmark(rows[i]) + "`"
}
