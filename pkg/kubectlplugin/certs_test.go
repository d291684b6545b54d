package kubectlplugin

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

func withStaticTLS(c *api.EtcdCluster) {
	c.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{
		Member:         &api.MemberSecret{PeerSecret: "example-peer", ServerSecret: "example-server"},
		OperatorSecret: "example-client",
	}}
}

// tlsSecret is a secret of the keys, its leaf called cn from ca.
func tlsSecret(t *testing.T, ca etcdtest.CA, name, cn string, serial int64, keys [3]string) *corev1.Secret {
	cert, key := etcdtest.Issue(t, ca.Cert, ca.Key, &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{"*.example.team-a.svc"}})
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data: map[string][]byte{keys[0]: cert, keys[1]: key, keys[2]: ca.PEM}}
}

func TestCertsListsEveryCertificateWithItsExpiryAndIssuer(t *testing.T) {
	ca := etcdtest.NewCA(t, "example CA")
	f := newKubeFixture(t, withStaticTLS,
		tlsSecret(t, ca, "example-peer", "peer", 0xa1, [3]string{etcdutil.SecretPeerCert, etcdutil.SecretPeerKey, etcdutil.SecretPeerCA}),
		tlsSecret(t, ca, "example-client", "operator", 0xb2, [3]string{etcdutil.SecretClientCert, etcdutil.SecretClientKey, etcdutil.SecretClientCA}))

	out, _, err := cliRun(t, f.plugin, "certs", "example", "-n", ns, "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := [][]string{
		{"SECRET", "KEY", "SUBJECT", "ISSUER", "SERIAL", "NOT AFTER", "LEFT", "STATE", "NAMES"},
		{"example-peer", "peer.crt", "CN=peer", "CN=example CA", "a1"},
		{"example-peer", "peer-ca.crt", "CN=example CA", "CN=example CA", "1"},
		{"example-client", "etcd-client.crt", "CN=operator", "CN=example CA", "b2"},
		{"example-client", "etcd-client-ca.crt", "CN=example CA", "CN=example CA", "1"},
		{"not read: secret example-server does not exist"},
	}
	if len(lines) != len(want) {
		t.Fatalf("printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		for _, field := range w {
			if !strings.Contains(lines[i], field) {
				t.Errorf("line %d %q lacks %q", i, lines[i], field)
			}
		}
	}
	// The test certificates live two hours: the operator warns from their start.
	if !strings.Contains(lines[1], "expires soon") || !strings.Contains(lines[1], "*.example.team-a.svc") {
		t.Errorf("line %q: want its state and names", lines[1])
	}

	out, _, err = cliRun(t, f.plugin, "certs", "example", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r CertsReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if len(r.Certificates) != 4 || r.Certificates[0].Serial != "a1" || r.Certificates[0].NotAfter.IsZero() || r.Certificates[0].Issuer != "CN=example CA" {
		t.Errorf("-o json: %+v", r)
	}
}

func TestCertsOfAClusterWithoutTLS(t *testing.T) {
	f := newKubeFixture(t, nil)
	out, _, err := cliRun(t, f.plugin, "certs", "example", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "has no TLS") {
		t.Errorf("printed %q", out)
	}
	if _, _, err := cliRun(t, f.plugin, "certs", "example", "-n", ns, "-o", "table"); err == nil {
		t.Error("-o table accepted")
	}
}

func TestCertState(t *testing.T) {
	day := 24 * time.Hour
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	year := etcdutil.Certificate{NotBefore: start, NotAfter: start.Add(365 * day)}
	tests := []struct {
		name string
		at   time.Time
		want string
	}{
		{"before its start a certificate is not yet valid", start.Add(-time.Hour), "not yet valid"},
		{"far from its expiry it is valid", start.Add(100 * day), "valid"},
		{"when the operator warns it expires soon", start.Add(300 * day), "expires soon"},
		{"at its expiry it is expired", start.Add(365 * day), "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := certState(year, tt.at); got != tt.want {
				t.Errorf("certState = %q, want %q", got, tt.want)
			}
		})
	}
}
