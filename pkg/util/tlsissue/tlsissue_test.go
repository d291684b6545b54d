package tlsissue

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

var example = Cluster{Name: "example", Namespace: "prod", Domain: ".cluster.local"}

func newCA(t *testing.T, now time.Time) *CA {
	t.Helper()
	ca, err := NewCA("example-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func issueAll(t *testing.T, ca *CA, now time.Time) map[Kind]map[string][]byte {
	t.Helper()
	out := map[Kind]map[string][]byte{}
	for _, k := range Kinds {
		data, err := ca.Issue(k, example, now, 90*24*time.Hour)
		if err != nil {
			t.Fatalf("issue %s: %v", k, err)
		}
		out[k] = data
	}
	return out
}

// The certificates issued pass the checks the operator makes of any TLS
// secrets, for the members' DNS names, with and without the cluster domain.
func TestIssuedCertificatesPassTheSecretsCheck(t *testing.T) {
	now := time.Now()
	ca := newCA(t, now)
	s := issueAll(t, ca, now)
	peer := etcdutil.PeerSecret("example-peer-tls", s[Peer])
	server := etcdutil.ServerSecret("example-server-tls", s[Server])
	for _, k := range []Kind{Operator, Client} {
		op := etcdutil.OperatorSecret("example-"+k.String()+"-tls", s[k])
		hosts := []string{"example-abcdefghij.example.prod.svc", "example-abcdefghij.example.prod.svc.cluster.local"}
		if msgs := etcdutil.CheckCertSecrets(&peer, &server, &op, hosts, now); len(msgs) > 0 {
			t.Errorf("%s: %s", k, strings.Join(msgs, "; "))
		}
		if _, err := etcdutil.TLSConfigFromSecretData(s[k]); err != nil {
			t.Errorf("%s secret as a client TLS config: %v", k, err)
		}
	}
}

// Peer and server certificates name every member, the client Service under
// all its names and the loopback; client certificates only dial.
func TestIssuedCertificatesNamesAndUsages(t *testing.T) {
	now := time.Now()
	ca := newCA(t, now)
	s := issueAll(t, ca, now)
	for _, tc := range []struct {
		kind   Kind
		names  []string
		usages []x509.ExtKeyUsage
	}{
		{Peer, []string{"example-x.example.prod.svc", "example-x.example.prod.svc.cluster.local", "example-client", "example-client.prod", "example-client.prod.svc", "example-client.prod.svc.cluster.local", "localhost", "127.0.0.1"},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{Server, []string{"example-x.example.prod.svc", "example-client.prod.svc", "localhost", "127.0.0.1"},
			[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{Client, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{Operator, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	} {
		certKey, _, _ := tc.kind.Keys()
		cert := parse(t, s[tc.kind][certKey])
		for _, n := range tc.names {
			if err := cert.VerifyHostname(n); err != nil {
				t.Errorf("%s: %v", tc.kind, err)
			}
		}
		if tc.names == nil && (len(cert.DNSNames) > 0 || len(cert.IPAddresses) > 0) {
			t.Errorf("%s names hosts: %v %v", tc.kind, cert.DNSNames, cert.IPAddresses)
		}
		if got := cert.ExtKeyUsage; !slices.Equal(got, tc.usages) {
			t.Errorf("%s ext key usages %v, want %v", tc.kind, got, tc.usages)
		}
		if !cert.NotAfter.After(now.Add(89*24*time.Hour)) || cert.NotAfter.After(now.Add(91*24*time.Hour)) {
			t.Errorf("%s valid until %s, not 90 days", tc.kind, cert.NotAfter)
		}
	}
}

// A member serving with the server certificate and the operator dialling
// with its own complete a real handshake, each checking the other.
func TestIssuedCertificatesHandshake(t *testing.T) {
	now := time.Now()
	ca := newCA(t, now)
	s := issueAll(t, ca, now)
	serverCert, err := tls.X509KeyPair(s[Server][etcdutil.SecretServerCert], s[Server][etcdutil.SecretServerKey])
	if err != nil {
		t.Fatal(err)
	}
	clients := x509.NewCertPool()
	clients.AppendCertsFromPEM(s[Server][etcdutil.SecretServerCA])
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{serverCert}, ClientCAs: clients, ClientAuth: tls.RequireAndVerifyClientCert,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			err = c.(*tls.Conn).Handshake()
			c.Close()
		}
		served <- err
	}()
	cfg, err := etcdutil.TLSConfigFromSecretData(s[Operator])
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = "example-abcdefghij.example.prod.svc"
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", l.Addr().String(), cfg)
	if err != nil {
		t.Fatalf("operator dials the member: %v", err)
	}
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := <-served; err != nil {
		t.Fatalf("member accepts the operator: %v", err)
	}
}

// A CA secret is read back as it was written; one that cannot issue is
// refused with the reason, never used.
func TestCAFromSecret(t *testing.T) {
	now := time.Now()
	ca := newCA(t, now)
	data, err := ca.SecretData()
	if err != nil {
		t.Fatal(err)
	}
	back, err := CAFromSecret(data, now)
	if err != nil {
		t.Fatalf("a CA secret the operator wrote: %v", err)
	}
	other, _ := NewCA("other", now)
	leaf := issueAll(t, back, now)[Peer][etcdutil.SecretPeerCert]
	if !ca.Signed(leaf) || other.Signed(leaf) {
		t.Error("Signed does not tell the CA that signed a certificate")
	}
	otherData, _ := other.SecretData()
	notCA := issueAll(t, ca, now)[Client]
	for _, tc := range []struct {
		name string
		data map[string][]byte
		want string
	}{
		{"no key", map[string][]byte{CACertKey: data[CACertKey]}, "lacks key(s) ca.key"},
		{"nothing", map[string][]byte{}, "lacks key(s) ca.crt, ca.key"},
		{"a leaf, not a CA", map[string][]byte{CACertKey: notCA[etcdutil.SecretClientCert], CAKeyKey: notCA[etcdutil.SecretClientKey]}, "not a CA certificate"},
		{"another CA's key", map[string][]byte{CACertKey: data[CACertKey], CAKeyKey: otherData[CAKeyKey]}, "is not the key of ca.crt"},
		{"not PEM", map[string][]byte{CACertKey: []byte("x"), CAKeyKey: []byte("y")}, "not a PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CAFromSecret(tc.data, now)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := CAFromSecret(data, now.Add(CAValidity+time.Hour)); err == nil || !strings.Contains(err.Error(), "is valid from") {
		t.Fatalf("an expired CA: got %v", err)
	}
}

func parse(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBundleTrustsEveryCA(t *testing.T) {
	now := time.Now()
	a, err := NewCA("a", now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewCA("b", now)
	if err != nil {
		t.Fatal(err)
	}
	leafA, err := a.Issue(Server, Cluster{Name: "x", Namespace: "ns"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leafB, err := b.Issue(Server, Cluster{Name: "x", Namespace: "ns"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	withoutNewline := a.CertPEM[:len(a.CertPEM)-1]
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(Bundle(withoutNewline, b.CertPEM)) {
		t.Fatal("the bundle does not parse")
	}
	for name, leaf := range map[string]map[string][]byte{"a": leafA, "b": leafB} {
		certKey, _, caKey := Server.Keys()
		block, _ := pem.Decode(leaf[certKey])
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("a leaf of CA %s is not trusted by the bundle: %v", name, err)
		}
		trusting := Server.Trusting(leaf, Bundle(a.CertPEM, b.CertPEM))
		if string(trusting[caKey]) != string(Bundle(a.CertPEM, b.CertPEM)) || string(trusting[certKey]) != string(leaf[certKey]) || string(leaf[caKey]) == string(trusting[caKey]) {
			t.Errorf("Trusting did not replace only the CA key of a copy")
		}
	}
}
