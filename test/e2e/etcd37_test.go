//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestEtcd37UpgradeScaleAndRestartUnderLoad takes a cluster of the newest 3.6
// through what users do with 3.7 under the linearizability checker: the move
// to 3.7, a scale-up through 3.7's learners and a member killed and back. 3.7
// refuses the flags 3.6 pods were created with, so the move replaces each
// member (a new one on 3.7 first, then the old one removed) instead of
// patching its image. No acknowledged write may be lost, and the data written
// before stays.
func TestEtcd37UpgradeScaleAndRestartUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("etcd37")
	createCluster(t, framework.NewCluster(name, 3, newest36))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/etcd37", "written by "+newest36, dataTimeout); err != nil {
		t.Fatal(err)
	}
	step := func(what string, t0 time.Time) {
		t.Logf("%s: %.1fs", what, time.Since(t0).Seconds())
	}
	underLoad(t, opNS, name, "etcd-3.7-lifecycle", 2*time.Minute, func(ctx context.Context) {
		t0 := time.Now()
		if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"version": newest37}); err != nil {
			t.Fatal(err)
		}
		err := framework.WaitFor(ctx, upgradeTimeout, framework.Poll, "every member on "+newest37,
			framework.Both(f.PodsOnImage(opNS, name, framework.EtcdImage(newest37), 3), f.ReadyMembers(opNS, name, 3), currentVersion(opNS, name, newest37)))
		if err != nil {
			t.Fatal(err)
		}
		waitClusterVersion(t, opNS, name, "3.7.0")
		step("upgrade to "+newest37, t0)

		t0 = time.Now()
		if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"size": 5}); err != nil {
			t.Fatal(err)
		}
		_, members := waitReady(t, opNS, name, 5, changeTimeout)
		step("scale 3 → 5 on "+newest37, t0)

		t0 = time.Now()
		if err := f.KillPod(ctx, opNS, members[0]); err != nil {
			t.Fatal(err)
		}
		waitReady(t, opNS, name, 5, changeTimeout)
		step("member killed and back on "+newest37, t0)

	})
	if err := f.ExpectValue(ctx, opNS, name, false, "/e2e/etcd37", "written by "+newest36, dataTimeout); err != nil {
		t.Error(err)
	}
	members, err := f.MemberList(ctx, opNS, name, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.IsLearner {
			t.Errorf("member %s is still a learner", m.Name)
		}
	}
}
