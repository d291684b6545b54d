package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr bool
	}{
		{"endpoints are required", nil, true},
		{"a list of endpoints", []string{"-endpoints", "http://a:2379, http://b:2379"}, false},
		{"no clients is refused", []string{"-endpoints", "http://a:2379", "-clients", "0"}, true},
		{"a zero duration is refused", []string{"-endpoints", "http://a:2379", "-duration", "0s"}, true},
		{"stray arguments are refused", []string{"-endpoints", "http://a:2379", "extra"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args, &bytes.Buffer{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && len(o.cfg.Endpoints) != 2 {
				t.Errorf("endpoints %q, want 2", o.cfg.Endpoints)
			}
		})
	}
}

func TestRunWithBadFlagsExitsTwo(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-clients", "3"}, &out, &errOut); code != 2 {
		t.Errorf("exit %d, want 2 (stderr %q)", code, errOut.String())
	}
}

// writeClientSecret writes a self-signed certificate as the three files of a
// cluster's client secret (the CA is the certificate itself: enough to load).
func writeClientSecret(t *testing.T) (ca, cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd-checker-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("etcd-client-ca.crt", "CERTIFICATE", der), write("etcd-client.crt", "CERTIFICATE", der), write("etcd-client.key", "EC PRIVATE KEY", keyDER)
}

func TestParseTLSFlags(t *testing.T) {
	ca, cert, key := writeClientSecret(t)
	https := "-endpoints=https://a:2379,https://b:2379"
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr bool
		wantTLS bool
		certs   int
	}{
		{"no TLS flags: plain http", []string{"-endpoints=http://a:2379,http://b:2379"}, false, false, 0},
		{"the client secret's three files", []string{https, "-cacert", ca, "-cert", cert, "-key", key}, false, true, 1},
		{"the CA alone verifies the server, presents no certificate", []string{https, "-cacert", ca}, false, true, 0},
		{"a certificate without its key is refused", []string{https, "-cacert", ca, "-cert", cert}, true, false, 0},
		{"a certificate without the CA is refused", []string{https, "-cert", cert, "-key", key}, true, false, 0},
		{"a missing CA file is refused", []string{https, "-cacert", ca + ".missing"}, true, false, 0},
		{"a key that is not one is refused", []string{https, "-cacert", ca, "-cert", cert, "-key", ca}, true, false, 0},
		{"TLS flags with an http endpoint are refused", []string{"-endpoints=http://a:2379", "-cacert", ca}, true, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args, &bytes.Buffer{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if (o.cfg.TLS != nil) != tc.wantTLS {
				t.Fatalf("TLS config %v, want one: %v", o.cfg.TLS, tc.wantTLS)
			}
			if tc.wantTLS && (o.cfg.TLS.RootCAs == nil || len(o.cfg.TLS.Certificates) != tc.certs) {
				t.Errorf("TLS config with CAs %v and %d certificates, want the CA and %d", o.cfg.TLS.RootCAs, len(o.cfg.TLS.Certificates), tc.certs)
			}
		})
	}
}
