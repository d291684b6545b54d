//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/checker"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// The fault scenarios: each runs etcd-checker (a linearizability checker, in the
// operator image) as a pod against the cluster's client service while a fault is
// injected and healed. Where quorum survives, or comes back with its data, the
// history must be linearizable and no acknowledged write may be missing.

// loadLead is how long the workload runs before the fault, so that the history
// holds writes from before it.
const loadLead = 8 * time.Second

// chaosResult is one line of _output/chaos/results.json.
type chaosResult struct {
	checker.Result
	Test            string  `json:"test"`
	RecoverySeconds float64 `json:"recoverySeconds"`
	Passed          bool    `json:"passed"`
}

// underLoad runs the checker against cluster for d, calls fault loadLead into it,
// and fails the test unless the history is linearizable with no acknowledged write
// lost. fault returns when the cluster has healed; the time it took is reported as
// the recovery.
func underLoad(t *testing.T, ns, cluster, scenario string, d time.Duration, fault func(ctx context.Context)) {
	t.Helper()
	underLoadPod(t, framework.CheckerPod{Namespace: ns, Cluster: cluster, Scenario: scenario, Duration: d}, fault)
}

// underLoadPod is underLoad with the checker pod described in full (a TLS
// cluster's client secret, a lower rate).
func underLoadPod(t *testing.T, p framework.CheckerPod, fault func(ctx context.Context)) {
	t.Helper()
	ctx := t.Context()
	scenario, d := p.Scenario, p.Duration
	c, err := f.StartChecker(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Delete)
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(loadLead):
	}
	start := time.Now()
	fault(ctx)
	recovery := time.Since(start)
	if t.Failed() {
		return
	}
	r, log, err := c.Wait(ctx, d+6*time.Minute)
	keepCheckerLog(t, scenario, withoutArtifacts(log))
	res := chaosResult{Result: r, Test: t.Name(), RecoverySeconds: recovery.Seconds(), Passed: err == nil && r.Passed()}
	res.Scenario = scenario
	writeChaosResult(t, res)
	t.Logf("CHAOS %s: %s recovery=%.1fs", scenario, r, recovery.Seconds())
	if err != nil {
		t.Fatalf("%v\nchecker log:\n%s", err, checkerLog(t, scenario, log))
	}
	if !r.Passed() {
		t.Errorf("%s: the clients' history fails: %s (read-back error %q)\nchecker log:\n%s", scenario, r, r.ReadBackErr, checkerLog(t, scenario, log))
	}
	if r.Acked == 0 {
		t.Errorf("%s: no operation was acknowledged", scenario)
	}
}

// keepCheckerLog keeps a checker run's whole log beside its result, passed
// or not: a run that passed can still have met errors worth reading (which
// member each connection reached, and what failed), and the test's output
// has only a failed run's last lines. What holds the addresses the
// connections reached (the client Service, pods) is listed after it.
func keepCheckerLog(t *testing.T, scenario, log string) {
	log += f.WhatHolds(t.Context(), framework.AddressesReached(log))
	dir := f.ChaosResultsDir()
	if err := os.MkdirAll(dir, 0o755); err == nil {
		err = os.WriteFile(filepath.Join(dir, scenario+".log"), []byte(log), 0o644)
		if err != nil {
			t.Logf("keep the checker log: %v", err)
		}
	}
}

// writeChaosResult keeps the result for hack/chaos.sh, which gathers them into
// _output/chaos/results.json.
func writeChaosResult(t *testing.T, r chaosResult) {
	dir := f.ChaosResultsDir()
	out, _ := json.Marshal(r)
	if err := os.MkdirAll(dir, 0o755); err == nil {
		err = os.WriteFile(filepath.Join(dir, r.Scenario+".json"), append(out, '\n'), 0o644)
		if err != nil {
			t.Logf("keep the result: %v", err)
		}
	}
}

// waitReplaced waits for n ready members and n Ready pods none of which is one of
// the pods in gone (by UID: a member restarted in place keeps its pod's name).
func waitReplaced(t *testing.T, ns, name string, n int, timeout time.Duration, gone map[types.UID]bool) {
	t.Helper()
	err := framework.WaitFor(t.Context(), timeout, framework.Poll, fmt.Sprintf("%d ready members of %s on new pods", n, name),
		framework.Both(f.ReadyMembers(ns, name, n), func(ctx context.Context) (bool, string, error) {
			pods, err := f.ClusterPods(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			ready := framework.ReadyPods(pods)
			for _, p := range ready {
				if gone[p.UID] {
					return false, "old pod " + p.Name + " still there: " + framework.DescribePods(pods), nil
				}
			}
			return len(ready) == n, framework.DescribePods(pods), nil
		}))
	if err != nil {
		t.Fatal(err)
	}
}

func TestChaosLeaderKill(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("chaos-leader")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	underLoad(t, opNS, name, "leader-kill", 45*time.Second, func(ctx context.Context) {
		killTheLeader(ctx, t, name, false)
	})
}

// killTheLeader kills the pod of cluster name's leader and waits until the
// cluster has three ready members again without it.
func killTheLeader(ctx context.Context, t *testing.T, name string, secure bool) {
	t.Helper()
	leader, err := f.Leader(ctx, opNS, name, secure)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.KillPod(ctx, opNS, leader.Name); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the leader %s", leader.Name)
	waitReady(t, opNS, name, 3, changeTimeout, leader.Name)
}

// Two of three members on claims are killed: the quorum is lost until the operator
// restarts them in place on their data.
func TestChaosQuorumLossAndHeal(t *testing.T) {
	t.Parallel()
	name, _ := pvcCluster(t, opNS, "chaos-quorum")
	underLoad(t, opNS, name, "quorum-loss-and-heal", 60*time.Second, func(ctx context.Context) {
		pods, err := f.ClusterPods(ctx, opNS, name)
		if err != nil {
			t.Fatal(err)
		}
		gone := map[types.UID]bool{}
		for _, p := range framework.LivePods(pods)[:2] {
			if err := f.KillPod(ctx, opNS, p.Name); err != nil {
				t.Fatal(err)
			}
			gone[p.UID] = true
			t.Logf("killed %s", p.Name)
		}
		waitReplaced(t, opNS, name, 3, changeTimeout, gone)
	})
}

// The operator is killed while it adds a member (3 -> 5): the new operator must
// finish the change with the clients seeing nothing wrong.
func TestChaosOperatorKillDuringAdd(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "chaos-op")
	installOperator(t, ns, framework.Install{})
	name := framework.UniqueName("chaos-op")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, ns, name, 3, bootstrapTimeout(3))
	underLoad(t, ns, name, "operator-kill-during-add", 90*time.Second, func(ctx context.Context) {
		if _, err := f.PatchClusterSpec(ctx, ns, name, map[string]any{"size": 5}); err != nil {
			t.Fatal(err)
		}
		err := framework.WaitFor(ctx, changeTimeout, framework.Poll, "a fourth pod", func(ctx context.Context) (bool, string, error) {
			pods, err := f.ClusterPods(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			return len(framework.LivePods(pods)) >= 4, framework.DescribePods(pods), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		operators, err := f.DeploymentPods(ctx, ns, framework.OperatorDeployment)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range operators {
			if err := f.KillPod(ctx, ns, p.Name); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("killed the operator (%d pods) during the add", len(operators))
		waitReady(t, ns, name, 5, bootstrapTimeout(3))
	})
}

func TestChaosScaleUnderLoad(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("chaos-scale")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	underLoad(t, opNS, name, "scale-3-5-3", 90*time.Second, func(ctx context.Context) {
		for _, size := range []int{5, 3} {
			if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"size": size}); err != nil {
				t.Fatal(err)
			}
			waitReady(t, opNS, name, size, changeTimeout)
		}
	})
}

func TestChaosUpgradeUnderLoad(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("chaos-upgrade")
	cl := framework.NewCluster(name, 3, "3.4.23")
	// Snapshots every 10 entries, so that the move to 3.6 finds the v2 entries
	// of 3.4 and 3.5 behind one (see TestRollingUpgradeAcrossThreeMinorVersions).
	cl.Spec.Pod = &api.PodPolicy{EtcdEnv: []corev1.EnvVar{{Name: "ETCD_SNAPSHOT_COUNT", Value: "10"}}}
	createCluster(t, cl)
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	underLoad(t, opNS, name, "upgrade-3.4-3.5-3.6", 2*time.Minute, func(ctx context.Context) {
		for _, version := range []string{"3.5.35", "3.6.6"} {
			if err := rollThreeMembersTo(ctx, t, name, version); err != nil {
				t.Fatal(err)
			}
		}
	})
}
