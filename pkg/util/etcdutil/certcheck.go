package etcdutil

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"
)

// Keys of the member secrets, as the original named them.
const (
	SecretPeerCert   = "peer.crt"
	SecretPeerKey    = "peer.key"
	SecretPeerCA     = "peer-ca.crt"
	SecretServerCert = "server.crt"
	SecretServerKey  = "server.key"
	SecretServerCA   = "server-ca.crt"
)

// CertSecret is one TLS secret of a cluster as the operator is given it.
type CertSecret struct {
	// Name is the secret's name; Field the spec field that names it.
	Name, Field string
	// CertKey, KeyKey and CAKey are the keys of the certificate, its key
	// and the CA that peers verify against.
	CertKey, KeyKey, CAKey string
	Data                   map[string][]byte
}

// PeerSecret, ServerSecret and OperatorSecret describe the three secrets.
func PeerSecret(name string, data map[string][]byte) CertSecret {
	return CertSecret{Name: name, Field: "spec.TLS.static.member.peerSecret", CertKey: SecretPeerCert, KeyKey: SecretPeerKey, CAKey: SecretPeerCA, Data: data}
}

func ServerSecret(name string, data map[string][]byte) CertSecret {
	return CertSecret{Name: name, Field: "spec.TLS.static.member.serverSecret", CertKey: SecretServerCert, KeyKey: SecretServerKey, CAKey: SecretServerCA, Data: data}
}

func OperatorSecret(name string, data map[string][]byte) CertSecret {
	return CertSecret{Name: name, Field: "spec.TLS.static.operatorSecret", CertKey: SecretClientCert, KeyKey: SecretClientKey, CAKey: SecretClientCA, Data: data}
}

func (s CertSecret) where(key string) string {
	return fmt.Sprintf("%s of secret %s (%s)", key, s.Name, s.Field)
}

// parsed is a secret whose keys all parse.
type parsed struct {
	CertSecret
	cert *x509.Certificate
	ca   *x509.CertPool
}

// CheckCertSecrets finds what would make members or the operator fail
// their TLS handshakes, before they are tried: missing keys, data that does
// not parse, a key that is not the certificate's, a certificate that is not
// yet or no longer valid at now, not signed by the CA of its secret, not
// trusted by the other side, or not naming hosts. peer and server
// certificates must name hosts (the members' DNS names); the server's must
// be trusted by the operator's CA and the operator's by the server's. Any
// of peer, server and operator may be nil.
func CheckCertSecrets(peer, server, operator *CertSecret, hosts []string, now time.Time) []string {
	var problems []string
	check := func(s *CertSecret, named bool) *parsed {
		if s == nil {
			return nil
		}
		p, errs := parseCertSecret(*s, now)
		problems = append(problems, errs...)
		if p != nil && named {
			problems = append(problems, checkHosts(p, hosts)...)
		}
		return p
	}
	check(peer, true)
	srv := check(server, true)
	op := check(operator, false)
	if srv != nil && op != nil {
		if err := verifyAt(srv.cert, op.ca, now); err != nil {
			problems = append(problems, fmt.Sprintf("%s is not trusted by %s, so the operator cannot talk to members: %v",
				srv.where(srv.CertKey), op.where(op.CAKey), err))
		}
		if err := verifyAt(op.cert, srv.ca, now); err != nil {
			problems = append(problems, fmt.Sprintf("%s is not trusted by %s, so members refuse the operator: %v",
				op.where(op.CertKey), srv.where(srv.CAKey), err))
		}
	}
	return problems
}

func parseCertSecret(s CertSecret, now time.Time) (*parsed, []string) {
	var missing []string
	for _, k := range []string{s.CertKey, s.KeyKey, s.CAKey} {
		if len(s.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, []string{fmt.Sprintf("secret %s (%s) lacks key(s) %s", s.Name, s.Field, strings.Join(missing, ", "))}
	}
	block, _ := pem.Decode(s.Data[s.CertKey])
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, []string{fmt.Sprintf("%s is not a PEM certificate", s.where(s.CertKey))}
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s does not parse: %v", s.where(s.CertKey), err)}
	}
	if _, err := tls.X509KeyPair(s.Data[s.CertKey], s.Data[s.KeyKey]); err != nil {
		return nil, []string{fmt.Sprintf("%s is not the key of %s: %v", s.where(s.KeyKey), s.CertKey, err)}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.Data[s.CAKey]) {
		return nil, []string{fmt.Sprintf("%s holds no PEM certificate", s.where(s.CAKey))}
	}
	p := &parsed{CertSecret: s, cert: cert, ca: pool}
	switch {
	case now.After(cert.NotAfter):
		return p, []string{fmt.Sprintf("%s expired on %s", s.where(s.CertKey), cert.NotAfter.UTC().Format(time.RFC3339))}
	case now.Before(cert.NotBefore):
		return p, []string{fmt.Sprintf("%s is not valid before %s", s.where(s.CertKey), cert.NotBefore.UTC().Format(time.RFC3339))}
	}
	if err := verifyAt(cert, pool, now); err != nil {
		return p, []string{fmt.Sprintf("%s is not signed by %s: %v", s.where(s.CertKey), s.CAKey, err)}
	}
	return p, nil
}

// verifyAt checks the chain at now. Key usages are etcd's business: it
// accepts certificates without extended key usage.
func verifyAt(cert *x509.Certificate, roots *x509.CertPool, now time.Time) error {
	_, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

func checkHosts(p *parsed, hosts []string) []string {
	var bad []string
	for _, h := range hosts {
		if p.cert.VerifyHostname(h) != nil {
			bad = append(bad, h)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	names := append([]string{}, p.cert.DNSNames...)
	for _, ip := range p.cert.IPAddresses {
		names = append(names, net.IP.String(ip))
	}
	if len(names) == 0 {
		names = []string{"none"}
	}
	return []string{fmt.Sprintf("%s does not name the member DNS name(s) %s (its names: %s); members are <cluster>-<10 characters>.<cluster>.<namespace>.svc[<cluster domain>], so a wildcard like *.<cluster>.<namespace>.svc covers them",
		p.where(p.CertKey), strings.Join(bad, ", "), strings.Join(names, ", "))}
}
