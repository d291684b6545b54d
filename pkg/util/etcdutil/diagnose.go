package etcdutil

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// diagnoseTimeout bounds the look behind a timeout, per endpoint: the caller
// already waited a dial timeout.
const diagnoseTimeout = 2 * time.Second

// TimeoutError is a call to etcd that timed out or found no endpoint
// usable, with what a closer look found behind it. The etcd client only
// says "context deadline exceeded" whether a name does not resolve, a port
// refuses connections, the TLS handshake fails or the cluster has no
// leader; the user needs the cause to fix anything.
type TimeoutError struct {
	Err error
	// Causes are what was found, one line per endpoint or for the cluster.
	Causes []string
}

func (e *TimeoutError) Error() string {
	if len(e.Causes) == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("%v (cause: %s)", e.Err, strings.Join(e.Causes, "; "))
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// isTimeout tells the errors that hide their cause: deadlines, and gRPC's
// Unavailable (no connection could be made).
func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(errors.Unwrap(err)) {
	case codes.DeadlineExceeded, codes.Unavailable:
		return true
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable:
		return true
	}
	return strings.Contains(err.Error(), "context deadline exceeded")
}

// explainUnreachable adds to an error of reaching cfg's endpoints what is
// wrong with each of them. It returns err unchanged unless err hides its
// cause, or when nothing was found.
func explainUnreachable(ctx context.Context, cfg ClientConfig, err error) error {
	if !isTimeout(err) {
		return err
	}
	causes := diagnoseEndpoints(ctx, cfg)
	if len(causes) == 0 {
		return err
	}
	return &TimeoutError{Err: err, Causes: causes}
}

// diagnoseEndpoints looks at each endpoint in parallel as a client does,
// step by step: the URL, the name, the port, the TLS handshake.
func diagnoseEndpoints(ctx context.Context, cfg ClientConfig) []string {
	// The caller's context may be the one that just expired.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), diagnoseTimeout)
	defer cancel()
	out := make([]string, len(cfg.Endpoints))
	var wg sync.WaitGroup
	for i, ep := range cfg.Endpoints {
		wg.Go(func() { out[i] = diagnoseEndpoint(ctx, ep, cfg.TLS, cfg.Addresses) })
	}
	wg.Wait()
	var causes []string
	for _, c := range out {
		if c != "" {
			causes = append(causes, c)
		}
	}
	return causes
}

// DiagnoseEndpoint says what keeps a client from reaching the etcd endpoint
// ep, "" when its name resolves, its port accepts connections and, for https,
// the TLS handshake succeeds with tlsConfig.
func DiagnoseEndpoint(ctx context.Context, ep string, tlsConfig *tls.Config) string {
	return diagnoseEndpoint(ctx, ep, tlsConfig, nil)
}

// diagnoseEndpoint is DiagnoseEndpoint for a client that connects to the
// hosts that addresses map at those addresses (ClientConfig.Addresses):
// their names are not looked up.
func diagnoseEndpoint(ctx context.Context, ep string, tlsConfig *tls.Config, addresses map[string]string) string {
	u, err := url.Parse(ep)
	if err != nil {
		return fmt.Sprintf("endpoint %q is not a URL: %v", ep, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Sprintf("endpoint %q is not a client URL like https://host:2379", ep)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	dialHost := host
	if ip := addresses[host]; ip != "" {
		dialHost = ip
	} else if net.ParseIP(host) == nil {
		if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
			return fmt.Sprintf("%s: the name %s does not resolve (%v); the member's pod may not exist or not be ready, or the cluster domain is wrong", ep, host, err)
		}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(dialHost, port))
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && strings.Contains(err.Error(), "refused") {
			return fmt.Sprintf("%s: connection refused: nothing listens on port %s; etcd is not running there", ep, port)
		}
		return fmt.Sprintf("%s: cannot connect: %v", ep, err)
	}
	defer func() { _ = conn.Close() }()
	if u.Scheme != "https" {
		return ""
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if tlsConfig != nil {
		cfg = tlsConfig.Clone()
	}
	cfg.ServerName = host
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Sprintf("%s: TLS handshake failed: %v", ep, err)
	}
	return ""
}

// explainRequestTimeout adds to a request that timed out on a connected
// client what the members say: a cluster without a leader cannot answer
// anything that needs quorum.
func explainRequestTimeout(ctx context.Context, c *clientv3.Client, cfg ClientConfig, err error) error {
	if !isTimeout(err) {
		return err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), diagnoseTimeout)
	defer cancel()
	answered, leaders := 0, map[uint64]bool{}
	for _, ep := range cfg.Endpoints {
		resp, serr := c.Status(sctx, ep)
		if serr != nil {
			continue
		}
		answered++
		if resp.Leader != 0 {
			leaders[resp.Leader] = true
		}
	}
	var cause string
	switch {
	case answered == 0:
		causes := diagnoseEndpoints(ctx, cfg)
		if len(causes) == 0 {
			return err
		}
		return &TimeoutError{Err: err, Causes: causes}
	case len(leaders) == 0:
		cause = fmt.Sprintf("no leader: %d member(s) answered and none follows a leader; a quorum of members is not running or cannot reach each other", answered)
	default:
		return err
	}
	return &TimeoutError{Err: err, Causes: []string{cause}}
}
