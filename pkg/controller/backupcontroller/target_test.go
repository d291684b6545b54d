package backupcontroller

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

func TestCheckOwnNamespace(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		refused  string // part of the reason; "" means admitted
	}{
		{"the client service of its namespace", "http://example-client.team-a.svc:2379", ""},
		{"with the cluster domain", "https://example-client.team-a.svc.cluster.local:2379", ""},
		{"a member of its namespace", "https://example-abc.example.team-a.svc:2379", ""},
		{"a trailing dot", "http://example-client.team-a.svc.cluster.local.:2379", ""},
		{"another namespace's service", "http://example-client.team-b.svc:2379", "names namespace team-b"},
		{"another namespace's member", "http://m.example.team-b.svc.cluster.local:2379", "names namespace team-b"},
		{"a short name, completed in the operator's namespace", "http://example-client:2379", "not a Service DNS name"},
		{"a name completed by the search path", "http://example-client.team-b:2379", "not a Service DNS name"},
		{"an IP address", "http://10.96.0.12:2379", "IP address"},
		{"an IPv6 address", "http://[fd00::1]:2379", "IP address"},
		{"a pod DNS name", "http://10-0-0-1.team-a.pod:2379", "pod DNS name"},
		{"a name outside the cluster after .svc", "http://x.team-a.svc.evil.example:2379", "domain other than cluster.local"},
		{"an external host", "https://etcd.example.com:2379", "not a Service DNS name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkOwnNamespace("team-a", []string{"http://example-client.team-a.svc:2379", tc.endpoint})
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.refused) || !failure.IsPermanent(err) {
				t.Fatalf("got %v, want a permanent refusal saying %q", err, tc.refused)
			}
			if !strings.Contains(err.Error(), "spec.clusterName") {
				t.Errorf("the reason does not say what to do instead: %v", err)
			}
		})
	}
}

func TestResolveTargetByClusterName(t *testing.T) {
	plain := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "team-a"}, Spec: api.ClusterSpec{Size: 3}}
	secure := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "secure", Namespace: "team-a"}, Spec: api.ClusterSpec{Size: 3,
		TLS: &api.TLSPolicy{Static: &api.StaticTLS{OperatorSecret: "secure-operator-tls"}}}}
	issued := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "issued", Namespace: "team-a"}, Spec: api.ClusterSpec{Size: 3,
		TLS: &api.TLSPolicy{Issued: &api.IssuedTLS{}}}}
	other := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "team-b"}, Spec: api.ClusterSpec{Size: 3}}
	client := fake.NewSimpleClientset(plain, secure, issued, other)
	backupOf := func(spec api.BackupSpec) *api.EtcdBackup {
		return &api.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "team-a"}, Spec: spec}
	}
	ctx := context.Background()

	got, err := resolveTarget(ctx, client, backupOf(api.BackupSpec{ClusterName: "plain"}))
	if err != nil || len(got.endpoints) != 1 || got.endpoints[0] != "http://plain-client.team-a.svc:2379" || got.tlsSecret != "" {
		t.Errorf("plain cluster: %+v, %v", got, err)
	}
	got, err = resolveTarget(ctx, client, backupOf(api.BackupSpec{ClusterName: "secure"}))
	if err != nil || got.endpoints[0] != "https://secure-client.team-a.svc:2379" || got.tlsSecret != "secure-operator-tls" {
		t.Errorf("TLS cluster: %+v, %v", got, err)
	}
	got, err = resolveTarget(ctx, client, backupOf(api.BackupSpec{ClusterName: "issued"}))
	if err != nil || got.endpoints[0] != "https://issued-client.team-a.svc:2379" || got.tlsSecret != "issued-client-tls" {
		t.Errorf("a cluster of issued TLS is backed up with its users' client certificate: %+v, %v", got, err)
	}
	got, err = resolveTarget(ctx, client, backupOf(api.BackupSpec{ClusterName: "secure", ClientTLSSecret: "mine"}))
	if err != nil || got.tlsSecret != "mine" {
		t.Errorf("an explicit clientTLSSecret must win: %+v, %v", got, err)
	}
	// A cluster of that name in another namespace is not this backup's.
	_, err = resolveTarget(ctx, client, backupOf(api.BackupSpec{ClusterName: "elsewhere"}))
	if err == nil || !strings.Contains(err.Error(), "EtcdCluster team-a/elsewhere (spec.clusterName) not found") || failure.IsPermanent(err) {
		t.Errorf("missing cluster: %v, want a retried not-found", err)
	}
	// Names resolved from spec.clusterName pass the cluster-wide check.
	got, _ = resolveTarget(ctx, client, backupOf(api.BackupSpec{ClusterName: "plain"}))
	if err := checkOwnNamespace("team-a", got.endpoints); err != nil {
		t.Errorf("the client Service of spec.clusterName is refused: %v", err)
	}
}
