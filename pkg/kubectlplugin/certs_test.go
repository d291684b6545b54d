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
		{"issued by: the user (static TLS): renewed by hand"},
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

// TestCertsShowsTheCARotation: under issued TLS the certificates' table is
// followed by the CA and where its rotation is, from status.caRotation.
func TestCertsShowsTheCARotation(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	at := func(tm time.Time) *metav1.Time { mt := metav1.NewTime(tm); return &mt }
	old := &api.CACertificate{Subject: "CN=etcd CA of team-a/example,O=etcd-operator", Serial: "5f3a", NotAfter: metav1.NewTime(now.Add(3000 * 24 * time.Hour))}
	next := &api.CACertificate{Subject: "CN=etcd CA of team-a/example,O=etcd-operator", Serial: "9c41", NotAfter: metav1.NewTime(now.Add(3650 * 24 * time.Hour))}
	tests := []struct {
		name   string
		status *api.CARotationStatus
		want   []string
		absent []string
	}{
		{name: "a cluster whose status tells no CA yet shows the table only", status: nil, absent: []string{"CA:", "CA rotation:"}},
		{name: "outside a rotation the CA is shown and none is under way", status: &api.CARotationStatus{CA: old},
			want: []string{"CA: CN=etcd CA of team-a/example,O=etcd-operator, serial 5f3a, expires 2035-02-15T08:00:00Z (3000d left)", "CA rotation: none under way",
				"made by: not the operator: rotated only when asked (`kubectl etcd rotate-ca`)"},
			absent: []string{"Last CA rotation:"}},
		{name: "a CA the operator made is shown with when it is rotated unasked", status: &api.CARotationStatus{CA: old, MadeByOperator: true, AutoRotateAt: at(now.Add(2000 * 24 * time.Hour))},
			want: []string{"made by: the operator, which rotates it unasked from 2032-05-21T08:00:00Z"}},
		{name: "a rotation the operator began by itself says so", status: &api.CARotationStatus{CA: old, MadeByOperator: true, Rotation: "auto-2035-02-15T08:00:00Z", Unasked: true, Step: "trust-new", OldCA: old, NewCA: next},
			want: []string{"CA rotation: auto-2035-02-15T08:00:00Z, began not recorded (begun by the operator as the CA nears its expiry)", "step: trust-new since not recorded (step 4 of 4"}},
		{name: "a rotation under way shows its step, since when, and both CAs", status: &api.CARotationStatus{CA: old, Rotation: "r2", Step: "trust-both",
			Started: at(now.Add(-time.Hour)), StepStarted: at(now.Add(-time.Hour)), OldCA: old, NewCA: next, LastRotation: "r1", LastRotated: at(now.Add(-90 * 24 * time.Hour))},
			want: []string{"CA rotation: r2, began 2026-11-29T07:00:00Z", "step: trust-both since 2026-11-29T07:00:00Z (steps 1-2 of 4: the certificate secrets trust the old and the new CA",
				"old CA: CN=etcd CA of team-a/example,O=etcd-operator, serial 5f3a", "new CA: CN=etcd CA of team-a/example,O=etcd-operator, serial 9c41",
				"Last CA rotation: r1, ended 2026-08-31T08:00:00Z"}},
		{name: "a rotation an earlier operator began says its start was not recorded", status: &api.CARotationStatus{CA: old, Rotation: "r2", Step: "reissue", OldCA: old, NewCA: next},
			want: []string{"r2, began not recorded", "reissue since not recorded (step 3 of 4: every certificate is issued again from the new CA)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newKubeFixture(t, func(c *api.EtcdCluster) {
				c.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{}}
				c.Status.CARotation = tt.status
			})
			var out strings.Builder
			if err := f.plugin.Certificates(t.Context(), &out, ns, "example", "", now); err != nil {
				t.Fatal(err)
			}
			// Columns are aligned by a tabwriter: words are compared.
			flat := strings.Join(strings.Fields(out.String()), " ")
			for _, w := range tt.want {
				if !strings.Contains(flat, w) {
					t.Errorf("printed\n%s\nwant %q", out.String(), w)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(out.String(), a) {
					t.Errorf("printed\n%s\nwith %q", out.String(), a)
				}
			}
			var doc strings.Builder
			if err := f.plugin.Certificates(t.Context(), &doc, ns, "example", "json", now); err != nil {
				t.Fatal(err)
			}
			var r CertsReport
			if err := json.Unmarshal([]byte(doc.String()), &r); err != nil {
				t.Fatal(err)
			}
			if (r.CARotation == nil) != (tt.status == nil) || r.CARotation != nil && r.CARotation.Step != tt.status.Step {
				t.Errorf("-o json caRotation = %+v, want %+v", r.CARotation, tt.status)
			}
		})
	}
}

func TestCertsNamesTheCertManagerIssuer(t *testing.T) {
	f := newKubeFixture(t, func(c *api.EtcdCluster) {
		c.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{IssuerRef: &api.IssuerReference{Name: "etcd-ca", Kind: api.ClusterIssuerKind}}}
	})
	out, _, err := cliRun(t, f.plugin, "certs", "example", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	if want := "issued by: cert-manager ClusterIssuer etcd-ca (cert-manager.io)"; !strings.Contains(out, want) {
		t.Errorf("printed:\n%s\nwant a line %q", out, want)
	}
}
