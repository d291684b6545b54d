//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/checker"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// Faults of the node itself. Not parallel: each disturbs every pod on the node,
// so it runs while no other test does (Go starts the parallel tests after the
// sequential ones).

// checkerRun is a running checker: a pod beside the cluster, or a run in this
// process where a pod would not outlive the fault.
type checkerRun interface {
	Wait(ctx context.Context, timeout time.Duration) (checker.Result, string, error)
	Delete()
}

// judged waits for a checker whose workload ran through a fault, records its
// result line (as underLoad does) and returns it. With bound nil the test fails
// unless the history is linearizable with no acknowledged write lost. A fault
// the data cannot survive passes a bound instead, which says whether the loss
// stayed within what the fault may take; the history is then reported, not
// judged.
// wait bounds the checker's run: see checkerWait.
func judged(t *testing.T, scenario string, c checkerRun, wait, recovery time.Duration, bound func(checker.Result) error) checker.Result {
	t.Helper()
	r, log, err := c.Wait(t.Context(), wait)
	// The history the checker prints for its visualization is no reading.
	log = withoutArtifacts(log)
	keepCheckerLog(t, scenario, log)
	passed := err == nil && r.Passed()
	var boundErr error
	if bound != nil && err == nil {
		boundErr = bound(r)
		passed = boundErr == nil && r.ReadBackErr == ""
	}
	res := chaosResult{Result: r, Test: t.Name(), RecoverySeconds: recovery.Seconds(), Passed: passed}
	res.Scenario = scenario
	writeChaosResult(t, res)
	t.Logf("CHAOS %s: %s recovery=%.1fs", scenario, r, recovery.Seconds())
	if r.WatchRestarts > 0 {
		// Where the watch stalled and what it had: the trail of a stall,
		// which a watch made again hides from the figures.
		t.Logf("%s: the checker's watch:\n%s", scenario, linesAbout(log, "the watch"))
	}
	switch {
	case err != nil:
		t.Fatalf("%s: %v\nchecker log:\n%s", scenario, err, checkerLog(t, scenario, log))
	case r.Acked == 0:
		t.Errorf("%s: no operation was acknowledged", scenario)
	case bound != nil && !passed:
		t.Errorf("%s: %v (read-back error %q)\nchecker log:\n%s", scenario, boundErr, r.ReadBackErr, checkerLog(t, scenario, log))
	case bound == nil && !passed:
		t.Errorf("%s: the clients' history fails: %s (read-back error %q)\nchecker log:\n%s", scenario, r, r.ReadBackErr, checkerLog(t, scenario, log))
	}
	return r
}

// linesAbout are the lines of log that mention what.
func linesAbout(log, what string) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, what) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// checkerWait is how long a checker of a workload of d may take: its read-back
// and the wait for its watch (settle each, 4 min when 0) and porcupine's search
// (5 min at most, long on a history a restore made non-linearizable).
func checkerWait(d, settle time.Duration) time.Duration {
	if settle == 0 {
		settle = 4 * time.Minute
	}
	return d + 2*settle + 6*time.Minute
}

// TestChaosNodeRestart puts the node through a reboot
// (hack/local-cluster/node-restart.sh: the kubelet, kube-proxy and containerd
// stop, every container is killed with SIGKILL, all start again) with two
// clusters on it, one on claims and one on emptyDir, and the operator itself,
// while a checker writes to and reads from each. Both come back with their
// members' IDs and every acknowledged write, and the histories are
// linearizable: the kubelet recreates each pod's containers on the volumes the
// pod had, the claim's and the emptyDir's alike, so nothing is replaced.
//
// The checkers run in this process, a client off the node: a checker pod would
// be killed with everything else on it.
func TestChaosNodeRestart(t *testing.T) {
	onClaims, _ := pvcCluster(t, opNS, "noderestart")
	onEmptyDir := framework.UniqueName("noderestart-empty")
	createClusterIn(t, opNS, opNS, framework.NewCluster(onEmptyDir, 3, "3.5.21"))
	waitReady(t, opNS, onEmptyDir, 3, bootstrapTimeout(3))

	clusters := []string{onClaims, onEmptyDir}
	scenarios := map[string]string{onClaims: "node-restart-pvc", onEmptyDir: "node-restart-emptydir"}
	before := map[string]map[string]uint64{}
	restarts := map[string]int32{}
	checkers := map[string]checkerRun{}
	const d = 75 * time.Second
	for _, name := range clusters {
		before[name] = memberIDs(t, opNS, name)
		for pod, n := range etcdRestartCounts(t, name) {
			restarts[pod] = n
		}
		c, err := f.StartLocalChecker(t.Context(), framework.CheckerPod{Namespace: opNS, Cluster: name, Scenario: scenarios[name], Duration: d})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Delete)
		checkers[name] = c
	}
	pause(t, loadLead)

	restarted := time.Now()
	out, err := f.Run(t.Context(), framework.Cmd{Name: "bash", Args: []string{"-c", "bash ../../hack/local-cluster/node-restart.sh 5 2>&1"}})
	if err != nil {
		t.Fatalf("node restart: %v\n%s", err, out)
	}
	t.Logf("node back %.1fs after the restart began:\n%s", time.Since(restarted).Seconds(), out)

	recovery := map[string]time.Duration{}
	for _, name := range clusters {
		waitEtcdRestarted(t, name, restarts)
		waitReady(t, opNS, name, 3, changeTimeout)
		recovery[name] = time.Since(restarted)
		t.Logf("%s: 3/3 ready %.1fs after the node restart began", name, recovery[name].Seconds())
	}
	for _, name := range clusters {
		judged(t, scenarios[name], checkers[name], checkerWait(d, 0), recovery[name], nil)
		sameMembers(t, before[name], memberIDs(t, opNS, name))
	}
}

// TestChaosLongNodeNotReady stops the node's kubelet until the node controller
// has marked the node NotReady and every pod on it not Ready
// (hack/local-cluster/node-notready.sh), then starts it again, with a checker
// pod against a cluster on claims and one on emptyDir. The containers run on
// meanwhile, so the members must be neither restarted nor replaced, and no
// acknowledged write lost. In `make chaos` only: the node controller's grace
// period alone is close to a minute of a node no other test can use.
func TestChaosLongNodeNotReady(t *testing.T) {
	onClaims, _ := pvcCluster(t, opNS, "notready")
	onEmptyDir := framework.UniqueName("notready-empty")
	createClusterIn(t, opNS, opNS, framework.NewCluster(onEmptyDir, 3, "3.5.21"))
	waitReady(t, opNS, onEmptyDir, 3, bootstrapTimeout(3))

	clusters := []string{onClaims, onEmptyDir}
	scenarios := map[string]string{onClaims: "node-notready-pvc", onEmptyDir: "node-notready-emptydir"}
	before := map[string]map[string]uint64{}
	checkers := map[string]checkerRun{}
	const d = 150 * time.Second
	for _, name := range clusters {
		before[name] = memberIDs(t, opNS, name)
		c, err := f.StartChecker(t.Context(), framework.CheckerPod{Namespace: opNS, Cluster: name, Scenario: scenarios[name], Duration: d})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Delete)
		checkers[name] = c
	}
	pause(t, loadLead)

	stopped := time.Now()
	out, err := f.Run(t.Context(), framework.Cmd{Name: "bash", Args: []string{"-c", "bash ../../hack/local-cluster/node-notready.sh 10 2>&1"}})
	if err != nil {
		t.Fatalf("node NotReady: %v\n%s", err, out)
	}
	t.Logf("node Ready again %.1fs after the kubelet stopped:\n%s", time.Since(stopped).Seconds(), out)

	recovery := map[string]time.Duration{}
	for _, name := range clusters {
		waitReady(t, opNS, name, 3, changeTimeout)
		recovery[name] = time.Since(stopped)
		t.Logf("%s: 3/3 ready %.1fs after the kubelet stopped", name, recovery[name].Seconds())
	}
	for _, name := range clusters {
		judged(t, scenarios[name], checkers[name], checkerWait(d, 0), recovery[name], nil)
		sameMembers(t, before[name], memberIDs(t, opNS, name))
	}
}

// waitEtcdRestarted waits for the etcd container of every member pod in
// restarts to have restarted since: status is the operator's last word from
// before a node restart until it runs again.
func waitEtcdRestarted(t *testing.T, name string, restarts map[string]int32) {
	t.Helper()
	err := framework.WaitFor(t.Context(), changeTimeout, framework.Poll, "the etcd containers of "+name+" to restart", func(ctx context.Context) (bool, string, error) {
		now := etcdRestartCounts(t, name)
		for pod, n := range restarts {
			if _, ok := now[pod]; !ok {
				continue
			}
			if now[pod] <= n && podOf(name, pod) {
				return false, fmt.Sprintf("%s: restarts %d, was %d", pod, now[pod], n), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// etcdRestartCounts is the etcd container's restart count per member pod of
// the cluster.
func etcdRestartCounts(t *testing.T, name string) map[string]int32 {
	t.Helper()
	pods, err := f.Kube.CoreV1().Pods(opNS).List(t.Context(), metav1.ListOptions{LabelSelector: "etcd_cluster=" + name})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int32{}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "etcd" {
				counts[p.Name] = cs.RestartCount
			}
		}
	}
	return counts
}

// podOf says whether pod still belongs to the cluster's members (a pod the
// operator replaced has a new name and nothing to wait for).
func podOf(cluster, pod string) bool {
	return len(pod) > len(cluster) && pod[:len(cluster)] == cluster
}

// pause waits d, or fails the test if it ends first.
func pause(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	case <-time.After(d):
	}
}
