package cluster

import (
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// issuedRunning is a running cluster of three of issued TLS on the fake
// clients, annotated with annotations, whose CA issued its four
// certificates age ago for 90 days.
func issuedRunning(t *testing.T, age time.Duration, annotations map[string]string) (*fixture, *tlsissue.CA) {
	t.Helper()
	cl := newTestCluster(withIssuedTLS)
	cl.Annotations = annotations
	f := newFixture(t, cl)
	ca := addCA(t, f)
	for _, name := range issuedNames[1:] {
		leaf, err := ca.Issue(kindOf(name), tlsissue.Cluster{Name: testName, Namespace: testNS}, testStart.Add(-age), api.DefaultCertificateValidity)
		if err != nil {
			t.Fatal(err)
		}
		addSecret(t, f, name, leaf)
	}
	f.withMembers(memberA, memberB, memberC)
	f.pod(memberA)
	f.pod(memberB)
	f.pod(memberC)
	return f, ca
}

// leafCert is the certificate of a secret of issued TLS.
func leafCert(t *testing.T, s *corev1.Secret) *x509.Certificate {
	t.Helper()
	certKey, _, _ := kindOf(s.Name).Keys()
	block, _ := pem.Decode(s.Data[certKey])
	if block == nil {
		t.Fatalf("secret %s holds no certificate in %s", s.Name, certKey)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// passes runs n passes that must not fail.
func (f *fixture) passes(n int) {
	f.t.Helper()
	for range n {
		f.mustPass()
	}
}

// TestRenewal: the certificates of issued TLS are renewed from their CA in
// place, one secret per pass, when two thirds of their lifetime have passed
// or the user asks; the operator dials with its renewed certificate.
func TestRenewal(t *testing.T) {
	day := 24 * time.Hour
	const rotation = "2025-03-01T11:00:00Z"
	t.Run("certificates past two thirds of their lifetime are renewed in place from the same CA, one per pass, and told", func(t *testing.T) {
		f, ca := issuedRunning(t, 61*day, nil)
		reg := prometheus.NewRegistry()
		f.c.cfg.Metrics = NewMetrics(reg)
		before := map[string]*corev1.Secret{}
		for _, name := range issuedNames[1:] {
			before[name] = f.secret(name)
		}
		f.mustPass()
		expect(t, "secrets updated by the first pass", f.secretUpdates(), []string{"example-peer-tls"})
		f.passes(6)
		expect(t, "secrets updated", f.secretUpdates(), issuedNames[1:])
		expect(t, "secrets created", f.secretCreates(), nil)
		expect(t, "pod actions", f.podActions(), nil)
		for _, name := range issuedNames[1:] {
			after := f.secret(name)
			old, renewed := leafCert(t, before[name]), leafCert(t, after)
			certKey, _, _ := kindOf(name).Keys()
			switch {
			case !ca.Signed(after.Data[certKey]):
				t.Errorf("%s was not renewed from the cluster's CA", name)
			case !renewed.NotAfter.After(old.NotAfter):
				t.Errorf("%s expires on %s after its renewal, not after %s", name, renewed.NotAfter, old.NotAfter)
			case !slices.Equal(renewed.DNSNames, old.DNSNames) || renewed.Subject.String() != old.Subject.String():
				t.Errorf("%s names %s %v after its renewal, %s %v before", name, renewed.Subject, renewed.DNSNames, old.Subject, old.DNSNames)
			}
			if ref := metav1.GetControllerOf(after); ref != nil || after.Labels[api.LabelClusterName] != before[name].Labels[api.LabelClusterName] {
				t.Errorf("%s metadata changed by its renewal: %+v", name, after.ObjectMeta)
			}
		}
		var told []string
		for _, e := range f.events() {
			if strings.Contains(e, eventCertificateRenewed) {
				told = append(told, e)
			}
		}
		if len(told) != 4 || !strings.Contains(told[0], "Normal CertificateRenewed Secret example-peer-tls renewed from CA secret example-ca: it expired on 2025-03-30T12:00:00Z, now on 2025-05-30T12:00:00Z (two thirds of its lifetime passed on") {
			t.Errorf("events = %q, want one CertificateRenewed per secret with both expiries", told)
		}
		if got := seriesOf(t, reg, "etcd_operator_cluster_certificates_renewed_total", "secret"); len(got) != 4 || got["example-operator-tls"] != 1 {
			t.Errorf("renewals counted: %v", got)
		}
		if got := f.c.certs.operator; got == nil || !ca.Signed(got.data["etcd-client.crt"]) ||
			string(got.data["etcd-client.crt"]) != string(f.secret("example-operator-tls").Data["etcd-client.crt"]) {
			t.Error("the operator does not dial with its renewed certificate")
		}
		if f.c.tlsConfig == nil {
			t.Error("the operator has no client TLS after the renewal")
		}
		f.passes(2)
		expect(t, "secrets updated", f.secretUpdates(), issuedNames[1:])
	})

	t.Run("a rotation asked for renews every secret once and is recorded in status", func(t *testing.T) {
		f, _ := issuedRunning(t, day, map[string]string{api.RotateCertificatesAnnotation: rotation})
		f.passes(7)
		expect(t, "secrets updated", f.secretUpdates(), issuedNames[1:])
		for _, name := range issuedNames[1:] {
			if got := f.secret(name).Annotations[api.RotatedForAnnotation]; got != rotation {
				t.Errorf("%s renewed for %q, want %q", name, got, rotation)
			}
		}
		if got := f.mustStatus().CertificatesRotated; got != rotation {
			t.Errorf("status.certificatesRotated = %q, want %q", got, rotation)
		}
		f.passes(2)
		expect(t, "secrets updated", f.secretUpdates(), issuedNames[1:])
	})

	t.Run("a secret written since it was read is read again, not overwritten", func(t *testing.T) {
		f, _ := issuedRunning(t, 61*day, nil)
		conflicts := 1
		f.kube.PrependReactor("update", "secrets", func(a clienttesting.Action) (bool, runtime.Object, error) {
			if conflicts > 0 {
				conflicts--
				return true, nil, apierrors.NewConflict(corev1.Resource("secrets"), "example-peer-tls", nil)
			}
			return false, nil, nil
		})
		f.mustPass()
		if told := f.events(); slices.ContainsFunc(told, func(e string) bool { return strings.Contains(e, eventCertificateRenewed) }) {
			t.Errorf("a renewal that met a conflict was told: %q", told)
		}
		f.mustPass()
		expect(t, "secrets updated", f.secretUpdates(), []string{"example-peer-tls", "example-peer-tls"})
		if !strings.Contains(strings.Join(f.events(), "\n"), "CertificateRenewed Secret example-peer-tls") {
			t.Error("the renewal after the conflict was not told")
		}
	})

	t.Run("without the right to update secrets the status names the verb to add", func(t *testing.T) {
		f, _ := issuedRunning(t, 61*day, nil)
		f.kube.PrependReactor("update", "secrets", func(a clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), "example-peer-tls", nil)
		})
		if err := f.pass(); err == nil {
			t.Fatal("the pass succeeded without updating the secret")
		}
		if s := f.mustStatus(); !strings.Contains(s.Reason, "add the verb update to its rule on secrets") {
			t.Errorf("reason = %q", s.Reason)
		}
	})

	t.Run("an expired certificate is renewed while members are not ready, one secret per pass, from the same CA", func(t *testing.T) {
		f, ca := issuedRunning(t, 91*day, nil)
		f.setReady(memberA, false)
		f.setReady(memberB, false)
		f.setReady(memberC, false)
		f.mustPass()
		expect(t, "secrets updated by the first pass", f.secretUpdates(), []string{"example-peer-tls"})
		f.passes(6)
		expect(t, "secrets updated", f.secretUpdates(), issuedNames[1:])
		expect(t, "pod actions", f.podActions(), nil)
		for _, name := range issuedNames[1:] {
			after := f.secret(name)
			certKey, _, _ := kindOf(name).Keys()
			if !ca.Signed(after.Data[certKey]) || !leafCert(t, after).NotAfter.After(testStart) {
				t.Errorf("%s was not renewed from the cluster's CA into a valid certificate", name)
			}
		}
		if told := strings.Join(f.events(), "\n"); !strings.Contains(told, "CertificateRenewed Secret example-peer-tls renewed from CA secret example-ca: it expired on 2025-02-28T12:00:00Z, now on 2025-05-30T12:00:00Z (expired on 2025-02-28T12:00:00Z: every handshake with it fails)") {
			t.Errorf("events = %q", told)
		}
	})

	t.Run("nothing is renewed while a member is not ready", func(t *testing.T) {
		f, _ := issuedRunning(t, 61*day, nil)
		f.setReady(memberB, false)
		f.passes(2)
		expect(t, "secrets updated", f.secretUpdates(), nil)
	})
}

// TestRenewalDuringACARotation: while the CA secret records a CA rotation,
// a leaf of the new CA is no problem, an expired leaf is still renewed (from
// ca.crt, which every member trusts through the rotation), and the renewal
// keeps the trusted CA the rotation gave the secret.
func TestRenewalDuringACARotation(t *testing.T) {
	f, old := issuedRunning(t, 91*24*time.Hour, nil)
	f.setReady(memberA, false)
	f.setReady(memberB, false)
	f.setReady(memberC, false)
	next, err := tlsissue.NewCA("the next CA", testStart)
	if err != nil {
		t.Fatal(err)
	}
	nextData, err := next.SecretData()
	if err != nil {
		t.Fatal(err)
	}
	update := func(s *corev1.Secret) {
		t.Helper()
		if err := f.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), s, testNS); err != nil {
			t.Fatal(err)
		}
	}
	caSecret := f.secret("example-ca")
	caSecret.Annotations = map[string]string{caRotationAnnotation: "r1", caRotationStepAnnotation: string(caStepReissue)}
	caSecret.Data[nextCACertKey], caSecret.Data[nextCAKeyKey] = nextData[tlsissue.CACertKey], nextData[tlsissue.CAKeyKey]
	update(caSecret)
	both := tlsissue.Bundle(old.CertPEM, next.CertPEM)
	for _, name := range issuedNames[1:] {
		s := f.secret(name)
		s.Data = kindOf(name).Trusting(s.Data, both)
		if name == "example-server-tls" {
			// Already issued from the new CA by the rotation.
			fresh, err := next.Issue(tlsissue.Server, tlsissue.Cluster{Name: testName, Namespace: testNS}, testStart, api.DefaultCertificateValidity)
			if err != nil {
				t.Fatal(err)
			}
			s.Data = tlsissue.Server.Trusting(fresh, both)
		}
		update(s)
	}
	f.passes(6)
	expect(t, "secrets updated", f.secretUpdates(), []string{"example-peer-tls", "example-operator-tls", "example-client-tls"})
	for _, name := range issuedNames[1:] {
		s := f.secret(name)
		certKey, _, caKey := kindOf(name).Keys()
		if string(s.Data[caKey]) != string(both) {
			t.Errorf("%s trusts %q after its renewal, not the rotation's bundle", name, s.Data[caKey])
		}
		if name != "example-server-tls" && !old.Signed(s.Data[certKey]) {
			t.Errorf("%s was not renewed from ca.crt", name)
		}
	}
	if reason := f.mustStatus().Reason; strings.Contains(reason, "was not issued by the CA") {
		t.Errorf("a leaf of the rotation's new CA is reported: %q", reason)
	}
}
