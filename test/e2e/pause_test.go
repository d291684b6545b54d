//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// pauseHold is how long a paused cluster must stay as it was left. The operator
// reacts to pod events within a second and ticks every 8 s, so 10 s (the original
// suite's figure) covers both.
const pauseHold = 10 * time.Second

// TestPausedClusterIsLeftAloneUntilUnpaused is the original's TestPauseControl: a
// member killed while the cluster is paused is not replaced until it is unpaused.
func TestPausedClusterIsLeftAloneUntilUnpaused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("pause")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))

	cl, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"paused": true})
	if err != nil {
		t.Fatal(err)
	}
	// Kill only once the operator has seen the pause; otherwise the test would race it.
	err = framework.WaitFor(ctx, 30*time.Second, framework.Poll, "status.controlPaused and observedGeneration of the paused spec",
		func(ctx context.Context) (bool, string, error) {
			got, err := f.GetCluster(ctx, opNS, name)
			if err != nil {
				return false, err.Error(), nil
			}
			return got.Status.ControlPaused && got.Status.ObservedGeneration >= cl.Generation, framework.DescribeStatus(got), nil
		})
	if err != nil {
		t.Fatal(err)
	}

	victim := pods[0]
	if err := f.KillPod(ctx, opNS, victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s while paused", victim)
	err = framework.Holds(ctx, pauseHold, framework.Poll, "no pod to replace "+victim,
		func(ctx context.Context) (bool, string, error) {
			all, err := f.ClusterPods(ctx, opNS, name)
			if err != nil {
				return true, "", nil // a failed list proves nothing either way
			}
			live := framework.LivePods(all)
			for _, p := range live {
				if p.Name == victim {
					return false, "the killed pod is still live: " + framework.DescribePods(all), nil
				}
			}
			return len(live) == 2, fmt.Sprintf("%d live pods: %s", len(live), framework.DescribePods(all)), nil
		})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"paused": false}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, opNS, name, 3, changeTimeout, victim)
}
