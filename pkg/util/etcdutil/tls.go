package etcdutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Keys of the operator secret (spec.TLS.static.operatorSecret) that holds the
// client certificate the operator presents to etcd. The names are the
// original operator's, so existing secrets keep working.
const (
	SecretClientCert = "etcd-client.crt"
	SecretClientKey  = "etcd-client.key"
	SecretClientCA   = "etcd-client-ca.crt"
)

// NewTLSConfig builds a client TLS configuration in memory. The original
// wrote the PEM data to temporary files for the etcd client and never removed
// them; nothing here touches the disk. caPEM is required because the members'
// certificates come from the user's own CA, never the system pool. certPEM
// and keyPEM are either both set (client-certificate auth) or both empty.
func NewTLSConfig(certPEM, keyPEM, caPEM []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("tls config: no CA certificate found in the CA PEM data")
	}
	cfg := &tls.Config{
		RootCAs:    pool,
		MinVersion: tls.VersionTLS12,
	}
	switch {
	case len(certPEM) == 0 && len(keyPEM) == 0:
	case len(certPEM) == 0 || len(keyPEM) == 0:
		return nil, errors.New("tls config: client certificate and key must be given together")
	default:
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("tls config: client key pair: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// TLSConfigFromSecretData builds the client TLS configuration from the data
// of the operator secret. All three keys are required; the error names every
// missing one so that the user can fix the secret in one go.
func TLSConfigFromSecretData(data map[string][]byte) (*tls.Config, error) {
	var missing []string
	for _, k := range []string{SecretClientCert, SecretClientKey, SecretClientCA} {
		if len(data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("tls secret: missing or empty key(s) %s", strings.Join(missing, ", "))
	}
	cfg, err := NewTLSConfig(data[SecretClientCert], data[SecretClientKey], data[SecretClientCA])
	if err != nil {
		return nil, fmt.Errorf("tls secret: %w", err)
	}
	return cfg, nil
}
