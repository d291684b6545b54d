//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestChartInstallRunsAClusterThatKubectlScales installs the three operators
// with the Helm chart (example/chart) the way docs/user-guide/install.md does,
// runs a cluster with them, scales it with `kubectl scale` (the scale
// subresource), checks the JSON log format, and uninstalls the release.
func TestChartInstallRunsAClusterThatKubectlScales(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "chart")
	release := "e2e-" + ns

	applyChartCRDs(t)
	uninstalled := false
	helmRun(t, "install", release, f.Env.Path("example", "chart"), "--namespace", ns, "--set", "logFormat=json,crds.install=false", imageValues(operatorImage()))
	t.Cleanup(func() {
		if !uninstalled {
			_, _ = f.Run(context.WithoutCancel(t.Context()), framework.Cmd{Name: helmBinary(t), Args: []string{"uninstall", release, "--namespace", ns}})
		}
	})
	// The chart names its objects after the release: "<release>-etcd-operator-<operator>".
	for _, key := range []string{"cluster", "backup", "restore"} {
		if err := f.WaitDeploymentReady(ctx, ns, release+"-etcd-operator-"+key, 1, framework.OperatorReadyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	logs, err := f.Kubectl(ctx, "logs", "-n", ns, "deployment/"+release+"-etcd-operator-cluster")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil || line["msg"] == nil {
			t.Errorf("-log-format=json: an operator log line is not JSON with a msg: %q", l)
			break
		}
	}

	name := framework.UniqueName("chart")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 1, "3.5.21"))
	waitReady(t, ns, name, 1, bootstrapTimeout(1))

	if _, err := f.Kubectl(ctx, "scale", "-n", ns, "etcd/"+name, "--replicas=3"); err != nil {
		t.Fatal(err)
	}
	cl, _ := waitReady(t, ns, name, 3, bootstrapTimeout(2))
	if cl.Spec.Size != 3 || cl.Status.Selector != "app=etcd,etcd_cluster="+name {
		t.Errorf("after kubectl scale: spec.size %d, status.selector %q", cl.Spec.Size, cl.Status.Selector)
	}
	if out, err := f.Kubectl(ctx, "scale", "-n", ns, "etcd/"+name, "--replicas=9"); err == nil {
		t.Errorf("kubectl scale --replicas=9 was accepted beyond the schema's 7: %s", out)
	}
	if err := f.PutAndGet(ctx, ns, name, false, "/e2e/chart", "ok", dataTimeout); err != nil {
		t.Fatal(err)
	}

	helmRun(t, "uninstall", release, "--namespace", ns, "--wait")
	uninstalled = true
	if out, err := f.Kubectl(ctx, "get", "deployments,serviceaccounts,roles,rolebindings", "-n", ns,
		"-l", "app.kubernetes.io/instance="+release, "-o", "name"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("left behind by helm uninstall (err %v): %s", err, out)
	}
}

// helmBinary is the helm that hack/e2e.sh built.
func helmBinary(t *testing.T) string {
	t.Helper()
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("this test runs helm and $HELM is not set: run it through hack/e2e.sh, or HELM=$(bash hack/tools.sh helm)")
	}
	return helm
}

// helmRun runs helm with args and returns what it printed.
func helmRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := f.Run(t.Context(), framework.Cmd{Name: helmBinary(t), Args: args})
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// imageValues is the --set value that runs the operators from image.
func imageValues(image string) string {
	i := strings.LastIndex(image, ":")
	if i < strings.LastIndex(image, "/") || i < 0 {
		panic("the operator image " + image + " has no tag")
	}
	return "--set=image.repository=" + image[:i] + ",image.tag=" + image[i+1:]
}

// applyChartCRDs applies example/crd/ (the chart's CRDs). Other tests'
// operators install the CRDs themselves (--create-crd=true), and Helm refuses
// to take over objects another release or tool made: the chart tests install
// with crds.install=false, as docs/user-guide/helm.md says to when the CRDs
// come from elsewhere.
func applyChartCRDs(t *testing.T) {
	t.Helper()
	if _, err := f.Kubectl(t.Context(), "apply", "-f", f.Env.Path("example", "crd")+"/"); err != nil {
		t.Fatal(err)
	}
}

// TestHelmUpgradeWaitsForTheNewOperatorsWhileAClusterScales installs the
// chart as a release packages it (helm package, then the .tgz) with
// `--wait` and two replicas of every operator, then upgrades the release
// to a new image and a new flag with `helm upgrade --wait` while its
// cluster scales 3 → 5 under the checker. Both helm commands must return
// (the standbys Ready, the rollouts complete) with every pod on the new
// image, exactly one leader labelled per operator, and the cluster at its
// size with a linearizable history and no acknowledged write lost.
func TestHelmUpgradeWaitsForTheNewOperatorsWhileAClusterScales(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "helmup")
	release := "up-" + ns
	applyChartCRDs(t)
	dir := t.TempDir()
	helmRun(t, "package", f.Env.Path("example", "chart"), "--destination", dir)
	packaged, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil || len(packaged) != 1 {
		t.Fatalf("helm package wrote %v (%v), want one .tgz", packaged, err)
	}
	replicas := "operators.cluster.replicas=2,operators.backup.replicas=2,operators.restore.replicas=2,crds.install=false"
	start := time.Now()
	helmRun(t, "install", release, packaged[0], "--namespace", ns, "--wait", "--timeout=4m", "--set", replicas, imageValues(operatorImage()))
	t.Logf("helm install --wait with two replicas each returned in %.1fs", time.Since(start).Seconds())
	t.Cleanup(func() {
		_, _ = f.Run(context.WithoutCancel(t.Context()), framework.Cmd{Name: helmBinary(t), Args: []string{"uninstall", release, "--namespace", ns, "--wait"}})
	})
	deployments := []string{release + "-etcd-operator-cluster", release + "-etcd-operator-backup", release + "-etcd-operator-restore"}
	for _, d := range deployments {
		waitPodsOn(t, ns, d, 2, operatorImage())
		waitOnlyLeaderLabelled(t, ns, d, nil)
	}

	name := framework.UniqueName("helmup")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, ns, name, 3, bootstrapTimeout(3))
	underLoad(t, ns, name, "helm-upgrade", 2*time.Minute, func(ctx context.Context) {
		if _, err := f.PatchClusterSpec(ctx, ns, name, map[string]any{"size": 5}); err != nil {
			t.Fatal(err)
		}
		old := map[types.UID]bool{}
		for _, d := range deployments {
			pods, err := f.DeploymentPods(ctx, ns, d)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods {
				old[p.UID] = true
			}
		}
		start := time.Now()
		helmRun(t, "upgrade", release, packaged[0], "--namespace", ns, "--wait", "--timeout=6m", "--reuse-values",
			"--set", "logLevel=debug", imageValues(nextOperatorImage()))
		t.Logf("helm upgrade --wait to a new image and a new flag returned in %.1fs while %s scaled to 5", time.Since(start).Seconds(), name)
		for _, d := range deployments {
			waitPodsOn(t, ns, d, 2, nextOperatorImage())
			waitOnlyLeaderLabelled(t, ns, d, old)
		}
		waitReady(t, ns, name, 5, changeTimeout)
	})
}

// waitPodsOn waits until deployment has n live pods, all Ready and all
// running image.
func waitPodsOn(t *testing.T, ns, deployment string, n int, image string) {
	t.Helper()
	err := framework.WaitFor(t.Context(), rolloutTimeout, framework.Poll, fmt.Sprintf("%d Ready pods of %s on %s", n, deployment, image),
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.DeploymentPods(ctx, ns, deployment)
			if err != nil {
				return false, err.Error(), nil
			}
			for _, p := range pods {
				if p.Spec.Containers[0].Image != image {
					return false, p.Name + " runs " + p.Spec.Containers[0].Image, nil
				}
			}
			return len(pods) == n && len(framework.ReadyPods(pods)) == n, framework.DescribePods(pods), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}
