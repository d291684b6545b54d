package etcdutil

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// startTimeout bounds how long a member or cluster may take to come up on a
// busy 2-core machine running the race detector.
const startTimeout = 30 * time.Second

// testMember is one in-process etcd server.
type testMember struct {
	name      string
	peerURL   string
	clientURL string
	// dir is the data directory, kept across restarts.
	dir      string
	etcd     *embed.Etcd
	stopOnce *sync.Once
}

// id is the etcd member ID, known once the server has started.
func (m *testMember) id() uint64 { return uint64(m.etcd.Server.ID()) }

// stop closes the server; safe to call more than once and from Cleanup.
func (m *testMember) stop() { m.stopOnce.Do(m.etcd.Close) }

// restart starts a stopped member again on its data directory, with the
// cluster's configuration, and waits until it serves.
func (c *testCluster) restart(m *testMember) {
	c.t.Helper()
	// etcd ignores the initial cluster once it has a data directory, but
	// the configuration must still name the member's own peer URL.
	e, err := startEmbedded(c.t, m, m.name+"="+m.peerURL, embed.ClusterStateFlagExisting, c.clientTLS, c.configure)
	if err != nil {
		c.t.Fatalf("restart %s: %v", m.name, err)
	}
	m.etcd = e
	m.stopOnce = new(sync.Once)
	waitReady(c.t, m)
}

// testCluster is a set of in-process etcd servers on loopback ports.
type testCluster struct {
	t         *testing.T
	clientTLS *transport.TLSInfo
	// configure, if set, changes each member's configuration before it
	// starts (a quota, a snapshot count, ...).
	configure func(*embed.Config)
	members   []*testMember
}

// endpoints returns the client URLs of all members but the given ones, in
// start order.
func (c *testCluster) endpoints(except ...*testMember) []string {
	var eps []string
	for _, m := range c.members {
		skip := false
		for _, e := range except {
			skip = skip || e == m
		}
		if !skip {
			eps = append(eps, m.clientURL)
		}
	}
	return eps
}

func (c *testCluster) byID(id uint64) *testMember {
	for _, m := range c.members {
		if m.id() == id {
			return m
		}
	}
	c.t.Fatalf("no test member has ID %x", id)
	return nil
}

// startCluster starts an n-member cluster and waits until every member is
// ready and follows the same leader. clientTLS, if set, makes client URLs
// https with that server configuration. Ports are chosen free at runtime;
// another process may grab one between the check and the bind, so a start
// that fails on an address in use is retried with new ports.
func startCluster(t *testing.T, n int, clientTLS *transport.TLSInfo) *testCluster {
	t.Helper()
	return startClusterWith(t, n, clientTLS, nil)
}

// startClusterWith is startCluster with configure applied to every member's
// configuration.
func startClusterWith(t *testing.T, n int, clientTLS *transport.TLSInfo, configure func(*embed.Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, clientTLS: clientTLS, configure: configure}
	for attempt := 1; ; attempt++ {
		ports := freePorts(t, 2*n)
		var pairs []string
		c.members = nil
		for i := range n {
			m := &testMember{
				name:      fmt.Sprintf("m%d", i),
				peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
				clientURL: fmt.Sprintf("%s://127.0.0.1:%d", c.clientScheme(), ports[2*i+1]),
			}
			c.members = append(c.members, m)
			pairs = append(pairs, m.name+"="+m.peerURL)
		}
		err := c.startAll(strings.Join(pairs, ","))
		if err == nil {
			break
		}
		if attempt < 5 && isAddrInUse(err) {
			continue
		}
		t.Fatalf("start %d-member cluster: %v", n, err)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, m := range c.members {
			wg.Go(m.stop)
		}
		wg.Wait()
	})
	for _, m := range c.members {
		waitReady(t, m)
	}
	c.waitLeader()
	return c
}

func (c *testCluster) clientScheme() string {
	if c.clientTLS != nil {
		return "https"
	}
	return "http"
}

// startAll starts every member of c.members; on failure it stops the ones
// already started so that a retry begins from nothing.
func (c *testCluster) startAll(initialCluster string) error {
	for i, m := range c.members {
		e, err := startEmbedded(c.t, m, initialCluster, embed.ClusterStateFlagNew, c.clientTLS, c.configure)
		if err != nil {
			for _, started := range c.members[:i] {
				started.stop()
			}
			return fmt.Errorf("member %s: %w", m.name, err)
		}
		m.etcd = e
		m.stopOnce = new(sync.Once)
	}
	return nil
}

// addMember starts a member that joins the running cluster with
// initial-cluster-state existing, next to the given current members. The
// caller has already registered peerURL with MemberAdd, so only a collision
// on the client port is retried here; one on the peer port is returned for
// the caller to register a new peer URL.
func (c *testCluster) addMember(name, peerURL string, current []*testMember) (*testMember, error) {
	c.t.Helper()
	pairs := []string{name + "=" + peerURL}
	for _, m := range current {
		pairs = append(pairs, m.name+"="+m.peerURL)
	}
	for attempt := 1; ; attempt++ {
		m := &testMember{
			name:      name,
			peerURL:   peerURL,
			clientURL: fmt.Sprintf("%s://127.0.0.1:%d", c.clientScheme(), freePorts(c.t, 1)[0]),
		}
		e, err := startEmbedded(c.t, m, strings.Join(pairs, ","), embed.ClusterStateFlagExisting, c.clientTLS, c.configure)
		if err != nil {
			if attempt < 5 && isAddrInUse(err) && !strings.Contains(err.Error(), strings.TrimPrefix(peerURL, "http://")) {
				continue
			}
			return nil, err
		}
		m.etcd = e
		m.stopOnce = new(sync.Once)
		c.members = append(c.members, m) // stopped by startCluster's cleanup
		waitReady(c.t, m)
		return m, nil
	}
}

// isAddrInUse recognises a lost race for a port; the text check covers
// errors that were flattened into strings on their way up.
func isAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

func startEmbedded(t *testing.T, m *testMember, initialCluster, state string, clientTLS *transport.TLSInfo, configure func(*embed.Config)) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	if m.dir == "" {
		m.dir = filepath.Join(t.TempDir(), m.name)
	}
	cfg.Dir = m.dir
	cfg.ListenPeerUrls = []url.URL{mustURL(t, m.peerURL)}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.ListenClientUrls = []url.URL{mustURL(t, m.clientURL)}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	cfg.InitialCluster = initialCluster
	cfg.ClusterState = state
	cfg.InitialClusterToken = "etcdutil-test"
	cfg.LogLevel = "error"
	// Durability is irrelevant for a throwaway data dir, and fsync is the
	// slowest part of every raft round on a loaded CI machine.
	cfg.UnsafeNoFsync = true
	if clientTLS != nil {
		cfg.ClientTLSInfo = *clientTLS
	}
	if configure != nil {
		configure(cfg)
	}
	return embed.StartEtcd(cfg)
}

// waitReady waits until the member has joined the cluster and serves
// clients.
func waitReady(t *testing.T, m *testMember) {
	t.Helper()
	select {
	case <-m.etcd.Server.ReadyNotify():
	case err := <-m.etcd.Err():
		t.Fatalf("member %s failed: %v", m.name, err)
	case <-time.After(startTimeout):
		t.Fatalf("member %s not ready after %v", m.name, startTimeout)
	}
}

// waitLeader waits until all members follow the same leader.
func (c *testCluster) waitLeader() {
	c.t.Helper()
	poll(c.t, startTimeout, "all members follow one leader", func() (bool, string) {
		var leads []uint64
		for _, m := range c.members {
			leads = append(leads, uint64(m.etcd.Server.Leader()))
		}
		for _, l := range leads {
			if l == 0 || l != leads[0] {
				return false, fmt.Sprintf("leaders seen: %x", leads)
			}
		}
		return true, ""
	})
}

// poll calls cond until it returns true or timeout passes; tests wait for
// state this way instead of sleeping a fixed time.
func poll(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s; last: %s", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// All listeners are held until every port is chosen so that the ports are
// distinct from each other.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	return etcdtest.FreePorts(t, n)
}

// deadEndpoint is a loopback URL on which nothing listens.
func deadEndpoint(t *testing.T) string {
	return fmt.Sprintf("http://127.0.0.1:%d", freePorts(t, 1)[0])
}

func mustURL(t *testing.T, s string) url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return *u
}

// testPKI is a CA with a server certificate for 127.0.0.1/localhost and a
// client certificate, all as PEM.
type testPKI struct {
	caPEM, serverCertPEM, serverKeyPEM, clientCertPEM, clientKeyPEM []byte
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	p := etcdtest.NewPKI(t)
	return testPKI{caPEM: p.CA, serverCertPEM: p.ServerCert, serverKeyPEM: p.ServerKey, clientCertPEM: p.ClientCert, clientKeyPEM: p.ClientKey}
}

// serverTLSInfo writes the server side to files, since embed only reads
// certificates from disk, and requires client certificates.
func (p testPKI) serverTLSInfo(t *testing.T) *transport.TLSInfo {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
		return path
	}
	return &transport.TLSInfo{
		CertFile:       write("server.crt", p.serverCertPEM),
		KeyFile:        write("server.key", p.serverKeyPEM),
		TrustedCAFile:  write("ca.crt", p.caPEM),
		ClientCertAuth: true,
	}
}
