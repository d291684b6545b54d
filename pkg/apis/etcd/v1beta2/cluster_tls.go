package v1beta2

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TLSPolicy configures TLS for a cluster: either static (the user's own
// secrets) or issued (certificates the operator makes), never both.
type TLSPolicy struct {
	// Static names the secrets of user-provided certificates.
	Static *StaticTLS `json:"static,omitempty"`
	// Issued asks the operator to issue every certificate from a CA of its
	// own, kept in a Secret: `TLS: {issued: {}}` is a TLS cluster, peers
	// and clients over https. The operator makes the Secrets
	// <cluster>-peer-tls, <cluster>-server-tls, <cluster>-operator-tls and
	// <cluster>-client-tls (etcd-client.crt, etcd-client.key and
	// etcd-client-ca.crt, for users and EtcdBackups) when they are missing.
	// It renews each of those four certificates from the same CA, in place,
	// once two thirds of its lifetime have passed, or when annotation
	// etcd.database.coreos.com/rotate-certificates gets a new value; the CA
	// is rotated on request (etcd.database.coreos.com/rotate-ca) and, when
	// the operator made it, by itself long before it expires. With
	// issuerRef, cert-manager issues and renews the certificates instead.
	Issued *IssuedTLS `json:"issued,omitempty"`
}

// IssuedTLS configures the certificates the operator issues.
type IssuedTLS struct {
	// CASecret names the Secret of the CA (ca.crt and ca.key) the
	// certificates are issued from; the operator makes it when it does not
	// exist, and uses one that does. Default <cluster>-ca.
	CASecret string `json:"caSecret,omitempty"`
	// CertificateValidity is how long the certificates the operator issues
	// are valid, like "2160h". Default 2160h (90 days); the CA it makes is
	// valid for ten years.
	CertificateValidity *metav1.Duration `json:"certificateValidity,omitempty"`
	// IssuerRef names a cert-manager Issuer or ClusterIssuer that issues
	// the certificates instead of a CA of the operator's own: the operator
	// makes four cert-manager Certificates owned by the cluster
	// (<cluster>-peer, -server, -operator and -client, each writing the
	// Secret <certificate>-cert-manager), which cert-manager issues and
	// renews (at two thirds of certificateValidity), and copies each issued
	// certificate into the Secret of the operator's layout that members and
	// clients mount, only once the members trust the CA that issued it.
	// Excludes caSecret.
	IssuerRef *IssuerReference `json:"issuerRef,omitempty"`
}

// IssuerReference names a cert-manager issuer, as a cert-manager
// Certificate's issuerRef does.
type IssuerReference struct {
	// Name is the issuer's name.
	Name string `json:"name"`
	// Kind is Issuer (default; in the cluster's namespace) or
	// ClusterIssuer, or the kind of an external issuer of another group.
	Kind string `json:"kind,omitempty"`
	// Group is the issuer's API group; default cert-manager.io.
	Group string `json:"group,omitempty"`
}

// Defaults of an issuer reference.
const (
	CertManagerGroup     = "cert-manager.io"
	IssuerKind           = "Issuer"
	ClusterIssuerKind    = "ClusterIssuer"
	certManagerSecretEnd = "-cert-manager"
)

// WithDefaults is the reference with its kind and group filled in.
func (r IssuerReference) WithDefaults() IssuerReference {
	if r.Kind == "" {
		r.Kind = IssuerKind
	}
	if r.Group == "" {
		r.Group = CertManagerGroup
	}
	return r
}

// FromCertManager tells whether cert-manager issues the cluster's
// certificates.
func (tp *TLSPolicy) FromCertManager() bool {
	return tp.IsIssued() && tp.Issued.IssuerRef != nil
}

// CertManagerCertificate names the cert-manager Certificate of the secret
// named secret (one of TLSSecrets' Peer, Server, Operator or Client), and
// the Secret cert-manager writes it into.
func CertManagerCertificate(secret string) (certificate, issuedSecret string) {
	certificate = strings.TrimSuffix(secret, "-tls")
	return certificate, certificate + certManagerSecretEnd
}

// StaticTLS names the secrets holding the certificates.
type StaticTLS struct {
	// Member names the secrets mounted into member pods.
	Member *MemberSecret `json:"member,omitempty"`
	// OperatorSecret holds etcd-client.crt, etcd-client.key and etcd-client-ca.crt,
	// used by the operator (and the probes) to talk to members over https.
	OperatorSecret string `json:"operatorSecret,omitempty"`
}

// MemberSecret names the secrets mounted into members.
type MemberSecret struct {
	// PeerSecret holds peer.crt, peer.key and peer-ca.crt; when set peers talk https.
	PeerSecret string `json:"peerSecret,omitempty"`
	// ServerSecret holds server.crt, server.key and server-ca.crt for the client port.
	ServerSecret string `json:"serverSecret,omitempty"`
}

// Defaults of issued TLS.
const (
	DefaultCertificateValidity = 90 * 24 * time.Hour
	// MaxCertificateValidity keeps a certificate within its CA's ten years.
	MaxCertificateValidity = 5 * 365 * 24 * time.Hour
	MinCertificateValidity = time.Hour
	// CertificateValidityRange says so in messages.
	CertificateValidityRange = "between 1h and 43800h (five years): the CA the operator makes is valid for ten years"
)

// TLSSecrets are the names of a cluster's TLS secrets, "" for those it has
// none of.
type TLSSecrets struct {
	// Peer and Server are mounted into members; Operator is the operator's
	// (and the probes') client certificate.
	Peer, Server, Operator string
	// Client is the client certificate users and EtcdBackups present: the
	// operator's under static TLS (the original had no other).
	Client string
	// CA is the issuing CA's secret, under issued TLS from the operator's
	// own CA only.
	CA string
	// Field is the spec field the names come from, for messages.
	Field string
}

// IsIssued tells whether the operator issues the cluster's certificates.
func (tp *TLSPolicy) IsIssued() bool {
	return tp != nil && tp.Issued != nil
}

// Secrets names the TLS secrets of the cluster named cluster, so that the
// rest of the operator does not care who made them.
func (tp *TLSPolicy) Secrets(cluster string) TLSSecrets {
	switch {
	case tp.IsIssued():
		ca := tp.Issued.CASecret
		switch {
		case tp.Issued.IssuerRef != nil:
			// The CA is the issuer's.
			ca = ""
		case ca == "":
			ca = cluster + "-ca"
		}
		return TLSSecrets{
			Peer: cluster + "-peer-tls", Server: cluster + "-server-tls",
			Operator: cluster + "-operator-tls", Client: cluster + "-client-tls",
			CA: ca, Field: "spec.TLS.issued",
		}
	case tp != nil && tp.Static != nil:
		s := TLSSecrets{Operator: tp.Static.OperatorSecret, Client: tp.Static.OperatorSecret, Field: "spec.TLS.static"}
		if m := tp.Static.Member; m != nil {
			s.Peer, s.Server = m.PeerSecret, m.ServerSecret
		}
		return s
	}
	return TLSSecrets{}
}

// SecretsInUse names the TLS secrets members may still mount: the policy's,
// and without TLS those of issued TLS, which members keep using while it
// is switched off (static TLS cannot be switched off).
func (tp *TLSPolicy) SecretsInUse(cluster string) TLSSecrets {
	if tp.Mode() == "" {
		return (&TLSPolicy{Issued: &IssuedTLS{}}).Secrets(cluster)
	}
	return tp.Secrets(cluster)
}

// Validity is how long issued certificates are valid.
func (it *IssuedTLS) Validity() time.Duration {
	if it == nil || it.CertificateValidity == nil || it.CertificateValidity.Duration == 0 {
		return DefaultCertificateValidity
	}
	return it.CertificateValidity.Duration
}

// Mode names the cluster's TLS mode: "issued", "static" or "" without TLS.
func (tp *TLSPolicy) Mode() string {
	switch {
	case tp.IsIssued():
		return "issued"
	case tp.IsSecurePeer() || tp.IsSecureClient():
		return "static"
	}
	return ""
}

// IsSecurePeer tells whether members talk to each other over https.
func (tp *TLSPolicy) IsSecurePeer() bool {
	return tp.IsIssued() || tp != nil && tp.Static != nil && tp.Static.Member != nil && tp.Static.Member.PeerSecret != ""
}

// IsSecureClient tells whether members serve clients over https.
func (tp *TLSPolicy) IsSecureClient() bool {
	return tp.IsIssued() || tp != nil && tp.Static != nil && tp.Static.OperatorSecret != ""
}
