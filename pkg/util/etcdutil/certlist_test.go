package etcdutil

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

func TestListCertificates(t *testing.T) {
	ca, next := newTestCA(t, "cluster CA"), newTestCA(t, "next CA")
	leaf, key := etcdtest.Issue(t, ca.cert, ca.key, &x509.Certificate{
		SerialNumber: big.NewInt(0xbeef), Subject: pkix.Name{CommonName: "member"},
		DNSNames: []string{"*.example.default.svc"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	})
	opLeaf, opKey := etcdtest.Issue(t, ca.cert, ca.key, &x509.Certificate{SerialNumber: big.NewInt(0xcafe), Subject: pkix.Name{CommonName: "operator"}})
	parsed, err := x509.ParseCertificate(mustDecode(t, leaf))
	if err != nil {
		t.Fatal(err)
	}
	secret := func(mk func(string, map[string][]byte) CertSecret, name string, cert, key, bundle []byte) *CertSecret {
		s := mk(name, map[string][]byte{})
		s.Data[s.CertKey], s.Data[s.KeyKey], s.Data[s.CAKey] = cert, key, bundle
		return &s
	}
	member := Certificate{Secret: "peer", Key: SecretPeerCert, Field: "spec.TLS.static.member.peerSecret",
		Subject: "CN=member", Issuer: "CN=cluster CA", Serial: "beef",
		NotBefore: parsed.NotBefore.UTC(), NotAfter: parsed.NotAfter.UTC(),
		DNSNames: []string{"*.example.default.svc"}, IPs: []string{"127.0.0.1"}}
	caOf := func(s, key, field string, c testCA) Certificate {
		return Certificate{Secret: s, Key: key, Field: field, CA: true, Subject: c.cert.Subject.String(), Issuer: c.cert.Subject.String(),
			Serial: fmt.Sprintf("%x", c.cert.SerialNumber), NotBefore: c.cert.NotBefore.UTC(), NotAfter: c.cert.NotAfter.UTC(), IPs: []string{}}
	}
	tests := []struct {
		name    string
		secrets []*CertSecret
		want    []Certificate
	}{
		{"no secrets, no certificates", nil, nil},
		{"a secret lists its leaf, then its CA", []*CertSecret{secret(PeerSecret, "peer", leaf, key, ca.pem)},
			[]Certificate{member, caOf("peer", SecretPeerCA, "spec.TLS.static.member.peerSecret", ca)}},
		{"every CA of a bundle is listed, a repeat once",
			[]*CertSecret{secret(PeerSecret, "peer", leaf, key, append(append(append([]byte{}, ca.pem...), next.pem...), ca.pem...))},
			[]Certificate{member, caOf("peer", SecretPeerCA, "spec.TLS.static.member.peerSecret", ca), caOf("peer", SecretPeerCA, "spec.TLS.static.member.peerSecret", next)}},
		{"what does not parse is left out, a missing secret too",
			[]*CertSecret{nil, secret(ServerSecret, "server", []byte("garbage"), key, append([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), ca.pem...))},
			[]Certificate{caOf("server", SecretServerCA, "spec.TLS.static.member.serverSecret", ca)}},
		{"the three secrets in their order",
			[]*CertSecret{secret(PeerSecret, "peer", leaf, key, ca.pem), secret(ServerSecret, "server", nil, nil, nil), secret(OperatorSecret, "op", opLeaf, opKey, ca.pem)},
			[]Certificate{member, caOf("peer", SecretPeerCA, "spec.TLS.static.member.peerSecret", ca),
				{Secret: "op", Key: SecretClientCert, Field: "spec.TLS.static.operatorSecret", Subject: "CN=operator", Issuer: "CN=cluster CA", Serial: "cafe",
					NotBefore: member.NotBefore, NotAfter: member.NotAfter, IPs: []string{}},
				caOf("op", SecretClientCA, "spec.TLS.static.operatorSecret", ca)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ListCertificates(tt.secrets...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ListCertificates (-want +got):\n%s", diff)
			}
		})
	}
}

func mustDecode(t *testing.T, certPEM []byte) []byte {
	t.Helper()
	certs := parseAllCerts(certPEM)
	if len(certs) != 1 {
		t.Fatalf("want one certificate, got %d", len(certs))
	}
	return certs[0].Raw
}

func TestExpiresSoon(t *testing.T) {
	day := 24 * time.Hour
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		lifetime time.Duration
		at       time.Duration // after NotBefore
		want     bool
	}{
		{"a year's certificate in its first half is fine", 365 * day, 180 * day, false},
		{"a 180-day certificate is flagged as its last third begins, 60 days ahead", 180 * day, 120 * day, true},
		{"a 180-day certificate just before its last third is fine", 180 * day, 120*day - time.Minute, false},
		{"a year's certificate is flagged 90 days ahead, not at its last third", 365 * day, 275 * day, true},
		{"a year's certificate 91 days ahead is fine", 365 * day, 274 * day, false},
		{"a 90-day certificate is flagged 30 days ahead", 90 * day, 60 * day, true},
		{"a 90-day certificate 31 days ahead is fine", 90 * day, 59 * day, false},
		{"a 10-year CA is flagged 90 days ahead, not years ahead", 3650 * day, 3560 * day, true},
		{"a 10-year CA 91 days ahead is fine", 3650 * day, 3559 * day, false},
		{"a certificate of a week is flagged from its start: renewing it by hand is due at once", 7 * day, 0, true},
		{"a certificate at its expiry is expired, not expiring", 90 * day, 90 * day, false},
		{"an expired certificate is not expiring", 90 * day, 100 * day, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Certificate{NotBefore: start, NotAfter: start.Add(tt.lifetime)}
			if got := ExpiresSoon(c, start.Add(tt.at)); got != tt.want {
				t.Errorf("ExpiresSoon at %v of %v = %v, want %v (warn from %s)", tt.at, tt.lifetime, got, tt.want, WarnFrom(c.NotBefore, c.NotAfter))
			}
		})
	}
}
