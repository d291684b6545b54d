// Package tlsissue makes the certificates of a cluster whose TLS the operator
// issues (spec.TLS.issued): a CA of its own, and the peer, server and client
// certificates it signs, in the layout of the secrets members and the
// operator mount. It is pure: keys come from crypto/rand, time from the
// caller, and nothing here talks to Kubernetes.
package tlsissue

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// Keys of the CA secret.
const (
	CACertKey = "ca.crt"
	CAKeyKey  = "ca.key"
)

// CAValidity is how long a CA the operator makes is valid: longer than any
// certificate it issues, and long enough that nobody has to renew it soon.
const CAValidity = 10 * 365 * 24 * time.Hour

// backdate is how far before now a certificate starts: clocks of nodes
// differ, and a certificate that starts in a member's future is refused.
const backdate = 5 * time.Minute

// CA is a certificate authority with its key.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// NewCA makes a CA (ECDSA P-256) named for the cluster, valid from now for
// CAValidity.
func NewCA(commonName string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"etcd-operator"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("sign the CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pemOf("CERTIFICATE", der)}, nil
}

// SecretData is the CA as its secret holds it.
func (ca *CA) SecretData() (map[string][]byte, error) {
	keyPEM, err := keyPEM(ca.Key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{CACertKey: ca.CertPEM, CAKeyKey: keyPEM}, nil
}

// CAFromSecret reads a CA secret. It is refused when it lacks its key, its
// certificate is no CA, the key is not the certificate's, or it is not
// valid at now: certificates it would sign are then useless.
func CAFromSecret(data map[string][]byte, now time.Time) (*CA, error) {
	var missing []string
	for _, k := range []string{CACertKey, CAKeyKey} {
		if len(data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("lacks key(s) %s", strings.Join(missing, ", "))
	}
	block, _ := pem.Decode(data[CACertKey])
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s is not a PEM certificate", CACertKey)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s does not parse: %w", CACertKey, err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%s is not a CA certificate (no CA basic constraint or no cert-sign key usage)", CACertKey)
	}
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return nil, fmt.Errorf("%s is valid from %s to %s only", CACertKey, cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	kb, _ := pem.Decode(data[CAKeyKey])
	if kb == nil {
		return nil, fmt.Errorf("%s is not a PEM key", CAKeyKey)
	}
	key, err := parseKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s does not parse: %w", CAKeyKey, err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s is not the key of %s", CAKeyKey, CACertKey)
	}
	return &CA{Cert: cert, Key: key, CertPEM: data[CACertKey]}, nil
}

// Signed tells whether the certificate of a secret (certKey, in PEM) was
// signed by the CA: a leaf of another CA would not be trusted by the
// members given this CA's.
func (ca *CA) Signed(certPEM []byte) bool {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	return err == nil && cert.CheckSignatureFrom(ca.Cert) == nil
}

// Kind is one of the secrets of a cluster.
type Kind int

const (
	// Peer is mounted into members for their peer port.
	Peer Kind = iota
	// Server is mounted into members for their client port.
	Server
	// Operator is the operator's (and the probes') client certificate.
	Operator
	// Client is the client certificate of users and EtcdBackups.
	Client
)

var kindNames = [...]string{Peer: "peer", Server: "server", Operator: "operator", Client: "client"}

func (k Kind) String() string { return kindNames[k] }

// Kinds are every kind, in the order they are made.
var Kinds = []Kind{Peer, Server, Operator, Client}

// Keys are the keys of the secret of kind k: the certificate, its key and
// the CA it is checked against, as the original's secrets had them.
func (k Kind) Keys() (cert, key, ca string) {
	switch k {
	case Peer:
		return etcdutil.SecretPeerCert, etcdutil.SecretPeerKey, etcdutil.SecretPeerCA
	case Server:
		return etcdutil.SecretServerCert, etcdutil.SecretServerKey, etcdutil.SecretServerCA
	}
	return etcdutil.SecretClientCert, etcdutil.SecretClientKey, etcdutil.SecretClientCA
}

// Cluster names a cluster for the names its certificates carry.
type Cluster struct {
	Name, Namespace string
	// Domain is spec.pod.ClusterDomain (".cluster.local" when empty): the
	// members' names are given with and without it.
	Domain string
}

// Hosts are the names a member's peer and server certificates carry: every
// member (<member>.<cluster>.<ns>.svc, with and without the cluster
// domain), the client Service under each of its names, and localhost for
// etcdctl in the pod.
func (c Cluster) Hosts() []string {
	domain := c.Domain
	if domain == "" {
		domain = ".cluster.local"
	}
	if !strings.HasPrefix(domain, ".") {
		domain = "." + domain
	}
	client := c.Name + "-client"
	return []string{
		fmt.Sprintf("*.%s.%s.svc", c.Name, c.Namespace),
		fmt.Sprintf("*.%s.%s.svc%s", c.Name, c.Namespace, domain),
		client,
		fmt.Sprintf("%s.%s", client, c.Namespace),
		fmt.Sprintf("%s.%s.svc", client, c.Namespace),
		fmt.Sprintf("%s.%s.svc%s", client, c.Namespace, domain),
		"localhost",
	}
}

// Issue issues the certificate of kind k for the cluster, valid from
// now for validity, and lays it out with the CA as the secret holds it.
// Peer certificates serve and dial (members dial each other); server
// certificates too, as etcd's gRPC gateway dials its own member with the
// server's; client certificates only dial.
func (ca *CA) Issue(k Kind, c Cluster, now time.Time, validity time.Duration) (map[string][]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the %s key: %w", k, err)
	}
	tmpl := &x509.Certificate{
		Subject:   pkix.Name{CommonName: fmt.Sprintf("%s-%s", c.Name, k), Organization: []string{"etcd-operator"}},
		NotBefore: now.Add(-backdate),
		NotAfter:  now.Add(validity),
		KeyUsage:  x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		// A certificate is never valid longer than its CA.
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	switch k {
	case Peer, Server:
		tmpl.DNSNames = c.Hosts()
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	default:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := sign(tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign the %s certificate: %w", k, err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	certKey, keyKey, caKey := k.Keys()
	return map[string][]byte{certKey: pemOf("CERTIFICATE", der), keyKey: kp, caKey: ca.CertPEM}, nil
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
}

func keyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pemOf("PRIVATE KEY", der), nil
}

// parseKey reads the key forms a user's CA secret may hold: PKCS #8, EC or
// PKCS #1 RSA.
func parseKey(der []byte) (crypto.Signer, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
		return nil, errors.New("not a signing key")
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("neither PKCS #8, EC nor PKCS #1")
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// Bundle is the CA certificates, in PEM, one after another: the trusted CA
// file of members and clients while a CA is being replaced holds the old
// and the new, so that a certificate of either is trusted.
func Bundle(cas ...[]byte) []byte {
	var b []byte
	for _, c := range cas {
		b = append(b, c...)
		if len(c) > 0 && c[len(c)-1] != '\n' {
			b = append(b, '\n')
		}
	}
	return b
}

// Trusting is the secret data of kind k with its CA key holding bundle
// instead of the CA that issued the certificate: during a CA rotation a
// member or client must trust both the old CA and the new.
func (k Kind) Trusting(data map[string][]byte, bundle []byte) map[string][]byte {
	_, _, caKey := k.Keys()
	out := make(map[string][]byte, len(data))
	for key, v := range data {
		out[key] = v
	}
	out[caKey] = bundle
	return out
}
