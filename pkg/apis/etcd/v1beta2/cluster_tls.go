package v1beta2

// TLSPolicy configures TLS for a cluster. Only static (user-provided) secrets are supported.
type TLSPolicy struct {
	// Static names the secrets of user-provided certificates.
	Static *StaticTLS `json:"static,omitempty"`
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

// IsSecurePeer tells whether members talk to each other over https.
func (tp *TLSPolicy) IsSecurePeer() bool {
	return tp != nil && tp.Static != nil && tp.Static.Member != nil && tp.Static.Member.PeerSecret != ""
}

// IsSecureClient tells whether members serve clients over https.
func (tp *TLSPolicy) IsSecureClient() bool {
	return tp != nil && tp.Static != nil && tp.Static.OperatorSecret != ""
}
