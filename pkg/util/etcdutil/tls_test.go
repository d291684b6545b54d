package etcdutil

import (
	"strings"
	"testing"
)

func TestNewTLSConfig(t *testing.T) {
	p := newTestPKI(t)
	other := newTestPKI(t)

	t.Run("a client key pair and CA give a config that presents the certificate", func(t *testing.T) {
		cfg, err := NewTLSConfig(p.clientCertPEM, p.clientKeyPEM, p.caPEM)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Certificates) != 1 || cfg.RootCAs == nil {
			t.Fatalf("certificates %d, RootCAs %v", len(cfg.Certificates), cfg.RootCAs)
		}
	})
	t.Run("a CA alone gives a config without client certificate", func(t *testing.T) {
		cfg, err := NewTLSConfig(nil, nil, p.caPEM)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Certificates) != 0 {
			t.Fatalf("certificates %d, want 0", len(cfg.Certificates))
		}
	})

	bad := []struct {
		name          string
		cert, key, ca []byte
		errPart       string
	}{
		{"a missing CA is refused", p.clientCertPEM, p.clientKeyPEM, nil, "no CA certificate"},
		{"garbage CA data is refused", p.clientCertPEM, p.clientKeyPEM, []byte("not pem"), "no CA certificate"},
		{"a certificate without key is refused", p.clientCertPEM, nil, p.caPEM, "given together"},
		{"a key without certificate is refused", nil, p.clientKeyPEM, p.caPEM, "given together"},
		{"a key that does not match the certificate is refused", p.clientCertPEM, other.clientKeyPEM, p.caPEM, "key pair"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewTLSConfig(tt.cert, tt.key, tt.ca)
			if err == nil || !strings.Contains(err.Error(), tt.errPart) {
				t.Fatalf("err = %v, want one containing %q", err, tt.errPart)
			}
		})
	}
}

func TestTLSConfigFromSecretData(t *testing.T) {
	p := newTestPKI(t)
	full := func() map[string][]byte {
		return map[string][]byte{
			"etcd-client.crt":    p.clientCertPEM,
			"etcd-client.key":    p.clientKeyPEM,
			"etcd-client-ca.crt": p.caPEM,
		}
	}

	t.Run("the three keys of the original operator secret are enough", func(t *testing.T) {
		cfg, err := TLSConfigFromSecretData(full())
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Certificates) != 1 || cfg.RootCAs == nil {
			t.Fatalf("certificates %d, RootCAs %v", len(cfg.Certificates), cfg.RootCAs)
		}
	})

	tests := []struct {
		name    string
		drop    []string
		empty   string
		errPart string
	}{
		{name: "a missing certificate is named", drop: []string{"etcd-client.crt"}, errPart: "key(s) etcd-client.crt"},
		{name: "a missing key is named", drop: []string{"etcd-client.key"}, errPart: "key(s) etcd-client.key"},
		{name: "a missing CA is named", drop: []string{"etcd-client-ca.crt"}, errPart: "key(s) etcd-client-ca.crt"},
		{name: "every missing key is named at once", drop: []string{"etcd-client.key", "etcd-client-ca.crt"}, errPart: "key(s) etcd-client-ca.crt, etcd-client.key"},
		{name: "an empty value counts as missing", empty: "etcd-client.key", errPart: "key(s) etcd-client.key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := full()
			for _, k := range tt.drop {
				delete(data, k)
			}
			if tt.empty != "" {
				data[tt.empty] = []byte{}
			}
			_, err := TLSConfigFromSecretData(data)
			if err == nil || !strings.Contains(err.Error(), tt.errPart) {
				t.Fatalf("err = %v, want one containing %q", err, tt.errPart)
			}
		})
	}

	t.Run("a nil map names all three keys", func(t *testing.T) {
		_, err := TLSConfigFromSecretData(nil)
		if err == nil || !strings.Contains(err.Error(), "etcd-client-ca.crt, etcd-client.crt, etcd-client.key") {
			t.Fatalf("err = %v", err)
		}
	})
}
