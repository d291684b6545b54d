package cluster

import (
	"context"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// certRereadInterval is how often the member TLS secrets are read again for
// their check: a renewed certificate is seen within it, and a cluster at rest
// costs two reads per interval, not two per pass.
const certRereadInterval = 5 * time.Minute

// certRereadWhileBad is how often they are read while the last check found
// a problem: the user is replacing them, and the cluster waits for it.
const certRereadWhileBad = 15 * time.Second

// secretData is a secret as read, nil data when it does not exist.
type secretData struct {
	name string
	data map[string][]byte
}

// certCache holds the TLS secrets of the last read.
type certCache struct {
	peer, server *secretData
	// operator is the operator secret as loadTLS last read it.
	operator *secretData
	readAt   time.Time
	// bad tells whether the last check found a problem or a member secret
	// missing: the secrets are then read again at certRereadWhileBad.
	bad bool
	// listed are the certificates of the secrets in listedFrom (peer,
	// server, operator), parsed again only when one of them was read again:
	// a pass at rest reuses them. Shared with snapshots, never changed.
	listed     []etcdutil.Certificate
	listedFrom [3]*secretData
}

// due tells whether the TLS secrets are to be read again at now.
func (cc *certCache) due(now time.Time) bool {
	every := certRereadInterval
	if cc.bad {
		every = certRereadWhileBad
	}
	return now.Sub(cc.readAt) >= every
}

// checkCertificates lists the certificates of the cluster's TLS secrets
// (for their expiry: expiringCertificates and the metric) and checks them
// against the clock and the members' DNS names, so that an expired
// certificate, one of another CA or one without the members' names is
// reported before (and while) members fail their handshakes with it. A
// member secret that does not exist yet is not reported here: pods wait for
// it (cert-manager creates secrets after the cluster), and a missing
// operator secret is loadTLS's.
func (c *Cluster) checkCertificates(ctx context.Context, s *snapshot) ([]problem, []etcdutil.Certificate) {
	tlsp := s.spec.Spec.TLS
	if !tlsp.IsSecurePeer() && !tlsp.IsSecureClient() {
		c.certs = certCache{}
		return nil, nil
	}
	names := tlsp.Secrets(s.spec.Name)
	want := func(cached *secretData, name string) bool {
		return name != "" && (cached == nil || cached.name != name)
	}
	peerName, serverName := names.Peer, names.Server
	if c.certs.due(s.now) || want(c.certs.peer, peerName) || want(c.certs.server, serverName) {
		c.certs.peer, c.certs.server = c.readSecret(ctx, peerName), c.readSecret(ctx, serverName)
		c.certs.readAt = s.now
	}
	secret := func(sd *secretData, mk func(string, map[string][]byte) etcdutil.CertSecret) *etcdutil.CertSecret {
		if sd == nil || sd.data == nil {
			return nil
		}
		cs := mk(sd.name, sd.data)
		if tlsp.IsIssued() {
			cs.Field = names.Field
		}
		return &cs
	}
	var operator *etcdutil.CertSecret
	if tlsp.IsSecureClient() && c.certs.operator != nil && c.certs.operator.name == names.Operator {
		operator = secret(c.certs.operator, etcdutil.OperatorSecret)
	}
	peer, server := secret(c.certs.peer, etcdutil.PeerSecret), secret(c.certs.server, etcdutil.ServerSecret)
	msgs := etcdutil.CheckCertSecrets(peer, server, operator, memberHosts(s), s.now)
	var ps []problem
	for _, m := range msgs {
		ps = append(ps, newProblem(problemTLSCertificate, "TLS: %s", m))
	}
	// A member secret that does not exist yet is waited for like a bad
	// one: it is being made (by a certificate manager, by hand), and its
	// certificates are judged as soon as it appears.
	c.certs.bad = len(ps) > 0 || absent(c.certs.peer) || absent(c.certs.server)
	from := [3]*secretData{c.certs.peer, c.certs.server}
	if operator != nil {
		from[2] = c.certs.operator
	}
	if from != c.certs.listedFrom {
		c.certs.listed, c.certs.listedFrom = etcdutil.ListCertificates(peer, server, operator), from
	}
	return ps, c.certs.listed
}

// tlsGuide is the page that says how to renew certificates; issuedGuide
// says how the operator renews those it issued.
const (
	tlsGuide    = "docs/user-guide/tls.md#renewing-static-certificates"
	issuedGuide = "docs/user-guide/tls.md#renewal-of-issued-certificates"
	// caRotationGuide says how the CA of issued TLS is rotated.
	caRotationGuide = "docs/user-guide/tls.md#rotating-the-ca-of-issued-tls"
	// certManagerGuide says what cert-manager and the operator each do
	// with certificates a cert-manager issuer issues.
	certManagerGuide = "docs/user-guide/tls.md#certificates-from-cert-manager"
)

// expiringCertificates reports each certificate that expires soon
// (etcdutil.ExpiresSoon) as an advisory problem: nothing waits for it, but
// when it expires every handshake with it fails at once, which takes the
// whole cluster down. Each is its own problem, and a renewed certificate
// with a new expiry that also expires soon is a new one, announced again.
//
// Under issued TLS (issued) a certificate the operator issued is renewed
// by it (renew.go) before the user would be asked to: it is told only once
// its renewal is overdue (renewalOverdue), which says that something holds
// the renewal up. The CA is not renewed: it is told with how to rotate it.
func expiringCertificates(certs []etcdutil.Certificate, now time.Time, tlsp *api.TLSPolicy) []problem {
	issued := tlsp.IsIssued()
	var ps []problem
	for _, cert := range certs {
		renewed := issued && !cert.CA
		switch {
		case !renewed && !etcdutil.ExpiresSoon(cert, now):
			continue
		case renewed && (now.Before(renewalOverdue(cert.NotBefore, cert.NotAfter)) || !now.Before(cert.NotAfter)):
			continue
		}
		expiry := cert.NotAfter.UTC().Format(time.RFC3339)
		p := newProblem(problemTLSCertificateExpiring,
			"TLS: %s (serial %s, issuer %q) expires on %s: renew it and update the secret in place (see %s)",
			cert.Where(), cert.Serial, cert.Issuer, expiry, tlsGuide)
		if issued && cert.CA {
			// A CA the operator made is rotated unasked long before this
			// (caAutoRotateAt); one the user brought is rotated only when
			// asked, and renewing it in place would stop every renewal.
			p = newProblem(problemTLSCertificateExpiring,
				"TLS: %s (serial %s, issuer %q) expires on %s: rotate it with a new value of annotation %s (`kubectl etcd rotate-ca`; see %s)",
				cert.Where(), cert.Serial, cert.Issuer, expiry, rotateCAAnnotation, caRotationGuide)
		}
		switch {
		case tlsp.FromCertManager() && cert.CA:
			p = newProblem(problemTLSCertificateExpiring,
				"TLS: %s (serial %s, issuer %q) expires on %s: it is the CA of cert-manager issuer %s, renewed there (see %s)",
				cert.Where(), cert.Serial, cert.Issuer, expiry, tlsp.Issued.IssuerRef.Name, certManagerGuide)
		case tlsp.FromCertManager():
			p = newProblem(problemTLSCertificateExpiring,
				"TLS: %s (serial %s, issuer %q) expires on %s and was due for renewal on %s: cert-manager renews it and the operator copies it; the Certificate's conditions and status.reason say what holds it up (see %s)",
				cert.Where(), cert.Serial, cert.Issuer, expiry, renewAt(cert.NotBefore, cert.NotAfter).UTC().Format(time.RFC3339), certManagerGuide)
		case renewed:
			p = newProblem(problemTLSCertificateExpiring,
				"TLS: %s (serial %s, issuer %q) expires on %s and was due for renewal on %s: the operator renews it once every member is ready and no problem holds the cluster up (see %s)",
				cert.Where(), cert.Serial, cert.Issuer, expiry, renewAt(cert.NotBefore, cert.NotAfter).UTC().Format(time.RFC3339), issuedGuide)
		}
		p.topic = cert.Secret + "/" + cert.Key + "/" + cert.Serial + "/" + expiry
		p.fields = logrus.Fields{"secret": cert.Secret, "key": cert.Key, "subject": cert.Subject, "serial": cert.Serial, "notAfter": expiry}
		ps = append(ps, p)
	}
	return ps
}

// readSecret reads a secret for the check; nil when there is none to read
// or it cannot be read now (the next pass tries again).
func (c *Cluster) readSecret(ctx context.Context, name string) *secretData {
	if name == "" {
		return nil
	}
	secret, err := c.cfg.KubeClient.CoreV1().Secrets(c.namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return &secretData{name: name}
	case err != nil:
		c.log.WithError(err).WithField("secret", name).Debug("read TLS secret for its check")
		return nil
	}
	return &secretData{name: name, data: secret.Data}
}

// absent tells whether a secret the cluster names was found missing.
func absent(sd *secretData) bool {
	return sd != nil && sd.data == nil
}

// memberHosts are the DNS names member certificates must carry: those of
// the members that have pods, or, before there is any, the name a new
// member gets (<cluster>-<10 characters>).
func memberHosts(s *snapshot) []string {
	tmpl := memberTemplate(s.spec)
	names := make([]string, 0, len(s.pods))
	for name := range s.pods {
		names = append(names, name)
	}
	if len(names) == 0 {
		names = append(names, s.spec.Name+"-"+sampleMemberSuffix)
	}
	slices.Sort(names)
	hosts := make([]string, 0, len(names))
	for _, n := range names {
		m := tmpl
		m.Name = n
		hosts = append(hosts, m.Addr())
	}
	return hosts
}

// sampleMemberSuffix stands for the random part of a member's name.
const sampleMemberSuffix = "newmember0"
