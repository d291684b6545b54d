//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestUpgradeToAnImageThatCannotBePulledIsTakenBack asks for an etcd version
// whose image the node does not have and cannot pull. The patched member's
// container waits for its image; status.reason says so and names the member,
// the rollout halts with UpgradeFailed at the pending timeout, no other member
// is patched, and setting spec.version back patches the member back. Before,
// the rollout waited for every member to be Ready forever, the broken member
// included, with an empty reason.
func TestUpgradeToAnImageThatCannotBePulledIsTakenBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "badimage")
	installOperator(t, ns, framework.Install{PendingTimeout: 20 * time.Second})
	name := framework.UniqueName("badimage")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, ns, name, 3, bootstrapTimeout(3))
	if err := f.PutAndGet(ctx, ns, name, false, "/e2e/badimage", "kept", dataTimeout); err != nil {
		t.Fatal(err)
	}

	const missing = "3.5.99"
	if _, err := f.PatchClusterSpec(ctx, ns, name, map[string]any{"version": missing}); err != nil {
		t.Fatal(err)
	}
	err := framework.WaitFor(ctx, changeTimeout, framework.Poll, "status.reason to name the image the patched member waits for",
		func(ctx context.Context) (bool, string, error) {
			cl, err := f.GetCluster(ctx, ns, name)
			if err != nil {
				return false, "", nil
			}
			r := cl.Status.Reason
			return strings.Contains(r, "ErrImagePull") || strings.Contains(r, "ImagePullBackOff"), r, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	err = framework.WaitFor(ctx, changeTimeout, framework.Poll, "the rollout to halt with UpgradeFailed",
		func(ctx context.Context) (bool, string, error) {
			cl, err := f.GetCluster(ctx, ns, name)
			if err != nil {
				return false, "", nil
			}
			return strings.Contains(cl.Status.Reason, "upgrade to "+missing+" halted"), cl.Status.Reason, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := f.ClusterPods(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	patched := 0
	for _, p := range framework.LivePods(pods) {
		if framework.EtcdContainerImage(&p) == framework.EtcdImage(missing) {
			patched++
		}
	}
	if patched != 1 {
		t.Fatalf("%d members patched to %s, want exactly one: %s", patched, missing, framework.DescribePods(pods))
	}
	if err := f.ExpectValue(ctx, ns, name, false, "/e2e/badimage", "kept", dataTimeout); err != nil {
		t.Error(err)
	}

	if _, err := f.PatchClusterSpec(ctx, ns, name, map[string]any{"version": "3.5.21"}); err != nil {
		t.Fatal(err)
	}
	err = framework.WaitFor(ctx, upgradeTimeout, framework.Poll, "every member back on 3.5.21 and ready",
		framework.Both(f.PodsOnImage(ns, name, framework.EtcdImage("3.5.21"), 3), f.ReadyMembers(ns, name, 3), currentVersion(ns, name, "3.5.21")))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ExpectValue(ctx, ns, name, false, "/e2e/badimage", "kept", dataTimeout); err != nil {
		t.Error(err)
	}
	cl, err := f.GetCluster(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	// The one thing status.reason may still say is that the members share a
	// node, as they do on the one-node local cluster: advice that outlives
	// any upgrade.
	if r := cl.Status.Reason; r != "" && !strings.HasPrefix(r, "members are not spread:") {
		t.Errorf("status.reason = %q once the member is back", r)
	}
}

// TestDeletedServicesAreCreatedAgain deletes a running cluster's client and
// peer services: the operator creates them again at once (it used to remember
// that it had made them, and never looked again until it restarted).
func TestDeletedServicesAreCreatedAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("svc")
	createCluster(t, framework.NewCluster(name, 1, "3.5.21"))
	waitReady(t, opNS, name, 1, bootstrapTimeout(1))
	services := f.Kube.CoreV1().Services(opNS)
	for _, svc := range []string{name + "-client", name} {
		before, err := services.Get(ctx, svc, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := services.Delete(ctx, svc, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err = framework.WaitFor(ctx, time.Minute, framework.Poll, "service "+svc+" to be created again",
			func(ctx context.Context) (bool, string, error) {
				after, err := services.Get(ctx, svc, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return false, "not found", nil
				}
				if err != nil {
					return false, "", err
				}
				return after.UID != before.UID, fmt.Sprintf("uid %s", after.UID), nil
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/svc", "served", dataTimeout); err != nil {
		t.Error(err)
	}
}

// TestUpgradeTakenBackBeforeItHaltsHealsAtOnce asks for an etcd version whose
// image cannot be pulled and sets spec.version back as soon as status.reason
// names the pull failure, long before the operator's pending timeout (5
// minutes) would halt the rollout. The member is patched back within a
// minute, and status.reason names the image all along, never the clean exit
// of the etcd the kubelet stopped to change the image.
func TestUpgradeTakenBackBeforeItHaltsHealsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("takenback")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))

	const missing = "3.5.98"
	if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"version": missing}); err != nil {
		t.Fatal(err)
	}
	err := framework.WaitFor(ctx, changeTimeout, time.Second, "status.reason to name the image the patched member waits for",
		func(ctx context.Context) (bool, string, error) {
			cl, err := f.GetCluster(ctx, opNS, name)
			if err != nil {
				return false, "", nil
			}
			r := cl.Status.Reason
			if strings.Contains(r, "exit code 0") {
				return false, "", fmt.Errorf("status.reason names the clean exit of the replaced etcd: %q", r)
			}
			return strings.Contains(r, "ErrImagePull") || strings.Contains(r, "ImagePullBackOff") || strings.Contains(r, "has not run yet"), r, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"version": "3.5.21"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = framework.WaitFor(ctx, time.Minute, time.Second, "every member back on 3.5.21 and ready within a minute",
		framework.Both(f.PodsOnImage(opNS, name, framework.EtcdImage("3.5.21"), 3), f.ReadyMembers(opNS, name, 3)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: every member back on 3.5.21 and ready %.1fs after spec.version was set back", name, time.Since(start).Seconds())
}
