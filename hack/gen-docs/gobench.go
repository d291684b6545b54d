package main

import (
	"bufio"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// goBenchmarksPackage is the package whose benchmarks the page's Go benchmark
// section shows: those of an idle cluster (pkg/cluster/idle_bench_test.go).
const goBenchmarksPackage = "github.com/openetcd/etcd-operator/pkg/cluster"

// goBenchResult is every run of one benchmark: its figures by unit.
type goBenchResult struct {
	name    string
	metrics map[string][]float64 // "ns/op", "B/op", "allocs/op", or the benchmark's own
}

// parseGoBench reads `go test -bench -benchmem -count N` output and keeps the
// benchmarks of pkg, in the order they first ran.
func parseGoBench(out, pkg string) []goBenchResult {
	var order []string
	byName := map[string]*goBenchResult{}
	current := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			current = strings.TrimSpace(p)
			continue
		}
		f := strings.Fields(line)
		if current != pkg || len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := f[0]
		// The -GOMAXPROCS suffix.
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		r, ok := byName[name]
		if !ok {
			r = &goBenchResult{name: name, metrics: map[string][]float64{}}
			byName[name] = r
			order = append(order, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			r.metrics[f[i+1]] = append(r.metrics[f[i+1]], v)
		}
	}
	var res []goBenchResult
	for _, n := range order {
		res = append(res, *byName[n])
	}
	return res
}

// goBenchmarkRow is a benchmark as the page shows it: the range of its time
// per op over the runs and what it allocates; a benchmark that reports bytes
// of its own (a unit "<what>-B/<per>") measures memory, and shows that instead.
func goBenchmarkRow(r goBenchResult, about string) goBenchmark {
	g := goBenchmark{Name: r.name, About: about, PerOp: "–", Allocated: "–"}
	for unit, vs := range r.metrics {
		if strings.Contains(unit, "-B/") {
			g.PerOp = spanOf(vs, byteUnits)
			return g
		}
	}
	if ns := r.metrics["ns/op"]; len(ns) > 0 {
		g.PerOp = spanOf(ns, timeUnits)
	}
	bytes, allocs := r.metrics["B/op"], r.metrics["allocs/op"]
	if len(bytes) > 0 && len(allocs) > 0 {
		lo, hi := minMax(allocs)
		a := spacedThousands(lo)
		if hi != lo {
			a += "–" + spacedThousands(hi)
		}
		g.Allocated = spanOf(bytes, byteUnits) + ", " + a + " allocs"
	}
	return g
}

type unit struct {
	name string
	size float64
}

// units of a kind of figure, and the significant digits it is shown with:
// times vary from run to run, bytes much less.
type units struct {
	digits int
	scale  []unit
}

var timeUnits = units{2, []unit{{"ns", 1}, {"µs", 1e3}, {"ms", 1e6}, {"s", 1e9}}}
var byteUnits = units{3, []unit{{"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}}}

// spanOf writes the range of vs in the largest unit the maximum reaches one
// of, each end to the units' significant digits: "26–32 µs", "2.5–12 ms",
// "13.5 KB".
func spanOf(vs []float64, us units) string {
	lo, hi := minMax(vs)
	u := us.scale[0]
	for _, c := range us.scale {
		if hi >= c.size {
			u = c
		}
	}
	a, b := significant(lo/u.size, us.digits), significant(hi/u.size, us.digits)
	if a == b {
		return a + " " + u.name
	}
	return a + "–" + b + " " + u.name
}

// significant writes v with digits significant digits, or as a whole number
// when it has more digits than that.
func significant(v float64, digits int) string {
	decimals := 0
	if v > 0 {
		decimals = max(0, digits-1-int(math.Floor(math.Log10(v))))
		// A rounding that carries into a new digit (0.9966 to "1.00") is
		// counted from the rounded value: "1.0".
		if r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'f', decimals, 64), 64); err == nil && r > 0 {
			decimals = max(0, digits-1-int(math.Floor(math.Log10(r))))
		}
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

func minMax(vs []float64) (float64, float64) {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return s[0], s[len(s)-1]
}

// spacedThousands writes 3249 as "3 249", as the page does.
func spacedThousands(v float64) string {
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}

// goBenchmarksSection is the data of a `make bench-go` run: the benchmarks of
// an idle cluster, each with what the last data said it measures.
func goBenchmarksSection(run runInfo, out string, last goBenchmarksData) (goBenchmarksData, error) {
	results := parseGoBench(out, goBenchmarksPackage)
	if len(results) == 0 {
		return goBenchmarksData{}, fmt.Errorf("no benchmark of %s in the output", goBenchmarksPackage)
	}
	runs := 0
	for _, vs := range results[0].metrics {
		runs = max(runs, len(vs))
	}
	about := map[string]string{}
	for _, b := range last.Benchmarks {
		about[b.Name] = b.About
	}
	run.Run = fmt.Sprintf("`make bench-go` (`pkg/cluster/idle_bench_test.go`, the range of %s runs; real etcd in the process, so times include the server's side and are noisy; allocations are exact)", count(runs))
	d := goBenchmarksData{runInfo: run}
	for _, r := range results {
		d.Benchmarks = append(d.Benchmarks, goBenchmarkRow(r, about[r.name]))
	}
	return d, nil
}
