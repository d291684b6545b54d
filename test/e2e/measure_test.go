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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// measurePoll is the resolution of original-measured.md: its poller ran kubectl
// every 0.25 s.
const measurePoll = 250 * time.Millisecond

// original holds the figures of original-measured.md (min, median, max in seconds),
// measured on the same kind of node with the same procedures.
var original = map[string][3]float64{
	"a1 bootstrap 3.4.23 -> status 3 ready": {32.3, 32.5, 32.7},
	"a2 bootstrap 3.4.23 -> 3 pods Ready":   {31.2, 32.0, 32.3},
	"b  member replacement":                 {21.6, 21.8, 22.3},
	// The original replaced a killed member with an empty one whatever its volume.
	"b2 member replacement, PVC (restart in place)": {21.6, 21.8, 22.3},
	"c1 scale 3->5":                       {32.4, 32.5, 32.5},
	"c2 scale 5->3":                       {24.6, 24.7, 24.7},
	"d1 upgrade 3.4.23->3.5.21 -> pods":   {24.5, 24.5, 24.5},
	"d2 upgrade 3.4.23->3.5.21 -> status": {32.3, 32.4, 32.6},
	"d3 upgrade: lowest Ready pods":       {2, 2, 2},
	"d4 upgrade: lowest status ready":     {3, 3, 3},
	// f and g: one sample each; the original's RSS is given for its working set.
	"f1 API requests/min, 1 idle cluster":   {67.3, 67.3, 67.3},
	"f2 API requests/min, 10 idle clusters": {134.7, 134.7, 134.7},
	"g1 memory MiB, 1 idle cluster":         {28.1, 28.2, 28.3},
	"g1 memory MiB, 10 idle clusters":       {28.5, 28.5, 28.5},
	"g2 CPU-s per 180 s, 1 idle cluster":    {0.15, 0.15, 0.15},
	"g2 CPU-s per 180 s, 10 idle clusters":  {0.42, 0.42, 0.42},
}

// idleWarmup and idleWindow are original-measured.md's: a 180 s window that
// starts 30 s after the clusters are ready.
const (
	idleWarmup = 30 * time.Second
	idleWindow = 180 * time.Second
)

// TestMeasureLifecycle times the operator the way original-measured.md timed the
// original, for comparison; it asserts nothing about the times. It runs only when
// asked, with the number of runs: E2E_MEASURE=3 go test -tags e2e -run
// TestMeasureLifecycle ./test/e2e/ -v. Runs are sequential and alone on the node
// (do not combine it with other tests) so that they do not slow each other down.
func TestMeasureLifecycle(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("E2E_MEASURE"))
	if runs <= 0 {
		t.Skip("measurements run only on request: E2E_MEASURE=<runs> go test -tags e2e -run TestMeasureLifecycle ./test/e2e/ -v")
	}
	// E2E_MEASURE_ONLY (a list of emptydir, v36, pvc, whole, upgrade) runs only
	// those scenarios, for a look at one of them; v36 is emptydir's on etcd
	// 3.6, whose joins may have two learners in flight.
	scenarios := []string{"emptydir", "v36", "pvc", "whole", "upgrade"}
	only := strings.Fields(strings.ReplaceAll(os.Getenv("E2E_MEASURE_ONLY"), ",", " "))
	wanted := func(scenario string) bool { return len(only) == 0 || slices.Contains(only, scenario) }
	for _, o := range only {
		if !slices.Contains(scenarios, o) {
			t.Fatalf("E2E_MEASURE_ONLY=%q: %q is none of %s", os.Getenv("E2E_MEASURE_ONLY"), o, strings.Join(scenarios, ", "))
		}
	}
	results := map[string][]float64{}
	for i := range runs {
		if wanted("emptydir") {
			measureEmptyDirLifecycle(t, results, "3.5.21")
		}
		if wanted("v36") {
			measureEmptyDirLifecycle(t, results, version36)
		}
		if wanted("pvc") {
			measurePVCReplacement(t, results)
		}
		if wanted("whole") {
			measureWholeClusterRestart(t, results)
		}
		if wanted("upgrade") {
			measureUpgrade(t, results)
		}
		t.Logf("run %d of %d done", i+1, runs)
	}
	// E2E_MEASURE_IDLE=0 leaves out the idle figures (7 minutes of waiting),
	// for a run that only looks at where a lifecycle's time goes.
	if os.Getenv("E2E_MEASURE_IDLE") != "0" {
		measureIdle(t, results, 1)
		measureIdle(t, results, 10)
	}
	report := measureReport(results, runs)
	t.Log("\n" + report)
	stamp := time.Now().UTC().Format("20060102-150405")
	path := filepath.Join(f.Env.RepoRoot, "_output", "e2e", "measure-"+stamp+".md")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		if err := os.WriteFile(path, []byte(report), 0o644); err == nil {
			t.Logf("written to %s", path)
		}
		// The operator's log, with its timestamps, tells where each
		// scenario's time went.
		logPath := filepath.Join(filepath.Dir(path), "measure-"+stamp+"-operator.log")
		if err := os.WriteFile(logPath, []byte(f.DeploymentLogs(t.Context(), opNS, framework.OperatorDeployment)), 0o644); err == nil {
			t.Logf("operator log written to %s", logPath)
		}
	}
}

// measurePVCReplacement: a killed member of a cluster on claims comes back
// in place, on its claim.
func measurePVCReplacement(t *testing.T, results map[string][]float64) {
	ctx := t.Context()
	name, _ := pvcCluster(t, opNS, "measure-pvc")
	pods, err := f.ClusterPods(ctx, opNS, name)
	if err != nil {
		t.Fatal(err)
	}
	victim := pods[0]
	start := time.Now()
	if err := f.KillPod(ctx, opNS, victim.Name); err != nil {
		t.Fatal(err)
	}
	// The member comes back under the same name, in a pod with another UID.
	record(results, measure(t, name, start, nil, probe{"b2 member replacement, PVC (restart in place)", func(cl *api.EtcdCluster, pods []corev1.Pod) bool {
		if slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.UID == victim.UID }) {
			return false
		}
		return statusReady(3)(cl, pods) && podsReady(3)(cl, pods)
	}}))
	deleteAndWait(t, name)
}

// measureWholeClusterRestart: every pod of a cluster on claims killed at
// once; the members come back in place, on their claims, together.
func measureWholeClusterRestart(t *testing.T, results map[string][]float64) {
	name, _ := pvcCluster(t, opNS, "measure-whole")
	m, start := killEveryPod(t, name, "b3 whole-cluster restart, PVC (all 3 pods killed)")
	record(results, m)
	logContainerStarts(t, name, start)
	deleteAndWait(t, name)
}

// logContainerStarts logs when each container of the cluster's pods started
// and ended, counted from start, and how often it restarted: where a
// measured time went between the pod's creation and its readiness.
func logContainerStarts(t *testing.T, name string, start time.Time) {
	pods, err := f.ClusterPods(t.Context(), opNS, name)
	if err != nil {
		t.Logf("list pods of %s: %v", name, err)
		return
	}
	since := func(m metav1.Time) string { return fmt.Sprintf("%.1fs", m.Sub(start).Seconds()) }
	for _, p := range pods {
		line := fmt.Sprintf("pod %s created %s", p.Name, since(p.CreationTimestamp))
		for _, st := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			line += fmt.Sprintf("; %s restarts=%d", st.Name, st.RestartCount)
			if r := st.State.Running; r != nil {
				line += " running since " + since(r.StartedAt)
			}
			if e := st.State.Terminated; e != nil {
				line += fmt.Sprintf(" ran %s–%s (exit %d)", since(e.StartedAt), since(e.FinishedAt), e.ExitCode)
			}
			if e := st.LastTerminationState.Terminated; e != nil {
				line += fmt.Sprintf(", before: ran %s–%s (exit %d %s: %q)", since(e.StartedAt), since(e.FinishedAt), e.ExitCode, e.Reason, lastLine(e.Message))
			}
		}
		// A peer etcd cannot dial (its name unknown to cluster DNS yet, or
		// still answered with the address of its pod before) keeps it
		// from its quorum: how long that lasted is in etcd's log.
		// E2E_MEASURE_ETCD_LOG=1 logs the whole log.
		raw, err := f.Kube.CoreV1().Pods(opNS).GetLogs(p.Name, &corev1.PodLogOptions{Container: "etcd"}).DoRaw(t.Context())
		if err == nil {
			if os.Getenv("E2E_MEASURE_ETCD_LOG") != "" {
				t.Logf("etcd log of %s:\n%s", p.Name, raw)
			}
			var undialled []string
			for l := range strings.Lines(string(raw)) {
				if strings.Contains(l, "dial tcp") {
					undialled = append(undialled, l)
				}
			}
			if len(undialled) > 0 {
				line += fmt.Sprintf("; %d etcd log lines with \"dial tcp\", the last: %.400s", len(undialled), undialled[len(undialled)-1])
			}
		}
		t.Log(line)
	}
}

// measureEmptyDirLifecycle: bootstrap of 3 members of version, replacement of
// a killed member, scale 3→5 and 5→3, on one cluster as in the original's
// procedure. Rows of another version than 3.5.21 say which; those of 3.5.21
// keep the names original-measured.md's figures are filed under.
func measureEmptyDirLifecycle(t *testing.T, results map[string][]float64, version string) {
	ctx := t.Context()
	name := framework.UniqueName("measure")
	on := ""
	if version != "3.5.21" {
		on = " on " + version
	}
	start := time.Now()
	createCluster(t, framework.NewCluster(name, 3, version))
	m := measure(t, name, start, nil,
		probe{"a1 bootstrap " + version + " -> status 3 ready", statusReady(3)},
		probe{"a2 bootstrap " + version + " -> 3 pods Ready", podsReady(3)})
	record(results, m)

	pods, err := f.ClusterPods(ctx, opNS, name)
	if err != nil {
		t.Fatal(err)
	}
	victim := pods[0].Name
	start = time.Now()
	if err := f.KillPod(ctx, opNS, victim); err != nil {
		t.Fatal(err)
	}
	record(results, measure(t, name, start, nil, probe{"b  member replacement" + on, func(cl *api.EtcdCluster, pods []corev1.Pod) bool {
		return statusReady(3, victim)(cl, pods) && podsReady(3, victim)(cl, pods)
	}}))

	for _, step := range []struct {
		label string
		size  int
	}{{"c1 scale 3->5", 5}, {"c2 scale 5->3", 3}} {
		start = time.Now()
		if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"size": step.size}); err != nil {
			t.Fatal(err)
		}
		n := step.size
		record(results, measure(t, name, start, nil, probe{step.label + on, func(cl *api.EtcdCluster, pods []corev1.Pod) bool {
			return statusReady(n)(cl, pods) && podsReady(n)(cl, pods)
		}}))
	}
	deleteAndWait(t, name)
}

// measureUpgrade: bootstrap of 3.4.23 (the original's version), then the rolling
// upgrade to 3.5.21 with the lowest readiness seen on the way.
func measureUpgrade(t *testing.T, results map[string][]float64) {
	ctx := t.Context()
	name := framework.UniqueName("measure-up")
	start := time.Now()
	createCluster(t, framework.NewCluster(name, 3, "3.4.23"))
	record(results, measure(t, name, start, nil,
		probe{"a1 bootstrap 3.4.23 -> status 3 ready", statusReady(3)},
		probe{"a2 bootstrap 3.4.23 -> 3 pods Ready", podsReady(3)}))

	start = time.Now()
	if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"version": "3.5.21"}); err != nil {
		t.Fatal(err)
	}
	lowPods, lowStatus := 3, 3
	sample := func(cl *api.EtcdCluster, pods []corev1.Pod) {
		lowPods = min(lowPods, len(framework.ReadyPods(pods)))
		lowStatus = min(lowStatus, len(cl.Status.Members.Ready))
	}
	image := framework.EtcdImage("3.5.21")
	record(results, measure(t, name, start, sample,
		probe{"d1 upgrade 3.4.23->3.5.21 -> pods", func(cl *api.EtcdCluster, pods []corev1.Pod) bool {
			ready := framework.ReadyPods(pods)
			if len(framework.LivePods(pods)) != 3 || len(ready) != 3 {
				return false
			}
			for _, p := range ready {
				if framework.EtcdContainerImage(&p) != image {
					return false
				}
			}
			return true
		}},
		probe{"d2 upgrade 3.4.23->3.5.21 -> status", func(cl *api.EtcdCluster, pods []corev1.Pod) bool {
			return cl.Status.CurrentVersion == "3.5.21" && statusReady(3)(cl, pods)
		}}))
	results["d3 upgrade: lowest Ready pods"] = append(results["d3 upgrade: lowest Ready pods"], float64(lowPods))
	results["d4 upgrade: lowest status ready"] = append(results["d4 upgrade: lowest status ready"], float64(lowStatus))
	deleteAndWait(t, name)
}

type probe struct {
	label string
	done  func(*api.EtcdCluster, []corev1.Pod) bool
}

// measure polls the cluster and its pods every 0.25 s and returns, for each probe,
// the seconds from start to the first poll where it held.
func measure(t *testing.T, name string, start time.Time, sample func(*api.EtcdCluster, []corev1.Pod), probes ...probe) map[string]float64 {
	t.Helper()
	return measureIn(t, opNS, name, start, sample, probes...)
}

// measureIn is measure for a cluster in namespace ns.
func measureIn(t *testing.T, ns, name string, start time.Time, sample func(*api.EtcdCluster, []corev1.Pod), probes ...probe) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	err := framework.WaitFor(t.Context(), changeTimeout, measurePoll, "measured state of "+name, func(ctx context.Context) (bool, string, error) {
		cl, err := f.GetCluster(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		pods, err := f.ClusterPods(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		now := time.Since(start).Seconds()
		if sample != nil {
			sample(cl, pods)
		}
		for _, p := range probes {
			if _, ok := got[p.label]; !ok && p.done(cl, pods) {
				got[p.label] = now
			}
		}
		return len(got) == len(probes), framework.DescribeStatus(cl) + " | " + framework.DescribePods(pods), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for label, s := range got {
		t.Logf("%s: %.1fs", label, s)
	}
	return got
}

func record(results map[string][]float64, m map[string]float64) {
	for k, v := range m {
		results[k] = append(results[k], v)
	}
}

// statusReady: status lists n ready members, none unready, none of exclude.
func statusReady(n int, exclude ...string) func(*api.EtcdCluster, []corev1.Pod) bool {
	return func(cl *api.EtcdCluster, _ []corev1.Pod) bool {
		r := cl.Status.Members
		if len(r.Ready) != n || len(r.Unready) != 0 {
			return false
		}
		for _, x := range exclude {
			if slices.Contains(r.Ready, x) {
				return false
			}
		}
		return true
	}
}

// podsReady: exactly n pods without deletionTimestamp, all Ready, none of exclude.
func podsReady(n int, exclude ...string) func(*api.EtcdCluster, []corev1.Pod) bool {
	return func(_ *api.EtcdCluster, pods []corev1.Pod) bool {
		live := framework.LivePods(pods)
		if len(live) != n || len(framework.ReadyPods(pods)) != n {
			return false
		}
		for _, p := range live {
			if slices.Contains(exclude, p.Name) {
				return false
			}
		}
		return true
	}
}

func deleteAndWait(t *testing.T, name string) {
	t.Helper()
	ctx := t.Context()
	if err := f.DeleteCluster(ctx, opNS, name); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitFor(ctx, cleanupTimeout, framework.Poll, "deletion of "+name,
		framework.Both(f.ClusterGone(opNS, name), f.DependentsGone(opNS, name))); err != nil {
		t.Fatal(err)
	}
}

// measureReport is a markdown table of min/median/max next to the original's.
func measureReport(results map[string][]float64, runs int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Lifecycle figures, %d run(s), seconds from the kubectl call (poll every 0.25 s)\n\n", runs)
	fmt.Fprintln(&b, "| scenario | n | min | median | max | original min / median / max |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|")
	labels := make([]string, 0, len(results))
	for k := range results {
		labels = append(labels, k)
	}
	slices.Sort(labels)
	for _, k := range labels {
		v := slices.Clone(results[k])
		slices.Sort(v)
		// CPU seconds are small numbers: one decimal would hide the difference.
		prec := 1
		if strings.HasPrefix(k, "g2 ") {
			prec = 2
		}
		orig := "-"
		if o, ok := original[k]; ok {
			orig = fmt.Sprintf("%.*f / %.*f / %.*f", prec, o[0], prec, o[1], prec, o[2])
		}
		fmt.Fprintf(&b, "| %s | %d | %.*f | %.*f | %.*f | %s |\n", k, len(v), prec, v[0], prec, median(v), prec, v[len(v)-1], orig)
	}
	return b.String()
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// measureIdle is original-measured.md's f and g: an operator of its own with
// clusters of one member that have nothing to do, its requests to the
// Kubernetes API (its own counter, which counts what the audit log would),
// its memory (the kubelet's working set, sampled every 5 s) and its CPU time
// over idleWindow.
func measureIdle(t *testing.T, results map[string][]float64, clusters int) {
	ctx := t.Context()
	ns := newNamespace(t, "idle")
	installOperator(t, ns, framework.Install{})
	var names []string
	for range clusters {
		name := framework.UniqueName("idle")
		createClusterIn(t, ns, ns, framework.NewCluster(name, 1, "3.5.21"))
		names = append(names, name)
	}
	for _, name := range names {
		waitReady(t, ns, name, 1, bootstrapTimeout(1))
	}
	time.Sleep(idleWarmup) // the window of the original's measurement, not a wait for state
	requestsBefore, breakdownBefore := operatorRequests(t, ns)
	statsBefore, _ := deploymentContainerStats(t, ns, framework.OperatorDeployment)
	var memory []float64
	end := time.Now().Add(idleWindow)
	for time.Now().Before(end) {
		if st, ok := deploymentContainerStats(t, ns, framework.OperatorDeployment); ok {
			memory = append(memory, st.workingSetMiB)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(5 * time.Second):
		}
	}
	requestsAfter, breakdownAfter := operatorRequests(t, ns)
	statsAfter, _ := deploymentContainerStats(t, ns, framework.OperatorDeployment)
	plural := "cluster"
	if clusters > 1 {
		plural = "clusters"
	}
	perMin := (requestsAfter - requestsBefore) / idleWindow.Minutes()
	if len(memory) == 0 {
		t.Fatal("the kubelet's summary API never reported the operator's memory")
	}
	slices.Sort(memory)
	record(results, map[string]float64{
		fmt.Sprintf("f%d API requests/min, %d idle %s", min(clusters, 2), clusters, plural): perMin,
		fmt.Sprintf("g1 memory MiB, %d idle %s", clusters, plural):                          median(memory),
		fmt.Sprintf("g2 CPU-s per 180 s, %d idle %s", clusters, plural):                     statsAfter.cpuSeconds - statsBefore.cpuSeconds,
	})
	var lines []string
	for k, v := range breakdownAfter {
		if d := v - breakdownBefore[k]; d > 0 {
			lines = append(lines, fmt.Sprintf("%s %.1f/min", k, d/idleWindow.Minutes()))
		}
	}
	slices.Sort(lines)
	t.Logf("%d idle %s: %.1f requests/min (%s)", clusters, plural, perMin, strings.Join(lines, ", "))
}

// operatorRequests reads the operator's request counter from its /metrics,
// through the apiserver's pod proxy: the total and each "verb resource".
func operatorRequests(t *testing.T, ns string) (float64, map[string]float64) {
	t.Helper()
	pods, err := f.DeploymentPods(t.Context(), ns, framework.OperatorDeployment)
	if err != nil || len(pods) != 1 {
		t.Fatalf("operator pods in %s: %d, %v", ns, len(pods), err)
	}
	raw, err := f.Kube.CoreV1().RESTClient().Get().
		AbsPath("/api/v1/namespaces", ns, "pods", pods[0].Name+":8080", "proxy", "metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("read the operator's metrics: %v", err)
	}
	const metric = "etcd_operator_kubernetes_requests_total{"
	total := 0.0
	byKind := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, metric), "} ")
		if !ok || !strings.HasPrefix(line, metric) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		total += v
		byKind[labels] = v
	}
	if total == 0 {
		t.Fatalf("no %s series in the operator's metrics", strings.TrimSuffix(metric, "{"))
	}
	return total, byKind
}
