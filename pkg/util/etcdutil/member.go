// Package etcdutil is the operator's only door to etcd: the member model that
// names pods and URLs, thin wrappers around the etcd v3 client, and the client
// TLS configuration built from a Kubernetes secret.
package etcdutil

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Ports etcd members listen on inside their pods. They are fixed because every
// member has its own pod IP and DNS name, so there is nothing to collide with.
const (
	ClientPort = 2379
	PeerPort   = 2380
)

// Member is one etcd member as the operator sees it. Its name is also the pod
// name and hostname; the pod's subdomain is the cluster's headless service, so
// the member is reachable at a stable DNS name before it ever joins etcd.
type Member struct {
	// Name is the member, pod and host name: "<cluster>-<suffix>".
	Name string
	// Namespace is the namespace of the pod and of the headless service.
	Namespace string
	// ID is the etcd member ID; 0 until etcd has assigned one (MemberAdd).
	ID uint64
	// SecurePeer and SecureClient select https for the peer and client URLs.
	SecurePeer   bool
	SecureClient bool
	// SwitchingTLS is a member of a cluster whose TLS is being switched on
	// or off while it runs: it holds the peer and server certificates
	// whatever its schemes, so that it can dial peers that listen https,
	// and it serves clients http and https on its one client port, so that
	// clients of either scheme keep working through the switch.
	SwitchingTLS bool
	// ClusterName is the EtcdCluster name, which is also the name of the
	// headless service. When empty it is derived from Name, as the original
	// operator did.
	ClusterName string
	// ClusterDomain is the DNS suffix after ".svc", such as ".cluster.local";
	// empty relies on the resolver's search path. A missing leading dot is
	// added, because "svccluster.local" can never be what the user meant.
	ClusterDomain string
	// IsLearner marks a member that does not vote yet: it counts neither
	// towards the quorum nor as an endpoint for requests that need one.
	IsLearner bool
}

// Addr is the member's DNS name: <name>.<cluster>.<namespace>.svc<domain>.
func (m Member) Addr() string {
	cluster := m.ClusterName
	if cluster == "" {
		cluster = ClusterNameFromMemberName(m.Name)
	}
	domain := m.ClusterDomain
	if domain != "" && !strings.HasPrefix(domain, ".") {
		domain = "." + domain
	}
	return fmt.Sprintf("%s.%s.%s.svc%s", m.Name, cluster, m.Namespace, domain)
}

// PeerURL is what the member advertises to other members (and what MemberAdd
// registers), so it must match the member's peer certificate SANs.
func (m Member) PeerURL() string {
	return fmt.Sprintf("%s://%s:%d", scheme(m.SecurePeer), m.Addr(), PeerPort)
}

// ClientURL is the member's client URL in the scheme the operator dials.
func (m Member) ClientURL() string {
	return fmt.Sprintf("%s://%s:%d", scheme(m.SecureClient), m.Addr(), ClientPort)
}

// AdvertiseClientURL is what the member advertises to clients, who find it
// in etcd's member list (the operator's health reads among them): its
// ClientURL, but http while it switches TLS, a scheme it serves whichever
// way the switch goes and whatever scheme the operator dials meanwhile.
func (m Member) AdvertiseClientURL() string {
	if m.SwitchingTLS {
		return fmt.Sprintf("http://%s:%d", m.Addr(), ClientPort)
	}
	return m.ClientURL()
}

// ListenPeerURL binds all interfaces because the pod IP is not known when the
// pod spec is built.
func (m Member) ListenPeerURL() string {
	return fmt.Sprintf("%s://0.0.0.0:%d", scheme(m.SecurePeer), PeerPort)
}

// ListenClientURL binds all interfaces so that both the probes (localhost)
// and the services (pod IP) reach the member. A member switching TLS
// listens with both schemes on the one port: etcd then tells TLS
// connections from plain ones on it.
func (m Member) ListenClientURL() string {
	if m.SwitchingTLS {
		return fmt.Sprintf("http://0.0.0.0:%d,https://0.0.0.0:%d", ClientPort, ClientPort)
	}
	return fmt.Sprintf("%s://0.0.0.0:%d", scheme(m.SecureClient), ClientPort)
}

// HoldsPeerCertificates tells whether the member is given the peer
// certificates: to listen https, or to dial peers that do.
func (m Member) HoldsPeerCertificates() bool { return m.SecurePeer || m.SwitchingTLS }

// HoldsServerCertificates tells whether the member is given the server
// certificates: to serve clients https.
func (m Member) HoldsServerCertificates() bool { return m.SecureClient || m.SwitchingTLS }

func scheme(secure bool) string {
	if secure {
		return "https"
	}
	return "http"
}

// MemberSet is a set of members keyed by name. Names, not IDs, are the key
// because a member that was added to etcd but whose pod never started has no
// name inside etcd yet, while the operator always knows the name it chose.
type MemberSet map[string]*Member

// NewMemberSet builds a set from members; a later member replaces an earlier
// one with the same name.
func NewMemberSet(ms ...*Member) MemberSet {
	s := make(MemberSet, len(ms))
	for _, m := range ms {
		s.Add(m)
	}
	return s
}

// MembersFromEtcd turns an etcd member list into a MemberSet, taking every
// field but Name, ID and the peer scheme from template (namespace, client
// TLS, cluster name and domain are properties of the cluster, not of the
// member). The peer scheme is the one etcd records for the member: while
// TLS is switched on or off in a running cluster, members differ in it,
// and a member restarted or named in --initial-cluster must keep it. The
// name comes from the peer URL, not from etcd's Name field, because etcd
// only learns a member's name once it has started; an error here means a
// member was not created by this operator and the cluster cannot be
// managed safely.
func MembersFromEtcd(members []*etcdserverpb.Member, template Member) (MemberSet, error) {
	s := make(MemberSet, len(members))
	for _, em := range members {
		if len(em.PeerURLs) == 0 {
			return nil, fmt.Errorf("member %x has no peer URL", em.ID)
		}
		name, err := MemberNameFromPeerURL(em.PeerURLs[0])
		if err != nil {
			return nil, fmt.Errorf("member %x: %w", em.ID, err)
		}
		if _, dup := s[name]; dup {
			return nil, fmt.Errorf("member %x: name %q is used by two members", em.ID, name)
		}
		m := template
		m.Name = name
		m.ID = em.ID
		m.IsLearner = em.IsLearner
		m.SecurePeer = strings.HasPrefix(em.PeerURLs[0], "https://")
		s[name] = &m
	}
	return s, nil
}

// Add inserts m, replacing any member with the same name.
func (s MemberSet) Add(m *Member) { s[m.Name] = m }

// Remove deletes the member called name; removing an absent name is a no-op.
func (s MemberSet) Remove(name string) { delete(s, name) }

// Size is the number of members.
func (s MemberSet) Size() int { return len(s) }

// Names returns the member names in sorted order, so logs and events list
// them the same way every time.
func (s MemberSet) Names() []string {
	names := make([]string, 0, len(s))
	for name := range s {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Voters returns the members that vote, the ones the quorum is made of.
func (s MemberSet) Voters() MemberSet {
	v := MemberSet{}
	for name, m := range s {
		if !m.IsLearner {
			v[name] = m
		}
	}
	return v
}

// Learners returns the names of the members that do not vote yet, sorted.
func (s MemberSet) Learners() []string {
	var names []string
	for _, name := range s.Names() {
		if s[name].IsLearner {
			names = append(names, name)
		}
	}
	return names
}

// Diff returns the members of s whose names are not in other. The members
// are shared, not copied.
func (s MemberSet) Diff(other MemberSet) MemberSet {
	d := MemberSet{}
	for name, m := range s {
		if _, ok := other[name]; !ok {
			d[name] = m
		}
	}
	return d
}

// IsEqual reports whether both sets hold the same names; other fields are
// ignored because reconciliation compares running pods with etcd membership,
// and pods carry no member IDs.
func (s MemberSet) IsEqual(other MemberSet) bool {
	if len(s) != len(other) {
		return false
	}
	for name := range s {
		if _, ok := other[name]; !ok {
			return false
		}
	}
	return true
}

// PeerURLPairs returns "name=peerURL" for every member sorted by name: the
// value of etcd's --initial-cluster flag once joined with ",".
func (s MemberSet) PeerURLPairs() []string {
	pairs := make([]string, 0, len(s))
	for _, name := range s.Names() {
		pairs = append(pairs, name+"="+s[name].PeerURL())
	}
	return pairs
}

// ClientURLs returns every member's client URL, sorted, for use as client
// endpoints.
func (s MemberSet) ClientURLs() []string {
	urls := make([]string, 0, len(s))
	for _, m := range s {
		urls = append(urls, m.ClientURL())
	}
	sort.Strings(urls)
	return urls
}

// PickOne returns the member with the lowest name, or nil for an empty set.
// It is deterministic so that a retried reconcile acts on the same member
// instead of a random one (Go map order) as the original did.
func (s MemberSet) PickOne() *Member {
	names := s.Names()
	if len(names) == 0 {
		return nil
	}
	return s[names[0]]
}

// ByID returns the member with the given etcd ID, or nil.
func (s MemberSet) ByID(id uint64) *Member {
	for _, m := range s {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// Clone copies the set and its members, so a reconcile step can work on a
// candidate membership without touching the one it may have to fall back to.
func (s MemberSet) Clone() MemberSet {
	c := make(MemberSet, len(s))
	for name, m := range s {
		cp := *m
		c[name] = &cp
	}
	return c
}

// String lists the sorted names, for logs.
func (s MemberSet) String() string {
	return "[" + strings.Join(s.Names(), ",") + "]"
}

// MemberNameFromPeerURL recovers a member name from its peer URL: the first
// DNS label of the host. It refuses IP hosts because such a member was not
// created by this operator and has no name it could be matched by.
func MemberNameFromPeerURL(peerURL string) (string, error) {
	u, err := url.Parse(peerURL)
	if err != nil {
		return "", fmt.Errorf("parse peer URL %q: %w", peerURL, err)
	}
	host := u.Hostname()
	if host == "" {
		return "", fmt.Errorf("peer URL %q has no host", peerURL)
	}
	if net.ParseIP(host) != nil {
		return "", fmt.Errorf("peer URL %q has an IP host; member names come from DNS names", peerURL)
	}
	name, _, _ := strings.Cut(host, ".")
	if name == "" {
		return "", fmt.Errorf("peer URL %q: host starts with an empty DNS label", peerURL)
	}
	return name, nil
}

// ClusterNameFromMemberName strips the random suffix the operator appends to
// member names ("<cluster>-<suffix>"). A name without "-" yields "".
func ClusterNameFromMemberName(name string) string {
	i := strings.LastIndex(name, "-")
	if i < 0 {
		return ""
	}
	return name[:i]
}
