package etcdutil

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// Timeouts for requests that are expected to fail: long enough for a loaded
// machine to answer a live member, short enough to keep the tests quick.
const (
	shortDial    = 1 * time.Second
	shortRequest = 1 * time.Second
)

func TestAgreedLeader(t *testing.T) {
	down := errors.New("down")
	tests := []struct {
		name    string
		members []MemberHealth
		want    uint64
	}{
		{"all members follow the same leader", []MemberHealth{{ID: 1, Leader: 1}, {ID: 2, Leader: 1}, {ID: 3, Leader: 1}}, 1},
		{"a majority wins over a member that still follows the old leader", []MemberHealth{{ID: 1, Leader: 2}, {ID: 2, Leader: 2}, {ID: 3, Leader: 1}}, 2},
		{"a lone survivor's belief is not a majority", []MemberHealth{{ID: 1, Leader: 1}, {ID: 2, Err: down}, {ID: 3, Err: down}}, 0},
		{"members without a leader agree on nothing", []MemberHealth{{ID: 1}, {ID: 2}, {ID: 3}}, 0},
		{"a split vote has no leader", []MemberHealth{{ID: 1, Leader: 1}, {ID: 2, Leader: 2}, {ID: 3, Err: down}, {ID: 4, Leader: 1}}, 0},
		{"learners neither vote nor count", []MemberHealth{{ID: 1, Leader: 1}, {ID: 2, Err: down}, {ID: 3, IsLearner: true, Leader: 1}, {ID: 4, IsLearner: true, Leader: 1}}, 0},
		{"a single voter with an unstarted learner leads", []MemberHealth{{ID: 1, Leader: 1}, {ID: 2, IsLearner: true, Err: down}}, 1},
		{"no members, no leader", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := agreedLeader(tt.members); got != tt.want {
				t.Errorf("agreedLeader = %x, want %x", got, tt.want)
			}
		})
	}
}

func TestSingleMember(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, nil)
	m := c.members[0]
	cfg := ClientConfig{Endpoints: c.endpoints()}

	t.Run("list returns the only member with its name and URLs", func(t *testing.T) {
		resp, err := ListMembers(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Members) != 1 {
			t.Fatalf("got %d members, want 1", len(resp.Members))
		}
		got := resp.Members[0]
		if got.ID != m.id() || got.Name != m.name || !reflect.DeepEqual(got.PeerURLs, []string{m.peerURL}) || !reflect.DeepEqual(got.ClientURLs, []string{m.clientURL}) {
			t.Errorf("member = %+v, want ID %x name %s peer %s client %s", got, m.id(), m.name, m.peerURL, m.clientURL)
		}
	})

	t.Run("health knows the leader and reads linearizably", func(t *testing.T) {
		h, err := ClusterHealth(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Healthy() || h.LeaderID != m.id() || !h.Linearizable || h.ReadErr != nil {
			t.Fatalf("health = %+v, want leader %x and a linearizable read", h, m.id())
		}
		if len(h.Members) != 1 {
			t.Fatalf("got %d member reports, want 1", len(h.Members))
		}
		mh := h.Members[0]
		if mh.Err != nil || mh.ID != m.id() || mh.Name != m.name || mh.ClientURL != m.clientURL || mh.Version == "" || mh.RaftIndex == 0 || mh.RaftTerm == 0 || mh.Revision == 0 || mh.Leader != m.id() {
			t.Errorf("member report = %+v", mh)
		}
		if got := h.Answered(); !reflect.DeepEqual(got, []string{m.clientURL}) {
			t.Errorf("Answered = %v, want [%s]", got, m.clientURL)
		}
	})

	t.Run("endpoint status comes from the asked member", func(t *testing.T) {
		st, err := EndpointStatus(t.Context(), ClientConfig{}, m.clientURL)
		if err != nil {
			t.Fatal(err)
		}
		if st.Header.MemberId != m.id() || st.Leader != m.id() || st.Version == "" {
			t.Errorf("status = %+v, want member and leader %x", st, m.id())
		}
	})

	t.Run("leader id is the only member", func(t *testing.T) {
		id, err := LeaderID(t.Context(), cfg)
		if err != nil || id != m.id() {
			t.Fatalf("LeaderID = %x, %v; want %x", id, err, m.id())
		}
	})

	t.Run("a client to a dead endpoint fails within the dial timeout", func(t *testing.T) {
		start := time.Now()
		cli, err := NewClientContext(t.Context(), ClientConfig{Endpoints: []string{deadEndpoint(t)}, DialTimeout: shortDial})
		if err == nil {
			_ = cli.Close()
			t.Fatal("NewClientContext to a dead endpoint succeeded")
		}
		if d := time.Since(start); d > shortDial+3*time.Second {
			t.Errorf("NewClientContext took %v with a %v dial timeout", d, shortDial)
		}
	})

	t.Run("a client without endpoints is refused", func(t *testing.T) {
		if _, err := NewClientContext(t.Context(), ClientConfig{}); err == nil {
			t.Fatal("NewClientContext without endpoints succeeded")
		}
	})

	t.Run("max revision skips a dead endpoint", func(t *testing.T) {
		cli, err := NewClientContext(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cli.Close() }()
		var putRev int64
		for i := range 3 {
			resp, err := cli.Put(t.Context(), "k", fmt.Sprint(i))
			if err != nil {
				t.Fatal(err)
			}
			putRev = resp.Header.Revision
		}
		dead := deadEndpoint(t)
		short := ClientConfig{DialTimeout: shortDial, RequestTimeout: shortRequest}
		ep, rev, err := MaxRevisionEndpoint(t.Context(), short, []string{dead, m.clientURL})
		if err != nil || ep != m.clientURL || rev < putRev {
			t.Fatalf("MaxRevisionEndpoint = %s, %d, %v; want %s with revision >= %d", ep, rev, err, m.clientURL, putRev)
		}
	})

	t.Run("max revision fails naming every endpoint when none answers", func(t *testing.T) {
		dead1, dead2 := deadEndpoint(t), deadEndpoint(t)
		short := ClientConfig{DialTimeout: shortDial, RequestTimeout: shortRequest}
		start := time.Now()
		ep, _, err := MaxRevisionEndpoint(t.Context(), short, []string{dead1, dead2})
		if err == nil {
			t.Fatalf("MaxRevisionEndpoint of dead endpoints = %s, want an error", ep)
		}
		if !strings.Contains(err.Error(), dead1) || !strings.Contains(err.Error(), dead2) {
			t.Errorf("error %q does not name both endpoints", err)
		}
		// Endpoints are asked in parallel, so two dead ones cost one timeout.
		if d := time.Since(start); d > shortDial+3*time.Second {
			t.Errorf("took %v", d)
		}
		if _, _, err := MaxRevisionEndpoint(t.Context(), short, nil); err == nil {
			t.Error("MaxRevisionEndpoint without endpoints succeeded")
		}
	})

	// Last, because it leaves a learner that will never start in the cluster
	// until it is removed.
	t.Run("a learner is added idempotently, not promoted before catching up, and removed idempotently", func(t *testing.T) {
		peerURL := deadEndpoint(t)
		l, err := AddLearner(t.Context(), cfg, peerURL)
		if err != nil {
			t.Fatal(err)
		}
		if !l.IsLearner || l.ID == 0 || !reflect.DeepEqual(l.PeerURLs, []string{peerURL}) {
			t.Fatalf("learner = %+v", l)
		}
		again, err := AddLearner(t.Context(), cfg, peerURL)
		if err != nil || again.ID != l.ID {
			t.Fatalf("second AddLearner = %+v, %v; want the existing member %x", again, err, l.ID)
		}

		err = PromoteMember(t.Context(), cfg, l.ID)
		if !errors.Is(err, rpctypes.ErrMemberLearnerNotReady) {
			t.Fatalf("PromoteMember of a learner that never started = %v, want ErrMemberLearnerNotReady", err)
		}
		// Promoting a voter is treated as an already finished promotion.
		if err := PromoteMember(t.Context(), cfg, m.id()); err != nil {
			t.Errorf("PromoteMember of a voter = %v, want nil", err)
		}

		h, err := ClusterHealth(t.Context(), ClientConfig{Endpoints: cfg.Endpoints, RequestTimeout: shortRequest})
		if err != nil {
			t.Fatal(err)
		}
		if !h.Healthy() || len(h.Members) != 2 {
			t.Fatalf("health with an unstarted learner = %+v; want healthy with 2 members", h)
		}
		for _, mh := range h.Members {
			if mh.ID == l.ID && (mh.Err == nil || !mh.IsLearner || mh.ClientURL != "") {
				t.Errorf("unstarted learner report = %+v; want a not-started error", mh)
			}
		}

		for i := range 2 {
			if err := RemoveMember(t.Context(), cfg, l.ID); err != nil {
				t.Fatalf("RemoveMember #%d = %v", i+1, err)
			}
		}
		resp, err := ListMembers(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Members) != 1 || resp.Members[0].ID != m.id() {
			t.Fatalf("members after removing the learner: %+v", resp.Members)
		}
	})
}

func TestThreeMembers(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	ctx := t.Context()
	cfg := ClientConfig{Endpoints: c.endpoints()}

	resp, err := ListMembers(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := memberNames(resp.Members); !reflect.DeepEqual(got, []string{"m0", "m1", "m2"}) {
		t.Fatalf("members = %v, want m0 m1 m2", got)
	}
	waitHealthy(t, cfg, 3)

	// Leadership moves only when asked from the leader.
	leadID, err := LeaderID(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var followers []*testMember
	for _, m := range c.members {
		if m.id() != leadID {
			followers = append(followers, m)
		}
	}
	target, other := followers[0], followers[1]
	if err := MoveLeader(ctx, cfg, other.clientURL, target.id()); !errors.Is(err, rpctypes.ErrNotLeader) {
		t.Fatalf("MoveLeader from a follower = %v, want ErrNotLeader", err)
	}
	if err := MoveLeader(ctx, cfg, c.byID(leadID).clientURL, target.id()); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "LeaderID reports the new leader", func() (bool, string) {
		id, err := LeaderID(ctx, cfg)
		return err == nil && id == target.id(), fmt.Sprintf("leader %x, %v", id, err)
	})

	// Remove a follower. etcd refuses membership changes until the leader
	// has been connected to enough members for 5 s, so retry those refusals.
	victim := other
	retryUnhealthy(t, "remove "+victim.name, func() error { return RemoveMember(ctx, cfg, victim.id()) })
	victim.stop()
	remaining := []*testMember{}
	for _, m := range c.members {
		if m != victim {
			remaining = append(remaining, m)
		}
	}
	cfg.Endpoints = c.endpoints(victim)
	resp, err = ListMembers(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Members) != 2 || slices.ContainsFunc(resp.Members, func(m *etcdserverpb.Member) bool { return m.ID == victim.id() }) {
		t.Fatalf("members after removing %s: %v", victim.name, memberNames(resp.Members))
	}
	if err := RemoveMember(ctx, cfg, victim.id()); err != nil {
		t.Fatalf("removing %s again = %v, want nil", victim.name, err)
	}

	// Add a fourth member the way the operator does: MemberAdd first, then
	// start it with initial-cluster-state existing and the full membership.
	var added *testMember
	for attempt := 1; added == nil; attempt++ {
		peerURL := deadEndpoint(t)
		var newID uint64
		retryUnhealthy(t, "add "+peerURL, func() error {
			m, err := AddMember(ctx, cfg, peerURL)
			if err != nil {
				return err
			}
			if m.ID == 0 || m.IsLearner || !reflect.DeepEqual(m.PeerURLs, []string{peerURL}) {
				t.Fatalf("added member = %+v", m)
			}
			newID = m.ID
			return nil
		})
		again, err := AddMember(ctx, cfg, peerURL)
		if err != nil || again.ID != newID {
			t.Fatalf("second AddMember = %+v, %v; want the existing member %x", again, err, newID)
		}
		added, err = c.addMember("m3", peerURL, remaining)
		if err != nil {
			if attempt < 5 && isAddrInUse(err) {
				// The peer port was taken: unregister it and pick another.
				retryUnhealthy(t, "remove unstartable member", func() error { return RemoveMember(ctx, cfg, newID) })
				continue
			}
			t.Fatalf("start m3: %v", err)
		}
		if added.id() != newID {
			t.Fatalf("m3 started as %x, but MemberAdd returned %x", added.id(), newID)
		}
	}
	cfg.Endpoints = c.endpoints(victim)
	var want []string
	for _, m := range append(remaining, added) {
		want = append(want, m.name)
	}
	slices.Sort(want)
	poll(t, 20*time.Second, "the member list shows 3 started members", func() (bool, string) {
		resp, err := ListMembers(ctx, cfg)
		if err != nil {
			return false, err.Error()
		}
		names := memberNames(resp.Members)
		return reflect.DeepEqual(names, want), fmt.Sprint(names)
	})
	waitHealthy(t, cfg, 3)
}

func TestQuorumLoss(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	waitHealthy(t, ClientConfig{Endpoints: c.endpoints()}, 3)

	survivor := c.members[0]
	var wg sync.WaitGroup
	for _, m := range c.members[1:] {
		wg.Go(m.stop)
	}
	wg.Wait()

	cfg := ClientConfig{Endpoints: []string{survivor.clientURL}, DialTimeout: shortDial, RequestTimeout: shortRequest}
	start := time.Now()
	h, err := ClusterHealth(t.Context(), cfg)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("ClusterHealth from the survivor = %v; want a report, not an error", err)
	}
	if h.Linearizable || h.ReadErr == nil || h.Healthy() {
		t.Errorf("after losing 2 of 3 members: Linearizable %v, ReadErr %v; want no linearizable read", h.Linearizable, h.ReadErr)
	}
	if h.LeaderID != 0 {
		t.Errorf("LeaderID = %x with one of three members left, want 0", h.LeaderID)
	}
	if got := h.Answered(); !reflect.DeepEqual(got, []string{survivor.clientURL}) {
		t.Errorf("Answered = %v, want only the survivor %s", got, survivor.clientURL)
	}
	if len(h.Members) != 3 {
		t.Errorf("got %d member reports, want all 3 members", len(h.Members))
	}
	// Statuses and the read run in parallel, each bounded by the request
	// timeout, so this is a few timeouts at most, never a hang.
	if limit := shortDial + 4*shortRequest; took > limit {
		t.Errorf("ClusterHealth took %v, want under %v", took, limit)
	}

	if _, err := LeaderID(t.Context(), cfg); !errors.Is(err, ErrNoLeader) {
		t.Errorf("LeaderID = %v, want ErrNoLeader", err)
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	p := newTestPKI(t)
	c := startCluster(t, 1, p.serverTLSInfo(t))
	m := c.members[0]
	if !strings.HasPrefix(m.clientURL, "https://") {
		t.Fatalf("client URL %s is not https", m.clientURL)
	}

	t.Run("the operator secret's client certificate is accepted", func(t *testing.T) {
		tlsCfg, err := TLSConfigFromSecretData(map[string][]byte{
			SecretClientCert: p.clientCertPEM,
			SecretClientKey:  p.clientKeyPEM,
			SecretClientCA:   p.caPEM,
		})
		if err != nil {
			t.Fatal(err)
		}
		cfg := ClientConfig{Endpoints: c.endpoints(), TLS: tlsCfg}
		resp, err := ListMembers(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Members) != 1 || resp.Members[0].ID != m.id() {
			t.Fatalf("members = %+v", resp.Members)
		}
		// ClusterHealth dials every member separately; TLS must reach those too.
		h, err := ClusterHealth(t.Context(), cfg)
		if err != nil || !h.Healthy() || len(h.Answered()) != 1 {
			t.Fatalf("health over TLS = %+v, %v", h, err)
		}
	})

	t.Run("no client certificate is refused", func(t *testing.T) {
		tlsCfg, err := NewTLSConfig(nil, nil, p.caPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg := ClientConfig{Endpoints: c.endpoints(), TLS: tlsCfg, DialTimeout: shortDial, RequestTimeout: shortRequest}
		if _, err := ListMembers(t.Context(), cfg); err == nil {
			t.Fatal("ListMembers without a client certificate succeeded")
		}
	})

	t.Run("a server from another CA is not trusted", func(t *testing.T) {
		other := newTestPKI(t)
		tlsCfg, err := NewTLSConfig(other.clientCertPEM, other.clientKeyPEM, other.caPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg := ClientConfig{Endpoints: c.endpoints(), TLS: tlsCfg, DialTimeout: shortDial, RequestTimeout: shortRequest}
		if _, err := ListMembers(t.Context(), cfg); err == nil {
			t.Fatal("ListMembers trusting another CA succeeded")
		}
	})
}

// waitHealthy polls until the cluster has an agreed leader, serves a
// linearizable read and n members answer.
func waitHealthy(t *testing.T, cfg ClientConfig, n int) {
	t.Helper()
	poll(t, 20*time.Second, fmt.Sprintf("the cluster is healthy with %d members answering", n), func() (bool, string) {
		h, err := ClusterHealth(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return h.Healthy() && len(h.Answered()) == n, fmt.Sprintf("%+v", h)
	})
}

// retryUnhealthy repeats a membership change that etcd refuses while it
// cannot yet prove the change is safe; any other error fails the test.
func retryUnhealthy(t *testing.T, what string, do func() error) {
	t.Helper()
	poll(t, 20*time.Second, "etcd accepts: "+what, func() (bool, string) {
		err := do()
		if err == nil {
			return true, ""
		}
		if errors.Is(err, rpctypes.ErrUnhealthy) || errors.Is(err, rpctypes.ErrMemberNotEnoughStarted) {
			return false, err.Error()
		}
		t.Fatalf("%s: %v", what, err)
		return false, ""
	})
}

// memberNames returns the sorted names of etcd members; a member that has
// not started yet shows as "".
func memberNames(ms []*etcdserverpb.Member) []string {
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// TestHealthDoesNotWaitForAMemberThatIsGone: a stopped member's port refuses
// connections, and the health check says so at once rather than after the
// request timeout (an hour here), which would hold up its replacement.
func TestHealthDoesNotWaitForAMemberThatIsGone(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	waitHealthy(t, ClientConfig{Endpoints: c.endpoints()}, 3)
	gone := c.members[2]
	gone.stop()

	cfg := ClientConfig{Endpoints: []string{c.members[0].clientURL, c.members[1].clientURL}, RequestTimeout: time.Hour}
	done := make(chan Health, 1)
	go func() {
		h, err := ClusterHealth(t.Context(), cfg)
		if err != nil {
			t.Errorf("ClusterHealth = %v", err)
		}
		done <- h
	}()
	var h Health
	select {
	case h = <-done:
	case <-time.After(time.Minute):
		t.Fatal("ClusterHealth waited out the request timeout for a member whose port refuses connections")
	}
	for _, mh := range h.Members {
		switch {
		case mh.ClientURL == gone.clientURL && (mh.Err == nil || !strings.Contains(mh.Err.Error(), "connection refused")):
			t.Errorf("the stopped member: %v, want connection refused", mh.Err)
		case mh.ClientURL != gone.clientURL && mh.Err != nil:
			t.Errorf("member %s: %v, want an answer", mh.Name, mh.Err)
		}
	}
	if !h.Healthy() {
		t.Errorf("two of three members answer: want a healthy cluster, got %+v", h)
	}
}

// TestAddressesAreDialledInsteadOfTheNames: an endpoint whose host has an
// address in ClientConfig.Addresses is reached there without a lookup, and
// over TLS the certificate is still checked against the name.
func TestAddressesAreDialledInsteadOfTheNames(t *testing.T) {
	t.Parallel()
	const name = "m0.nowhere.invalid" // .invalid never resolves (RFC 2606)
	port := func(c *testCluster) string {
		u := mustURL(t, c.members[0].clientURL)
		return u.Port()
	}

	plain := startCluster(t, 1, nil)
	endpoint := "http://" + name + ":" + port(plain)
	if _, err := ListMembers(t.Context(), ClientConfig{Endpoints: []string{endpoint}, DialTimeout: shortDial, RequestTimeout: shortRequest}); err == nil {
		t.Fatalf("%s was reached without an address", endpoint)
	}
	resp, err := ListMembers(t.Context(), ClientConfig{Endpoints: []string{endpoint}, Addresses: map[string]string{name: "127.0.0.1"}})
	if err != nil || len(resp.Members) != 1 {
		t.Fatalf("%s at 127.0.0.1: %v, %v", endpoint, resp, err)
	}

	p := newTestPKI(t)
	secure := startCluster(t, 1, p.serverTLSInfo(t))
	tlsCfg, err := NewTLSConfig(p.clientCertPEM, p.clientKeyPEM, p.caPEM)
	if err != nil {
		t.Fatal(err)
	}
	// The server's certificate names localhost: reached as localhost at
	// 127.0.0.1 it is trusted, reached under another name at the same
	// address it is not.
	good := ClientConfig{Endpoints: []string{"https://localhost:" + port(secure)}, TLS: tlsCfg, Addresses: map[string]string{"localhost": "127.0.0.1"}}
	if _, err := ListMembers(t.Context(), good); err != nil {
		t.Fatalf("localhost at 127.0.0.1 over TLS: %v", err)
	}
	bad := ClientConfig{Endpoints: []string{"https://" + name + ":" + port(secure)}, TLS: tlsCfg, Addresses: map[string]string{name: "127.0.0.1"},
		DialTimeout: shortDial, RequestTimeout: shortRequest}
	if _, err := ListMembers(t.Context(), bad); err == nil {
		t.Fatalf("a certificate for localhost was trusted as %s", name)
	}
}
