//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestChartInstallRunsAClusterThatKubectlScales installs the three operators
// with the Helm chart (example/chart) the way docs/user-guide/install.md does,
// runs a cluster with them, scales it with `kubectl scale` (the scale
// subresource), checks the JSON log format, and uninstalls the release.
func TestChartInstallRunsAClusterThatKubectlScales(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("this test installs the chart with helm and $HELM is not set: run it through hack/e2e.sh, or HELM=$(bash hack/tools.sh helm)")
	}
	ns := newNamespace(t, "chart")
	release := "e2e-" + ns

	// Other tests' operators install the CRDs themselves (--create-crd=true), and
	// Helm refuses to take over objects another release or tool made: apply
	// example/crd/ (the chart's), and install with crds.install=false, as
	// docs/user-guide/helm.md says to when the CRDs come from elsewhere.
	if _, err := f.Kubectl(ctx, "apply", "-f", f.Env.Path("example", "crd")+"/"); err != nil {
		t.Fatal(err)
	}
	args := []string{"install", release, f.Env.Path("example", "chart"), "--namespace", ns, "--set", "logFormat=json,crds.install=false"}
	if img := f.Env.OperatorImage; img != "" {
		i := strings.LastIndex(img, ":")
		if i < strings.LastIndex(img, "/") {
			t.Fatalf("E2E_OPERATOR_IMAGE %q has no tag", img)
		}
		args = append(args, "--set", "image.repository="+img[:i]+",image.tag="+img[i+1:])
	}
	if _, err := f.Run(ctx, framework.Cmd{Name: helm, Args: args}); err != nil {
		t.Fatal(err)
	}
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			_, _ = f.Run(t.Context(), framework.Cmd{Name: helm, Args: []string{"uninstall", release, "--namespace", ns}})
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

	if _, err := f.Run(ctx, framework.Cmd{Name: helm, Args: []string{"uninstall", release, "--namespace", ns, "--wait"}}); err != nil {
		t.Fatal(err)
	}
	uninstalled = true
	if out, err := f.Kubectl(ctx, "get", "deployments,serviceaccounts,roles,rolebindings", "-n", ns,
		"-l", "app.kubernetes.io/instance="+release, "-o", "name"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("left behind by helm uninstall (err %v): %s", err, out)
	}
}
