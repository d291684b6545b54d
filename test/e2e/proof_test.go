//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestMemberKilledOverALongLifeIsRestartedNotReplaced: a member's etcd
// container is killed (SIGKILL, exit 137, as the OOM killer does) three times
// while the operator is down, then once more while it runs: four restarts in
// the pod's life, more than the repair ladder's three. The kubelet restarts it
// in its pod each time; the ladder counts the restarts it saw within its
// window, not the container's restartCount over the pod's life, so the member
// keeps its ID, its pod and its claim, and a checker loses nothing.
func TestMemberKilledOverALongLifeIsRestartedNotReplaced(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "long-life")
	installOperator(t, ns, framework.Install{})
	name, pods := pvcCluster(t, ns, "life")
	before := memberIDs(t, ns, name)
	victim := pods[len(pods)-1]
	claimUID := claimUIDOf(t, ns, victim)

	underLoadPod(t, durableLoad(ns, name, "member-killed-over-a-long-life-pvc", 60*time.Second), func(ctx context.Context) {
		// The restarts of a long life: the operator does not see them.
		stopOperator(ctx, t, ns)
		for range 3 {
			killEtcdContainer(t, ns, victim)
		}
		if err := f.ScaleDeployment(ctx, ns, framework.OperatorDeployment, 1); err != nil {
			t.Fatal(err)
		}
		if err := f.WaitDeploymentReady(ctx, ns, framework.OperatorDeployment, 1, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		// One more, with the operator watching: the kubelet's back-off now
		// keeps the container down long enough for passes to see it crash.
		killEtcdContainer(t, ns, victim)
		waitReady(t, ns, name, 3, changeTimeout)
	})
	sameMembers(t, before, memberIDs(t, ns, name))
	if uid := claimUIDOf(t, ns, victim); uid != claimUID {
		t.Errorf("claim %s was deleted and made again (uid %s, was %s): the member's data was thrown away", victim, uid, claimUID)
	}
	if events := eventsOf(t, ns, name); strings.Contains(events, "Replacing Dead Member") {
		t.Errorf("a member was replaced; events:\n%s", events)
	}
}

// killEtcdContainer kills member pod's etcd container with SIGKILL through
// containerd, as the OOM killer would, and waits until the kubelet has
// restarted it and the pod is Ready again.
func killEtcdContainer(t *testing.T, ns, pod string) {
	t.Helper()
	ctx := t.Context()
	p, err := f.Kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := k8sutil.EtcdContainerStatus(p)
	if st == nil || st.ContainerID == "" {
		t.Fatalf("pod %s has no etcd container to kill", pod)
	}
	restarts := st.RestartCount
	id := strings.TrimPrefix(st.ContainerID, "containerd://")
	if out, err := f.Run(ctx, framework.Cmd{Name: "ctr", Args: []string{"--address", "/run/containerd/containerd.sock", "--namespace", "k8s.io",
		"tasks", "kill", "--signal", "SIGKILL", id}}); err != nil {
		t.Fatalf("kill the etcd container of %s: %v: %s", pod, err, out)
	}
	err = framework.WaitFor(ctx, 3*time.Minute, framework.Poll, fmt.Sprintf("pod %s restarted by the kubelet and Ready", pod), func(ctx context.Context) (bool, string, error) {
		p, err := f.Kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		st := k8sutil.EtcdContainerStatus(p)
		if st == nil || st.RestartCount <= restarts || !k8sutil.IsPodReady(p) {
			return false, fmt.Sprintf("restarts %d, ready %v", restartsOf(st), k8sutil.IsPodReady(p)), nil
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func claimUIDOf(t *testing.T, ns, name string) string {
	t.Helper()
	pvc, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(pvc.UID)
}

func restartsOf(st *corev1.ContainerStatus) int32 {
	if st == nil {
		return 0
	}
	return st.RestartCount
}

// TestPodStuckTerminatingHoldsBackOnlyItsMember: one member's pod stays
// Terminating (a finalizer holds it, as a node that never confirms the
// deletion would), and a second member's pod is deleted: the quorum is lost.
// The second member is restarted in place on its claim while the first pod
// stays stuck, the quorum comes back, status.reason names the stuck pod, and
// the first member comes back once its pod is gone. A checker loses nothing.
func TestPodStuckTerminatingHoldsBackOnlyItsMember(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "stuck-pod")
	installOperator(t, ns, framework.Install{})
	name, pods := pvcCluster(t, ns, "stuck")
	before := memberIDs(t, ns, name)
	stuck, gone := pods[0], pods[1]
	const hold = "e2e.etcd.database.coreos.com/hold"

	underLoadPod(t, durableLoad(ns, name, "pod-stuck-terminating-pvc", 60*time.Second), func(ctx context.Context) {
		patch := fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, hold)
		if _, err := f.Kube.CoreV1().Pods(ns).Patch(ctx, stuck, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { releasePod(t, ns, stuck) })
		if err := f.Kube.CoreV1().Pods(ns).Delete(ctx, stuck, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
			t.Fatal(err)
		}
		// Past its deletion deadline and the operator's grace for it, the
		// pod counts as stuck: its member as gone, its name not free.
		pause(t, 40*time.Second)
		if err := f.KillPod(ctx, ns, gone); err != nil {
			t.Fatal(err)
		}
		// The stuck member stays a member, listed unready; the other two
		// serve, and status.reason says what holds the third back.
		err := framework.WaitFor(ctx, changeTimeout, framework.Poll, "the two other members ready and status.reason naming the stuck pod", func(ctx context.Context) (bool, string, error) {
			cl, err := f.GetCluster(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			m := cl.Status.Members
			served := len(m.Ready) == 2 && !slices.Contains(m.Ready, stuck) && slices.Equal(m.Unready, []string{stuck})
			return served && strings.Contains(cl.Status.Reason, "pod "+stuck+" has been terminating since"), framework.DescribeStatus(cl), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		releasePod(t, ns, stuck)
		waitReady(t, ns, name, 3, changeTimeout)
	})
	sameMembers(t, before, memberIDs(t, ns, name))
}

// releasePod removes the finalizers that hold a pod, if it is still there.
func releasePod(t *testing.T, ns, pod string) {
	t.Helper()
	_, err := f.Kube.CoreV1().Pods(ns).Patch(context.WithoutCancel(t.Context()), pod, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("release pod %s: %v", pod, err)
	}
}
