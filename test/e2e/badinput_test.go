//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// waitEvent waits for an event of the given type and reason on the
// cluster and returns its message.
func waitEvent(t *testing.T, cl *api.EtcdCluster, typ, reason string) string {
	t.Helper()
	var msg string
	err := framework.WaitFor(t.Context(), invalidReportTimeout, framework.Poll, "a "+typ+" event "+reason+" on the cluster",
		func(ctx context.Context) (bool, string, error) {
			evs, err := f.Kube.CoreV1().Events(cl.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
				"involvedObject.name": cl.Name, "involvedObject.uid": string(cl.UID),
			}.String()})
			if err != nil {
				return false, err.Error(), nil
			}
			var seen []string
			for _, e := range evs.Items {
				if e.Type == typ && e.Reason == reason {
					msg = e.Message
					return true, "", nil
				}
				seen = append(seen, e.Type+"/"+e.Reason)
			}
			return false, fmt.Sprintf("events: %v", seen), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func expectNoPods(t *testing.T, cl *api.EtcdCluster) {
	t.Helper()
	pods, err := f.ClusterPods(t.Context(), cl.Namespace, cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) > 0 {
		t.Errorf("pods were created: %s", framework.DescribePods(pods))
	}
}

// TestMisspeltScopeIsAnEvent: a cluster whose scope
// annotation no operator takes is not left without a word.
func TestMisspeltScopeIsAnEvent(t *testing.T) {
	t.Parallel()
	cl := createCluster(t, &api.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: framework.UniqueName("scope"), Annotations: map[string]string{api.ScopeAnnotation: "ClusterWide"}},
		Spec:       api.ClusterSpec{Size: 1},
	})
	msg := waitEvent(t, cl, corev1.EventTypeWarning, "InvalidScope")
	if !strings.Contains(msg, `is "ClusterWide", not "clusterwide"`) {
		t.Errorf("InvalidScope says %q", msg)
	}
	expectNoPods(t, cl)
}

// TestCertificatesOfAnotherClusterAreReported:
// certificates made by example/tls/gen-certs.sh for another cluster name do
// not name this cluster's members; the cluster says so and makes no pod that
// would fail its handshakes.
func TestCertificatesOfAnotherClusterAreReported(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("wrongcerts")
	dir := t.TempDir()
	if _, err := f.Run(ctx, framework.Cmd{
		Name: "bash",
		Args: []string{f.Env.Path("example", "tls", "gen-certs.sh")},
		Env:  []string{"CLUSTER=another-cluster", "NAMESPACE=" + opNS, "OUT=" + dir},
	}); err != nil {
		t.Fatalf("gen-certs.sh: %v", err)
	}
	secrets := map[string][]string{
		name + "-peer":     {"peer.crt", "peer.key", "peer-ca.crt"},
		name + "-server":   {"server.crt", "server.key", "server-ca.crt"},
		name + "-operator": {"etcd-client.crt", "etcd-client.key", "etcd-client-ca.crt"},
	}
	for secret, keys := range secrets {
		data := map[string][]byte{}
		for _, k := range keys {
			b, err := os.ReadFile(filepath.Join(dir, k))
			if err != nil {
				t.Fatal(err)
			}
			data[k] = b
		}
		if _, err := f.Kube.CoreV1().Secrets(opNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret}, Data: data}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = f.Kube.CoreV1().Secrets(opNS).Delete(ctx, secret, metav1.DeleteOptions{})
		})
	}
	cl := createCluster(t, &api.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.ClusterSpec{Size: 1, TLS: &api.TLSPolicy{Static: &api.StaticTLS{
			Member:         &api.MemberSecret{PeerSecret: name + "-peer", ServerSecret: name + "-server"},
			OperatorSecret: name + "-operator",
		}}},
	})
	msg := waitEvent(t, cl, corev1.EventTypeWarning, "TLSCertificateInvalid")
	if !strings.Contains(msg, "does not name the member DNS name(s) "+name+"-newmember0."+name+"."+opNS+".svc") ||
		!strings.Contains(msg, "*.another-cluster."+opNS+".svc") {
		t.Errorf("TLSCertificateInvalid says %q", msg)
	}
	got, err := f.GetCluster(ctx, opNS, name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Status.Reason, "does not name the member DNS name(s)") {
		t.Errorf("status: %s", framework.DescribeStatus(got))
	}
	expectNoPods(t, cl)
}
