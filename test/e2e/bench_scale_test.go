//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/openetcd/etcd-operator/hack/bench/benchreport"
	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// scaleWarmup separates the last cluster becoming ready from the idle window
// (original-measured.md waited 30 s). A new cluster is not idle at once: its
// tick doubles from 8 s to 30 s over its first minute and it looks at etcd
// again a minute after its first look; windows that started 20 s after
// ready saw some of the new clusters write their status once more then
// (0.1 per new cluster). The window measures clusters at rest, after both.
const scaleWarmup = 75 * time.Second

// scaleSampleEvery is how often the idle window scrapes the operator for its
// RSS: as often as a Prometheus would (15 s is the usual interval). Each
// scrape costs the operator CPU for every cluster's series, which a tighter
// sampling would count as the clusters' own.
const scaleSampleEvery = 15 * time.Second

// The project's goals per idle cluster.
const (
	goalRSSKiB     = 100
	goalCPUPercent = 0.01
	goalRequests   = 0
)

// scalePoint is the operator's idle cost with a number of one-member clusters.
type scalePoint struct {
	Clusters int `json:"clusters"`
	// ReadySeconds is how long the step's new clusters took to be ready.
	ReadySeconds   float64 `json:"readySeconds"`
	RSSMiB         float64 `json:"rssMiB"`
	HeapMiB        float64 `json:"heapInUseMiB"`
	CPUPercent     float64 `json:"cpuPercentOfACore"`
	RequestsPerMin float64 `json:"requestsPerMin"`
	// Requests is what the requests were, "verb resource" per minute.
	Requests map[string]float64 `json:"requests,omitempty"`
}

// scaleFit is the scale bench's result.
type scaleFit struct {
	WindowSeconds float64             `json:"windowSeconds"`
	Points        []scalePoint        `json:"points"`
	RSS           framework.LinearFit `json:"rss"`
	Heap          framework.LinearFit `json:"heap"`
	CPU           framework.LinearFit `json:"cpu"`
	Requests      framework.LinearFit `json:"requests"`
	// ReplaceAlone and ReplaceAmong: a killed member of a 3-member cluster
	// replaced, with no idle cluster and with AmongClusters.
	ReplaceAlone  float64 `json:"replaceAloneSeconds"`
	ReplaceAmong  float64 `json:"replaceAmongSeconds"`
	AmongClusters int     `json:"amongClusters"`
	// Burst one-member clusters created at once next to AmongClusters: seconds
	// to the first and to the last Available.
	Burst          int     `json:"burst"`
	BurstFirst     float64 `json:"burstFirstAvailableSeconds"`
	BurstLast      float64 `json:"burstLastAvailableSeconds"`
	BurstPodsAtEnd int     `json:"podsOnTheNodeAfterTheBurst"`
}

// TestMeasureScale runs an operator of its own with growing numbers of idle
// one-member clusters (E2E_BENCH_SCALE, e.g. "10 50 100") and reports its
// memory, CPU and Kubernetes API requests at each, their cost per cluster and
// the projection to 1 000 and 10 000 clusters. With the most clusters present
// it then times the replacement of a killed member (against the same with no
// idle cluster) and a burst of E2E_BENCH_BURST clusters created at once. Run it
// alone on the node: hack/bench/run.sh.
func TestMeasureScale(t *testing.T) {
	spec := os.Getenv("E2E_BENCH_SCALE")
	if spec == "" {
		t.Skip("the scale bench runs only on request: E2E_BENCH_SCALE=\"10 50 100\" (hack/bench/run.sh)")
	}
	var counts []int
	for _, w := range strings.Fields(spec) {
		n, err := strconv.Atoi(w)
		if err != nil || n <= 0 {
			t.Fatalf("E2E_BENCH_SCALE=%q: %q is not a number of clusters", spec, w)
		}
		counts = append(counts, n)
	}
	slices.Sort(counts)
	burst := envInt(t, "E2E_BENCH_BURST", 20)
	window := time.Duration(envInt(t, "E2E_BENCH_WINDOW", 60)) * time.Second
	most := counts[len(counts)-1]
	ctx := t.Context()

	ns := newNamespace(t, "bench-scale")
	installOperator(t, ns, framework.Install{Profiling: true})
	checkPodCapacity(t, most+3+burst)
	// Registered after the operator: it runs first, while the operator still
	// runs. The idle clusters are many, so they are deleted together rather
	// than one after another by createClusterIn's cleanups.
	t.Cleanup(func() { deleteAllClusters(t, ns) })

	res := &scaleFit{WindowSeconds: window.Seconds(), Burst: burst, AmongClusters: most}
	// A 3-member cluster whose member is killed alone and again among the idle
	// clusters. It stays during the idle windows: a constant, which goes into
	// the fits' base, not their slope.
	busy := framework.UniqueName("busy")
	createClusterIn(t, ns, ns, framework.NewCluster(busy, 3, "3.5.21"))
	waitReady(t, ns, busy, 3, bootstrapTimeout(3))
	res.ReplaceAlone = benchReplaceIn(t, ns, busy, "replace", false)["replace"]

	var idle []string
	for _, n := range counts {
		start := time.Now()
		var step []string
		for len(idle) < n {
			name := framework.UniqueName("idle")
			if _, err := f.CreateCluster(ctx, ns, framework.NewCluster(name, 1, "3.5.21")); err != nil {
				t.Fatal(err)
			}
			idle = append(idle, name)
			step = append(step, name)
		}
		waitAvailable(t, ns, step, 2*time.Minute+time.Duration(len(step))*3*time.Second)
		p := scalePoint{Clusters: n, ReadySeconds: time.Since(start).Seconds()}
		t.Logf("%d idle clusters ready (%d new in %.1fs)", n, len(step), p.ReadySeconds)
		sleepCtx(t, scaleWarmup) // the measurement's window, not a wait for state
		measureIdleWindow(t, ns, window, &p)
		t.Logf("%d idle clusters: RSS %.1f MiB, heap %.1f MiB, CPU %.3f%% of a core, %.1f requests/min %v",
			n, p.RSSMiB, p.HeapMiB, p.CPUPercent, p.RequestsPerMin, p.Requests)
		res.Points = append(res.Points, p)
	}
	if secs, ok := os.LookupEnv("E2E_BENCH_PROFILE"); ok && secs != "" {
		profileOperator(t, ns, time.Duration(envInt(t, "E2E_BENCH_PROFILE", 60))*time.Second, most)
	}

	res.ReplaceAmong = benchReplaceIn(t, ns, busy, "replace", false)["replace"]
	benchBurst(t, ns, res)

	xs := make([]float64, len(res.Points))
	for i, p := range res.Points {
		xs[i] = float64(p.Clusters)
	}
	pick := func(fn func(scalePoint) float64) []float64 {
		ys := make([]float64, len(res.Points))
		for i, p := range res.Points {
			ys[i] = fn(p)
		}
		return ys
	}
	res.RSS = framework.Fit("MiB", xs, pick(func(p scalePoint) float64 { return p.RSSMiB }), goalRSSKiB/1024.0)
	res.Heap = framework.Fit("MiB", xs, pick(func(p scalePoint) float64 { return p.HeapMiB }), goalRSSKiB/1024.0)
	res.CPU = framework.Fit("% of a core", xs, pick(func(p scalePoint) float64 { return p.CPUPercent }), goalCPUPercent)
	res.Requests = framework.Fit("requests/min", xs, pick(func(p scalePoint) float64 { return p.RequestsPerMin }), goalRequests)
	rep := benchReport{Header: benchreport.Header{Kind: "scale"}, Runs: 1, Scale: res, Notes: []string{
		fmt.Sprintf("One operator of its own, idle one-member clusters of etcd 3.5.21 and one 3-member cluster; a %.0f s window starting %.0f s after the step's clusters are ready. RSS and CPU from the operator's process metrics (RSS: median of samples every %.0f s), requests from etcd_operator_kubernetes_requests_total.",
			window.Seconds(), scaleWarmup.Seconds(), scaleSampleEvery.Seconds()),
	}}
	writeBench(t, &rep)
}

// checkPodCapacity fails, with the fix, when the node cannot run need more pods.
func checkPodCapacity(t *testing.T, need int) {
	t.Helper()
	ctx := t.Context()
	node, err := f.Kube.CoreV1().Nodes().Get(ctx, f.Env.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := f.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", f.Env.NodeName).String()})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			running++
		}
	}
	capacity := int(node.Status.Allocatable.Pods().Value())
	if running+need > capacity {
		t.Fatalf("node %s takes %d pods and runs %d: the scale bench needs %d more (its clusters, a 3-member cluster and the burst). "+
			"Raise the kubelet's maxPods (hack/local-cluster/templates/kubelet-config.yaml has 250; it applies when the local cluster is built: "+
			"sudo make local-down local-up) or ask for less (E2E_BENCH_SCALE, E2E_BENCH_BURST)", f.Env.NodeName, capacity, running, need)
	}
	t.Logf("node %s: %d pods running, room for %d; the bench needs %d", f.Env.NodeName, running, capacity, need)
}

// waitAvailable waits until every named cluster has its one member ready and
// the Available condition.
func waitAvailable(t *testing.T, ns string, names []string, timeout time.Duration) {
	t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	err := framework.WaitFor(t.Context(), timeout, framework.Poll, fmt.Sprintf("%d clusters Available", len(names)), func(ctx context.Context) (bool, string, error) {
		ok, _, err := availableClusters(ctx, ns, want)
		if err != nil {
			return false, err.Error(), nil
		}
		return len(ok) == len(want), fmt.Sprintf("%d of %d Available", len(ok), len(want)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// availableClusters returns which of want are Available with one ready member.
func availableClusters(ctx context.Context, ns string, want map[string]bool) (map[string]bool, int, error) {
	list, err := f.Etcd.EtcdV1beta2().EtcdClusters(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, err
	}
	ok := map[string]bool{}
	for i := range list.Items {
		cl := &list.Items[i]
		if !want[cl.Name] {
			continue
		}
		c := framework.StatusCondition(cl, api.ClusterConditionAvailable)
		if c != nil && c.Status == corev1.ConditionTrue && len(cl.Status.Members.Ready) == 1 {
			ok[cl.Name] = true
		}
	}
	return ok, len(list.Items), nil
}

// measureIdleWindow samples the operator's metrics over window.
func measureIdleWindow(t *testing.T, ns string, window time.Duration, p *scalePoint) {
	t.Helper()
	before := scrapeOperator(t, ns)
	var rss, heap []float64
	end := time.Now().Add(window)
	for {
		m := scrapeOperator(t, ns)
		rss = append(rss, m.sum("process_resident_memory_bytes")/(1<<20))
		heap = append(heap, m.sum("go_memstats_heap_inuse_bytes")/(1<<20))
		if !time.Now().Before(end) {
			break
		}
		sleepCtx(t, min(scaleSampleEvery, time.Until(end)))
	}
	after := scrapeOperator(t, ns)
	took := after.at.Sub(before.at)
	const requests = "etcd_operator_kubernetes_requests_total"
	p.RequestsPerMin = (after.sum(requests) - before.sum(requests)) / took.Minutes()
	p.CPUPercent = 100 * (after.sum("process_cpu_seconds_total") - before.sum("process_cpu_seconds_total")) / took.Seconds()
	slices.Sort(rss)
	slices.Sort(heap)
	p.RSSMiB, p.HeapMiB = median(rss), median(heap)
	p.Requests = map[string]float64{}
	for series, v := range after.series {
		labels, ok := strings.CutPrefix(series, requests+"{")
		if d := v - before.series[series]; ok && d > 0 {
			p.Requests[strings.TrimSuffix(labels, "}")] = d / took.Minutes()
		}
	}
}

// operatorMetrics is one scrape of the operator's /metrics: each series
// ("name{labels}") and its value.
type operatorMetrics struct {
	at     time.Time
	series map[string]float64
}

// sum adds every series of the metric name.
func (m operatorMetrics) sum(name string) float64 {
	total := 0.0
	for s, v := range m.series {
		if s == name || strings.HasPrefix(s, name+"{") {
			total += v
		}
	}
	return total
}

// scrapeOperator reads the operator's /metrics through the apiserver's pod proxy.
func scrapeOperator(t *testing.T, ns string) operatorMetrics {
	t.Helper()
	pods, err := f.DeploymentPods(t.Context(), ns, framework.OperatorDeployment)
	if err != nil || len(pods) != 1 {
		t.Fatalf("operator pods in %s: %d, %v", ns, len(pods), err)
	}
	at := time.Now()
	raw, err := f.Kube.CoreV1().RESTClient().Get().
		AbsPath("/api/v1/namespaces", ns, "pods", pods[0].Name+":8080", "proxy", "metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("read the operator's metrics: %v", err)
	}
	m := operatorMetrics{at: at, series: map[string]float64{}}
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m.series[line[:i]] = v
	}
	return m
}

// profileOperator takes a CPU profile of the operator over d, after the
// measured windows so that it does not weigh on them, and leaves it as
// _output/bench/operator-cpu-<clusters>-<time>.pprof for `go tool pprof`.
func profileOperator(t *testing.T, ns string, d time.Duration, clusters int) {
	t.Helper()
	pods, err := f.DeploymentPods(t.Context(), ns, framework.OperatorDeployment)
	if err != nil || len(pods) != 1 {
		t.Fatalf("operator pods in %s: %d, %v", ns, len(pods), err)
	}
	raw, err := f.Kube.CoreV1().RESTClient().Get().
		AbsPath("/api/v1/namespaces", ns, "pods", pods[0].Name+":8080", "proxy", "debug", "pprof", "profile").
		Param("seconds", strconv.Itoa(int(d.Seconds()))).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("the operator's CPU profile: %v", err)
	}
	file := filepath.Join(f.Env.RepoRoot, "_output", "bench", fmt.Sprintf("operator-cpu-%d-%s.pprof", clusters, time.Now().UTC().Format("20060102-150405")))
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("the operator's CPU profile over %s with %d idle clusters: %s (go tool pprof -top %s)", d, clusters, file, file)
}

// benchBurst creates res.Burst one-member clusters at once and times the first
// and the last to be Available.
func benchBurst(t *testing.T, ns string, res *scaleFit) {
	t.Helper()
	ctx := t.Context()
	want := map[string]bool{}
	var names []string
	for range res.Burst {
		name := framework.UniqueName("burst")
		want[name] = true
		names = append(names, name)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for _, name := range names {
		wg.Go(func() {
			if _, err := f.CreateCluster(ctx, ns, framework.NewCluster(name, 1, "3.5.21")); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	err := framework.WaitFor(ctx, 2*time.Minute+time.Duration(res.Burst)*5*time.Second, measurePoll, "the burst's clusters Available",
		func(ctx context.Context) (bool, string, error) {
			ok, _, err := availableClusters(ctx, ns, want)
			if err != nil {
				return false, err.Error(), nil
			}
			now := time.Since(start).Seconds()
			if len(ok) > 0 && res.BurstFirst == 0 {
				res.BurstFirst = now
			}
			res.BurstLast = now
			return len(ok) == len(want), fmt.Sprintf("%d of %d Available", len(ok), len(want)), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("burst of %d clusters among %d: first Available after %.1fs, last after %.1fs", res.Burst, res.AmongClusters, res.BurstFirst, res.BurstLast)
}

// deleteAllClusters deletes every EtcdCluster in ns and waits for their pods.
func deleteAllClusters(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := f.Etcd.EtcdV1beta2().EtcdClusters(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Errorf("cleanup: delete the clusters in %s: %v", ns, err)
		return
	}
	err := framework.WaitFor(ctx, 14*time.Minute, 2*time.Second, "the clusters' pods in "+ns+" to be gone", func(ctx context.Context) (bool, string, error) {
		pods, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: api.LabelApp + "=" + api.LabelAppValue})
		if err != nil {
			return false, err.Error(), nil
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items)), nil
	})
	if err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// scaleTable is the markdown of a scale report.
func scaleTable(rep benchReport) string {
	s := rep.Scale
	var b strings.Builder
	fmt.Fprintf(&b, "Scale, %s, %s\n\n", rep.Date, rep.Machine)
	fmt.Fprint(&b, "| idle one-member clusters |")
	for _, p := range s.Points {
		fmt.Fprintf(&b, " %d |", p.Clusters)
	}
	fmt.Fprintln(&b, " per cluster | goal per cluster | 1 000 (projected) | 10 000 (projected) |")
	fmt.Fprint(&b, "|---|")
	for range s.Points {
		fmt.Fprint(&b, "---|")
	}
	fmt.Fprintln(&b, "---|---|---|---|")
	row := func(label string, l framework.LinearFit, prec int, per func(float64) string, goal string, v func(scalePoint) float64) {
		fmt.Fprintf(&b, "| %s |", label)
		for _, p := range s.Points {
			fmt.Fprintf(&b, " %.*f |", prec, v(p))
		}
		if !l.Fitted {
			fmt.Fprintf(&b, " – (one step) | %s | – | – |\n", goal)
			return
		}
		fmt.Fprintf(&b, " %s | %s | %.*f | %.*f |\n", per(l.PerCluster), goal, prec, l.At1000, prec, l.At10000)
	}
	row("operator RSS, MiB", s.RSS, 1, func(x float64) string { return fmt.Sprintf("%.0f KiB", x*1024) }, fmt.Sprintf("≤ %d KiB", goalRSSKiB),
		func(p scalePoint) float64 { return p.RSSMiB })
	row("operator Go heap in use, MiB", s.Heap, 1, func(x float64) string { return fmt.Sprintf("%.0f KiB", x*1024) }, "–",
		func(p scalePoint) float64 { return p.HeapMiB })
	row("operator CPU, % of a core", s.CPU, 3, func(x float64) string { return fmt.Sprintf("%.4f %%", x) }, fmt.Sprintf("≤ %g %%", goalCPUPercent),
		func(p scalePoint) float64 { return p.CPUPercent })
	row("Kubernetes API requests/min", s.Requests, 1, func(x float64) string { return fmt.Sprintf("%.3f", x) }, strconv.Itoa(goalRequests),
		func(p scalePoint) float64 { return p.RequestsPerMin })
	fmt.Fprint(&b, "| seconds for the step's new clusters to be Available |")
	for _, p := range s.Points {
		fmt.Fprintf(&b, " %.1f |", p.ReadySeconds)
	}
	fmt.Fprintln(&b, " | | | |")
	fmt.Fprintf(&b, "\nReplacement of a killed member of a 3-member cluster: %.1f s with no idle cluster, %.1f s among %d.\n",
		s.ReplaceAlone, s.ReplaceAmong, s.AmongClusters)
	fmt.Fprintf(&b, "Burst of %d one-member clusters created at once among %d: first Available after %.1f s, the last after %.1f s.\n",
		s.Burst, s.AmongClusters, s.BurstFirst, s.BurstLast)
	if len(s.Points) > 0 {
		last := s.Points[len(s.Points)-1]
		var kinds []string
		for k, v := range last.Requests {
			kinds = append(kinds, fmt.Sprintf("%s %.1f/min", k, v))
		}
		slices.Sort(kinds)
		fmt.Fprintf(&b, "Requests with %d idle clusters: %s.\n", last.Clusters, strings.Join(kinds, ", "))
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	return b.String()
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// sleepCtx sleeps d unless the test's context ends first.
func sleepCtx(t *testing.T, d time.Duration) {
	select {
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	case <-time.After(d):
	}
}
