//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/checker"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// Bounds of the waits. They are well above what the operator needs on the local
// node (see original-measured.md: the original took ~32 s to bootstrap 3 members
// on its fixed 8 s tick), so a timeout means stuck, not slow.
const (
	changeTimeout  = 3 * time.Minute
	upgradeTimeout = 4 * time.Minute
	cleanupTimeout = 3 * time.Minute
	dataTimeout    = time.Minute
)

// bootstrapTimeout bounds the bootstrap of a cluster of the given size. Members
// are added one at a time, so the bound grows with the size; each step is given
// the ~30 s a member spends in its DNS init container when CoreDNS has cached a
// "no such name" for it, which pod-first joins avoid but a bound must not bet on.
func bootstrapTimeout(members int) time.Duration {
	return time.Minute + time.Duration(members)*45*time.Second
}

// createCluster creates cl in the shared operator's namespace, after arranging
// for a dump if the test fails and for the cluster's deletion when it ends.
func createCluster(t *testing.T, cl *api.EtcdCluster) *api.EtcdCluster {
	t.Helper()
	return createClusterIn(t, opNS, opNS, cl)
}

// createClusterIn is createCluster for a cluster in ns managed by an operator in opNamespace.
func createClusterIn(t *testing.T, ns, opNamespace string, cl *api.EtcdCluster) *api.EtcdCluster {
	t.Helper()
	secure := cl.Spec.TLS != nil && cl.Spec.TLS.IsSecureClient()
	watchCluster(t, framework.DumpTarget{Namespace: ns, Cluster: cl.Name, Secure: secure, OperatorNamespace: opNamespace})
	out, err := f.CreateCluster(t.Context(), ns, cl)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("created EtcdCluster %s/%s (size %d, version %q)", ns, cl.Name, cl.Spec.Size, cl.Spec.Version)
	return out
}

// watchCluster registers what must happen when the test ends for a cluster it
// creates: the dump if the test failed, then the deletion of the cluster and the
// wait until garbage collection has removed everything it owned, so the next test
// has the node to itself. Registered before the cluster is created, so that a
// failure while creating still gets its dump.
func watchCluster(t *testing.T, target framework.DumpTarget) {
	t.Helper()
	rec := f.RecordFailedContainers(target.Namespace, target.Cluster)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout+2*time.Minute)
		defer cancel()
		rec.Stop()
		if t.Failed() {
			dump(ctx, t, target, rec.Section())
		}
		if f.Env.KeepNamespaces && t.Failed() {
			t.Logf("E2E_KEEP_NAMESPACES=1: leaving EtcdCluster %s/%s for inspection", target.Namespace, target.Cluster)
			return
		}
		if err := f.DeleteCluster(ctx, target.Namespace, target.Cluster); err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		if err := framework.WaitFor(ctx, cleanupTimeout, framework.Poll,
			fmt.Sprintf("cluster %s/%s and everything it owned to be deleted", target.Namespace, target.Cluster),
			framework.Both(f.ClusterGone(target.Namespace, target.Cluster), f.DependentsGone(target.Namespace, target.Cluster))); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// dump logs the sections of a failure dump, each cut to its last lines, and writes
// them whole under the artifacts directory.
func dump(ctx context.Context, t *testing.T, target framework.DumpTarget, extra ...framework.Section) {
	t.Helper()
	sections := append(f.Dump(ctx, target), extra...)
	name := target.Cluster
	if name == "" {
		name = target.Namespace
	}
	path, err := f.WriteDump(t.Name(), name, sections)
	if err != nil {
		t.Logf("write dump: %v", err)
	}
	t.Logf("======== failure dump for %s (whole dump: %s)", name, path)
	for _, s := range sections {
		t.Logf("======== %s\n%s", s.Title, lastLines(s.Body, 150))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return fmt.Sprintf("(%d lines cut, see the file)\n%s", len(lines)-n, strings.Join(lines[len(lines)-n:], "\n"))
}

// checkerLog keeps a failed run's whole checker log with the test's
// artifacts and returns its last lines, with where the rest is: the lines
// that say where each connection's requests went are early in a long log.
func checkerLog(t *testing.T, scenario, log string) string {
	t.Helper()
	path, err := f.WriteDump(t.Name(), "checker-"+scenario, []framework.Section{{Title: "checker log of " + scenario, Body: log}})
	if err != nil {
		return fmt.Sprintf("(keep the checker log: %v)\n%s", err, lastLines(log, 40))
	}
	return fmt.Sprintf("(whole checker log: %s)\n%s", path, lastLines(log, 40))
}

// withoutArtifacts is a checker's log without the lines that carry its
// history (checker.ArtifactLinePrefix), which the checker run saves apart.
func withoutArtifacts(log string) string {
	var keep []string
	for _, line := range strings.Split(log, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), strings.TrimSpace(checker.ArtifactLinePrefix)) {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// newNamespace creates a namespace for one test and deletes it when the test ends
// (after the test's own cleanups, which were registered later and run first).
func newNamespace(t *testing.T, purpose string) string {
	t.Helper()
	ns, err := f.CreateNamespace(t.Context(), purpose)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f.Env.KeepNamespaces && t.Failed() {
			t.Logf("E2E_KEEP_NAMESPACES=1: leaving namespace %s", ns)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := f.DeleteNamespace(ctx, ns, 4*time.Minute); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return ns
}

// installOperator installs an operator of its own for a test in ns, removing its
// cluster-scoped RBAC at the end and dumping its log if the test fails.
func installOperator(t *testing.T, ns string, in framework.Install) *framework.Operator {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dump(ctx, t, framework.DumpTarget{Namespace: ns, OperatorNamespace: ns})
		}
	})
	op, err := f.InstallOperator(t.Context(), ns, in)
	if op != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := op.Uninstall(ctx, f); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("install the operator in %s (%+v): %v", ns, in, err)
	}
	return op
}

// waitReady waits for n ready members in status and n Ready pods, none in exclude.
func waitReady(t *testing.T, ns, name string, n int, timeout time.Duration, exclude ...string) (*api.EtcdCluster, []string) {
	t.Helper()
	start := time.Now()
	cl, pods, err := f.WaitClusterReady(t.Context(), ns, name, n, timeout, exclude...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s/%s: %d ready members after %.1fs: %v", ns, name, n, time.Since(start).Seconds(), cl.Status.Members.Ready)
	return cl, framework.PodNames(pods)
}

// errs collects failed checks, so that a test reports every wrong status field at
// once instead of the first.
type errs []string

func (e *errs) check(ok bool, format string, args ...any) {
	if !ok {
		*e = append(*e, fmt.Sprintf(format, args...))
	}
}

func (e errs) report(t *testing.T) {
	t.Helper()
	for _, m := range e {
		t.Error(m)
	}
}

// backupBed is what the tests of backups and restores run in: a namespace
// with an operator and the backup operator of its own (and the restore
// operator, when asked), and an S3-compatible server with a bucket named
// after the namespace's purpose, and its Secret.
type backupBed struct {
	ns, bucket, secret string
	srv                *framework.S3Server
}

func newBackupBed(t *testing.T, base string, withRestore bool) backupBed {
	t.Helper()
	b := backupBed{ns: newNamespace(t, base), bucket: "e2e-" + base}
	installOperator(t, b.ns, framework.Install{})
	if withRestore {
		// Runs before the namespace goes: a restore interrupted by a failed
		// test must not hold the namespace's deletion with its finalizer.
		t.Cleanup(func() { releaseRestores(t, b.ns) })
	}
	b.srv = startS3Server(t, b.bucket)
	b.secret = createS3Secret(t, b.ns, b.srv)
	deployExampleOperator(t, b.ns, f.Env.Path("example", "etcd-backup-operator", "deployment.yaml"))
	if withRestore {
		deployExampleOperator(t, b.ns, f.Env.Path("example", "etcd-restore-operator", "deployment.yaml"))
	}
	return b
}

// startS3Server starts the S3-compatible server for a test on the host, where
// pods reach it through the node address, with bucket created; it is stopped,
// and its log shown if the test failed, when the test ends.
func startS3Server(t *testing.T, bucket string) *framework.S3Server {
	t.Helper()
	srv, err := framework.StartS3Server(t.Context(), f.Env.NodeIP, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(srv.LogFile)
			t.Logf("======== versitygw log\n%s", lastLines(string(out), 60))
		}
	})
	if err := srv.CreateBucket(t.Context(), bucket); err != nil {
		t.Fatal(err)
	}
	return srv
}

// createS3Secret stores srv's credentials in ns and returns the Secret's name.
func createS3Secret(t *testing.T, ns string, srv *framework.S3Server) string {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "versitygw"}, StringData: srv.AWSSecretData()}
	if _, err := f.Kube.CoreV1().Secrets(ns).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return secret.Name
}
