//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// pluginRules are all the rights `kubectl etcd` needs on a plain-HTTP
// cluster, as docs/user-guide/kubectl-etcd.md lists them for status, compact, defrag,
// move-leader and snapshot.
var pluginRules = []rbacv1.PolicyRule{
	{APIGroups: []string{api.GroupName}, Resources: []string{"etcdclusters"}, Verbs: []string{"get"}},
	{APIGroups: []string{api.GroupName}, Resources: []string{"etcdbackups"}, Verbs: []string{"list"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"create"}},
}

// TestKubectlEtcdPlugin runs `kubectl etcd` the way a user does: the binary
// on PATH, found by kubectl's plugin lookup, as a service account that has
// only the rights docs/user-guide/kubectl-etcd.md lists, against a 3-member cluster: status,
// compact, defrag (leader last, after moving leadership), move-leader and a
// snapshot that restores; and the same user without pods/portforward is told
// what is missing.
func TestKubectlEtcdPlugin(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("plugin")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))

	binDir := t.TempDir()
	if _, err := f.Run(ctx, framework.Cmd{Name: "go", Args: []string{"build", "-o", filepath.Join(binDir, "kubectl-etcd"), "./cmd/kubectl-etcd"},
		Dir: f.Env.RepoRoot}); err != nil {
		t.Fatal(err)
	}
	user := pluginUser(t, "plugin-user-"+name, pluginRules)
	plugin := func(args ...string) (string, error) {
		return f.Run(ctx, framework.Cmd{Name: f.Env.Kubectl, Args: append([]string{"etcd"}, args...),
			Env: []string{"KUBECONFIG=" + user, "PATH=" + binDir + ":" + os.Getenv("PATH")}})
	}

	out, err := plugin("status", name, "-n", opNS)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl etcd status:\n%s", out)
	leader, err := f.Leader(ctx, opNS, name, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Phase:        Running", "Leader:       " + leader.Name, "Alarms:       none", "Last backup:  none"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q", want)
		}
	}
	for _, p := range pods {
		if !regexp.MustCompile(`(?m)^` + p + `\s+[0-9a-f]+\s+(Leader|Follower)\s+3\.5\.21\s`).MatchString(out) {
			t.Errorf("status has no member line for %s", p)
		}
	}

	if out, err = plugin("compact", name, "-n", opNS); err != nil || !strings.Contains(out, "up to revision") {
		t.Fatalf("compact: %q, %v", out, err)
	}

	out, err = plugin("defrag", name, "-n", opNS)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl etcd defrag:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "leadership moved from "+leader.Name) || !strings.HasPrefix(lines[3], "defragmented "+leader.Name) {
		t.Fatalf("defrag did not go followers first, then leadership away, then the old leader:\n%s", out)
	}
	if now, err := f.Leader(ctx, opNS, name, false); err != nil || now.Name == leader.Name {
		t.Fatalf("after defrag the leader is %q (%v), want another member than %s", now.Name, err, leader.Name)
	}

	if out, err = plugin("move-leader", name, "-n", opNS, "--to", leader.Name); err != nil {
		t.Fatal(err)
	}
	if now, err := f.Leader(ctx, opNS, name, false); err != nil || now.Name != leader.Name {
		t.Fatalf("move-leader --to %s: leader is %q (%v); printed %q", leader.Name, now.Name, err, out)
	}

	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/plugin", "in the snapshot", dataTimeout); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "snap.db")
	if out, err = plugin("snapshot", name, "-n", opNS, "--file", file); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := backuptest.CheckSnapshot(t.TempDir(), data); err != nil || keys < 1 {
		t.Fatalf("the snapshot (%s) holds %d keys, %v", strings.TrimSpace(out), keys, err)
	}

	// Without pods/portforward the user learns which right is missing.
	narrow := pluginUser(t, "plugin-noforward-"+name, pluginRules[:3])
	out, err = f.Run(ctx, framework.Cmd{Name: f.Env.Kubectl, Args: []string{"etcd", "status", name, "-n", opNS},
		Env: []string{"KUBECONFIG=" + narrow, "PATH=" + binDir + ":" + os.Getenv("PATH")}})
	if err == nil || !strings.Contains(err.Error(), "portforward") {
		t.Fatalf("status without pods/portforward = %q, %v; want an error naming the port-forward", out, err)
	}
}

// pluginUser creates a service account with a Role of the given rules in the
// shared namespace and returns a kubeconfig file that acts as it.
func pluginUser(t *testing.T, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := t.Context()
	rbac := f.Kube.RbacV1()
	sa, err := f.Kube.CoreV1().ServiceAccounts(opNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.Roles(opNS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(opNS).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: opNS}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = rbac.RoleBindings(opNS).Delete(ctx, name, metav1.DeleteOptions{})
		_ = rbac.Roles(opNS).Delete(ctx, name, metav1.DeleteOptions{})
		_ = f.Kube.CoreV1().ServiceAccounts(opNS).Delete(ctx, name, metav1.DeleteOptions{})
	})
	tok, err := f.Kube.CoreV1().ServiceAccounts(opNS).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cluster := &clientcmdapi.Cluster{Server: f.Config.Host, CertificateAuthorityData: f.Config.CAData, CertificateAuthority: f.Config.CAFile}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"local": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{name: {Token: tok.Status.Token}},
		Contexts:       map[string]*clientcmdapi.Context{name: {Cluster: "local", AuthInfo: name, Namespace: opNS}},
		CurrentContext: name,
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNoSpaceRecoveredWithKubectlEtcd fills a cluster with a 2 MiB quota
// until etcd raises NOSPACE (every member then fails /health and leaves the
// client Service), and recovers it by hand with the plugin: status names the
// alarm, compact, defrag and disarm make room, and writes work again through
// the client Service.
func TestNoSpaceRecoveredWithKubectlEtcd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("nospace")
	cl := framework.NewCluster(name, 3, "3.5.21")
	cl.Spec.Pod = &api.PodPolicy{EtcdEnv: []corev1.EnvVar{{Name: "ETCD_QUOTA_BACKEND_BYTES", Value: "2097152"}}}
	createCluster(t, cl)
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	// The operator recovers from NOSPACE by itself (TestNoSpaceIsRecoveredByTheOperator);
	// paused, it leaves the cluster to the user and the plugin.
	if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"paused": true}); err != nil {
		t.Fatal(err)
	}

	binDir := t.TempDir()
	if _, err := f.Run(ctx, framework.Cmd{Name: "go", Args: []string{"build", "-o", filepath.Join(binDir, "kubectl-etcd"), "./cmd/kubectl-etcd"},
		Dir: f.Env.RepoRoot}); err != nil {
		t.Fatal(err)
	}
	user := pluginUser(t, "plugin-nospace-"+name, pluginRules)
	plugin := func(args ...string) (string, error) {
		return f.Run(ctx, framework.Cmd{Name: f.Env.Kubectl, Args: append([]string{"etcd"}, append(args, "-n", opNS)...),
			Env: []string{"KUBECONFIG=" + user, "PATH=" + binDir + ":" + os.Getenv("PATH")}})
	}

	// Three keys overwritten with 100 KiB values (one argument may not pass
	// 128 KiB): history, not live data, fills the quota, as it does in
	// clusters nobody compacts.
	value := strings.Repeat("v", 100<<10)
	var lastErr error
	for i := 0; i < 60; i++ {
		_, lastErr = f.EtcdctlExec(ctx, opNS, pods[0], "--endpoints=http://localhost:2379", "put", fmt.Sprintf("/e2e/fill/%d", i%3), value)
		if lastErr != nil {
			break
		}
	}
	if lastErr == nil || !strings.Contains(lastErr.Error(), "database space exceeded") {
		msg := fmt.Sprint(lastErr)
		if i := strings.Index(msg, value[:64]); i >= 0 {
			msg = msg[:i] + "<value>" + strings.TrimLeft(msg[i:], "v")
		}
		t.Fatalf("filling a 2 MiB quota ended with %s, want NOSPACE", msg)
	}

	out, err := plugin("status", name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl etcd status under NOSPACE:\n%s", out)
	if !regexp.MustCompile(`Alarms:\s+NOSPACE on ` + name).MatchString(out) {
		t.Fatalf("status does not name the NOSPACE alarm")
	}
	for _, cmd := range []string{"compact", "defrag", "disarm"} {
		out, err := plugin(cmd, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubectl etcd %s:\n%s", cmd, out)
	}
	if out, err = plugin("status", name); err != nil || !strings.Contains(out, "Alarms:       none") {
		t.Fatalf("status after recovery = %v:\n%s", err, out)
	}
	waitReady(t, opNS, name, 3, changeTimeout)
	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/after-nospace", "room again", dataTimeout); err != nil {
		t.Fatal(err)
	}
}
