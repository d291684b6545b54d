package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// testCA issues the certificates of the TLS secrets of cluster tests.
type testCA struct {
	t    *testing.T
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: testStart.Add(-24 * time.Hour), NotAfter: testStart.Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{t: t, cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// secret is a TLS secret of the given keys, with a certificate valid from
// notBefore to notAfter for names, signed by ca and trusting trust.
func (ca *testCA) secret(name string, keys [3]string, trust []byte, notAfter time.Time, names ...string) *corev1.Secret {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: testStart.Add(-24 * time.Hour), NotAfter: notAfter, DNSNames: names,
	}, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS}, Data: map[string][]byte{
		keys[0]: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keys[1]: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		keys[2]: trust,
	}}
}

var (
	peerKeys     = [3]string{etcdutil.SecretPeerCert, etcdutil.SecretPeerKey, etcdutil.SecretPeerCA}
	serverKeys   = [3]string{etcdutil.SecretServerCert, etcdutil.SecretServerKey, etcdutil.SecretServerCA}
	operatorKeys = [3]string{etcdutil.SecretClientCert, etcdutil.SecretClientKey, etcdutil.SecretClientCA}
)

// TestCertificateProblemsAreReported: what is wrong with the
// certificates of the TLS secrets is reported before and while they are used.
func TestCertificateProblemsAreReported(t *testing.T) {
	members := "*." + testName + "." + testNS + ".svc"
	later := testStart.Add(300 * 24 * time.Hour)
	secrets := func(ca, other *testCA, peerNotAfter time.Time) []runtime.Object {
		return []runtime.Object{
			ca.secret("peer-tls", peerKeys, ca.pem, peerNotAfter, members),
			other.secret("server-tls", serverKeys, other.pem, later, members),
			ca.secret("operator-tls", operatorKeys, ca.pem, later),
		}
	}

	t.Run("a new cluster with an expired peer certificate says so and makes no pod", func(t *testing.T) {
		ca := newTestCA(t)
		f := newFixture(t, newTestCluster(withSize(1), withPhase(api.ClusterPhaseNone), withTLS),
			secrets(ca, ca, testStart.Add(-time.Hour))...)
		f.mustPass()
		f.mustPass()
		expect(t, "pod actions", f.podActions(), nil)
		s := f.mustStatus()
		if !strings.Contains(s.Reason, "peer.crt of secret peer-tls (spec.TLS.static.member.peerSecret) expired on") {
			t.Errorf("reason = %q, want the expired peer certificate", s.Reason)
		}
		if n := countEvents(f.events(), "Warning TLSCertificateInvalid"); n != 1 {
			t.Errorf("%d TLSCertificateInvalid events, want 1", n)
		}
	})

	t.Run("a running cluster whose server certificate comes from another CA than the operator trusts says so", func(t *testing.T) {
		ca, other := newTestCA(t), newTestCA(t)
		f := newFixture(t, newTestCluster(withTLS), secrets(ca, other, later)...)
		f.withMembers(memberA, memberB, memberC)
		f.pod(memberA)
		f.pod(memberB)
		f.pod(memberC)
		f.mustPass()
		s := f.mustStatus()
		if !strings.Contains(s.Reason, "server.crt of secret server-tls (spec.TLS.static.member.serverSecret) is not trusted by etcd-client-ca.crt of secret operator-tls") {
			t.Errorf("reason = %q, want the untrusted server certificate", s.Reason)
		}
	})

	t.Run("certificates that name no member are reported with the names they carry", func(t *testing.T) {
		ca := newTestCA(t)
		f := newFixture(t, newTestCluster(withSize(1), withPhase(api.ClusterPhaseNone), withTLS),
			ca.secret("peer-tls", peerKeys, ca.pem, later, "etcd.example.com"),
			ca.secret("server-tls", serverKeys, ca.pem, later, members),
			ca.secret("operator-tls", operatorKeys, ca.pem, later))
		f.mustPass()
		if s := f.mustStatus(); !strings.Contains(s.Reason, "does not name the member DNS name(s) example-newmember0.example."+testNS+".svc (its names: etcd.example.com)") {
			t.Errorf("reason = %q", s.Reason)
		}
		expect(t, "pod actions", f.podActions(), nil)
	})

	t.Run("an operator secret replaced with a good certificate is judged and used from its next read", func(t *testing.T) {
		ca := newTestCA(t)
		f := newFixture(t, newTestCluster(withSize(1), withPhase(api.ClusterPhaseNone), withTLS),
			ca.secret("peer-tls", peerKeys, ca.pem, later, members),
			ca.secret("server-tls", serverKeys, ca.pem, later, members),
			ca.secret("operator-tls", operatorKeys, ca.pem, testStart.Add(-time.Hour)))
		f.mustPass()
		if s := f.mustStatus(); !strings.Contains(s.Reason, "of secret operator-tls (spec.TLS.static.operatorSecret) expired on") {
			t.Fatalf("reason = %q, want the expired operator certificate", s.Reason)
		}
		renewed := ca.secret("operator-tls", operatorKeys, ca.pem, later)
		if _, err := f.kube.CoreV1().Secrets(testNS).Update(t.Context(), renewed, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.now = f.now.Add(certRereadWhileBad)
		f.mustPass()
		f.mustPass()
		if s := f.mustStatus(); strings.Contains(s.Reason, "TLS") {
			t.Errorf("reason = %q %v after the operator secret was renewed, want no TLS problem", s.Reason, certRereadWhileBad)
		}
		if len(f.podActions()) == 0 {
			t.Error("no seed pod made once the certificates are good")
		}
		if got, want := f.c.certs.operator.data[etcdutil.SecretClientCert], renewed.Data[etcdutil.SecretClientCert]; string(got) != string(want) {
			t.Error("the etcd client still uses the certificate read before")
		}
	})

	t.Run("member secrets made after the cluster are judged within the short re-read, not the long one", func(t *testing.T) {
		// Certificate managers (and gen-certs.sh) make the secrets after
		// the cluster, which waits for them: their certificates must be
		// judged as soon as they appear, not a whole certRereadInterval
		// later.
		ca := newTestCA(t)
		f := newFixture(t, newTestCluster(withSize(1), withPhase(api.ClusterPhaseNone), withTLS),
			ca.secret("operator-tls", operatorKeys, ca.pem, later))
		f.mustPass()
		for _, s := range []*corev1.Secret{
			ca.secret("peer-tls", peerKeys, ca.pem, testStart.Add(-time.Hour), members),
			ca.secret("server-tls", serverKeys, ca.pem, later, members),
		} {
			if _, err := f.kube.CoreV1().Secrets(testNS).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		f.now = f.now.Add(certRereadWhileBad)
		f.mustPass()
		if s := f.mustStatus(); !strings.Contains(s.Reason, "peer.crt of secret peer-tls (spec.TLS.static.member.peerSecret) expired on") {
			t.Errorf("reason = %q %v after the member secrets appeared, want the expired peer certificate", s.Reason, certRereadWhileBad)
		}
	})

	t.Run("good certificates raise nothing and the cluster is made", func(t *testing.T) {
		ca := newTestCA(t)
		f := newFixture(t, newTestCluster(withSize(1), withPhase(api.ClusterPhaseNone), withTLS), secrets(ca, ca, later)...)
		f.mustSeed()
		if s := f.mustStatus(); strings.Contains(s.Reason, "TLS") {
			t.Errorf("reason = %q", s.Reason)
		}
		if len(f.podActions()) == 0 {
			t.Error("no seed pod made")
		}
	})
}

// testClientSecretData is an operator secret: a CA and a client certificate
// signed by it.
func testClientSecretData(t *testing.T) map[string][]byte {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, clientKey := key(), key()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: testStart.Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	clientDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "etcd-operator"},
		NotBefore: testStart.Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &clientKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		etcdutil.SecretClientCert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: clientDER}),
		etcdutil.SecretClientKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		etcdutil.SecretClientCA:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}
}

func TestExpiringCertificates(t *testing.T) {
	day := 24 * time.Hour
	cert := func(secret, key, serial string, ca bool, lifetime time.Duration) etcdutil.Certificate {
		return etcdutil.Certificate{Secret: secret, Key: key, Field: "spec.TLS.static.member.peerSecret", CA: ca,
			Subject: "CN=" + secret, Issuer: "CN=test CA", Serial: serial, NotBefore: testStart.Add(-365 * day), NotAfter: testStart.Add(lifetime)}
	}
	// issuedCert is a certificate of issued TLS of 90 days, issued age ago.
	issuedCert := func(ca bool, age time.Duration) etcdutil.Certificate {
		return etcdutil.Certificate{Secret: "example-peer-tls", Key: "peer.crt", Field: "spec.TLS.issued", CA: ca,
			Subject: "CN=example-peer", Issuer: "CN=etcd CA", Serial: "b2", NotBefore: testStart.Add(-age), NotAfter: testStart.Add(90*day - age)}
	}
	issuedOwnCA := &api.TLSPolicy{Issued: &api.IssuedTLS{}}
	fromCertManager := &api.TLSPolicy{Issued: &api.IssuedTLS{IssuerRef: &api.IssuerReference{Name: "etcd-ca"}}}
	tests := []struct {
		name  string
		certs []etcdutil.Certificate
		tls   *api.TLSPolicy
		want  []string
	}{
		{name: "no certificates, nothing to tell"},
		{name: "certificates far from their expiry are not told", certs: []etcdutil.Certificate{cert("peer-tls", "peer.crt", "a1", false, 200*day)}},
		{name: "a leaf that expires within 30 days is told with its secret, key, expiry and what to do",
			certs: []etcdutil.Certificate{cert("peer-tls", "peer.crt", "a1", false, 10*day), cert("peer-tls", "peer-ca.crt", "1", true, 200*day)},
			want:  []string{`TLS: certificate "CN=peer-tls" in peer.crt of secret peer-tls (spec.TLS.static.member.peerSecret) (serial a1, issuer "CN=test CA") expires on 2025-03-11T12:00:00Z: renew it and update the secret in place (see docs/user-guide/tls.md#renewing-static-certificates)`}},
		{name: "a CA of a bundle that expires soon is told as a CA",
			certs: []etcdutil.Certificate{cert("peer-tls", "peer-ca.crt", "1", true, 20*day)},
			want:  []string{`TLS: CA certificate "CN=peer-tls" in peer-ca.crt of secret peer-tls (spec.TLS.static.member.peerSecret) (serial 1, issuer "CN=test CA") expires on 2025-03-21T12:00:00Z: renew it and update the secret in place (see docs/user-guide/tls.md#renewing-static-certificates)`}},
		{name: "an expired certificate is the unusable certificates' problem, not told here",
			certs: []etcdutil.Certificate{cert("peer-tls", "peer.crt", "a1", false, -day)}},
		{name: "an issued certificate due for its renewal is not told: the operator renews it",
			certs: []etcdutil.Certificate{issuedCert(false, 61*day)}, tls: issuedOwnCA},
		{name: "an issued certificate whose renewal is overdue is told, with the date it was due",
			certs: []etcdutil.Certificate{issuedCert(false, 76*day)}, tls: issuedOwnCA,
			want: []string{`TLS: certificate "CN=example-peer" in peer.crt of secret example-peer-tls (spec.TLS.issued) (serial b2, issuer "CN=etcd CA") expires on 2025-03-15T12:00:00Z and was due for renewal on 2025-02-13T12:00:00Z: the operator renews it once every member is ready and no problem holds the cluster up (see docs/user-guide/tls.md#renewal-of-issued-certificates)`}},
		{name: "the CA of issued TLS is not renewed: it is told with how to rotate it, as a CA the user brought is never rotated unasked",
			certs: []etcdutil.Certificate{issuedCert(true, 61*day)}, tls: issuedOwnCA,
			want: []string{"TLS: CA certificate \"CN=example-peer\" in peer.crt of secret example-peer-tls (spec.TLS.issued) (serial b2, issuer \"CN=etcd CA\") expires on 2025-03-30T12:00:00Z: rotate it with a new value of annotation etcd.database.coreos.com/rotate-ca (`kubectl etcd rotate-ca`; see docs/user-guide/tls.md#rotating-the-ca-of-issued-tls)"}},
		{name: "a certificate cert-manager issued whose renewal is overdue is told, with where to look",
			certs: []etcdutil.Certificate{issuedCert(false, 76*day)}, tls: fromCertManager,
			want: []string{`TLS: certificate "CN=example-peer" in peer.crt of secret example-peer-tls (spec.TLS.issued) (serial b2, issuer "CN=etcd CA") expires on 2025-03-15T12:00:00Z and was due for renewal on 2025-02-13T12:00:00Z: cert-manager renews it and the operator copies it; the Certificate's conditions and status.reason say what holds it up (see docs/user-guide/tls.md#certificates-from-cert-manager)`}},
		{name: "the CA of a cert-manager issuer is told as the issuer's",
			certs: []etcdutil.Certificate{issuedCert(true, 61*day)}, tls: fromCertManager,
			want: []string{`TLS: CA certificate "CN=example-peer" in peer.crt of secret example-peer-tls (spec.TLS.issued) (serial b2, issuer "CN=etcd CA") expires on 2025-03-30T12:00:00Z: it is the CA of cert-manager issuer etcd-ca, renewed there (see docs/user-guide/tls.md#certificates-from-cert-manager)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range expiringCertificates(tt.certs, testStart, tt.tls) {
				if p.kind != problemTLSCertificateExpiring || p.topic == "" {
					t.Errorf("problem %+v: want an expiring certificate with its topic", p)
				}
				got = append(got, p.msg)
			}
			expect(t, "messages", got, tt.want)
		})
	}
}

// TestCertificateExpiringSoonIsToldAndHoldsNothingUp: a certificate that
// expires soon is an advisory problem: the cluster is made all the same,
// the status and one Warning event per certificate and expiry say so, the
// failed-pass metric stays quiet, and the expiry metric follows renewals.
func TestCertificateExpiringSoonIsToldAndHoldsNothingUp(t *testing.T) {
	members := "*." + testName + "." + testNS + ".svc"
	later := testStart.Add(300 * 24 * time.Hour)
	ca := newTestCA(t)
	f := newFixture(t, newTestCluster(withSize(1), withPhase(api.ClusterPhaseNone), withTLS),
		ca.secret("peer-tls", peerKeys, ca.pem, testStart.Add(10*24*time.Hour), members),
		ca.secret("server-tls", serverKeys, ca.pem, later, members),
		ca.secret("operator-tls", operatorKeys, ca.pem, later))
	reg := prometheus.NewRegistry()
	f.c.cfg.Metrics = NewMetrics(reg)
	f.mustSeed()
	f.mustPass()
	if len(f.podActions()) == 0 {
		t.Fatal("no seed pod made: an expiring certificate held the cluster up")
	}
	if s := f.mustStatus(); !strings.Contains(s.Reason, "peer.crt of secret peer-tls (spec.TLS.static.member.peerSecret)") ||
		!strings.Contains(s.Reason, "expires on 2025-03-11T12:00:00Z") {
		t.Errorf("reason = %q, want the peer certificate's expiry", s.Reason)
	}
	if n := countEvents(f.events(), "Warning CertificateExpiresSoon"); n != 1 {
		t.Errorf("%d CertificateExpiresSoon events, want 1 for the passes so far", n)
	}
	if failed := seriesOf(t, reg, "etcd_operator_cluster_reconcile_failures_total", "reason"); len(failed) != 0 {
		t.Errorf("failed passes counted for an advisory problem: %v", failed)
	}
	expiries := func() map[string]float64 {
		t.Helper()
		return seriesOf(t, reg, "etcd_operator_cluster_certificate_expiry_timestamp_seconds", "secret", "key", "subject")
	}
	caExpiry := float64(ca.cert.NotAfter.Unix())
	if diff := cmp.Diff(map[string]float64{
		"peer-tls/peer.crt/CN=peer-tls": float64(testStart.Add(10 * 24 * time.Hour).Unix()), "peer-tls/peer-ca.crt/CN=test CA": caExpiry,
		"server-tls/server.crt/CN=server-tls": float64(later.Unix()), "server-tls/server-ca.crt/CN=test CA": caExpiry,
		"operator-tls/etcd-client.crt/CN=operator-tls": float64(later.Unix()), "operator-tls/etcd-client-ca.crt/CN=test CA": caExpiry,
	}, expiries()); diff != "" {
		t.Errorf("expiry series (-want +got):\n%s", diff)
	}

	renew := func(notAfter time.Time) {
		t.Helper()
		if _, err := f.kube.CoreV1().Secrets(testNS).Update(t.Context(), ca.secret("peer-tls", peerKeys, ca.pem, notAfter, members), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.now = f.now.Add(certRereadInterval)
		f.mustPass()
		f.mustPass()
	}
	renew(testStart.Add(20 * 24 * time.Hour))
	if n := countEvents(f.events(), "Warning CertificateExpiresSoon"); n != 1 {
		t.Errorf("%d CertificateExpiresSoon events after a renewal that also expires soon, want 1 more", n)
	}
	renew(later)
	if n := countEvents(f.events(), "Warning CertificateExpiresSoon"); n != 0 {
		t.Errorf("%d CertificateExpiresSoon events after a renewal for 300 days", n)
	}
	if s := f.mustStatus(); strings.Contains(s.Reason, "expires on") {
		t.Errorf("reason = %q after the renewal", s.Reason)
	}
	if got := expiries()["peer-tls/peer.crt/CN=peer-tls"]; got != float64(later.Unix()) {
		t.Errorf("peer.crt expiry series = %v, want the renewed certificate's %v alone", got, later.Unix())
	}
	f.c.cfg.Metrics.forget(testNS, testName)
	if len(expiries()) != 0 {
		t.Error("expiry series left after the cluster was forgotten")
	}
}

// seriesOf is the family name of reg, by the values of labels joined with
// "/"; series that share them add up.
func seriesOf(t *testing.T, reg *prometheus.Registry, name string, labels ...string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			var key []string
			for _, n := range labels {
				key = append(key, l[n])
			}
			out[strings.Join(key, "/")] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return out
}

// A wait that lasts is told even while a certificate expires soon: the
// advisory problem does not say why nothing happens.
func TestAnExpiringCertificateDoesNotExplainAWait(t *testing.T) {
	f := newFixture(t, newTestCluster())
	expiring := newProblem(problemTLSCertificateExpiring, "TLS: certificate expires soon")
	invalid := newProblem(problemTLSCertificate, "TLS: certificate expired")
	wait := waiting("pods of an earlier seed are being deleted")
	for _, tt := range []struct {
		name     string
		problems []problem
		want     int
	}{
		{"an expiring certificate alone leaves the wait to be told", []problem{expiring}, 2},
		{"an invalid certificate explains the wait", []problem{invalid}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f.c.waitingSince = time.Time{}
			s := &snapshot{spec: f.cl, now: testStart, phase: api.ClusterPhaseRunning}
			f.c.noteWait(s, wait, tt.problems)
			s.now = testStart.Add(stallAfter)
			if got := f.c.noteWait(s, wait, tt.problems); len(got) != tt.want {
				t.Errorf("problems %v, want %d", got, tt.want)
			}
		})
	}
}
