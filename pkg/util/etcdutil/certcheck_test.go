package etcdutil

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, cn string) testCA {
	t.Helper()
	key := etcdtest.NewKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca testCA) issue(t *testing.T, cn string, dnsNames ...string) (certPEM, keyPEM []byte) {
	return etcdtest.Issue(t, ca.cert, ca.key, &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: dnsNames})
}

// TestCheckCertSecrets: what is wrong with the TLS
// secrets is found before members fail their handshakes.
func TestCheckCertSecrets(t *testing.T) {
	ca, other := newTestCA(t, "cluster CA"), newTestCA(t, "another CA")
	wildcard := "*.example.default.svc"
	hosts := []string{"example-abcdefghij.example.default.svc"}
	secret := func(mk func(string, map[string][]byte) CertSecret, name string, signer testCA, trust []byte, names ...string) *CertSecret {
		c, k := signer.issue(t, name, names...)
		s := mk(name, map[string][]byte{})
		s.Data[s.CertKey], s.Data[s.KeyKey], s.Data[s.CAKey] = c, k, trust
		return &s
	}
	good := func() (peer, server, op *CertSecret) {
		return secret(PeerSecret, "peer", ca, ca.pem, wildcard),
			secret(ServerSecret, "server", ca, ca.pem, wildcard),
			secret(OperatorSecret, "operator", ca, ca.pem)
	}
	tests := []struct {
		name  string
		spoil func(peer, server, op *CertSecret)
		now   time.Time
		want  string
	}{
		{"secrets from one CA with a wildcard for the members are fine", func(_, _, _ *CertSecret) {}, time.Now(), ""},
		{"a missing key is named", func(p, _, _ *CertSecret) { delete(p.Data, SecretPeerKey) },
			time.Now(), "secret peer (spec.TLS.static.member.peerSecret) lacks key(s) peer.key"},
		{"a certificate that is not PEM", func(_, s, _ *CertSecret) { s.Data[SecretServerCert] = []byte("garbage") },
			time.Now(), "server.crt of secret server (spec.TLS.static.member.serverSecret) is not a PEM certificate"},
		{"a key of another certificate", func(p, s, _ *CertSecret) { p.Data[SecretPeerKey] = s.Data[SecretServerKey] },
			time.Now(), "peer.key of secret peer (spec.TLS.static.member.peerSecret) is not the key of peer.crt"},
		{"an expired certificate", func(_, _, _ *CertSecret) {},
			time.Now().Add(2 * time.Hour), "peer.crt of secret peer (spec.TLS.static.member.peerSecret) expired on"},
		{"a certificate of another CA", func(p, _, _ *CertSecret) {
			c, k := other.issue(t, "peer", wildcard)
			p.Data[SecretPeerCert], p.Data[SecretPeerKey] = c, k
		}, time.Now(), "peer.crt of secret peer (spec.TLS.static.member.peerSecret) is not signed by peer-ca.crt"},
		{"a server certificate without the members' names", func(_, s, _ *CertSecret) {
			c, k := ca.issue(t, "server", "localhost", "example-client.default.svc")
			s.Data[SecretServerCert], s.Data[SecretServerKey] = c, k
		}, time.Now(), "server.crt of secret server (spec.TLS.static.member.serverSecret) does not name the member DNS name(s) example-abcdefghij.example.default.svc (its names: localhost, example-client.default.svc)"},
		{"an operator that trusts another CA than the members'", func(_, _, o *CertSecret) {
			*o = *secret(OperatorSecret, "operator", ca, other.pem)
		}, time.Now(), "server.crt of secret server (spec.TLS.static.member.serverSecret) is not trusted by etcd-client-ca.crt of secret operator"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, s, o := good()
			tc.spoil(p, s, o)
			got := CheckCertSecrets(p, s, o, hosts, tc.now)
			if tc.want == "" {
				if len(got) > 0 {
					t.Fatalf("problems %q for good secrets", got)
				}
				return
			}
			if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Fatalf("problems %q, want one containing %q", got, tc.want)
			}
		})
	}
}
