//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/openetcd/etcd-operator/pkg/operatorrun"
	"github.com/openetcd/etcd-operator/pkg/restore"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// rolloutTimeout bounds one operator Deployment's rolling update: the new pod
// starting and becoming Ready as a standby, the old one shutting down (its
// workers get up to 20 s) and releasing its lock, the new one leading.
const rolloutTimeout = 2 * time.Minute

// rollChange is a change of an operator Deployment's pod template, as an
// upgrade makes one.
type rollChange struct {
	what string
	args func(deployment string) []string
}

var (
	// rolloutRestart is what `kubectl rollout restart` does: a new revision
	// of the same pods, as a new image makes.
	rolloutRestart = rollChange{"kubectl rollout restart", func(d string) []string {
		return []string{"rollout", "restart", "deployment/" + d}
	}}
	// newImage moves every container of the pod to the operator image's
	// second tag, which hack/local-cluster/load-image.sh gives it: a new
	// image as the kubelet sees one, as an upgrade of the operator brings.
	newImage = rollChange{"a new image (the operator image's second tag)", func(d string) []string {
		return []string{"set", "image", "deployment/" + d, "*=" + nextOperatorImage()}
	}}
	// newFlag adds a flag to the operator's command, as an upgrade of the
	// manifests does.
	newFlag = rollChange{"a new flag (--log-level=debug)", func(d string) []string {
		return []string{"patch", "deployment/" + d, "--type=json", "-p",
			`[{"op":"add","path":"/spec/template/spec/containers/0/command/-","value":"--log-level=debug"}]`}
	}}
)

// TestOperatorsRollWhileAClusterScales rolls each of the three operator
// Deployments of the example manifests (a new revision, a new image, then a
// new flag) while their cluster scales 3 → 5 → 3 → 5 under the checker. Each rollout must
// complete within rolloutTimeout: the new pod Ready, the old one gone, the
// new one the only pod labelled the leader (the restore operator's Service
// selecting it alone). The cluster must end at its size with a linearizable
// history and no acknowledged write lost.
func TestOperatorsRollWhileAClusterScales(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "rollout")
	installOperator(t, ns, framework.Install{})
	deployExampleOperator(t, ns, f.Env.Path("example", "etcd-backup-operator", "deployment.yaml"))
	deployExampleOperator(t, ns, f.Env.Path("example", "etcd-restore-operator", "deployment.yaml"))
	deployments := []string{framework.OperatorDeployment, "etcd-backup-operator", restoreOperatorDeployment}
	for _, d := range deployments {
		waitOnlyLeaderLabelled(t, ns, d, nil)
	}

	name := framework.UniqueName("rollout")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, ns, name, 3, bootstrapTimeout(3))
	underLoad(t, ns, name, "operator-rollout", 3*time.Minute, func(ctx context.Context) {
		for i, change := range []rollChange{rolloutRestart, newImage, newFlag} {
			size := []int{5, 3, 5}[i]
			if _, err := f.PatchClusterSpec(ctx, ns, name, map[string]any{"size": size}); err != nil {
				t.Fatal(err)
			}
			t.Logf("scaling %s to %d; rolling the operators: %s", name, size, change.what)
			// The etcd-operator first, while the scale is under way.
			for _, d := range deployments {
				rollOperator(t, ns, d, change)
			}
			waitReady(t, ns, name, size, changeTimeout)
		}
	})
}

// rollOperator changes deployment's pod template and waits, within
// rolloutTimeout, for the rollout to complete: one live pod, Ready, none of
// the old ones left, and the new one the only pod labelled the leader.
func rollOperator(t *testing.T, ns, deployment string, change rollChange) {
	t.Helper()
	ctx := t.Context()
	before, err := f.DeploymentPods(ctx, ns, deployment)
	if err != nil {
		t.Fatal(err)
	}
	old := map[types.UID]bool{}
	for _, p := range before {
		old[p.UID] = true
	}
	start := time.Now()
	if _, err := f.Kubectl(ctx, append([]string{"-n", ns}, change.args(deployment)...)...); err != nil {
		t.Fatalf("%s of %s: %v", change.what, deployment, err)
	}
	if _, err := f.Kubectl(ctx, "-n", ns, "rollout", "status", "deployment/"+deployment, "--timeout="+rolloutTimeout.String()); err != nil {
		t.Fatalf("the rollout of %s (%s) did not complete within %v: %v\n%s", deployment, change.what, rolloutTimeout, err,
			lastLines(f.DeploymentLogs(ctx, ns, deployment), 60))
	}
	err = framework.WaitFor(ctx, rolloutTimeout-time.Since(start), framework.Poll, "the old pods of "+deployment+" gone and its new pod Ready",
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.DeploymentPods(ctx, ns, deployment)
			if err != nil {
				return false, err.Error(), nil
			}
			for _, p := range pods {
				if old[p.UID] {
					return false, "old pod " + p.Name + " still there: " + framework.DescribePods(pods), nil
				}
			}
			return len(pods) == 1 && len(framework.ReadyPods(pods)) == 1, framework.DescribePods(pods), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	waitOnlyLeaderLabelled(t, ns, deployment, old)
	t.Logf("rolled %s (%s) in %.1fs", deployment, change.what, time.Since(start).Seconds())
}

// waitOnlyLeaderLabelled waits until exactly one pod of deployment, none of
// old, carries the leader label, and, for the restore operator, its backup
// Service selects that pod alone.
func waitOnlyLeaderLabelled(t *testing.T, ns, deployment string, old map[types.UID]bool) {
	t.Helper()
	err := framework.WaitFor(t.Context(), rolloutTimeout, framework.Poll, "one pod of "+deployment+" labelled the leader",
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.DeploymentPods(ctx, ns, deployment)
			if err != nil {
				return false, err.Error(), nil
			}
			var leaders []corev1.Pod
			for _, p := range pods {
				if p.Labels[operatorrun.LeaderLabel] == "true" {
					leaders = append(leaders, p)
				}
			}
			if len(leaders) != 1 || old[leaders[0].UID] {
				return false, fmt.Sprintf("labelled the leader: %s; pods: %s", podNames(leaders), framework.DescribePods(pods)), nil
			}
			if deployment != restoreOperatorDeployment {
				return true, "", nil
			}
			svc, err := f.Kube.CoreV1().Services(ns).Get(ctx, restore.ServiceName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			sel := labels.SelectorFromSet(svc.Spec.Selector)
			var selected []corev1.Pod
			for _, p := range pods {
				if sel.Matches(labels.Set(p.Labels)) {
					selected = append(selected, p)
				}
			}
			ok := len(selected) == 1 && selected[0].UID == leaders[0].UID
			return ok, fmt.Sprintf("Service %s (selector %v) selects %s; the leader is %s", restore.ServiceName, sel, podNames(selected), leaders[0].Name), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

func podNames(pods []corev1.Pod) string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return "[" + strings.Join(names, " ") + "]"
}
