package main

import (
	"fmt"
	"slices"
)

// archivePackage is the package whose benchmarks measure the continuous
// archive (pkg/backup/archive/bench_test.go): its lag behind a steady write
// load, and the replay of an hour of changes a restore to a point adds.
const archivePackage = "github.com/openetcd/etcd-operator/pkg/backup/archive"

// archiveBenchData is `make bench-go`'s figures of the continuous archive.
type archiveBenchData struct {
	runInfo
	Rows []archiveBenchFigure `json:"rows"`
}

// archiveBenchFigure is one figure of one benchmark: its range over the runs.
type archiveBenchFigure struct {
	Benchmark string `json:"benchmark"`
	Figure    string `json:"figure"`
	Value     string `json:"value"`
}

// archiveBenchAbout says what the section's benchmarks measure, above its
// table.
const archiveBenchAbout = "`BenchmarkArchiveUnderSteadyWrites`: 8 writers put values of 256 bytes into a real etcd as fast " +
	"as it takes them while the archive ships every change to versitygw with zstd, closing a chunk every second " +
	"(interval-s); the lag is how far the archive's newest stored change is behind the cluster, sampled every 10 ms, " +
	"and the last figure how long after the last write it was stored. " +
	"`BenchmarkReplayAnHourOfChanges`: an archive of an hour of writes at writes/s-in-the-hour (puts of 256 bytes, " +
	"one revision each, in chunks of a second) decoded, checked and applied onto a real etcd as a restore to a point " +
	"does, one transaction per revision; an hour at another rate takes its revisions divided by revisions/s. " +
	"A restore to a point is the restore of its snapshot followed by this replay, with its chunks read from the store: " +
	"the restore data path section above measures the two in one run."

// archiveBenchSection is the data of the archive benchmarks in go test
// output; ok is false when the output has none.
func archiveBenchSection(run runInfo, out string) (d archiveBenchData, ok bool) {
	results := parseGoBench(out, archivePackage)
	if len(results) == 0 {
		return archiveBenchData{}, false
	}
	runs := 0
	for _, r := range results {
		var figures []string
		for unit, vs := range r.metrics {
			runs = max(runs, len(vs))
			if ownFigure(unit) {
				figures = append(figures, unit)
			}
		}
		slices.Sort(figures)
		for _, figure := range figures {
			d.Rows = append(d.Rows, archiveBenchFigure{Benchmark: r.name, Figure: figure, Value: releaseFigure(r, figure)})
		}
	}
	d.runInfo = run
	d.Run = fmt.Sprintf("`make bench-go` (`pkg/backup/archive/bench_test.go`, the range of %s runs; a real etcd 3.6 "+
		"process syncing its writes to disk and a versitygw process, on this machine)", count(runs))
	return d, true
}

func archiveBenchBody(raw []byte) (string, error) {
	var d archiveBenchData
	if err := strictUnmarshal(raw, &d); err != nil {
		return "", err
	}
	rows := [][]string{{"benchmark", "figure", "range over the runs"}}
	for i, f := range d.Rows {
		rows = append(rows, []string{benchmarkCell(d.Rows, i, func(f archiveBenchFigure) string { return f.Benchmark }), f.Figure, f.Value})
	}
	return d.provenance() + "\n" + archiveBenchAbout + "\n\n" + mdTable(rows), nil
}
