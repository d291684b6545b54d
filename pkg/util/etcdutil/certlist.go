package etcdutil

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"time"
)

// Certificate is one certificate found in a cluster's TLS secrets: a leaf
// (the certificate a member or the operator presents) or a CA its secret
// trusts.
type Certificate struct {
	// Secret and Key say where it is: the secret's name and the data key.
	Secret string `json:"secret"`
	Key    string `json:"key"`
	// Field is the spec field that names the secret.
	Field string `json:"field"`
	// CA is true for a certificate of the secret's CA bundle.
	CA      bool   `json:"ca,omitempty"`
	Subject string `json:"subject"`
	Issuer  string `json:"issuer"`
	// Serial is the serial number in hexadecimal, as openssl prints it.
	Serial    string    `json:"serial"`
	NotBefore time.Time `json:"notBefore"`
	NotAfter  time.Time `json:"notAfter"`
	DNSNames  []string  `json:"dnsNames,omitempty"`
	IPs       []string  `json:"ips,omitempty"`
}

// ListCertificates lists every certificate of the given secrets, in their
// order: for each, those of its certificate key, then each CA of its CA
// bundle. A key that holds no certificate, or a PEM block that does not
// parse, adds nothing: CheckCertSecrets reports it. The same certificate
// twice under one key is listed once, so that (secret, key, serial) names
// one certificate. Any secret may be nil.
func ListCertificates(secrets ...*CertSecret) []Certificate {
	var out []Certificate
	for _, s := range secrets {
		if s == nil {
			continue
		}
		for _, k := range []struct {
			key string
			ca  bool
		}{{s.CertKey, false}, {s.CAKey, true}} {
			for _, c := range parseAllCerts(s.Data[k.key]) {
				out = append(out, describeCert(*s, k.key, k.ca, c))
			}
		}
	}
	return out
}

// parseAllCerts parses every CERTIFICATE block of data, leaving out those
// that do not parse and repeats.
func parseAllCerts(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			continue
		}
		repeat := false
		for _, o := range out {
			repeat = repeat || bytes.Equal(o.Raw, c.Raw)
		}
		if !repeat {
			out = append(out, c)
		}
	}
}

func describeCert(s CertSecret, key string, ca bool, c *x509.Certificate) Certificate {
	ips := make([]string, 0, len(c.IPAddresses))
	for _, ip := range c.IPAddresses {
		ips = append(ips, ip.String())
	}
	return Certificate{
		Secret: s.Name, Key: key, Field: s.Field, CA: ca,
		Subject: c.Subject.String(), Issuer: c.Issuer.String(), Serial: fmt.Sprintf("%x", c.SerialNumber),
		NotBefore: c.NotBefore.UTC(), NotAfter: c.NotAfter.UTC(),
		DNSNames: c.DNSNames, IPs: ips,
	}
}

// ExpiryNotice is the least notice a certificate's expiry is given: a month
// is time to get a certificate renewed by whoever issues them, past a
// holiday or a change freeze.
const ExpiryNotice = 30 * 24 * time.Hour

// ExpiryNoticeMost bounds the notice the lifetime rule gives: a CA of ten
// years flagged for its last three would be a warning everyone learns to
// ignore, while a quarter is time for a CA's renewal in its ordered steps.
const ExpiryNoticeMost = 90 * 24 * time.Hour

// WarnFrom is when a certificate starts to "expire soon": ExpiryNotice
// before it expires, or when the last third of its lifetime begins
// (at most ExpiryNoticeMost ahead), whichever comes first. The earlier of
// the two is the safer for the user: a certificate of 180 days is flagged
// 60 days ahead, one of a month or less from its start, since renewing it
// by hand is a chore that is due at once.
func WarnFrom(notBefore, notAfter time.Time) time.Time {
	notice := max(ExpiryNotice, min(notAfter.Sub(notBefore)/3, ExpiryNoticeMost))
	return notAfter.Add(-notice)
}

// ExpiresSoon tells whether c, still valid at now, is past WarnFrom. An
// expired certificate is not "soon": the check that finds the unusable
// ones reports it.
func ExpiresSoon(c Certificate, now time.Time) bool {
	return !now.Before(WarnFrom(c.NotBefore, c.NotAfter)) && now.Before(c.NotAfter)
}

// Where names the certificate for people: its key, secret and subject.
func (c Certificate) Where() string {
	what := "certificate"
	if c.CA {
		what = "CA certificate"
	}
	return fmt.Sprintf("%s %q in %s of secret %s (%s)", what, c.Subject, c.Key, c.Secret, c.Field)
}
