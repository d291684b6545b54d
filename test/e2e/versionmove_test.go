//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestMoveTo36FromAnOld35IsRefusedWithWhatToDo asks a 3.5.21 cluster for
// 3.6.6. etcd's 3.6 upgrade guide wants 3.5.32 or later first: the operator
// refuses before patching anything, says so in status.reason with what to do,
// and the cluster keeps running 3.5.21. Before, the first member patched
// could stop on 3.6 and the rollout halted after the fact.
func TestMoveTo36FromAnOld35IsRefusedWithWhatToDo(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("to36")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"version": "3.6.6"}); err != nil {
		t.Fatal(err)
	}
	err := framework.WaitFor(ctx, time.Minute, framework.Poll, "the move to 3.6.6 to be refused with what to do",
		func(ctx context.Context) (bool, string, error) {
			cl, err := f.GetCluster(ctx, opNS, name)
			if err != nil {
				return false, "", nil
			}
			r := cl.Status.Reason
			return strings.Contains(r, "upgrade refused") && strings.Contains(r, "3.5.32"), r, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.Holds(ctx, 15*time.Second, framework.Poll, "no member patched", f.PodsOnImage(opNS, name, framework.EtcdImage("3.5.21"), 3)); err != nil {
		t.Error(err)
	}
}

// TestDowngradeFrom36To35 moves a 3.6 cluster back to 3.5 through etcd's
// downgrade API: the operator enables the downgrade, waits for the cluster
// version to drop, then patches the members one at a time, the leader last;
// the data stays.
func TestDowngradeFrom36To35(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("down")
	createCluster(t, framework.NewCluster(name, 3, "3.6.6"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/down", "kept", dataTimeout); err != nil {
		t.Fatal(err)
	}
	if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"version": "3.5.35"}); err != nil {
		t.Fatal(err)
	}
	err := framework.WaitFor(ctx, upgradeTimeout, framework.Poll, "every member on 3.5.35",
		framework.Both(f.PodsOnImage(opNS, name, framework.EtcdImage("3.5.35"), 3), f.ReadyMembers(opNS, name, 3), currentVersion(opNS, name, "3.5.35")))
	if err != nil {
		t.Fatal(err)
	}
	waitClusterVersion(t, opNS, name, "3.5.0")
	if err := f.ExpectValue(ctx, opNS, name, false, "/e2e/down", "kept", dataTimeout); err != nil {
		t.Error(err)
	}
	if !strings.Contains(eventsOf(t, opNS, name), "DowngradeEnabled") {
		t.Error("no DowngradeEnabled event")
	}
}

// TestDowngradeFrom37To36UnderLoad moves a 3.7 cluster back to a current 3.6
// release through etcd's downgrade API while the checker writes and reads
// through the client Service: the cluster version drops to 3.6, every member
// ends on the 3.6 image, the data stays and no acknowledged write is lost.
func TestDowngradeFrom37To36UnderLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("down37")
	createCluster(t, framework.NewCluster(name, 3, "3.7.3"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/down37", "kept", dataTimeout); err != nil {
		t.Fatal(err)
	}
	underLoad(t, opNS, name, "downgrade-3.7-to-3.6", 2*time.Minute, func(ctx context.Context) {
		if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"version": "3.6.16"}); err != nil {
			t.Fatal(err)
		}
		err := framework.WaitFor(ctx, upgradeTimeout, framework.Poll, "every member on 3.6.16",
			framework.Both(f.PodsOnImage(opNS, name, framework.EtcdImage("3.6.16"), 3), f.ReadyMembers(opNS, name, 3), currentVersion(opNS, name, "3.6.16")))
		if err != nil {
			t.Fatal(err)
		}
	})
	waitClusterVersion(t, opNS, name, "3.6.0")
	if err := f.ExpectValue(ctx, opNS, name, false, "/e2e/down37", "kept", dataTimeout); err != nil {
		t.Error(err)
	}
	if !strings.Contains(eventsOf(t, opNS, name), "DowngradeEnabled") {
		t.Error("no DowngradeEnabled event")
	}
}
