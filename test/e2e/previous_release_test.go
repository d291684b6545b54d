//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/crds"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// The upgrade of the three operators from the previous release (the version
// and commit hack/previous-release records) to this tree, as a user of the
// example manifests upgrades: that release's manifests and image first, then
// this tree's applied over them. hack/previous-release.sh builds that
// release's image from its commit and extracts its manifests.

// exampleOperators are the three operators' Deployments and the example
// manifests they are made from, in a release's tree.
var exampleOperators = []struct{ deployment, file string }{
	{framework.OperatorDeployment, filepath.Join("example", "deployment.yaml")},
	{"etcd-backup-operator", filepath.Join("example", "etcd-backup-operator", "deployment.yaml")},
	{restoreOperatorDeployment, filepath.Join("example", "etcd-restore-operator", "deployment.yaml")},
}

// exampleImage is the image line of the example Deployments.
var exampleImage = regexp.MustCompile(`(?m)^([ \t]*image: )openetcd/etcd-operator:\S+$`)

// previousRelease is the release before this tree as hack/previous-release.sh
// made it: its source tree (whose example/ the test installs) and its image,
// imported into the cluster.
type previousRelease struct {
	version, commit, tree, image string
}

// loadPreviousRelease runs hack/previous-release.sh --load, which builds the
// previous release's image from its commit (minutes the first time, then
// cached) and imports it into the cluster, and reads what it printed.
func loadPreviousRelease(t *testing.T) previousRelease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", f.Env.Path("hack", "previous-release.sh"), "--load")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	t.Logf("hack/previous-release.sh --load (%.0fs):\n%s", time.Since(start).Seconds(), lastLines(stderr.String(), 40))
	if err != nil {
		t.Fatalf("hack/previous-release.sh --load: %v", err)
	}
	said := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			said[k] = v
		}
	}
	rel := previousRelease{version: said["version"], commit: said["commit"], tree: said["tree"], image: said["image"]}
	if rel.version == "" || rel.commit == "" || rel.tree == "" || rel.image == "" {
		t.Fatalf("hack/previous-release.sh printed %q, want version, commit, tree and image", stdout.String())
	}
	if rel.image == operatorImage() {
		t.Fatalf("the previous release's image %s is this tree's: the upgrade would change nothing on the node", rel.image)
	}
	return rel
}

// installPreviousRelease installs rel's three operators in ns as its install
// guide said: its create_role.sh for the namespace's default service account,
// then `kubectl create -f` of each example Deployment, on rel's image. Each
// operator installs its release's CRD at start (--create-crd=true). It waits
// for one Ready pod of each on rel's image, labelled the leader, and returns
// the name of the ClusterRole and binding, which it removes at the end.
func installPreviousRelease(t *testing.T, ns string, rel previousRelease) string {
	t.Helper()
	ctx := t.Context()
	op := &framework.Operator{Namespace: ns, RBACName: "e2e-" + ns}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := op.Uninstall(ctx, f); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	createRole(t, filepath.Join(rel.tree, "example", "rbac", "create_role.sh"), ns, op.RBACName)
	for _, o := range exampleOperators {
		t.Cleanup(func() {
			if t.Failed() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				t.Logf("======== %s log\n%s", o.deployment, lastLines(f.DeploymentLogs(ctx, ns, o.deployment), 120))
			}
		})
		if err := f.CreateFromExample(ctx, ns, filepath.Join(rel.tree, o.file), "s|image: openetcd/etcd-operator:.*|image: "+rel.image+"|"); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range exampleOperators {
		waitPodsOn(t, ns, o.deployment, 1, rel.image)
		waitOnlyLeaderLabelled(t, ns, o.deployment, nil)
	}
	return op.RBACName
}

// createRole runs a release's example/rbac/create_role.sh for the default
// service account of ns, with the ClusterRole and binding named rbacName.
func createRole(t *testing.T, script, ns, rbacName string) {
	t.Helper()
	args := []string{script, "--namespace=" + ns, "--role-name=" + rbacName, "--role-binding-name=" + rbacName}
	if _, err := f.Run(t.Context(), framework.Cmd{Name: "bash", Args: args}); err != nil {
		t.Fatalf("%s: %v", script, err)
	}
}

// applyThisRelease upgrades the operators of ns to this tree as
// docs/user-guide/install.md#upgrading-the-operator says: this tree's
// create_role.sh again, with the names of the install, then `kubectl apply`
// of the three example Deployments, on this tree's image.
func applyThisRelease(ctx context.Context, t *testing.T, ns, rbacName string) {
	t.Helper()
	createRole(t, f.Env.Path("example", "rbac", "create_role.sh"), ns, rbacName)
	var docs []string
	for _, o := range exampleOperators {
		raw, err := os.ReadFile(f.Env.Path(o.file))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(exampleImage.FindAll(raw, -1)); n != 1 {
			t.Fatalf("%s has %d lines naming the operator image, want one: the example changed, update the test", o.file, n)
		}
		docs = append(docs, exampleImage.ReplaceAllString(string(raw), "${1}"+operatorImage()))
	}
	if _, err := f.KubectlStdin(ctx, strings.Join(docs, "\n---\n"), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("kubectl apply of this tree's example Deployments: %v", err)
	}
}

// TestUpgradeFromThePreviousReleaseWhileAClusterScales installs the previous
// release's three operators from its own manifests and image, and under them
// a 3-member cluster and a periodic EtcdBackup. Then, while the cluster
// scales 3 → 5 under the checker, this tree's create_role.sh and example
// Deployments are applied over them, as a user upgrades. Each Deployment must
// roll to this tree's image with one pod labelled the leader; the upgraded
// operators must put this tree's CRDs in place; the scale must complete, and
// the member pods the previous release made must still run, the same pods:
// this operator replaces only member pods that never served or are stuck,
// so an upgrade of the operator alone restarts no member. The upgraded backup
// operator must take the next periodic backup, and the upgraded etcd-operator
// must then scale the cluster back to 3. The history must be linearizable
// with no acknowledged write lost.
//
// Not parallel: the previous release's operators install its CRDs, which are
// cluster-wide, over this tree's (the upgraded ones, and the end of the test,
// put this tree's back). make e2e-upgrade runs it alone.
func TestUpgradeFromThePreviousReleaseWhileAClusterScales(t *testing.T) {
	rel := loadPreviousRelease(t)
	t.Logf("upgrading from %s (commit %s, image %s) to this tree (image %s)", rel.version, rel.commit, rel.image, operatorImage())
	ns := newNamespace(t, "prevrel")
	putBackCRDsAtEnd(t)
	dumpOnFailure(t, ns)
	rbacName := installPreviousRelease(t, ns, rel)
	logCRDsDiffer(t, rel.version)

	bucket := "prevrel"
	srv := startS3Server(t, bucket)
	secret := createS3Secret(t, ns, srv)

	name := framework.UniqueName("prevrel")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, ns, name, 3, bootstrapTimeout(3))
	made := memberPods(t, ns, name)

	backup := createBackupIn(t, ns, &api.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-periodic"},
		Spec: api.BackupSpec{
			EtcdEndpoints: []string{framework.ClientURL(name, false)},
			StorageType:   api.BackupStorageTypeS3,
			BackupPolicy:  &api.BackupPolicy{BackupIntervalInSecond: 10, MaxBackups: 2},
			BackupSource: api.BackupSource{S3: &api.S3BackupSource{
				Path: bucket + "/" + name, AWSSecret: secret, Endpoint: srv.Endpoint, ForcePathStyle: true,
			}},
		},
	})
	waitBackupStoredAfter(t, ns, backup.Name, time.Time{}, rel.version)

	underLoad(t, ns, name, "previous-release-upgrade", 5*time.Minute, func(ctx context.Context) {
		if _, err := f.PatchClusterSpec(ctx, ns, name, map[string]any{"size": 5}); err != nil {
			t.Fatal(err)
		}
		old := map[types.UID]bool{}
		for _, o := range exampleOperators {
			pods, err := f.DeploymentPods(ctx, ns, o.deployment)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods {
				old[p.UID] = true
			}
		}
		start := time.Now()
		t.Logf("scaling %s to 5; applying this tree's create_role.sh and example Deployments over %s's", name, rel.version)
		applyThisRelease(ctx, t, ns, rbacName)
		for _, o := range exampleOperators {
			if _, err := f.Kubectl(ctx, "-n", ns, "rollout", "status", "deployment/"+o.deployment, "--timeout="+rolloutTimeout.String()); err != nil {
				t.Fatalf("the rollout of %s to this tree's image did not complete within %v: %v\n%s", o.deployment, rolloutTimeout, err,
					lastLines(f.DeploymentLogs(ctx, ns, o.deployment), 60))
			}
			waitPodsOn(t, ns, o.deployment, 1, operatorImage())
			waitOnlyLeaderLabelled(t, ns, o.deployment, old)
		}
		upgraded := time.Now()
		t.Logf("the three operators run %s, one leader each, %.1fs after the apply", operatorImage(), upgraded.Sub(start).Seconds())
		checkCRDsAreThisTrees(t)

		waitReady(t, ns, name, 5, changeTimeout)
		checkMembersKept(t, ns, name, made)
		waitBackupStoredAfter(t, ns, backup.Name, upgraded, "this tree")

		if _, err := f.PatchClusterSpec(ctx, ns, name, map[string]any{"size": 3}); err != nil {
			t.Fatal(err)
		}
		t.Logf("scaling %s back to 3 under the upgraded etcd-operator", name)
		waitReady(t, ns, name, 3, changeTimeout)
	})
}

// memberPods is the cluster's live member pods, by name.
func memberPods(t *testing.T, ns, name string) map[string]corev1.Pod {
	t.Helper()
	pods, err := f.ClusterPods(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]corev1.Pod{}
	for _, p := range framework.LivePods(pods) {
		byName[p.Name] = p
	}
	return byName
}

// checkMembersKept checks that every member pod of made still runs, the same
// pod (by UID: a member restarted in place keeps its pod's name) and Ready.
// Container restarts are the kubelet's, not the operator's, and are only
// reported.
func checkMembersKept(t *testing.T, ns, name string, made map[string]corev1.Pod) {
	t.Helper()
	now := memberPods(t, ns, name)
	for podName, before := range made {
		p, ok := now[podName]
		switch {
		case !ok:
			t.Errorf("member pod %s, made by the previous release, is gone: %s", podName, framework.DescribePods(mapValues(now)))
		case p.UID != before.UID:
			t.Errorf("member pod %s was made again (uid %s, was %s): the upgrade of the operator replaced a member", podName, p.UID, before.UID)
		case len(framework.ReadyPods([]corev1.Pod{p})) != 1:
			t.Errorf("member pod %s, made by the previous release, is not Ready: %s", podName, framework.DescribePods([]corev1.Pod{p}))
		default:
			if b, a := restarts(before), restarts(p); a != b {
				t.Logf("member pod %s kept; its containers restarted %d times meanwhile", podName, a-b)
			}
		}
	}
}

func restarts(p corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	return n
}

func mapValues(pods map[string]corev1.Pod) []corev1.Pod {
	out := make([]corev1.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, p)
	}
	return out
}

// waitBackupStoredAfter waits for EtcdBackup name to record a stored backup
// later than after; lastSuccessDate keeps whole seconds, so one in the second
// of after does not count. by names the operator expected to take it.
func waitBackupStoredAfter(t *testing.T, ns, name string, after time.Time, by string) {
	t.Helper()
	var st api.BackupStatus
	err := framework.WaitFor(t.Context(), backupTimeout, framework.Poll, fmt.Sprintf("EtcdBackup %s to store a backup taken by %s", name, by),
		func(ctx context.Context) (bool, string, error) {
			got, err := f.Etcd.EtcdV1beta2().EtcdBackups(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			st = got.Status
			return st.Succeeded && st.LastSuccessDate.After(after.Truncate(time.Second)), fmt.Sprintf("%+v", st), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("EtcdBackup %s: %s stored at %s, taken by %s", name, st.BackupPath, st.LastSuccessDate, by)
}

// logCRDsDiffer says which of the CRDs the previous release's operators
// installed differ from this tree's, so that the log tells whether the
// upgrade had definitions to change.
func logCRDsDiffer(t *testing.T, version string) {
	t.Helper()
	for _, want := range crds.All() {
		got, err := f.APIExt.ApiextensionsV1().CustomResourceDefinitions().Get(t.Context(), want.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := schemaDifference(got, want); diff != "" {
			t.Logf("CRD %s as %s installed it: %s", want.Name, version, diff)
		} else {
			t.Logf("CRD %s as %s installed it: this tree's schema", want.Name, version)
		}
	}
}

// checkCRDsAreThisTrees checks that each CRD serves this tree's schema: the
// upgraded operators (--create-crd=true) replaced the previous release's.
func checkCRDsAreThisTrees(t *testing.T) {
	t.Helper()
	for _, want := range crds.All() {
		err := framework.WaitFor(t.Context(), framework.OperatorReadyTimeout, framework.Poll, "CRD "+want.Name+" to serve this tree's schema",
			func(ctx context.Context) (bool, string, error) {
				got, err := f.APIExt.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, want.Name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				diff := schemaDifference(got, want)
				return diff == "", diff, nil
			})
		if err != nil {
			t.Error(err)
		}
	}
}

// schemaDifference says which version of want got serves with another
// schema or without it, "" when none. Schemas are compared as JSON values,
// so the apiserver's spelling of raw JSON (defaults, examples) does not count.
func schemaDifference(got, want *apiextv1.CustomResourceDefinition) string {
	served := map[string]*apiextv1.CustomResourceValidation{}
	for _, v := range got.Spec.Versions {
		if v.Served {
			served[v.Name] = v.Schema
		}
	}
	var differ []string
	for _, v := range want.Spec.Versions {
		s, ok := served[v.Name]
		switch {
		case !ok:
			differ = append(differ, "version "+v.Name+" is not served")
		case !sameJSON(s, v.Schema):
			differ = append(differ, "version "+v.Name+" has another schema")
		}
	}
	return strings.Join(differ, "; ")
}

func sameJSON(a, b any) bool {
	var va, vb any
	for _, p := range []struct {
		in  any
		out *any
	}{{a, &va}, {b, &vb}} {
		raw, err := json.Marshal(p.in)
		if err != nil {
			return false
		}
		if err := json.Unmarshal(raw, p.out); err != nil {
			return false
		}
	}
	return reflect.DeepEqual(va, vb)
}
