//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// Fault scenarios of the cluster's surroundings: client TLS, the object store
// of the backups, the members' space. Each runs the checker (underLoad) as the
// scenarios of chaos_test.go do.

// TestChaosTLSLeaderKill is the leader kill on a cluster with client TLS: the
// checker talks https with the client certificate of the cluster's own secret,
// the way a client in the cluster would, and must see a linearizable history
// with nothing acknowledged lost.
func TestChaosTLSLeaderKill(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("chaos-tls")
	secrets := createTLSSecrets(t, opNS, name)
	cl := framework.NewCluster(name, 3, "3.5.21")
	cl.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{
		Member:         &api.MemberSecret{PeerSecret: secrets.peer, ServerSecret: secrets.server},
		OperatorSecret: secrets.client,
	}}
	createCluster(t, cl)
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	underLoadPod(t, framework.CheckerPod{Namespace: opNS, Cluster: name, Scenario: "tls-leader-kill", Duration: 45 * time.Second, TLSSecret: secrets.client},
		func(ctx context.Context) {
			leader, err := f.Leader(ctx, opNS, name, true)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.KillPod(ctx, opNS, leader.Name); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed the leader %s", leader.Name)
			waitReady(t, opNS, name, 3, changeTimeout, leader.Name)
		})
}

// tlsSecretNames are the three secrets of a static-TLS cluster.
type tlsSecretNames struct{ peer, server, client string }

// createTLSSecrets makes the certificates of cluster in ns with
// example/tls/gen-certs.sh and stores them under names of the cluster's own (the
// script's fixed names would collide between tests); they go when the test ends.
func createTLSSecrets(t *testing.T, ns, cluster string) tlsSecretNames {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	if _, err := f.Run(ctx, framework.Cmd{
		Name: "bash",
		Args: []string{f.Env.Path("example", "tls", "gen-certs.sh")},
		Env:  []string{"CLUSTER=" + cluster, "NAMESPACE=" + ns, "OUT=" + dir},
	}); err != nil {
		t.Fatalf("gen-certs.sh: %v", err)
	}
	names := tlsSecretNames{peer: cluster + "-peer", server: cluster + "-server", client: cluster + "-client"}
	for secretName, files := range map[string][]string{
		names.peer:   {"peer.crt", "peer.key", "peer-ca.crt"},
		names.server: {"server.crt", "server.key", "server-ca.crt"},
		names.client: {"etcd-client.crt", "etcd-client.key", "etcd-client-ca.crt"},
	} {
		data := map[string][]byte{}
		for _, file := range files {
			b, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			data[file] = b
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName}, Data: data}
		if _, err := f.Kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = f.Kube.CoreV1().Secrets(ns).Delete(ctx, secretName, metav1.DeleteOptions{})
		})
	}
	return names
}

// TestChaosLongNoSpaceUnderLoad fills a member's space while the checker runs:
// a cluster whose quota is tiny (2 MiB, as TestNoSpaceIsRecoveredByTheOperator)
// gets 100 KiB values until etcd raises the NOSPACE alarm and refuses every
// write. Writes refused then are failures the clients see, never acknowledged;
// the operator reports the alarm (condition, events), compacts, defragments and
// disarms it, and writes work again. Nothing acknowledged before, during or
// after may be missing. The checker runs at a low rate so that its own writes
// do not fill the quota again before the recovery.
func TestChaosLongNoSpaceUnderLoad(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("chaos-nospace")
	cl := framework.NewCluster(name, 3, "3.5.21")
	quota := resource.MustParse("2Mi")
	cl.Spec.Maintenance = &api.MaintenancePolicy{Quota: &quota}
	createCluster(t, cl)
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	p := framework.CheckerPod{Namespace: opNS, Cluster: name, Scenario: "nospace-quota-exhausted", Duration: 90 * time.Second, Rate: 10}
	var recoveredAfter time.Duration
	underLoadPod(t, p, func(ctx context.Context) {
		fillUntilNoSpace(t, opNS, pods[0])
		full := time.Now()
		t.Log("NOSPACE: the quota is exhausted and etcd refuses writes")
		if !waitNoSpaceRecovered(t, opNS, name, pods[0]) {
			t.Log("the NoSpace condition was not seen (the recovery was faster than the poll); the events say it")
		}
		recoveredAfter = time.Since(full)
		waitReady(t, opNS, name, 3, changeTimeout)
	})
	t.Logf("writes resumed %.1fs after NOSPACE", recoveredAfter.Seconds())
}
