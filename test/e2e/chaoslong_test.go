//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// The longer half of the fault matrix, run by `make chaos` (hack/chaos.sh) and not
// by `make test`: hack/e2e.sh skips ^TestChaosLong unless E2E_CHAOS=1.

func TestChaosLongFollowerKill(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("chaos-follower")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	underLoad(t, opNS, name, "follower-kill", 45*time.Second, func(ctx context.Context) {
		victim := killFollower(ctx, t, name, pods)
		t.Logf("killed the follower %s", victim)
		waitReady(t, opNS, name, 3, changeTimeout, victim)
	})
}

// killFollower kills a member of the cluster in opNS that is not its leader,
// one of its first two pods, and returns its name.
func killFollower(ctx context.Context, t *testing.T, name string, pods []string) string {
	t.Helper()
	leader, err := f.Leader(ctx, opNS, name, false)
	if err != nil {
		t.Fatal(err)
	}
	victim := pods[0]
	if victim == leader.Name {
		victim = pods[1]
	}
	if err := f.KillPod(ctx, opNS, victim); err != nil {
		t.Fatal(err)
	}
	return victim
}

// Every pod of a cluster on claims is deleted at once: the whole cluster restarts
// on its data.
func TestChaosLongEveryPodDeleted(t *testing.T) {
	t.Parallel()
	name, _ := pvcCluster(t, opNS, "chaos-allpods")
	underLoad(t, opNS, name, "every-pod-deleted-pvc", 60*time.Second, func(ctx context.Context) {
		pods, err := f.ClusterPods(ctx, opNS, name)
		if err != nil {
			t.Fatal(err)
		}
		gone := map[types.UID]bool{}
		for _, p := range framework.LivePods(pods) {
			if err := f.KillPod(ctx, opNS, p.Name); err != nil {
				t.Fatal(err)
			}
			gone[p.UID] = true
		}
		t.Logf("deleted every pod (%d)", len(gone))
		waitReplaced(t, opNS, name, 3, changeTimeout, gone)
	})
}

func TestChaosLongOperatorKillDuringRemove(t *testing.T) {
	t.Parallel()
	var ns, name string
	liveAtMost := func(n int) framework.Condition {
		return func(ctx context.Context) (bool, string, error) {
			pods, err := f.ClusterPods(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			return len(framework.LivePods(pods)) <= n, framework.DescribePods(pods), nil
		}
	}
	operatorKillDuringNamed(t, "operator-kill-during-remove", 5, "3.5.21", map[string]any{"size": 3}, &ns, &name,
		liveAtMost(4), func(ctx context.Context) (bool, string, error) {
			return framework.Both(f.ReadyMembers(ns, name, 3), f.ReadyPodsCond(ns, name, 3))(ctx)
		})
}

func TestChaosLongOperatorKillDuringUpgrade(t *testing.T) {
	t.Parallel()
	var ns, name string
	const version = "3.5.35"
	image := framework.EtcdImage(version)
	operatorKillDuringNamed(t, "operator-kill-during-upgrade", 3, "3.5.21", map[string]any{"version": version}, &ns, &name,
		// Started: a member on the new image (PodsOnImage wants them all).
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.ClusterPods(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			for _, p := range framework.LivePods(pods) {
				if framework.EtcdContainerImage(&p) == image {
					return true, "", nil
				}
			}
			return false, framework.DescribePods(pods), nil
		},
		func(ctx context.Context) (bool, string, error) {
			return framework.Both(f.PodsOnImage(ns, name, image, 3), currentVersion(ns, name, version), f.ReadyMembers(ns, name, 3))(ctx)
		})
}

// operatorKillDuringNamed changes the spec of a cluster under its own operator,
// kills the operator once started holds, and waits for done. The namespace and
// the cluster's name are written through ns and name before the conditions run.
func operatorKillDuringNamed(t *testing.T, scenario string, size int, version string, change map[string]any, ns, name *string, started, done framework.Condition) {
	t.Helper()
	*ns = newNamespace(t, "chaos-op")
	installOperator(t, *ns, framework.Install{})
	*name = framework.UniqueName("chaos-op")
	createClusterIn(t, *ns, *ns, framework.NewCluster(*name, size, version))
	waitReady(t, *ns, *name, size, bootstrapTimeout(size))
	underLoad(t, *ns, *name, scenario, 90*time.Second, func(ctx context.Context) {
		if _, err := f.PatchClusterSpec(ctx, *ns, *name, change); err != nil {
			t.Fatal(err)
		}
		if err := framework.WaitFor(ctx, changeTimeout, framework.Poll, "the change to start", started); err != nil {
			t.Fatal(err)
		}
		operators, err := f.DeploymentPods(ctx, *ns, framework.OperatorDeployment)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range operators {
			if err := f.KillPod(ctx, *ns, p.Name); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("killed the operator (%d pods) during %s", len(operators), scenario)
		if err := framework.WaitFor(ctx, upgradeTimeout, framework.Poll, "the change to finish", done); err != nil {
			t.Fatal(err)
		}
	})
}

// The client Service is deleted: clients cannot reach the cluster until the
// operator makes it again.
func TestChaosLongClientServiceDeleted(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("chaos-svc")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	underLoad(t, opNS, name, "client-service-deleted", 45*time.Second, func(ctx context.Context) {
		svcs := f.Kube.CoreV1().Services(opNS)
		old, err := svcs.Get(ctx, name+"-client", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := svcs.Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err = framework.WaitFor(ctx, changeTimeout, framework.Poll, "the client service to be made again", func(ctx context.Context) (bool, string, error) {
			s, err := svcs.Get(ctx, old.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			return s.UID != old.UID, "the old one is still there", nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// A member's etcd is frozen (SIGSTOP) for 30 s, then thawed. The node is this
// machine, so the test finds the process by its --name flag.
func TestChaosLongMemberFrozen(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("chaos-freeze")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	underLoad(t, opNS, name, "member-frozen-30s", 60*time.Second, func(ctx context.Context) {
		leader, err := f.Leader(ctx, opNS, name, false)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := etcdPID(leader.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP %d: %v", pid, err)
		}
		t.Logf("froze the leader %s (pid %d)", leader.Name, pid)
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
		// A failed liveness probe may have had the kubelet restart it meanwhile.
		if err := syscall.Kill(pid, syscall.SIGCONT); err == syscall.ESRCH {
			t.Logf("the frozen etcd (pid %d) was restarted meanwhile", pid)
		} else if err != nil {
			t.Fatalf("SIGCONT %d: %v", pid, err)
		}
		waitReady(t, opNS, name, 3, changeTimeout)
	})
}

// etcdPID finds the etcd process of member on this node.
func etcdPID(member string) (int, error) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	flag := []byte("--name=" + member + "\x00")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, flag) || filepath.Base(string(bytes.SplitN(b, []byte{0}, 2)[0])) != "etcd" {
			continue
		}
		return strconv.Atoi(filepath.Base(filepath.Dir(p)))
	}
	return 0, fmt.Errorf("no etcd process with --name=%s on this node (the suite must run as root on the node)", member)
}

// The operator's own chaos monkey (-chaos-level 1) kills a member now and then for
// E2E_CHAOS_MINUTES (default 3; the full run is 10).
func TestChaosLongChaosLevelOne(t *testing.T) {
	t.Parallel()
	minutes := 3
	if v, err := strconv.Atoi(os.Getenv("E2E_CHAOS_MINUTES")); err == nil && v > 0 {
		minutes = v
	}
	ns := newNamespace(t, "chaos-monkey")
	installOperator(t, ns, framework.Install{ChaosLevel: 1})
	name := framework.UniqueName("chaos-monkey")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, ns, name, 3, bootstrapTimeout(3))
	d := time.Duration(minutes) * time.Minute
	underLoad(t, ns, name, fmt.Sprintf("chaos-level-1-%dm", minutes), d, func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-time.After(d - loadLead):
		}
		waitReady(t, ns, name, 3, changeTimeout)
	})
}
