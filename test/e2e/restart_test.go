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
