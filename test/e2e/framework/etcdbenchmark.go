package framework

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdBenchmarkModule is the module of etcd's own benchmark tool
// (tools/benchmark): etcd's root module, which publishes no module of its own
// for its tools. hack/tools.sh builds it.
const EtcdBenchmarkModule = "go.etcd.io/etcd/v3"

// EtcdBenchmarkResult is what one run of etcd's benchmark tool printed: its
// summary and its errors. Latencies are in seconds, as the tool prints them.
type EtcdBenchmarkResult struct {
	TotalSeconds      float64 `json:"totalSeconds"`
	RequestsPerSecond float64 `json:"requestsPerSecond"`
	P50Seconds        float64 `json:"p50Seconds"`
	P99Seconds        float64 `json:"p99Seconds"`
	// Errors counts the requests that failed, by error: the tool exits 0
	// when they do and prints them after its summary.
	Errors map[string]int `json:"errors,omitempty"`
}

// Failed is the number of requests that failed.
func (r EtcdBenchmarkResult) Failed() int {
	n := 0
	for _, c := range r.Errors {
		n += c
	}
	return n
}

var (
	benchTotal   = regexp.MustCompile(`^\s*Total:\s*(\S+) secs\.$`)
	benchRate    = regexp.MustCompile(`^\s*Requests/sec:\s*(\S+)$`)
	benchPercent = regexp.MustCompile(`^\s*([0-9.]+)% in (\S+) secs\.$`)
	benchError   = regexp.MustCompile(`^\s*\[(\d+)\]\s+(.*)$`)
)

// ParseEtcdBenchmark reads the report of one command of etcd's benchmark tool
// (put, range, watch-latency; pkg/report's text) from its standard output:
// "Summary:" with the total time and requests per second, the latency
// distribution, then "Error distribution:" when requests failed. The
// progress bar the tool draws on the same output, with carriage returns, is
// skipped. A run whose every request failed has errors and no summary. The
// watch command prints two summaries (watch creation, then events received),
// which one result cannot hold: it is refused.
func ParseEtcdBenchmark(out string) (EtcdBenchmarkResult, error) {
	var r EtcdBenchmarkResult
	section := ""
	summaries := 0
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		// The progress bar redraws its line after each \r; only what
		// follows the last one was left on the screen.
		if i := strings.LastIndexByte(line, '\r'); i >= 0 {
			line = line[i+1:]
		}
		switch strings.TrimSpace(line) {
		case "Summary:":
			summaries++
			section = "summary"
			continue
		case "Response time histogram:":
			section = "histogram"
			continue
		case "Latency distribution:":
			section = "latency"
			continue
		case "Error distribution:":
			section = "errors"
			continue
		case "":
			continue
		}
		var err error
		switch section {
		case "summary":
			if m := benchTotal.FindStringSubmatch(line); m != nil {
				r.TotalSeconds, err = parseBenchFloat("Total", m[1])
				seen["Total"] = true
			} else if m := benchRate.FindStringSubmatch(line); m != nil {
				r.RequestsPerSecond, err = parseBenchFloat("Requests/sec", m[1])
				seen["Requests/sec"] = true
			}
		case "latency":
			if m := benchPercent.FindStringSubmatch(line); m != nil {
				switch m[1] {
				case "50":
					r.P50Seconds, err = parseBenchFloat("50%", m[2])
					seen["50%"] = true
				case "99":
					r.P99Seconds, err = parseBenchFloat("99%", m[2])
					seen["99%"] = true
				}
			}
		case "errors":
			m := benchError.FindStringSubmatch(line)
			if m == nil {
				return r, fmt.Errorf("line %q of the error distribution is not \"[count] error\"", line)
			}
			n, _ := strconv.Atoi(m[1])
			if r.Errors == nil {
				r.Errors = map[string]int{}
			}
			r.Errors[m[2]] += n
		}
		if err != nil {
			return r, err
		}
	}
	switch {
	case summaries > 1:
		return r, fmt.Errorf("%d summaries in one output (the watch command's?): one command's report at a time", summaries)
	case summaries == 0 && len(r.Errors) == 0:
		return r, errors.New("no summary and no error distribution in the output")
	case summaries == 1:
		var missing []string
		for _, want := range []string{"Total", "Requests/sec", "50%", "99%"} {
			if !seen[want] {
				missing = append(missing, want)
			}
		}
		if len(missing) > 0 {
			return r, fmt.Errorf("the summary has no %s", strings.Join(missing, ", "))
		}
	}
	return r, nil
}

func parseBenchFloat(what, s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number", what, s)
	}
	return v, nil
}

// RunEtcdBenchmark runs etcd's benchmark tool bin against endpoints with
// args (global flags, the command and its flags) and --precise, and parses
// its report. The tool waits for ever for an endpoint it cannot reach: ctx
// bounds the run.
func RunEtcdBenchmark(ctx context.Context, bin string, endpoints, args []string) (EtcdBenchmarkResult, error) {
	full := append([]string{"--endpoints=" + strings.Join(endpoints, ","), "--precise"}, args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	command := filepath.Base(bin) + " " + strings.Join(full, " ")
	if err := cmd.Run(); err != nil {
		return EtcdBenchmarkResult{}, fmt.Errorf("%s: %w; the end of its output:\n%s", command, err, tail(stdout.String()+stderr.String(), 2000))
	}
	r, err := ParseEtcdBenchmark(stdout.String())
	if err != nil {
		return r, fmt.Errorf("%s: %w; its output:\n%s", command, err, tail(stdout.String(), 4000))
	}
	return r, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// EtcdBenchmarkVersion is the version of etcd's module the benchmark tool bin
// was built from, read from the build information Go writes into binaries.
func EtcdBenchmarkVersion(bin string) (string, error) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("read the build information of %s: %w", bin, err)
	}
	if info.Main.Path == EtcdBenchmarkModule {
		return info.Main.Version, nil
	}
	for _, d := range info.Deps {
		if d.Path == EtcdBenchmarkModule {
			return d.Version, nil
		}
	}
	return "", fmt.Errorf("%s was not built from %s (main module %s)", bin, EtcdBenchmarkModule, info.Main.Path)
}

// PutFromHost writes key=value through endpoints, from this process: the
// key the range workloads read must exist, and a write that succeeds shows
// that the tool, on this host, reaches the members too.
func PutFromHost(ctx context.Context, endpoints []string, key, value string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("client of %v: %w", endpoints, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, key, value); err != nil {
		return fmt.Errorf("put %s through %v: %w", key, endpoints, err)
	}
	return nil
}

// The goal of a cluster the operator runs, against the floor (the same etcd
// run by hand on the same node) under the same workload of etcd's benchmark
// tool. The bench prints whether it is met; it asserts nothing.
const (
	// EtcdBenchmarkGoalThroughput: the operator's requests per second are at
	// least this share of the floor's.
	EtcdBenchmarkGoalThroughput = 0.95
	// EtcdBenchmarkGoalP99: the operator's 99th percentile latency is at most
	// this multiple of the floor's.
	EtcdBenchmarkGoalP99 = 1.1
)

// EtcdBenchmarkSide is one side's runs of a workload and their medians.
type EtcdBenchmarkSide struct {
	Runs              []EtcdBenchmarkResult `json:"runs"`
	RequestsPerSecond float64               `json:"requestsPerSecond"`
	P50Ms             float64               `json:"p50Ms"`
	P99Ms             float64               `json:"p99Ms"`
}

// EtcdBenchmarkComparison is one workload on the operator's cluster against
// the floor: the medians of each side and the operator's as multiples of the
// floor's (0 when the floor has none).
type EtcdBenchmarkComparison struct {
	Operator          EtcdBenchmarkSide `json:"operator"`
	Floor             EtcdBenchmarkSide `json:"floor"`
	ThroughputOfFloor float64           `json:"throughputOfFloor"`
	P50OfFloor        float64           `json:"p50OfFloor"`
	P99OfFloor        float64           `json:"p99OfFloor"`
	// Shortfalls says, in words, how the operator's side misses the goal;
	// none: it meets it.
	Shortfalls []string `json:"shortfalls,omitempty"`
}

// CompareEtcdBenchmark compares the runs of one workload on the operator's
// cluster with those on the floor, by their medians.
func CompareEtcdBenchmark(operator, floor []EtcdBenchmarkResult) EtcdBenchmarkComparison {
	c := EtcdBenchmarkComparison{Operator: benchSide(operator), Floor: benchSide(floor)}
	if len(operator) == 0 || len(floor) == 0 {
		c.Shortfalls = []string{"not measured on both sides"}
		return c
	}
	c.ThroughputOfFloor = ratio(c.Operator.RequestsPerSecond, c.Floor.RequestsPerSecond)
	c.P50OfFloor = ratio(c.Operator.P50Ms, c.Floor.P50Ms)
	c.P99OfFloor = ratio(c.Operator.P99Ms, c.Floor.P99Ms)
	if c.ThroughputOfFloor < EtcdBenchmarkGoalThroughput {
		c.Shortfalls = append(c.Shortfalls, fmt.Sprintf("throughput %.2f× the floor's (goal ≥ %.2f×)", c.ThroughputOfFloor, EtcdBenchmarkGoalThroughput))
	}
	if c.P99OfFloor > EtcdBenchmarkGoalP99 {
		c.Shortfalls = append(c.Shortfalls, fmt.Sprintf("p99 %.2f× the floor's (goal ≤ %.2f×)", c.P99OfFloor, EtcdBenchmarkGoalP99))
	}
	return c
}

func benchSide(runs []EtcdBenchmarkResult) EtcdBenchmarkSide {
	s := EtcdBenchmarkSide{Runs: runs}
	var rate, p50, p99 []float64
	for _, r := range runs {
		rate = append(rate, r.RequestsPerSecond)
		p50 = append(p50, r.P50Seconds*1000)
		p99 = append(p99, r.P99Seconds*1000)
	}
	s.RequestsPerSecond, s.P50Ms, s.P99Ms = medianOf(rate), medianOf(p50), medianOf(p99)
	return s
}

// medianOf is the median of vs, 0 for none.
func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
