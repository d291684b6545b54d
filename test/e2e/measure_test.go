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
	"c1 scale 3->5":                         {32.4, 32.5, 32.5},
	"c2 scale 5->3":                         {24.6, 24.7, 24.7},
	"d1 upgrade 3.4.23->3.5.21 -> pods":     {24.5, 24.5, 24.5},
	"d2 upgrade 3.4.23->3.5.21 -> status":   {32.3, 32.4, 32.6},
	"d3 upgrade: lowest Ready pods":         {2, 2, 2},
	"d4 upgrade: lowest status ready":       {3, 3, 3},
}

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
	results := map[string][]float64{}
	for i := range runs {
		measureEmptyDirLifecycle(t, results)
		measureUpgrade(t, results)
		t.Logf("run %d of %d done", i+1, runs)
	}
	report := measureReport(results, runs)
	t.Log("\n" + report)
	path := filepath.Join(f.Env.RepoRoot, "_output", "e2e", "measure-"+time.Now().UTC().Format("20060102-150405")+".md")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		if err := os.WriteFile(path, []byte(report), 0o644); err == nil {
			t.Logf("written to %s", path)
		}
	}
}

// measureEmptyDirLifecycle: bootstrap of 3.5.21, replacement of a killed member,
// scale 3→5 and 5→3, on one cluster as in the original's procedure.
func measureEmptyDirLifecycle(t *testing.T, results map[string][]float64) {
	ctx := t.Context()
	name := framework.UniqueName("measure")
	start := time.Now()
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	m := measure(t, name, start, nil,
		probe{"a1 bootstrap 3.5.21 -> status 3 ready", statusReady(3)},
		probe{"a2 bootstrap 3.5.21 -> 3 pods Ready", podsReady(3)})
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
	record(results, measure(t, name, start, nil, probe{"b  member replacement", func(cl *api.EtcdCluster, pods []corev1.Pod) bool {
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
		record(results, measure(t, name, start, nil, probe{step.label, func(cl *api.EtcdCluster, pods []corev1.Pod) bool {
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
	got := map[string]float64{}
	err := framework.WaitFor(t.Context(), changeTimeout, measurePoll, "measured state of "+name, func(ctx context.Context) (bool, string, error) {
		cl, err := f.GetCluster(ctx, opNS, name)
		if err != nil {
			return false, err.Error(), nil
		}
		pods, err := f.ClusterPods(ctx, opNS, name)
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
		orig := "-"
		if o, ok := original[k]; ok {
			orig = fmt.Sprintf("%.1f / %.1f / %.1f", o[0], o[1], o[2])
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f | %.1f | %s |\n", k, len(v), v[0], median(v), v[len(v)-1], orig)
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
