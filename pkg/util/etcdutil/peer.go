package etcdutil

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

// peerRequestTimeout bounds one read of a peer's membership; a member that
// takes longer is skipped for this round, as etcd skips it when it joins.
const peerRequestTimeout = 2 * time.Second

// PeerMember is one member as a peer announces it. A member that was added
// but has not started yet has no name.
type PeerMember struct {
	Name     string   `json:"name"`
	PeerURLs []string `json:"peerURLs"`
}

// NewPeerHTTPClient is the client that talks to members' peer URLs. tlsConfig
// is nil for plain-HTTP peers; with peer TLS it carries the member's own peer
// certificate, which peers demand of each other.
func NewPeerHTTPClient(tlsConfig *tls.Config) *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	// etcd's peer listener speaks HTTP/1.1 only and drops a client that
	// negotiates h2, as etcd's own peer transport never does.
	transport.ForceAttemptHTTP2 = false
	return &http.Client{
		Transport: transport,
		Timeout:   peerRequestTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// TLSConfigFromFiles builds a TLS configuration from PEM files, as a member
// pod has them mounted.
func TLSConfigFromFiles(certFile, keyFile, caFile string) (*tls.Config, error) {
	read := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("tls config: %w", err)
		}
		return b, nil
	}
	cert, err := read(certFile)
	if err != nil {
		return nil, err
	}
	key, err := read(keyFile)
	if err != nil {
		return nil, err
	}
	ca, err := read(caFile)
	if err != nil {
		return nil, err
	}
	return NewTLSConfig(cert, key, ca)
}

// PeerMembership reads the membership a member serves on its peer URL. A
// starting etcd with --initial-cluster-state=existing reads the same thing
// and refuses to start unless its --initial-cluster matches it.
func PeerMembership(ctx context.Context, client *http.Client, peerURL string) ([]PeerMember, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(peerURL, "/")+"/members", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read the membership from %s: %w", peerURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read the membership from %s: %s", peerURL, resp.Status)
	}
	var members []PeerMember
	if err := json.Unmarshal(body, &members); err != nil {
		return nil, fmt.Errorf("read the membership from %s: %w", peerURL, err)
	}
	return members, nil
}

// MembershipWait describes a joining member waiting to be added.
type MembershipWait struct {
	// PeerURL is the joining member's own peer URL.
	PeerURL string
	// Peers are the peer URLs of the members it joins.
	Peers []string
	// Client reads the peers' membership (NewPeerHTTPClient).
	Client *http.Client
	// Interval is the pause between two rounds over the peers.
	Interval time.Duration
}

// ErrNoPeerAnswered is WaitForMembership's error when no peer ever answered.
var ErrNoPeerAnswered = errors.New("no member answered on its peer URL")

// WaitForMembership returns once the joining member may start: at least one
// peer answered, and every peer that answered lists the member. Requiring all
// of them, not just one, matters because a starting etcd takes the membership
// from the first peer that answers, and a follower that has not applied the
// MemberAdd yet would make it exit with "member count is unequal".
//
// report, if not nil, is called after every round that did not succeed, with
// what is still missing. The error on cancellation says the same.
func WaitForMembership(ctx context.Context, w MembershipWait, report func(missing error)) error {
	interval := w.Interval
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	for {
		missing := checkMembership(ctx, w)
		if missing == nil {
			return nil
		}
		if report != nil {
			report(missing)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ctx.Err(), missing)
		case <-time.After(interval):
		}
	}
}

// checkMembership is one round of WaitForMembership: nil when the member may
// start, otherwise why not.
func checkMembership(ctx context.Context, w MembershipWait) error {
	answered := 0
	var errs []error
	for _, peer := range w.Peers {
		members, err := PeerMembership(ctx, w.Client, peer)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		answered++
		listed := slices.ContainsFunc(members, func(m PeerMember) bool {
			return slices.Contains(m.PeerURLs, w.PeerURL)
		})
		if !listed {
			return fmt.Errorf("%s is not a member yet according to %s", w.PeerURL, peer)
		}
	}
	if answered == 0 {
		return fmt.Errorf("%w: %w", ErrNoPeerAnswered, errors.Join(errs...))
	}
	return nil
}
