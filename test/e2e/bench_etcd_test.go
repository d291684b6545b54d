//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/hack/bench/benchreport"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// The bench's third part (BENCH_ONLY=etcd hack/bench/run.sh) asks whether a
// cluster the operator runs serves etcd's own benchmark tool as fast as etcd
// run by hand:
//
//	E2E_BENCH_ETCD=<runs>  TestMeasureEtcdBenchmark: each workload <runs> times
//	                       on each side, median
//	ETCD_BENCHMARK         the tool (hack/tools.sh benchmark; run.sh sets it)

// etcdBenchVersion is the etcd of both sides, the floor's of the speed bench;
// hack/tools.sh builds the tool of the same release.
const etcdBenchVersion = "3.5.21"

// etcdBenchRangeKey is the key the range workloads read, written on each side
// before the first run, with a value of the puts' size.
const etcdBenchRangeKey = "bench-range-key"

// etcdBenchTimeout bounds one run of the tool: it waits for ever for a member
// it cannot reach. The longest workload takes seconds on the local node.
const etcdBenchTimeout = 5 * time.Minute

// etcdWorkload is one command of etcd's performance docs (op-guide/performance.md,
// "Benchmarks"), its request total scaled down so that a run of every workload
// on both sides takes a minute or two on a 2-core node.
type etcdWorkload struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
	// Docs is what etcd's docs run instead, where it differs.
	Docs string `json:"docs,omitempty"`
}

// etcdWorkloads: the docs' writes to all members and reads, with one client
// (each request's own latency) and with 1000 (what a cluster sustains), and
// the latency of a watch event after its put.
var etcdWorkloads = []etcdWorkload{
	{Name: "put, 1 client", Args: strings.Fields("--conns=1 --clients=1 put --key-size=8 --sequential-keys --total=2000 --val-size=256"),
		Docs: "--total=10000"},
	{Name: "put, 1000 clients", Args: strings.Fields("--conns=100 --clients=1000 put --key-size=8 --sequential-keys --total=50000 --val-size=256"),
		Docs: "--total=100000"},
	{Name: "range, linearizable, 1 client", Args: strings.Fields("--conns=1 --clients=1 range " + etcdBenchRangeKey + " --consistency=l --total=2000"),
		Docs: "--total=10000"},
	{Name: "range, serializable, 1 client", Args: strings.Fields("--conns=1 --clients=1 range " + etcdBenchRangeKey + " --consistency=s --total=2000"),
		Docs: "--total=10000"},
	{Name: "range, linearizable, 1000 clients", Args: strings.Fields("--conns=100 --clients=1000 range " + etcdBenchRangeKey + " --consistency=l --total=50000"),
		Docs: "--total=100000"},
	{Name: "range, serializable, 1000 clients", Args: strings.Fields("--conns=100 --clients=1000 range " + etcdBenchRangeKey + " --consistency=s --total=50000"),
		Docs: "--total=100000"},
	// Not in the docs' tables (the tool's default --total is 10000). Its
	// requests per second are the events delivered, which the put rate
	// sets: its latency is the figure.
	{Name: "watch latency, 100 watchers (not in the docs)",
		Args: strings.Fields("--conns=10 --clients=100 watch-latency --total=1000 --put-rate=100 --key-size=8 --val-size=256")},
}

// etcdBench is the etcd part's report.
type etcdBench struct {
	EtcdVersion      string `json:"etcdVersion"`
	BenchmarkVersion string `json:"benchmarkVersion"`
	Members          int    `json:"members"`
	// Floor and Operator name what was measured on each side.
	Floor     string              `json:"floor"`
	Operator  string              `json:"operator"`
	Workloads []etcdWorkloadBench `json:"workloads"`
}

type etcdWorkloadBench struct {
	etcdWorkload
	framework.EtcdBenchmarkComparison
}

// etcdBenchSide is a cluster the tool runs against.
type etcdBenchSide struct {
	name      string
	endpoints []string
}

// TestMeasureEtcdBenchmark runs etcd's own benchmark tool, the workloads of
// etcd's performance docs, against a 3-member cluster the operator runs
// (default pod settings: emptyDir) and against the floor: the same etcd
// release in 3 pods made directly with the operator's pod builder and a
// static initial cluster, on the same node. The sides take turns, workload by
// workload, the first side changing at each; each side's figures are the
// medians of E2E_BENCH_ETCD runs. The goal (framework.EtcdBenchmarkGoal*) is
// printed, never asserted. Run it alone on the node: hack/bench/run.sh.
//
// The tool runs on this process's host, against the members' pod IPs: the
// local cluster's host reaches pods directly (waitClusterVersion reaches
// them too), the tool needs no image of its own (the local cluster has
// no registry), and both sides share its path and its CPU alike. A Service
// would add kube-proxy's rules to the path, which the floor has no need of.
func TestMeasureEtcdBenchmark(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("E2E_BENCH_ETCD"))
	if runs <= 0 {
		t.Skip("the etcd benchmark runs only on request: E2E_BENCH_ETCD=<runs> (BENCH_ONLY=etcd hack/bench/run.sh)")
	}
	tool := os.Getenv("ETCD_BENCHMARK")
	if tool == "" {
		t.Fatal("ETCD_BENCHMARK is not set: hack/bench/run.sh sets it, or ETCD_BENCHMARK=$(bash hack/tools.sh benchmark)")
	}
	toolVersion, err := framework.EtcdBenchmarkVersion(tool)
	if err != nil {
		t.Fatal(err)
	}
	if f.Env.Nodes > 1 {
		t.Fatalf("the local cluster has %d nodes: the comparison needs both sides on one node (make local-up without NODES)", f.Env.Nodes)
	}
	started := time.Now()
	const members = 3

	floorNS := newNamespace(t, "bench-etcd-floor")
	floor := etcdBenchSide{name: "floor", endpoints: startFloorCluster(t, floorNS, members, etcdBenchVersion)}
	name := framework.UniqueName("benchetcd")
	createCluster(t, framework.NewCluster(name, members, etcdBenchVersion))
	waitReady(t, opNS, name, members, bootstrapTimeout(members))
	pods, err := f.ClusterPods(t.Context(), opNS, name)
	if err != nil {
		t.Fatal(err)
	}
	ready := framework.ReadyPods(pods)
	if len(ready) != members {
		t.Fatalf("%d Ready pods of %s after it was ready: %s", len(ready), name, framework.DescribePods(pods))
	}
	operator := etcdBenchSide{name: "operator", endpoints: clientEndpoints(ready)}
	sides := []etcdBenchSide{operator, floor}
	for _, s := range sides {
		if err := framework.PutFromHost(t.Context(), s.endpoints, etcdBenchRangeKey, strings.Repeat("v", 256)); err != nil {
			t.Fatalf("the %s, from this host: %v", s.name, err)
		}
		t.Logf("the %s's endpoints: %s", s.name, strings.Join(s.endpoints, ","))
	}

	results := map[string]map[string][]framework.EtcdBenchmarkResult{}
	for _, w := range etcdWorkloads {
		results[w.Name] = map[string][]framework.EtcdBenchmarkResult{}
	}
	for i := range runs {
		for j, w := range etcdWorkloads {
			order := slices.Clone(sides)
			if (i+j)%2 == 1 {
				slices.Reverse(order)
			}
			for _, s := range order {
				ctx, cancel := context.WithTimeout(t.Context(), etcdBenchTimeout)
				r, err := framework.RunEtcdBenchmark(ctx, tool, s.endpoints, w.Args)
				cancel()
				if err != nil {
					t.Fatalf("%s on the %s: %v", w.Name, s.name, err)
				}
				if n := r.Failed(); n > 0 {
					t.Errorf("%s on the %s: %d requests failed: %v", w.Name, s.name, n, r.Errors)
				}
				t.Logf("run %d, %s on the %s: %.0f requests/s, p50 %.2f ms, p99 %.2f ms",
					i+1, w.Name, s.name, r.RequestsPerSecond, r.P50Seconds*1000, r.P99Seconds*1000)
				results[w.Name][s.name] = append(results[w.Name][s.name], r)
			}
		}
		t.Logf("run %d of %d done", i+1, runs)
		// Written after every run, so that an interrupted bench leaves what it measured.
		writeEtcdBench(t, started, results, toolVersion, members, i+1, runs)
	}
}

// writeEtcdBench writes the etcd part's report of the runs done so far.
func writeEtcdBench(t *testing.T, started time.Time, results map[string]map[string][]framework.EtcdBenchmarkResult, toolVersion string, members, done, runs int) {
	b := &etcdBench{
		EtcdVersion:      etcdBenchVersion,
		BenchmarkVersion: toolVersion,
		Members:          members,
		Operator:         fmt.Sprintf("an EtcdCluster of %d members, default pod settings (emptyDir), run by the operator", members),
		Floor:            fmt.Sprintf("%d etcd pods made directly with the operator's pod builder and a static initial cluster, emptyDir", members),
	}
	for _, w := range etcdWorkloads {
		b.Workloads = append(b.Workloads, etcdWorkloadBench{
			etcdWorkload:            w,
			EtcdBenchmarkComparison: framework.CompareEtcdBenchmark(results[w.Name]["operator"], results[w.Name]["floor"]),
		})
	}
	var notes []string
	if "v"+etcdBenchVersion != toolVersion {
		notes = append(notes, fmt.Sprintf("The tool is of etcd %s, the clusters run %s.", toolVersion, etcdBenchVersion))
	}
	if done < runs {
		notes = append(notes, fmt.Sprintf("Partial: %d of %d runs done.", done, runs))
	}
	writeBench(t, &benchReport{Header: benchreport.Header{Kind: "etcd"}, Runs: done, Etcd: b, Notes: notes, started: started})
}

// etcdBenchTable is the markdown table of the etcd part's report.
func etcdBenchTable(rep benchReport) string {
	b := rep.Etcd
	var s strings.Builder
	fmt.Fprintf(&s, "etcd's benchmark tool, %s, %s; etcd %s, %d members each side, benchmark %s on the node against the members' pod IPs, median of %d run(s)\n\n",
		rep.Date, rep.Machine, b.EtcdVersion, b.Members, b.BenchmarkVersion, rep.Runs)
	fmt.Fprintln(&s, "| workload | requests/s, operator / floor | × floor | p50 ms, operator / floor | × floor | p99 ms, operator / floor | × floor | goal |")
	fmt.Fprintln(&s, "|---|---|---|---|---|---|---|---|")
	for _, w := range b.Workloads {
		goal := "met"
		if len(w.Shortfalls) > 0 {
			goal = "missed: " + strings.Join(w.Shortfalls, "; ")
		}
		fmt.Fprintf(&s, "| %s | %.0f / %.0f | %.2f | %s / %s | %.2f | %s / %s | %.2f | %s |\n", w.Name,
			w.Operator.RequestsPerSecond, w.Floor.RequestsPerSecond, w.ThroughputOfFloor,
			ms(w.Operator.P50Ms), ms(w.Floor.P50Ms), w.P50OfFloor,
			ms(w.Operator.P99Ms), ms(w.Floor.P99Ms), w.P99OfFloor, goal)
	}
	fmt.Fprintf(&s, "\nOperator: %s. Floor: %s. The goal: throughput at least %.2f× the floor's and p99 at most %.2f× it; printed, not asserted.\n",
		b.Operator, b.Floor, framework.EtcdBenchmarkGoalThroughput, framework.EtcdBenchmarkGoalP99)
	fmt.Fprintln(&s, "\nThe workloads, the commands of etcd's performance docs (op-guide/performance.md) against all members, totals scaled down:")
	fmt.Fprintln(&s)
	for _, w := range b.Workloads {
		docs := ""
		if w.Docs != "" {
			docs = " (the docs: " + w.Docs + ")"
		}
		fmt.Fprintf(&s, "- %s: `benchmark %s`%s\n", w.Name, strings.Join(w.Args, " "), docs)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&s, "\n%s\n", n)
	}
	return s.String()
}

// ms prints a latency in milliseconds with two significant decimals at least:
// a serializable read takes a fraction of one.
func ms(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// startFloorCluster starts the floor's n etcd pods of version in ns
// (startFloor) and returns their client URLs by pod IP. The namespace's
// deletion removes them.
func startFloorCluster(t *testing.T, ns string, n int, version string) []string {
	t.Helper()
	return clientEndpoints(startFloor(t, ns, n, version).pods)
}

// clientEndpoints are the pods' etcd client URLs by pod IP, plain http as
// the clusters of the bench serve.
func clientEndpoints(pods []corev1.Pod) []string {
	var eps []string
	for _, p := range pods {
		eps = append(eps, fmt.Sprintf("http://%s:%d", p.Status.PodIP, k8sutil.EtcdClientPort))
	}
	slices.Sort(eps)
	return eps
}
