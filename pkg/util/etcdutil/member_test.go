package etcdutil

import (
	"reflect"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestMemberURLs(t *testing.T) {
	tests := []struct {
		name                                   string
		m                                      Member
		addr, peer, client, lisPeer, lisClient string
	}{
		{
			name:      "plain member without cluster domain relies on the search path",
			m:         Member{Name: "example-abcde", Namespace: "default", ClusterName: "example"},
			addr:      "example-abcde.example.default.svc",
			peer:      "http://example-abcde.example.default.svc:2380",
			client:    "http://example-abcde.example.default.svc:2379",
			lisPeer:   "http://0.0.0.0:2380",
			lisClient: "http://0.0.0.0:2379",
		},
		{
			name:      "secure peer and client use https everywhere",
			m:         Member{Name: "db-x1", Namespace: "prod", ClusterName: "db", SecurePeer: true, SecureClient: true, ClusterDomain: ".cluster.local"},
			addr:      "db-x1.db.prod.svc.cluster.local",
			peer:      "https://db-x1.db.prod.svc.cluster.local:2380",
			client:    "https://db-x1.db.prod.svc.cluster.local:2379",
			lisPeer:   "https://0.0.0.0:2380",
			lisClient: "https://0.0.0.0:2379",
		},
		{
			name:      "secure peer only leaves the client side on http",
			m:         Member{Name: "db-x1", Namespace: "prod", ClusterName: "db", SecurePeer: true},
			addr:      "db-x1.db.prod.svc",
			peer:      "https://db-x1.db.prod.svc:2380",
			client:    "http://db-x1.db.prod.svc:2379",
			lisPeer:   "https://0.0.0.0:2380",
			lisClient: "http://0.0.0.0:2379",
		},
		{
			name:      "secure client only leaves the peer side on http",
			m:         Member{Name: "db-x1", Namespace: "prod", ClusterName: "db", SecureClient: true},
			addr:      "db-x1.db.prod.svc",
			peer:      "http://db-x1.db.prod.svc:2380",
			client:    "https://db-x1.db.prod.svc:2379",
			lisPeer:   "http://0.0.0.0:2380",
			lisClient: "https://0.0.0.0:2379",
		},
		{
			name:      "cluster domain without a leading dot gets one",
			m:         Member{Name: "db-x1", Namespace: "prod", ClusterName: "db", ClusterDomain: "cluster.local"},
			addr:      "db-x1.db.prod.svc.cluster.local",
			peer:      "http://db-x1.db.prod.svc.cluster.local:2380",
			client:    "http://db-x1.db.prod.svc.cluster.local:2379",
			lisPeer:   "http://0.0.0.0:2380",
			lisClient: "http://0.0.0.0:2379",
		},
		{
			name:      "empty cluster name is derived from a dashed member name",
			m:         Member{Name: "my-etcd-0001", Namespace: "ns"},
			addr:      "my-etcd-0001.my-etcd.ns.svc",
			peer:      "http://my-etcd-0001.my-etcd.ns.svc:2380",
			client:    "http://my-etcd-0001.my-etcd.ns.svc:2379",
			lisPeer:   "http://0.0.0.0:2380",
			lisClient: "http://0.0.0.0:2379",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []string{tt.m.Addr(), tt.m.PeerURL(), tt.m.ClientURL(), tt.m.ListenPeerURL(), tt.m.ListenClientURL()}
			want := []string{tt.addr, tt.peer, tt.client, tt.lisPeer, tt.lisClient}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Addr, PeerURL, ClientURL, ListenPeerURL, ListenClientURL =\n  %q\nwant\n  %q", got, want)
			}
		})
	}
}

func TestMemberNameFromPeerURL(t *testing.T) {
	tests := []struct {
		name, url, want, errPart string
	}{
		{name: "operator peer URL yields the pod name", url: "http://example-abcde.example.default.svc:2380", want: "example-abcde"},
		{name: "https and cluster domain do not matter", url: "https://db-x1.db.prod.svc.cluster.local:2380", want: "db-x1"},
		{name: "a single-label host is the name", url: "http://db-x1:2380", want: "db-x1"},
		{name: "a URL without port still has a host", url: "http://db-x1.db.prod.svc", want: "db-x1"},
		{name: "an IPv4 host has no member name", url: "http://10.0.0.1:2380", errPart: "IP host"},
		{name: "an IPv6 host has no member name", url: "http://[fd00::1]:2380", errPart: "IP host"},
		{name: "an unparsable URL is an error", url: "http://bad host:2380", errPart: "parse peer URL"},
		{name: "a URL without scheme has no host", url: "db-x1.db.svc:2380", errPart: "no host"},
		{name: "an empty string has no host", url: "", errPart: "no host"},
		{name: "a host starting with a dot has an empty first label", url: "http://.db.svc:2380", errPart: "empty DNS label"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MemberNameFromPeerURL(tt.url)
			if tt.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errPart) {
					t.Fatalf("MemberNameFromPeerURL(%q) = %q, %v; want an error containing %q", tt.url, got, err, tt.errPart)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("MemberNameFromPeerURL(%q) = %q, %v; want %q", tt.url, got, err, tt.want)
			}
		})
	}
}

func TestClusterNameFromMemberName(t *testing.T) {
	tests := []struct{ name, member, want string }{
		{"the random suffix is stripped", "example-abcde", "example"},
		{"only the last dash separates the suffix", "my-etcd-cluster-x9z", "my-etcd-cluster"},
		{"a name without a dash has no cluster", "standalone", ""},
		{"a trailing dash leaves the whole prefix", "example-", "example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClusterNameFromMemberName(tt.member); got != tt.want {
				t.Errorf("ClusterNameFromMemberName(%q) = %q, want %q", tt.member, got, tt.want)
			}
		})
	}
}

func member(name string) *Member {
	return &Member{Name: name, Namespace: "ns", ClusterName: "c"}
}

func TestMemberSetDiffAndEquality(t *testing.T) {
	tests := []struct {
		name      string
		s, other  MemberSet
		wantDiff  []string
		wantEqual bool
	}{
		{"equal sets have no difference", NewMemberSet(member("c-a"), member("c-b")), NewMemberSet(member("c-b"), member("c-a")), []string{}, true},
		{"a member missing from the other set is the difference", NewMemberSet(member("c-a"), member("c-b")), NewMemberSet(member("c-a")), []string{"c-b"}, false},
		{"extra members in the other set are not part of the difference", NewMemberSet(member("c-a")), NewMemberSet(member("c-a"), member("c-b")), []string{}, false},
		{"same size with different names is not equal", NewMemberSet(member("c-a"), member("c-b")), NewMemberSet(member("c-a"), member("c-c")), []string{"c-b"}, false},
		{"two empty sets are equal", NewMemberSet(), MemberSet{}, []string{}, true},
		{"a nil set behaves as empty", nil, NewMemberSet(member("c-a")), []string{}, false},
		{"equality ignores IDs and URLs", NewMemberSet(&Member{Name: "c-a", ID: 1}), NewMemberSet(&Member{Name: "c-a", ID: 2, SecurePeer: true}), []string{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Diff(tt.other).Names(); !reflect.DeepEqual(got, tt.wantDiff) {
				t.Errorf("Diff = %v, want %v", got, tt.wantDiff)
			}
			if got := tt.s.IsEqual(tt.other); got != tt.wantEqual {
				t.Errorf("IsEqual = %v, want %v", got, tt.wantEqual)
			}
			if got := tt.other.IsEqual(tt.s); got != tt.wantEqual {
				t.Errorf("IsEqual is not symmetric: other.IsEqual(s) = %v, want %v", got, tt.wantEqual)
			}
		})
	}
}

func TestMemberSetListsAreSortedByName(t *testing.T) {
	s := NewMemberSet(member("c-c"), member("c-a"), member("c-b"))
	s.Add(&Member{Name: "c-d", Namespace: "ns", ClusterName: "c", SecurePeer: true, SecureClient: true})

	if got, want := s.Names(), []string{"c-a", "c-b", "c-c", "c-d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	wantPairs := []string{
		"c-a=http://c-a.c.ns.svc:2380",
		"c-b=http://c-b.c.ns.svc:2380",
		"c-c=http://c-c.c.ns.svc:2380",
		"c-d=https://c-d.c.ns.svc:2380",
	}
	if got := s.PeerURLPairs(); !reflect.DeepEqual(got, wantPairs) {
		t.Errorf("PeerURLPairs = %q, want %q", got, wantPairs)
	}
	wantClients := []string{
		"http://c-a.c.ns.svc:2379",
		"http://c-b.c.ns.svc:2379",
		"http://c-c.c.ns.svc:2379",
		"https://c-d.c.ns.svc:2379",
	}
	if got := s.ClientURLs(); !reflect.DeepEqual(got, wantClients) {
		t.Errorf("ClientURLs = %q, want %q", got, wantClients)
	}
	if got := s.String(); got != "[c-a,c-b,c-c,c-d]" {
		t.Errorf("String = %q", got)
	}
}

func TestMemberSetMutation(t *testing.T) {
	s := NewMemberSet(member("c-b"), member("c-a"))
	if s.Size() != 2 {
		t.Fatalf("Size = %d, want 2", s.Size())
	}
	if got := s.PickOne(); got == nil || got.Name != "c-a" {
		t.Fatalf("PickOne = %v, want the lowest name c-a", got)
	}

	s.Add(&Member{Name: "c-a", ID: 7})
	if s.Size() != 2 || s["c-a"].ID != 7 {
		t.Errorf("Add of an existing name must replace it: size %d, ID %d", s.Size(), s["c-a"].ID)
	}
	if got := s.ByID(7); got == nil || got.Name != "c-a" {
		t.Errorf("ByID(7) = %v, want c-a", got)
	}
	if got := s.ByID(99); got != nil {
		t.Errorf("ByID(99) = %v, want nil", got)
	}

	c := s.Clone()
	c["c-a"].ID = 8
	c.Remove("c-b")
	if s["c-a"].ID != 7 || s.Size() != 2 {
		t.Errorf("changing a clone changed the original: ID %d, size %d", s["c-a"].ID, s.Size())
	}

	s.Remove("c-a")
	s.Remove("c-a") // removing an absent name is a no-op
	if got := s.Names(); !reflect.DeepEqual(got, []string{"c-b"}) {
		t.Errorf("after Remove: %v", got)
	}
	s.Remove("c-b")
	if got := s.PickOne(); got != nil {
		t.Errorf("PickOne of an empty set = %v, want nil", got)
	}
}

func TestMembersFromEtcd(t *testing.T) {
	tmpl := Member{Namespace: "ns", ClusterName: "c", SecurePeer: true, ClusterDomain: ".cluster.local"}

	t.Run("names come from peer URLs, even for members that never started", func(t *testing.T) {
		got, err := MembersFromEtcd([]*etcdserverpb.Member{
			{ID: 1, Name: "c-a", PeerURLs: []string{"https://c-a.c.ns.svc.cluster.local:2380"}},
			{ID: 2, Name: "", PeerURLs: []string{"https://c-b.c.ns.svc.cluster.local:2380"}, IsLearner: true},
		}, tmpl)
		if err != nil {
			t.Fatal(err)
		}
		want := MemberSet{
			"c-a": {Name: "c-a", ID: 1, Namespace: "ns", ClusterName: "c", SecurePeer: true, ClusterDomain: ".cluster.local"},
			"c-b": {Name: "c-b", ID: 2, Namespace: "ns", ClusterName: "c", SecurePeer: true, ClusterDomain: ".cluster.local", IsLearner: true},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, want %+v", got, want)
		}
		if voters := got.Voters(); voters.Size() != 1 || voters["c-a"] == nil {
			t.Errorf("voters %s, want c-a alone", voters)
		}
		if l := got.Learners(); len(l) != 1 || l[0] != "c-b" {
			t.Errorf("learners %q, want c-b", l)
		}
		// The peer URL the member was added with must be what we compute.
		if got["c-b"].PeerURL() != "https://c-b.c.ns.svc.cluster.local:2380" {
			t.Errorf("PeerURL round trip: %s", got["c-b"].PeerURL())
		}
	})

	bad := []struct {
		name    string
		members []*etcdserverpb.Member
		errPart string
	}{
		{"a member without peer URL is refused", []*etcdserverpb.Member{{ID: 0xa}}, "no peer URL"},
		{"a member with an IP peer URL is refused", []*etcdserverpb.Member{{ID: 0xa, PeerURLs: []string{"http://10.0.0.1:2380"}}}, "IP host"},
		{"two members with one name are refused", []*etcdserverpb.Member{
			{ID: 1, PeerURLs: []string{"http://c-a.c.ns.svc:2380"}},
			{ID: 2, PeerURLs: []string{"http://c-a.c.other.svc:2380"}},
		}, "used by two members"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := MembersFromEtcd(tt.members, tmpl)
			if err == nil || !strings.Contains(err.Error(), tt.errPart) {
				t.Fatalf("err = %v, want one containing %q", err, tt.errPart)
			}
		})
	}
}
