package framework

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// The outputs under testdata/etcd-benchmark are what etcd's benchmark tool
// (v3.5.21, the one hack/tools.sh builds) printed on its standard output, run
// by hand against etcd 3.5.21 processes on loopback: a 3-member cluster for the
// workloads of the bench, one member for the watch command and for the
// database that fills up (--quota-backend-bytes=1048576).
func TestParseEtcdBenchmark(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		// cut keeps only the output's first lines, as a tool killed while
		// printing would leave it; 0 keeps all.
		cut  int
		want EtcdBenchmarkResult
		err  string
	}{
		{name: "a put with 1000 clients gives its rate and the median and 99th percentile latencies",
			file: "put-1000-clients.txt",
			want: EtcdBenchmarkResult{TotalSeconds: 5.749692906, RequestsPerSecond: 8696.11661308438, P50Seconds: 0.091278928, P99Seconds: 0.382003213}},
		{name: "a put with one client reads through the progress bar's carriage returns",
			file: "put-1-client.txt",
			want: EtcdBenchmarkResult{TotalSeconds: 2.962209526, RequestsPerSecond: 675.1716860152991, P50Seconds: 0.001293503, P99Seconds: 0.005146088}},
		{name: "a linearizable range skips the line that names its consistency",
			file: "range-linearizable.txt",
			want: EtcdBenchmarkResult{TotalSeconds: 3.200890531, RequestsPerSecond: 15620.65291385624, P50Seconds: 0.04980503, P99Seconds: 0.194695584}},
		{name: "a serializable range",
			file: "range-serializable.txt",
			want: EtcdBenchmarkResult{TotalSeconds: 2.773167219, RequestsPerSecond: 18029.92609224262, P50Seconds: 0.04000454, P99Seconds: 0.162139172}},
		{name: "watch-latency's report is one summary: events delivered per second and the put-to-event latency",
			file: "watch-latency.txt",
			want: EtcdBenchmarkResult{TotalSeconds: 9.004856922, RequestsPerSecond: 11105.118145263075, P50Seconds: 0.000264082, P99Seconds: 0.00377501}},
		{name: "without --precise the figures have four decimals and still parse",
			file: "range-default-precision.txt",
			want: EtcdBenchmarkResult{TotalSeconds: 0.0614, RequestsPerSecond: 8149.1916, P50Seconds: 0.0005, P99Seconds: 0.0327}},
		{name: "requests that failed after others succeeded are counted by error beside the summary",
			file: "put-database-space-exceeded.txt",
			want: EtcdBenchmarkResult{TotalSeconds: 0.890744784, RequestsPerSecond: 1178.7888280241673, P50Seconds: 0.000797455, P99Seconds: 0.00310258,
				Errors: map[string]int{"etcdserver: mvcc: database space exceeded": 1950}}},
		{name: "a run whose every request failed has errors and no figures, and is no parse error",
			file: "put-too-large.txt",
			want: EtcdBenchmarkResult{Errors: map[string]int{"etcdserver: request is too large": 4}}},
		{name: "the watch command's two summaries are refused: one result cannot hold both",
			file: "watch.txt", err: "2 summaries in one output"},
		{name: "an output cut before the latency distribution names what is missing",
			file: "put-1000-clients.txt", cut: 10, err: "the summary has no 50%, 99%"},
		{name: "an output cut before the summary is an error, not zeros",
			file: "put-1000-clients.txt", cut: 1, err: "no summary and no error distribution"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "etcd-benchmark", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			out := string(raw)
			if tc.cut > 0 {
				out = strings.Join(strings.SplitAfter(out, "\n")[:tc.cut], "")
			}
			got, err := ParseEtcdBenchmark(out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalBenchResults(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func equalBenchResults(a, b EtcdBenchmarkResult) bool {
	if a.TotalSeconds != b.TotalSeconds || a.RequestsPerSecond != b.RequestsPerSecond ||
		a.P50Seconds != b.P50Seconds || a.P99Seconds != b.P99Seconds || len(a.Errors) != len(b.Errors) {
		return false
	}
	for k, v := range a.Errors {
		if b.Errors[k] != v {
			return false
		}
	}
	return true
}

// The bench's workloads, scaled down, run by the real tool against a real
// etcd: the tool's output is what the parser reads, and a request that fails
// shows as an error, not as a figure.
func TestEtcdBenchmarkAgainstARealEtcd(t *testing.T) {
	t.Parallel()
	bin := etcdBenchmarkTool(t)
	etcd := startEtcdProcess(t)
	endpoints := []string{etcd.clientURL}
	if err := PutFromHost(t.Context(), endpoints, "bench-range-key", strings.Repeat("v", 256)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		// failed is the number of requests that must fail.
		failed int
	}{
		{name: "put gives a rate and latencies",
			args: []string{"--conns=2", "--clients=20", "put", "--key-size=8", "--sequential-keys", "--total=500", "--val-size=256"}},
		{name: "a linearizable range of a key that exists",
			args: []string{"--conns=2", "--clients=20", "range", "bench-range-key", "--consistency=l", "--total=500"}},
		{name: "a serializable range",
			args: []string{"--conns=2", "--clients=20", "range", "bench-range-key", "--consistency=s", "--total=500"}},
		{name: "watch-latency",
			args: []string{"--conns=2", "--clients=10", "watch-latency", "--total=20", "--put-rate=200", "--key-size=8", "--val-size=256"}},
		{name: "puts larger than etcd takes all fail, and the run says so",
			args: []string{"--conns=1", "--clients=1", "put", "--total=3", "--val-size=2000000"}, failed: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RunEtcdBenchmark(t.Context(), bin, endpoints, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if got.Failed() != tc.failed {
				t.Fatalf("%d requests failed (%v), want %d", got.Failed(), got.Errors, tc.failed)
			}
			if tc.failed > 0 {
				return
			}
			if got.RequestsPerSecond <= 0 || got.TotalSeconds <= 0 || got.P50Seconds <= 0 || got.P99Seconds < got.P50Seconds {
				t.Errorf("figures that cannot be: %+v", got)
			}
		})
	}
}

func TestEtcdBenchmarkVersionIsTheEtcdTheBenchMeasures(t *testing.T) {
	got, err := EtcdBenchmarkVersion(etcdBenchmarkTool(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v" + etcdtest.Version35; got != want {
		t.Errorf("the benchmark tool is of etcd %s, the bench's clusters run %s: hack/tools.sh's BENCHMARK_VERSION", got, want)
	}
}

func TestEtcdBenchmarkVersionOfABinaryNotBuiltFromEtcd(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if v, err := EtcdBenchmarkVersion(self); err == nil || !strings.Contains(err.Error(), "was not built from "+EtcdBenchmarkModule) {
		t.Errorf("got %q, %v; want an error saying the binary is not etcd's", v, err)
	}
}

// etcdBenchmarkTool is $ETCD_BENCHMARK, which `make unit` sets.
func etcdBenchmarkTool(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("ETCD_BENCHMARK")
	if bin == "" {
		t.Fatal("etcd's benchmark tool is needed and $ETCD_BENCHMARK is not set: run `make unit`, or ETCD_BENCHMARK=$(bash hack/tools.sh benchmark) go test ./test/e2e/framework")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("etcd's benchmark tool is needed and $ETCD_BENCHMARK=%s is missing (%v): run `bash hack/tools.sh benchmark` to build it", bin, err)
	}
	return bin
}

func TestCompareEtcdBenchmark(t *testing.T) {
	run := func(rate, p50ms, p99ms float64) EtcdBenchmarkResult {
		return EtcdBenchmarkResult{RequestsPerSecond: rate, P50Seconds: p50ms / 1000, P99Seconds: p99ms / 1000}
	}
	for _, tc := range []struct {
		name            string
		operator, floor []EtcdBenchmarkResult
		// want: throughput, p50 and p99 of the floor's
		want       [3]float64
		shortfalls []string
	}{
		{name: "an operator as fast as the floor meets the goal",
			operator: []EtcdBenchmarkResult{run(1000, 2, 10)}, floor: []EtcdBenchmarkResult{run(1000, 2, 10)},
			want: [3]float64{1, 1, 1}},
		{name: "the medians are compared, not the best or the worst run",
			operator: []EtcdBenchmarkResult{run(500, 9, 90), run(960, 2, 11), run(2000, 1, 1)},
			floor:    []EtcdBenchmarkResult{run(1000, 2, 10), run(100, 50, 500), run(3000, 1, 1)},
			want:     [3]float64{0.96, 1, 1.1}},
		{name: "an even number of runs takes the mean of the middle two",
			operator: []EtcdBenchmarkResult{run(900, 2, 10), run(1100, 4, 14)},
			floor:    []EtcdBenchmarkResult{run(1000, 3, 12), run(1000, 3, 12)},
			want:     [3]float64{1, 1, 1}},
		{name: "throughput under 0.95 of the floor's misses the goal",
			operator: []EtcdBenchmarkResult{run(940, 2, 10)}, floor: []EtcdBenchmarkResult{run(1000, 2, 10)},
			want: [3]float64{0.94, 1, 1}, shortfalls: []string{"throughput 0.94× the floor's (goal ≥ 0.95×)"}},
		{name: "a p99 over 1.1 times the floor's misses the goal, whatever the median",
			operator: []EtcdBenchmarkResult{run(1000, 1, 12)}, floor: []EtcdBenchmarkResult{run(1000, 2, 10)},
			want: [3]float64{1, 0.5, 1.2}, shortfalls: []string{"p99 1.20× the floor's (goal ≤ 1.10×)"}},
		{name: "both misses are said",
			operator: []EtcdBenchmarkResult{run(500, 4, 20)}, floor: []EtcdBenchmarkResult{run(1000, 2, 10)},
			want: [3]float64{0.5, 2, 2}, shortfalls: []string{"throughput 0.50× the floor's (goal ≥ 0.95×)", "p99 2.00× the floor's (goal ≤ 1.10×)"}},
		{name: "a side with no run is not measured, not a ratio of zero",
			operator:   []EtcdBenchmarkResult{run(1000, 2, 10)},
			shortfalls: []string{"not measured on both sides"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := CompareEtcdBenchmark(tc.operator, tc.floor)
			got := [3]float64{c.ThroughputOfFloor, c.P50OfFloor, c.P99OfFloor}
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-9 {
					t.Errorf("throughput, p50, p99 of the floor's: got %v, want %v", got, tc.want)
					break
				}
			}
			if !slices.Equal(c.Shortfalls, tc.shortfalls) {
				t.Errorf("shortfalls %q, want %q", c.Shortfalls, tc.shortfalls)
			}
		})
	}
}
