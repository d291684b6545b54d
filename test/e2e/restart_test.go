//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestOperatorRestartHealsAMemberLostWhileItWasDown is the original's
// TestRestartOperator: with the operator scaled to zero a member dies and nobody
// replaces it; once the operator is back it rebuilds what it knew from etcd and
// Kubernetes and heals the cluster. It runs its own operator so that stopping it
// does not disturb the other tests.
func TestOperatorRestartHealsAMemberLostWhileItWasDown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "restart")
	installOperator(t, ns, framework.Install{})
	name := framework.UniqueName("restart")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	_, pods := waitReady(t, ns, name, 3, bootstrapTimeout(3))
	if err := f.PutAndGet(ctx, ns, name, false, "/e2e/restart", "kept", dataTimeout); err != nil {
		t.Fatal(err)
	}

	if err := f.ScaleDeployment(ctx, ns, framework.OperatorDeployment, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitDeploymentScaledDown(ctx, ns, framework.OperatorDeployment, time.Minute); err != nil {
		t.Fatal(err)
	}
	victim := pods[0]
	if err := f.KillPod(ctx, ns, victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s with the operator down", victim)
	err := framework.Holds(ctx, pauseHold, framework.Poll, "the cluster to stay at 2 pods without its operator",
		func(ctx context.Context) (bool, string, error) {
			all, err := f.ClusterPods(ctx, ns, name)
			if err != nil {
				return true, "", nil
			}
			live := framework.LivePods(all)
			return len(live) <= 2, fmt.Sprintf("%d live pods: %s", len(live), framework.DescribePods(all)), nil
		})
	if err != nil {
		t.Fatal(err)
	}

	if err := f.ScaleDeployment(ctx, ns, framework.OperatorDeployment, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitDeploymentReady(ctx, ns, framework.OperatorDeployment, 1, framework.OperatorReadyTimeout); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, name, 3, changeTimeout, victim)
	if err := f.ExpectValue(ctx, ns, name, false, "/e2e/restart", "kept", dataTimeout); err != nil {
		t.Error(err)
	}
}

// TestOperatorRestartWhileCreatingResumes kills the operator while a new
// cluster is still forming: its second member's pod exists, created before
// the member is added to etcd. The new operator must take the cluster up from
// there (the original marked it Failed for good), with no pod left over and
// no member without a pod.
func TestOperatorRestartWhileCreatingResumes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "creating")
	installOperator(t, ns, framework.Install{})
	name := framework.UniqueName("creating")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))

	err := framework.WaitFor(ctx, bootstrapTimeout(2), framework.Poll, "the cluster's second pod",
		func(ctx context.Context) (bool, string, error) {
			all, err := f.ClusterPods(ctx, ns, name)
			if err != nil {
				return false, "", err
			}
			live := framework.LivePods(all)
			return len(live) >= 2, framework.DescribePods(all), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := f.GetCluster(ctx, ns, name)
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
	t.Logf("killed the operator (%d pods) with the cluster %s", len(operators), framework.DescribeStatus(cl))

	waitReady(t, ns, name, 3, bootstrapTimeout(3))
	all, err := f.ClusterPods(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if live := framework.LivePods(all); len(live) != 3 {
		t.Errorf("%d live pods, want exactly the 3 members: %s", len(live), framework.DescribePods(all))
	}
	members, err := f.MemberList(ctx, ns, name, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 3 {
		t.Errorf("etcd has %d members, want 3: %+v", len(members), members)
	}
	if err := f.PutAndGet(ctx, ns, name, false, "/e2e/creating", "resumed", dataTimeout); err != nil {
		t.Error(err)
	}
}
