package etcdutil

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// waitResult runs WaitForMembership in the background and counts its
// unsuccessful rounds, so a test can tell "still waiting" from "returned".
type waitResult struct {
	rounds chan error
	done   chan error
}

func startWait(ctx context.Context, w MembershipWait) *waitResult {
	r := &waitResult{rounds: make(chan error, 1000), done: make(chan error, 1)}
	go func() {
		r.done <- WaitForMembership(ctx, w, func(missing error) { r.rounds <- missing })
	}()
	return r
}

// waitRounds waits until the wait has reported n unsuccessful rounds and
// returns the last reason; it fails the test if the wait returned instead.
func (r *waitResult) waitRounds(t *testing.T, n int) error {
	t.Helper()
	var last error
	for i := 0; i < n; i++ {
		select {
		case last = <-r.rounds:
		case err := <-r.done:
			t.Fatalf("the wait returned (%v) before round %d", err, i+1)
		case <-time.After(startTimeout):
			t.Fatalf("no round reported within %v", startTimeout)
		}
	}
	return last
}

func (r *waitResult) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(startTimeout):
		t.Fatalf("the wait did not return within %v", startTimeout)
		return nil
	}
}

func TestWaitForMembership(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1, nil)
	seed := c.members[0]
	cfg := ClientConfig{Endpoints: c.endpoints()}
	client := NewPeerHTTPClient(nil)

	t.Run("a peer's membership lists every member by peer URL", func(t *testing.T) {
		ms, err := PeerMembership(t.Context(), client, seed.peerURL)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 || ms[0].Name != seed.name || !slices.Equal(ms[0].PeerURLs, []string{seed.peerURL}) {
			t.Fatalf("membership = %+v, want only %s at %s", ms, seed.name, seed.peerURL)
		}
	})

	t.Run("the wait ends only once the member is added", func(t *testing.T) {
		joiner := fmt.Sprintf("http://127.0.0.1:%d", freePorts(t, 1)[0])
		// A dead peer is skipped, as a starting etcd skips it.
		w := startWait(t.Context(), MembershipWait{
			PeerURL: joiner, Peers: []string{deadEndpoint(t), seed.peerURL}, Client: client, Interval: 20 * time.Millisecond,
		})
		missing := w.waitRounds(t, 3)
		if missing == nil || errors.Is(missing, ErrNoPeerAnswered) {
			t.Fatalf("reason while waiting = %v, want that the member is not listed", missing)
		}
		if _, err := AddMember(t.Context(), cfg, joiner); err != nil {
			t.Fatal(err)
		}
		if err := w.result(t); err != nil {
			t.Fatalf("wait = %v, want success after MemberAdd", err)
		}
		ms, err := PeerMembership(t.Context(), client, seed.peerURL)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if slices.Contains(m.PeerURLs, joiner) && m.Name != "" {
				t.Errorf("the added member has name %q before it started", m.Name)
			}
		}
	})

	t.Run("without any answering peer the wait reports it and ends with its context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		w := startWait(ctx, MembershipWait{
			PeerURL: "http://127.0.0.1:1", Peers: []string{deadEndpoint(t)}, Client: client, Interval: 20 * time.Millisecond,
		})
		if missing := w.waitRounds(t, 2); !errors.Is(missing, ErrNoPeerAnswered) {
			t.Fatalf("reason = %v, want ErrNoPeerAnswered", missing)
		}
		cancel()
		err := w.result(t)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNoPeerAnswered) {
			t.Fatalf("wait = %v, want cancellation with the reason", err)
		}
	})
}

// TestWaitForMembershipWithPeerTLS runs the wait against a member that
// requires peer client certificates, as members of a TLS cluster do.
func TestWaitForMembershipWithPeerTLS(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	peerTLS := pki.serverTLSInfo(t)
	var seed *embed.Etcd
	var peerURL string
	for attempt := 1; ; attempt++ {
		ports := freePorts(t, 2)
		peerURL = fmt.Sprintf("https://127.0.0.1:%d", ports[0])
		cfg := embed.NewConfig()
		cfg.Name = "tls0"
		cfg.Dir = filepath.Join(t.TempDir(), "tls0")
		cfg.ListenPeerUrls = []url.URL{mustURL(t, peerURL)}
		cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
		cfg.ListenClientUrls = []url.URL{mustURL(t, fmt.Sprintf("http://127.0.0.1:%d", ports[1]))}
		cfg.AdvertiseClientUrls = cfg.ListenClientUrls
		cfg.InitialCluster = "tls0=" + peerURL
		cfg.PeerTLSInfo = *peerTLS
		cfg.LogLevel = "error"
		cfg.UnsafeNoFsync = true
		e, err := embed.StartEtcd(cfg)
		if err == nil {
			seed = e
			break
		}
		if attempt >= 5 || !isAddrInUse(err) {
			t.Fatalf("start TLS member: %v", err)
		}
	}
	t.Cleanup(seed.Close)
	waitReady(t, &testMember{name: "tls0", etcd: seed})

	certFile, keyFile, caFile := peerTLS.CertFile, peerTLS.KeyFile, peerTLS.TrustedCAFile
	tlsConfig, err := TLSConfigFromFiles(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := PeerMembership(t.Context(), NewPeerHTTPClient(tlsConfig), peerURL)
	if err != nil || len(ms) != 1 || ms[0].Name != "tls0" {
		t.Fatalf("membership with the peer certificate = %+v, %v; want tls0", ms, err)
	}

	// Without a client certificate the peer refuses the connection.
	noCert, err := NewTLSConfig(nil, nil, pki.caPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PeerMembership(t.Context(), NewPeerHTTPClient(noCert), peerURL); err == nil {
		t.Fatal("a peer requiring client certificates answered a client without one")
	}

	if _, err := TLSConfigFromFiles(certFile, keyFile, filepath.Join(t.TempDir(), "missing.crt")); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
}
