package k8sutil

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MemberTLS is how a member pod runs as for TLS, read from its etcd
// flags: what the operator switching TLS in a running cluster moves each
// member through, whoever made the pod.
type MemberTLS struct {
	// PeerHTTPS: its peers' connections to it are TLS.
	PeerHTTPS bool
	// PeerCertificates: it holds the peer certificates (to listen https,
	// or to dial peers that do).
	PeerCertificates bool
	// ClientHTTP and ClientHTTPS: the schemes it serves clients with.
	ClientHTTP, ClientHTTPS bool
}

// MemberTLSOf reads pod's etcd flags; ok is false for a pod without an
// etcd container or without the flags that say it.
func MemberTLSOf(pod *corev1.Pod) (t MemberTLS, ok bool) {
	var args []string
	for _, c := range pod.Spec.Containers {
		if c.Name == EtcdContainerName {
			// The original ran etcd through a shell with one string of
			// flags: its words are the flags too.
			for _, a := range append(append([]string{}, c.Command...), c.Args...) {
				args = append(args, strings.Fields(a)...)
			}
		}
	}
	var peer, client bool
	for _, a := range args {
		name, value, _ := strings.Cut(a, "=")
		switch name {
		case "--listen-peer-urls":
			peer = true
			t.PeerHTTPS = strings.HasPrefix(value, "https://")
		case "--listen-client-urls":
			client = true
			for _, u := range strings.Split(value, ",") {
				switch {
				case strings.HasPrefix(u, "https://"):
					t.ClientHTTPS = true
				case strings.HasPrefix(u, "http://"):
					t.ClientHTTP = true
				}
			}
		case "--peer-cert-file":
			t.PeerCertificates = true
		}
	}
	return t, peer && client
}

// TLSStage is a member's stage of TLS switched on or off in a running
// cluster (pkg/cluster's tlsswitch.go tells the switch): members in
// adjacent stages can always talk.
type TLSStage int

const (
	// TLSPlain: peers and clients http, no certificate.
	TLSPlain TLSStage = iota
	// TLSCertificates: peers on http, the peer certificates held to dial
	// peers that listen https; clients served http and https.
	TLSCertificates
	// TLSPeersSecure: peers on https; clients served http and https.
	TLSPeersSecure
	// TLSSecure: peers and clients https alone.
	TLSSecure
	// TLSNoStage: TLS of peers alone or of clients alone (static TLS
	// allows it), which no switch goes through.
	TLSNoStage
)

var tlsStageNames = map[TLSStage]string{
	TLSPlain:        "plain",
	TLSCertificates: "certificates",
	TLSPeersSecure:  "peers secure",
	TLSSecure:       "secure",
	TLSNoStage:      "TLS of peers or of clients alone",
}

func (st TLSStage) String() string { return tlsStageNames[st] }

// Stage is the stage of a member running as t says.
func (t MemberTLS) Stage() TLSStage {
	switch {
	case !t.PeerHTTPS && !t.PeerCertificates && t.ClientHTTP && !t.ClientHTTPS:
		return TLSPlain
	case !t.PeerHTTPS && t.PeerCertificates && t.ClientHTTP && t.ClientHTTPS:
		return TLSCertificates
	case t.PeerHTTPS && t.ClientHTTP && t.ClientHTTPS:
		return TLSPeersSecure
	case t.PeerHTTPS && !t.ClientHTTP && t.ClientHTTPS:
		return TLSSecure
	}
	return TLSNoStage
}
