//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/openetcd/etcd-operator/hack/bench/benchreport"
	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// The bench (`make bench`, hack/bench/run.sh) is three measurements that print
// figures and assert nothing about them (the third, etcd's own benchmark
// tool against the operator's cluster and the floor, is bench_etcd_test.go):
//
//	E2E_BENCH=<runs>           TestMeasureSpeed: the floor and the operator's
//	                           lifecycle, median of <runs>
//	E2E_BENCH_RESTORE_MIB=<m>  its restore's snapshot size (default 1024; 0: no restore)
//	E2E_BENCH_SCALE="10 50 100" TestMeasureScale: idle clusters, then a
//	                           replacement and a burst among them
//	E2E_BENCH_BURST=<n>        clusters of the burst (default 20)
//	E2E_BENCH_WINDOW=<seconds> idle window per step of the scale run (default 60)
//
// Both write a table and JSON to _output/bench/.

// Scenario names of the speed table, in the order printed.
const (
	floor1   = "floor: 1 etcd pod alone"
	floor3   = "floor: 3 etcd pods, static initial cluster, created together"
	floor5   = "floor: 5 etcd pods, static initial cluster, created together"
	boot3    = "bootstrap 3 × " + version35 + " (to status 3 ready, 3 pods Ready)"
	boot3v36 = "bootstrap 3 × " + version36 + " (to status 3 ready, 3 pods Ready)"
	boot3v37 = "bootstrap 3 × " + version37 + " (to status 3 ready, 3 pods Ready)"
	boot3v34 = "bootstrap 3 × 3.4.23 (to status 3 ready)"
	boot5    = "bootstrap 5 × " + version35
	// The bootstraps above start their members as the spec's default does;
	// the bootstrap part (TestMeasureBootstrap) measures both modes on every
	// version a new cluster may be made on.
	replEmptyDir    = "replacement, emptyDir (member pod killed → 3 ready)"
	replEmptyDirV36 = "replacement, emptyDir, on " + version36
	replEmptyDirV37 = "replacement, emptyDir, on " + version37
	replPVC         = "replacement, PVC: restart in place (member pod killed → 3 ready)"
	restartPVC      = "whole-cluster restart, PVC (all 3 pods killed → 3 ready)"
	scaleUp         = "scale 3 → 5"
	scaleUpV36      = "scale 3 → 5 on " + version36
	scaleUpV37      = "scale 3 → 5 on " + version37
	scaleDown       = "scale 5 → 3"
	upgrade         = "upgrade 3.4.23 → 3.5.21 (to status.currentVersion, 3 ready)"
	restoreGiB      = "restore (EtcdRestore created → Completed)"
)

// The newest patch release of each minor version a new cluster may be made
// on, among the local cluster's images: the lifecycle is measured on each.
// From 3.6 on the operator may have two learners in flight
// (--max-learners), which 3.5 does not allow.
const (
	version35 = "3.5.35"
	version36 = "3.6.16"
	version37 = "3.7.3"
)

// emptyDirRows names the rows one benchEmptyDir run fills, on its version; a
// step whose row is "" is left out.
type emptyDirRows struct {
	version, boot, replace, up, down string
}

var (
	emptyDir35 = emptyDirRows{version: version35, boot: boot3, replace: replEmptyDir, up: scaleUp, down: scaleDown}
	emptyDir36 = emptyDirRows{version: version36, boot: boot3v36, replace: replEmptyDirV36, up: scaleUpV36}
	emptyDir37 = emptyDirRows{version: version37, boot: boot3v37, replace: replEmptyDirV37, up: scaleUpV37}
)

// floorOf compares each operator scenario with the physical floor of the same
// work on this node: the pods it must start, created directly with the
// operator's own pod spec. A member joins after the one before it is in, so
// serial work is a multiple of the one-pod floor.
var floorOf = map[string]struct {
	floor  string
	factor float64
}{
	boot3:           {floor3, 1},
	boot3v34:        {floor3, 1},
	boot3v36:        {floor3, 1},
	boot3v37:        {floor3, 1},
	boot5:           {floor5, 1},
	replEmptyDir:    {floor1, 1},
	replEmptyDirV36: {floor1, 1},
	replEmptyDirV37: {floor1, 1},
	replPVC:         {floor1, 1},
	restartPVC:      {floor3, 1},
	scaleUp:         {floor1, 2},
	scaleUpV36:      {floor1, 2},
	scaleUpV37:      {floor1, 2},
	upgrade:         {floor1, 3},
}

// originalOf is the original's median from original-measured.md (its bootstrap
// was of 3.4.23, and every figure is of the versions it ran; it replaced a
// killed member with an empty one whatever the volume).
var originalOf = map[string]float64{
	boot3:           32.5,
	boot3v34:        32.5,
	boot3v36:        32.5,
	boot3v37:        32.5,
	replEmptyDir:    21.8,
	replEmptyDirV36: 21.8,
	replEmptyDirV37: 21.8,
	replPVC:         21.8,
	scaleUp:         32.5,
	scaleUpV36:      32.5,
	scaleUpV37:      32.5,
	scaleDown:       24.7,
	upgrade:         32.4,
}

// benchRow is one line of a bench table.
type benchRow struct {
	Scenario string    `json:"scenario"`
	Unit     string    `json:"unit"`
	Samples  []float64 `json:"samples"`
	Median   float64   `json:"median"`
	Min      float64   `json:"min"`
	Max      float64   `json:"max"`
	// Floor is the floor scenario this one is compared with, times FloorFactor.
	Floor        string  `json:"floor,omitempty"`
	FloorFactor  float64 `json:"floorFactor,omitempty"`
	RatioToFloor float64 `json:"ratioToFloor,omitempty"`
	Original     float64 `json:"original,omitempty"`
	// RatioToOriginal below 1 is faster than the original.
	RatioToOriginal float64 `json:"ratioToOriginal,omitempty"`
}

// benchReport is what a bench run writes to _output/bench/<kind>-<time>.json.
type benchReport struct {
	benchreport.Header
	Runs  int        `json:"runs"`
	Rows  []benchRow `json:"rows,omitempty"`
	Scale *scaleFit  `json:"scale,omitempty"`
	Etcd  *etcdBench `json:"etcd,omitempty"`
	Notes []string   `json:"notes,omitempty"`
	Table string     `json:"-"`
	// started names the files: a report written again replaces its files.
	started time.Time
}

// TestMeasureSpeed measures, in one run, the floor (etcd pods made directly,
// no operator) and the operator's lifecycle on the shared operator, runs times,
// and a restore once. Run it alone on the node: hack/bench/run.sh.
func TestMeasureSpeed(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("E2E_BENCH"))
	if runs <= 0 {
		t.Skip("the bench runs only on request: E2E_BENCH=<runs> (hack/bench/run.sh)")
	}
	restoreMiB := 1024
	if v, ok := os.LookupEnv("E2E_BENCH_RESTORE_MIB"); ok {
		restoreMiB, _ = strconv.Atoi(v)
	}
	started := time.Now()
	results := map[string][]float64{}
	floorNS := newNamespace(t, "bench-floor")
	// Each scenario is a subtest: one that fails leaves the others' figures.
	for i := range runs {
		t.Run(fmt.Sprintf("floor-%d", i), func(t *testing.T) {
			results[floor1] = append(results[floor1], measureFloor(t, floorNS, 1, version35))
			results[floor3] = append(results[floor3], measureFloor(t, floorNS, 3, version35))
			results[floor5] = append(results[floor5], measureFloor(t, floorNS, 5, version35))
		})
		t.Run(fmt.Sprintf("emptydir-%d", i), func(t *testing.T) { benchEmptyDir(t, results, emptyDir35) })
		t.Run(fmt.Sprintf("emptydir-3.6-%d", i), func(t *testing.T) { benchEmptyDir(t, results, emptyDir36) })
		t.Run(fmt.Sprintf("emptydir-3.7-%d", i), func(t *testing.T) { benchEmptyDir(t, results, emptyDir37) })
		t.Run(fmt.Sprintf("bootstrap5-%d", i), func(t *testing.T) { benchBootstrap5(t, results) })
		t.Run(fmt.Sprintf("pvc-%d", i), func(t *testing.T) { benchPVC(t, results) })
		t.Run(fmt.Sprintf("upgrade-%d", i), func(t *testing.T) {
			m := map[string][]float64{}
			measureUpgrade(t, m)
			results[boot3v34] = append(results[boot3v34], m["a1 bootstrap 3.4.23 -> status 3 ready"]...)
			results[upgrade] = append(results[upgrade], m["d2 upgrade 3.4.23->3.5.21 -> status"]...)
		})
		t.Logf("run %d of %d done", i+1, runs)
		// Written after every run, so that an interrupted bench leaves what it measured.
		writeSpeed(t, started, results, i+1, runs, nil)
	}
	if restoreMiB > 0 {
		label := fmt.Sprintf("%s, %d MiB snapshot, 3 members", restoreGiB, restoreMiB)
		t.Run("restore", func(t *testing.T) {
			results[label] = append(results[label], measureRestore(t, restoreMiB).CompletedSeconds)
		})
		writeSpeed(t, started, results, runs, runs, []string{
			"The restore runs once per bench (filling and snapshotting the data takes minutes); its steps are in the test log.",
		})
	}
}

// writeSpeed writes the speed report of the runs done so far.
func writeSpeed(t *testing.T, started time.Time, results map[string][]float64, done, runs int, notes []string) {
	order := []string{floor1, floor3, floor5, boot3, boot3v34, boot3v36, boot3v37, boot5, replEmptyDir, replEmptyDirV36, replEmptyDirV37, replPVC, restartPVC, scaleUp, scaleUpV36, scaleUpV37, scaleDown, upgrade}
	for k := range results {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	if done < runs {
		notes = append(notes, fmt.Sprintf("Partial: %d of %d runs done.", done, runs))
	}
	rep := benchReport{Header: benchreport.Header{Kind: "speed"}, Runs: done, Notes: notes, started: started}
	for _, k := range order {
		if len(results[k]) == 0 {
			continue
		}
		rep.Rows = append(rep.Rows, newBenchRow(k, "s", results[k]))
	}
	compareRows(rep.Rows)
	writeBench(t, &rep)
}

// measureFloor creates n etcd pods of version at once (startFloor), in a
// namespace no operator watches, and returns the seconds until all are
// Ready: what any pod-based etcd needs on this node. The pods and their
// Service are deleted before it returns.
func measureFloor(t *testing.T, ns string, n int, version string) float64 {
	t.Helper()
	ctx := t.Context()
	fl := startFloor(t, ns, n, version)
	t.Logf("floor of %d pod(s): %.1fs", n, fl.took)
	for _, p := range fl.pods {
		if err := f.KillPod(ctx, ns, p.Name); err != nil {
			t.Error(err)
		}
	}
	if err := f.Kube.CoreV1().Services(ns).Delete(ctx, fl.service, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
	if err := framework.WaitFor(ctx, cleanupTimeout, framework.Poll, "floor pods gone", func(ctx context.Context) (bool, string, error) {
		got, err := f.ClusterPods(ctx, ns, fl.name)
		return err == nil && len(got) == 0, fmt.Sprintf("%d pods", len(got)), nil
	}); err != nil {
		t.Fatal(err)
	}
	return fl.took
}

// floor is n etcd pods started without an operator.
type floor struct {
	// name is the cluster name their labels carry; service the peer
	// Service their names need.
	name, service string
	// pods are the pods as they were when all were Ready.
	pods []corev1.Pod
	// took is the seconds from their creation until all were Ready.
	took float64
}

// startFloor creates n etcd pods of version at once in ns, built by the
// operator's own pod builder (check-dns init container, probes, image) with
// a static initial cluster, and waits until all are Ready.
func startFloor(t *testing.T, ns string, n int, version string) floor {
	t.Helper()
	ctx := t.Context()
	name := framework.UniqueName("floor")
	cl := framework.NewCluster(name, n, version)
	cl.Namespace = ns
	cl = cl.WithDefaults()
	svc := k8sutil.NewPeerService(cl)
	svc.OwnerReferences = nil
	if _, err := f.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var members []*etcdutil.Member
	for i := range n {
		members = append(members, &etcdutil.Member{Name: fmt.Sprintf("%s-%04d", name, i), Namespace: ns, ClusterName: name})
	}
	initial := etcdutil.NewMemberSet(members...).PeerURLPairs()
	var pods []*corev1.Pod
	for _, m := range members {
		p := k8sutil.NewEtcdPod(cl, m, version, initial, k8sutil.ClusterStateNew, name)
		// No EtcdCluster owns them: with an owner that does not exist the
		// garbage collector would delete them.
		p.OwnerReferences = nil
		pods = append(pods, p)
	}
	start := time.Now()
	for _, p := range pods {
		if _, err := f.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	fl := floor{name: name, service: svc.Name}
	err := framework.WaitFor(ctx, changeTimeout, measurePoll, fmt.Sprintf("%d floor pods Ready", n), func(ctx context.Context) (bool, string, error) {
		got, err := f.ClusterPods(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		fl.took = time.Since(start).Seconds()
		fl.pods = framework.ReadyPods(got)
		return len(fl.pods) == n, framework.DescribePods(got), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fl
}

// benchEmptyDir: bootstrap of 3 members of rows.version, replacement of a
// killed member, scale 3→5 and 5→3 on one cluster, as original-measured.md
// did; each step whose row is named.
func benchEmptyDir(t *testing.T, results map[string][]float64, rows emptyDirRows) {
	ctx := t.Context()
	name := framework.UniqueName("bench")
	start := time.Now()
	createCluster(t, framework.NewCluster(name, 3, rows.version))
	m := measure(t, name, start, nil, probe{rows.boot, func(cl *api.EtcdCluster, pods []corev1.Pod) bool {
		return statusReady(3)(cl, pods) && podsReady(3)(cl, pods)
	}})
	record(results, m)
	if rows.replace != "" {
		record(results, benchReplace(t, name, rows.replace, false))
	}
	for _, s := range []struct {
		label string
		size  int
	}{{rows.up, 5}, {rows.down, 3}} {
		if s.label == "" {
			continue
		}
		start = time.Now()
		if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"size": s.size}); err != nil {
			t.Fatal(err)
		}
		n := s.size
		record(results, measure(t, name, start, nil, probe{s.label, func(cl *api.EtcdCluster, pods []corev1.Pod) bool {
			return statusReady(n)(cl, pods) && podsReady(n)(cl, pods)
		}}))
	}
	deleteAndWait(t, name)
}

// benchReplace kills one member's pod of the 3-member cluster name (in opNS)
// and measures until 3 members are ready again with the killed pod gone (a new
// member) or, when inPlace, back as a new pod of the same name.
func benchReplace(t *testing.T, name, label string, inPlace bool) map[string]float64 {
	t.Helper()
	return benchReplaceIn(t, opNS, name, label, inPlace)
}

func benchReplaceIn(t *testing.T, ns, name, label string, inPlace bool) map[string]float64 {
	t.Helper()
	ctx := t.Context()
	pods, err := f.ClusterPods(ctx, ns, name)
	if err != nil || len(pods) == 0 {
		t.Fatalf("pods of %s: %d, %v", name, len(pods), err)
	}
	victim := pods[len(pods)/2]
	start := time.Now()
	if err := f.KillPod(ctx, ns, victim.Name); err != nil {
		t.Fatal(err)
	}
	done := func(cl *api.EtcdCluster, pods []corev1.Pod) bool {
		if inPlace {
			return statusReady(3)(cl, pods) && podsReady(3)(cl, pods) && newPods(pods, victim)
		}
		return statusReady(3, victim.Name)(cl, pods) && podsReady(3, victim.Name)(cl, pods)
	}
	return measureIn(t, ns, name, start, nil, probe{label, done})
}

// newPods: none of the pods is one of old (same name, same UID).
func newPods(pods []corev1.Pod, old ...corev1.Pod) bool {
	uids := map[types.UID]bool{}
	for _, p := range old {
		uids[p.UID] = true
	}
	for _, p := range pods {
		if uids[p.UID] {
			return false
		}
	}
	return true
}

func benchBootstrap5(t *testing.T, results map[string][]float64) {
	name := framework.UniqueName("bench5")
	start := time.Now()
	createCluster(t, framework.NewCluster(name, 5, version35))
	record(results, measure(t, name, start, nil, probe{boot5, func(cl *api.EtcdCluster, pods []corev1.Pod) bool {
		return statusReady(5)(cl, pods) && podsReady(5)(cl, pods)
	}}))
	deleteAndWait(t, name)
}

// benchPVC: a cluster on claims (hostPath volumes), one member killed and
// restarted in place, then every pod killed at once.
func benchPVC(t *testing.T, results map[string][]float64) {
	name := framework.UniqueName("benchpv")
	group := "e2e-" + name
	createHostPathPVs(t, group, 4)
	cl := framework.NewCluster(name, 3, version35)
	cl.Spec.Pod = &api.PodPolicy{PersistentVolumeClaimSpec: claimSpec(group)}
	createCluster(t, cl)
	logVolumesOnFailure(t, group)
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	record(results, benchReplace(t, name, replPVC, true))
	m, _ := killEveryPod(t, name, restartPVC)
	record(results, m)
	deleteAndWait(t, name)
}

// killEveryPod kills every pod of cluster name at once and measures, as
// label, until the cluster is back with new pods, all ready. It returns
// when it is, and the time it started.
func killEveryPod(t *testing.T, name, label string) (map[string]float64, time.Time) {
	t.Helper()
	pods, err := f.ClusterPods(t.Context(), opNS, name)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, p := range pods {
		if err := f.KillPod(t.Context(), opNS, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	return measure(t, name, start, nil, probe{label, func(cl *api.EtcdCluster, got []corev1.Pod) bool {
		return statusReady(len(pods))(cl, got) && podsReady(len(pods))(cl, got) && newPods(got, pods...)
	}}), start
}

func newBenchRow(scenario, unit string, samples []float64) benchRow {
	v := slices.Clone(samples)
	slices.Sort(v)
	return benchRow{Scenario: scenario, Unit: unit, Samples: samples, Median: median(v), Min: v[0], Max: v[len(v)-1]}
}

// compareRows fills in the ratios to the floor and to the original.
func compareRows(rows []benchRow) {
	floors := map[string]float64{}
	for _, r := range rows {
		floors[r.Scenario] = r.Median
	}
	for i := range rows {
		r := &rows[i]
		if fl, ok := floorOf[r.Scenario]; ok && floors[fl.floor] > 0 {
			r.Floor, r.FloorFactor = fl.floor, fl.factor
			r.RatioToFloor = r.Median / (floors[fl.floor] * fl.factor)
		}
		if o, ok := originalOf[r.Scenario]; ok {
			r.Original = o
			r.RatioToOriginal = r.Median / o
		}
	}
}

// speedTable is the markdown table of a speed report.
func speedTable(rep benchReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Speed, %s, %s; seconds, median of %d (min–max), polled every 0.25 s\n\n", rep.Date, rep.Machine, rep.Runs)
	fmt.Fprintln(&b, "| scenario | seconds | × floor | the original | × original |")
	fmt.Fprintln(&b, "|---|---|---|---|---|")
	short := map[string]string{floor1: "1 pod", floor3: "3 pods", floor5: "5 pods"}
	for _, r := range rep.Rows {
		xf, orig, xo := "–", "–", "–"
		if r.Floor != "" {
			what := short[r.Floor]
			if r.FloorFactor != 1 {
				what = fmt.Sprintf("%g × %s", r.FloorFactor, what)
			}
			xf = fmt.Sprintf("%.1f (%s)", r.RatioToFloor, what)
		}
		if r.Original > 0 {
			orig, xo = fmt.Sprintf("%.1f", r.Original), fmt.Sprintf("%.2f", r.RatioToOriginal)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.Scenario, spread(r, 1), xf, orig, xo)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	return b.String()
}

// spread is "median (min–max)", or the one sample.
func spread(r benchRow, prec int) string {
	if len(r.Samples) == 1 || r.Min == r.Max {
		return fmt.Sprintf("%.*f", prec, r.Median)
	}
	return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, r.Median, prec, r.Min, prec, r.Max)
}

// writeBench dates the report, prints its table and writes it to
// _output/bench/<kind>-<time>.json and .md.
func writeBench(t *testing.T, rep *benchReport) {
	now := time.Now().UTC()
	if rep.started.IsZero() {
		rep.started = now
	}
	rep.Date = now.Format("2006-01-02")
	rep.Machine = machineKind(t)
	switch rep.Kind {
	case "speed":
		rep.Table = speedTable(*rep)
	case "scale":
		rep.Table = scaleTable(*rep)
	case "bootstrap":
		rep.Table = bootstrapTable(*rep)
	case "etcd":
		rep.Table = etcdBenchTable(*rep)
	}
	t.Log("\n" + rep.Table)
	dir := filepath.Join(f.Env.RepoRoot, "_output", "bench")
	base := filepath.Join(dir, rep.Kind+"-"+rep.started.UTC().Format("20060102-150405"))
	if err := benchreport.Write(base+".json", rep); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".md", []byte(rep.Table), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("written to %s.json and %s.md", base, base)
}

// machineKind names the node the figures come from: its cores, memory and
// kubelet, from the Node object (the local cluster's node is this machine).
func machineKind(t *testing.T) string {
	node, err := f.Kube.CoreV1().Nodes().Get(t.Context(), f.Env.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("%d-core machine", runtime.NumCPU())
	}
	c := node.Status.Capacity
	return fmt.Sprintf("single node, %s cores, %.0f GiB, %s, Kubernetes %s",
		c.Cpu().String(), float64(c.Memory().Value())/(1<<30), node.Status.NodeInfo.OSImage, node.Status.NodeInfo.KubeletVersion)
}
