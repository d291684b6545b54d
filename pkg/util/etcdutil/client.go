package etcdutil

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// The original operator's numbers: long enough for a member that is busy
// applying a snapshot, short enough that an 8 s reconcile tick is not eaten
// by one dead endpoint.
const (
	DefaultDialTimeout    = 5 * time.Second
	DefaultRequestTimeout = 5 * time.Second
)

// healthKey is the key read to prove that a member (serializable read) or
// the cluster (linearizable read) serves requests. etcdctl's endpoint health
// reads the same key, so RBAC rules written for it also cover the operator.
const healthKey = "health"

// ErrNoLeader means no leader is agreed on by a majority of the voting
// members: an election is running or quorum is lost.
var ErrNoLeader = errors.New("no leader agreed on by a majority of voting members")

// ClientConfig says how to reach a cluster. Every function of this package
// dials, does its work and closes the connection again: the operator talks to
// etcd a few times per reconcile tick, and a long-lived client would keep
// stale endpoints after members are replaced.
type ClientConfig struct {
	// Endpoints are client URLs such as "https://m.c.ns.svc:2379".
	Endpoints []string
	// TLS is used for https endpoints; nil means plain http.
	TLS *tls.Config
	// DialTimeout bounds connecting (0 means DefaultDialTimeout).
	DialTimeout time.Duration
	// RequestTimeout bounds each request (0 means DefaultRequestTimeout).
	RequestTimeout time.Duration
	// Cache, when set, keeps clients across calls (see ClientCache).
	Cache *ClientCache
	// Addresses, when set, map an endpoint's host name to the IP address
	// to connect to instead of looking the name up; a name not in it is
	// looked up as usual. TLS still checks the certificate against the
	// name. The operator knows its members' pod addresses from its cache:
	// a member's name is not fully qualified, so each lookup walks the
	// pod's DNS search list, and that was a quarter of what an idle
	// cluster cost the operator (see dialMapped).
	Addresses map[string]string
}

// addressesKey tells apart clients dialled with different Addresses.
func (c ClientConfig) addressesKey() string {
	if len(c.Addresses) == 0 {
		return ""
	}
	var b strings.Builder
	for _, host := range slices.Sorted(maps.Keys(c.Addresses)) {
		fmt.Fprintf(&b, "%s=%s;", host, c.Addresses[host])
	}
	return b.String()
}

// dialMapped connects to addr ("host:port"), at the address that
// addresses give for host when they give one.
func dialMapped(addresses map[string]string) func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil {
			if ip, ok := addresses[host]; ok && ip != "" {
				addr = net.JoinHostPort(ip, port)
			}
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

func (c ClientConfig) dialTimeout() time.Duration {
	if c.DialTimeout > 0 {
		return c.DialTimeout
	}
	return DefaultDialTimeout
}

func (c ClientConfig) requestTimeout() time.Duration {
	if c.RequestTimeout > 0 {
		return c.RequestTimeout
	}
	return DefaultRequestTimeout
}

// withEndpoints returns a copy of c that talks to exactly the given
// endpoints, for requests that must reach one specific member.
func (c ClientConfig) withEndpoints(eps ...string) ClientConfig {
	c.Endpoints = eps
	return c
}

// NewClientContext returns a client that has already been answered by at
// least one endpoint, or an error within DialTimeout. The etcd client alone
// connects lazily, so a client to dead endpoints would look fine and only
// hang in the first request; callers want "unreachable" to be an error here.
// The caller closes the client. ctx only bounds the connection check, not the
// client's lifetime.
func NewClientContext(ctx context.Context, cfg ClientConfig) (*clientv3.Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("new etcd client: no endpoints")
	}
	var dial []grpc.DialOption
	if len(cfg.Addresses) > 0 {
		dial = append(dial, grpc.WithContextDialer(dialMapped(cfg.Addresses)))
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   slices.Clone(cfg.Endpoints),
		TLS:         cfg.TLS,
		DialTimeout: cfg.dialTimeout(),
		DialOptions: dial,
		// Errors are returned to the caller; the client's own retry chatter
		// would only duplicate them in the operator's log.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("new etcd client %v: %w", cfg.Endpoints, err)
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.dialTimeout())
	defer cancel()
	// A serializable read is answered by any live member, even one without
	// quorum, so this checks reachability and nothing more.
	_, err = c.Get(pctx, healthKey, clientv3.WithSerializable(), clientv3.WithCountOnly())
	if err != nil && !errors.Is(err, rpctypes.ErrPermissionDenied) {
		_ = c.Close()
		return nil, fmt.Errorf("connect to etcd %v: %w", cfg.Endpoints, explainUnreachable(ctx, cfg, err))
	}
	return c, nil
}

// call dials cfg, runs fn with a context bounded by the request timeout and
// closes the client.
func call[T any](ctx context.Context, cfg ClientConfig, fn func(context.Context, *clientv3.Client) (T, error)) (T, error) {
	var zero T
	c, release, err := acquire(ctx, cfg)
	if err != nil {
		return zero, err
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.requestTimeout())
	defer cancel()
	out, err := fn(rctx, c)
	if err != nil {
		err = explainRequestTimeout(ctx, c, cfg, err)
	}
	release(err)
	return out, err
}

// ListMembers returns the membership with a linearizable read, so a member
// added or removed a moment ago is never missing or still listed. It
// therefore fails without quorum; ClusterHealth still reports members then.
func ListMembers(ctx context.Context, cfg ClientConfig) (*clientv3.MemberListResponse, error) {
	resp, err := call(ctx, cfg, func(ctx context.Context, c *clientv3.Client) (*clientv3.MemberListResponse, error) {
		return c.MemberList(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("member list: %w", err)
	}
	return resp, nil
}

// AddMember adds a voting member with the given peer URL. If a member with
// that peer URL already exists, it is returned instead of an error: an
// earlier MemberAdd may have been committed although its caller saw a
// timeout, and a retry must not fail forever on its own success (etcd
// refuses the retry as a duplicate, or, while the first one has not started,
// as "not enough started members").
func AddMember(ctx context.Context, cfg ClientConfig, peerURL string) (*etcdserverpb.Member, error) {
	m, err := addMember(ctx, cfg, peerURL, false)
	if err != nil {
		return nil, fmt.Errorf("member add %s: %w", peerURL, err)
	}
	return m, nil
}

// AddLearner adds a non-voting member, which cannot cost the cluster its
// quorum while it catches up; promote it with PromoteMember. Like AddMember
// it returns an existing member with the same peer URL (check IsLearner).
func AddLearner(ctx context.Context, cfg ClientConfig, peerURL string) (*etcdserverpb.Member, error) {
	m, err := addMember(ctx, cfg, peerURL, true)
	if err != nil {
		return nil, fmt.Errorf("learner add %s: %w", peerURL, err)
	}
	return m, nil
}

func addMember(ctx context.Context, cfg ClientConfig, peerURL string, learner bool) (*etcdserverpb.Member, error) {
	return call(ctx, cfg, func(ctx context.Context, c *clientv3.Client) (*etcdserverpb.Member, error) {
		add := c.MemberAdd
		if learner {
			add = c.MemberAddAsLearner
		}
		resp, err := add(ctx, []string{peerURL})
		if err == nil {
			return resp.Member, nil
		}
		list, lerr := c.MemberList(ctx)
		if lerr != nil {
			return nil, err
		}
		for _, m := range list.Members {
			if slices.Contains(m.PeerURLs, peerURL) {
				return m, nil
			}
		}
		return nil, err
	})
}

// PromoteMember makes a learner a voting member. A member that already votes
// is not an error, so a retried promotion succeeds. While the learner is
// still catching up etcd refuses; errors.Is(err,
// rpctypes.ErrMemberLearnerNotReady) tells the caller to retry later.
func PromoteMember(ctx context.Context, cfg ClientConfig, id uint64) error {
	_, err := call(ctx, cfg, func(ctx context.Context, c *clientv3.Client) (*clientv3.MemberPromoteResponse, error) {
		return c.MemberPromote(ctx, id)
	})
	if err != nil && !errors.Is(err, rpctypes.ErrMemberNotLearner) {
		return fmt.Errorf("member promote %x: %w", id, err)
	}
	return nil
}

// UpdateMemberPeerURL changes the peer URL etcd records for member id: how
// its peers reach it from then on.
func UpdateMemberPeerURL(ctx context.Context, cfg ClientConfig, id uint64, peerURL string) error {
	_, err := call(ctx, cfg, func(ctx context.Context, c *clientv3.Client) (*clientv3.MemberUpdateResponse, error) {
		return c.MemberUpdate(ctx, id, []string{peerURL})
	})
	if err != nil {
		return fmt.Errorf("member update %x to %s: %w", id, peerURL, err)
	}
	return nil
}

// RemoveMember removes a member by ID. A member that is already gone is not
// an error, so a reconcile that retries after a timeout does not get stuck.
// etcd refuses removals that would leave fewer than a quorum of members
// connected for the last 5 s (rpctypes.ErrUnhealthy); retry those later.
func RemoveMember(ctx context.Context, cfg ClientConfig, id uint64) error {
	_, err := call(ctx, cfg, func(ctx context.Context, c *clientv3.Client) (*clientv3.MemberRemoveResponse, error) {
		return c.MemberRemove(ctx, id)
	})
	switch {
	case err == nil, errors.Is(err, rpctypes.ErrMemberNotFound):
		return nil
	case errors.Is(err, rpctypes.ErrStopped):
		// The member that served the request was the one removed: it applied
		// its own removal and stopped before answering. Ask the others.
		if gone, listErr := memberGone(ctx, cfg, id); listErr == nil && gone {
			return nil
		}
	}
	return fmt.Errorf("member remove %x: %w", id, err)
}

// memberGone tells whether id has left the membership, as the members that
// still answer see it.
func memberGone(ctx context.Context, cfg ClientConfig, id uint64) (bool, error) {
	resp, err := ListMembers(ctx, cfg)
	if err != nil {
		return false, err
	}
	for _, m := range resp.Members {
		if m.ID == id {
			return false, nil
		}
	}
	return true, nil
}

// MoveLeader hands leadership to member toID. etcd only accepts the request
// from the current leader, so fromEndpoint must be the leader's client URL
// (cfg.Endpoints is ignored). Use it before removing or upgrading the leader
// to avoid an election under load.
func MoveLeader(ctx context.Context, cfg ClientConfig, fromEndpoint string, toID uint64) error {
	_, err := call(ctx, cfg.withEndpoints(fromEndpoint), func(ctx context.Context, c *clientv3.Client) (*clientv3.MoveLeaderResponse, error) {
		return c.MoveLeader(ctx, toID)
	})
	if err != nil {
		return fmt.Errorf("move leader from %s to %x: %w", fromEndpoint, toID, err)
	}
	return nil
}

// EndpointStatus asks one member about itself (version, raft state, leader
// it follows). Only endpoint is contacted; cfg.Endpoints is ignored.
func EndpointStatus(ctx context.Context, cfg ClientConfig, endpoint string) (*clientv3.StatusResponse, error) {
	resp, err := call(ctx, cfg.withEndpoints(endpoint), func(ctx context.Context, c *clientv3.Client) (*clientv3.StatusResponse, error) {
		return c.Status(ctx, endpoint)
	})
	if err != nil {
		return nil, fmt.Errorf("endpoint status %s: %w", endpoint, err)
	}
	return resp, nil
}

// Health is what a reconcile loop needs to know about a cluster at one
// moment, gathered without needing quorum.
type Health struct {
	// Members has one entry per member of the member list, sorted by name
	// then ID.
	Members []MemberHealth
	// LeaderID is the leader a majority of voting members follow, or 0. A
	// minority partition may still believe in an old leader; requiring a
	// majority keeps that belief out.
	LeaderID uint64
	// Linearizable is true when a quorum read went through: the cluster can
	// serve consistent reads and writes. False during an election or after
	// quorum loss.
	Linearizable bool
	// ReadErr says why the linearizable read failed.
	ReadErr error
	// Alarms are the active alarms any answering member reported, sorted
	// and without duplicates. They come with the members' status, so
	// knowing them costs no raft round (an AlarmList request is one).
	Alarms []Alarm
}

// Healthy reports an agreed leader and a working quorum read.
func (h Health) Healthy() bool { return h.LeaderID != 0 && h.Linearizable }

// Answered returns the client URLs of the members that answered.
func (h Health) Answered() []string {
	var eps []string
	for _, m := range h.Members {
		if m.Err == nil {
			eps = append(eps, m.ClientURL)
		}
	}
	return eps
}

// MemberHealth is one member's own view of itself. Every field after Err is
// zero when Err is set.
type MemberHealth struct {
	ID uint64
	// Name is etcd's member name, empty until the member first started.
	Name      string
	IsLearner bool
	// PeerURLs are the member's peer URLs, which name it even before it
	// started.
	PeerURLs []string
	// ClientURL is the advertised client URL that was asked ("" if the member
	// never started and so advertises none).
	ClientURL string
	// Err is why the member did not answer; nil means it did.
	Err error
	// Version is the etcd server version, for upgrade decisions.
	Version string
	// Leader is the leader this member follows (0 if none).
	Leader uint64
	// RaftTerm and RaftIndex show how far the member's log got; a member far
	// behind the others is still catching up.
	RaftTerm  uint64
	RaftIndex uint64
	// Revision is the member's key-value store revision.
	Revision int64
	// RaftAppliedIndex is how far the member has applied its log; a
	// follower close to the leader's RaftIndex is caught up.
	RaftAppliedIndex uint64
	// DBSize is the size of the member's database file; DBSizeInUse is the
	// part of it that holds data. The difference is what a defragmentation
	// gives back, and DBSize is what etcd compares with its quota.
	DBSize      int64
	DBSizeInUse int64
	// Alarms are the cluster's active alarms as this member knows them
	// (etcd replicates alarms, so every member lists all of them).
	Alarms []Alarm
	// StorageVersion, DBSizeQuota and Downgrade are reported by etcd 3.6
	// and later only; they are zero for older members.
	StorageVersion string
	DBSizeQuota    int64
	Downgrade      DowngradeInfo
}

// ClusterHealth reports on every member the cluster knows about, asking each
// at its advertised client URL in parallel. It fails only when no endpoint
// in cfg answers at all; everything else is reported in Health.
func ClusterHealth(ctx context.Context, cfg ClientConfig) (h Health, err error) {
	c, release, err := acquire(ctx, cfg)
	if err != nil {
		return Health{}, fmt.Errorf("cluster health: %w", err)
	}
	defer func() {
		// A member that did not answer may have moved: the client is dialled
		// again next time.
		failed := err
		for _, m := range h.Members {
			if failed == nil && m.Err != nil && slices.Contains(cfg.Endpoints, m.ClientURL) {
				failed = m.Err
			}
		}
		release(failed)
	}()

	var readErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		rctx, cancel := context.WithTimeout(ctx, cfg.requestTimeout())
		defer cancel()
		_, readErr = c.Get(rctx, healthKey)
		if errors.Is(readErr, rpctypes.ErrPermissionDenied) {
			readErr = nil // the read got through the quorum before being refused
		}
	})
	members, err := memberStatuses(ctx, c, cfg)
	wg.Wait()
	if err != nil {
		return Health{}, fmt.Errorf("cluster health: %w", explainRequestTimeout(ctx, c, cfg, err))
	}
	h.Members = members
	h.LeaderID = agreedLeader(members)
	h.Alarms = mergeAlarms(members)
	if readErr != nil {
		h.ReadErr = fmt.Errorf("linearizable read: %w", readErr)
	} else {
		h.Linearizable = true
	}
	return h, nil
}

// LeaderID returns the leader a majority of voting members follow, or an
// error wrapping ErrNoLeader.
func LeaderID(ctx context.Context, cfg ClientConfig) (uint64, error) {
	c, err := NewClientContext(ctx, cfg)
	if err != nil {
		return 0, fmt.Errorf("leader id: %w", err)
	}
	defer func() { _ = c.Close() }()
	members, err := memberStatuses(ctx, c, cfg)
	if err != nil {
		return 0, fmt.Errorf("leader id: %w", err)
	}
	id := agreedLeader(members)
	if id == 0 {
		return 0, fmt.Errorf("leader id: %w", ErrNoLeader)
	}
	return id, nil
}

// memberStatuses lists members and asks each for its status in parallel.
// The list is read without quorum (MemberListRequest.Linearizable false), so
// a survivor of quorum loss still tells who its peers are; the typed client
// always asks for a linearizable list, hence the raw gRPC call.
func memberStatuses(ctx context.Context, c *clientv3.Client, cfg ClientConfig) ([]MemberHealth, error) {
	lctx, cancel := context.WithTimeout(ctx, cfg.requestTimeout())
	list, err := clientv3.RetryClusterClient(c).MemberList(lctx, &etcdserverpb.MemberListRequest{Linearizable: false})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("member list: %w", clientv3.ContextError(lctx, err))
	}
	out := make([]MemberHealth, len(list.Members))
	var wg sync.WaitGroup
	for i, m := range list.Members {
		out[i] = MemberHealth{ID: m.ID, Name: m.Name, IsLearner: m.IsLearner, PeerURLs: m.PeerURLs}
		if len(m.ClientURLs) == 0 {
			out[i].Err = errors.New("member has not started: it advertises no client URL")
			continue
		}
		out[i].ClientURL = m.ClientURLs[0]
		wg.Go(func() { fillStatus(ctx, c, cfg, &out[i]) })
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// quickLookAfter is how long a member may take to answer its status before
// a closer look at its endpoint: a member that answers does so within
// milliseconds, and one whose name no longer resolves or whose port refuses
// connections (its pod is gone) would otherwise hold the whole health check
// for the request timeout, and a replacement with it.
const quickLookAfter = 300 * time.Millisecond

func fillStatus(ctx context.Context, c *clientv3.Client, cfg ClientConfig, mh *MemberHealth) {
	sctx, cancel := context.WithTimeout(ctx, cfg.requestTimeout())
	defer cancel()
	type answer struct {
		resp *clientv3.StatusResponse
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		if eps := c.Endpoints(); len(eps) == 1 && eps[0] == mh.ClientURL {
			// The client's own connection: clientv3's Status dials the
			// endpoint anew, a connection per member per health check.
			resp, err := etcdserverpb.NewMaintenanceClient(c.ActiveConnection()).Status(sctx, &etcdserverpb.StatusRequest{})
			if err != nil {
				answered <- answer{nil, clientv3.ContextError(sctx, err)}
				return
			}
			answered <- answer{(*clientv3.StatusResponse)(resp), nil}
			return
		}
		resp, err := c.Status(sctx, mh.ClientURL)
		answered <- answer{resp, err}
	}()
	var got answer
	look := time.NewTimer(quickLookAfter)
	select {
	case got = <-answered:
		look.Stop()
	case <-look.C:
		dctx, dcancel := context.WithTimeout(sctx, diagnoseTimeout)
		cause := diagnoseEndpoint(dctx, mh.ClientURL, cfg.TLS, cfg.Addresses)
		dcancel()
		if cause != "" {
			// Not waited for: clientv3 dials a member's endpoint for its
			// status with its own dial timeout, whatever the context says;
			// the goroutine ends with it (answered is buffered).
			cancel()
			mh.Err = fmt.Errorf("status %s: %w", mh.ClientURL, &TimeoutError{Err: errors.New("no answer"), Causes: []string{cause}})
			return
		}
		got = <-answered
	}
	resp, err := got.resp, got.err
	if err != nil {
		if isTimeout(err) {
			dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), diagnoseTimeout)
			cause := diagnoseEndpoint(dctx, mh.ClientURL, cfg.TLS, cfg.Addresses)
			dcancel()
			if cause != "" {
				err = &TimeoutError{Err: err, Causes: []string{cause}}
			}
		}
		mh.Err = fmt.Errorf("status %s: %w", mh.ClientURL, err)
		return
	}
	// A DNS name reused by a different member would otherwise make a
	// stranger's facts look like this member's.
	if resp.Header.MemberId != mh.ID {
		mh.Err = fmt.Errorf("status %s: answered as member %x, not %x", mh.ClientURL, resp.Header.MemberId, mh.ID)
		return
	}
	copyStatus(mh, resp)
}

func copyStatus(mh *MemberHealth, resp *clientv3.StatusResponse) {
	mh.Version = resp.Version
	mh.Leader = resp.Leader
	mh.RaftTerm = resp.RaftTerm
	mh.RaftIndex = resp.RaftIndex
	mh.Revision = resp.Header.Revision
	mh.RaftAppliedIndex = resp.RaftAppliedIndex
	mh.DBSize = resp.DbSize
	mh.DBSizeInUse = resp.DbSizeInUse
	mh.Alarms = parseStatusAlarms(resp.Errors)
	mh.StorageVersion, mh.DBSizeQuota, mh.Downgrade = statusFieldsOf36(resp.XXX_unrecognized)
}

// agreedLeader returns the leader followed by a majority of voting members,
// counting only members that answered, or 0.
func agreedLeader(members []MemberHealth) uint64 {
	voters := 0
	votes := map[uint64]int{}
	for _, m := range members {
		if m.IsLearner {
			continue
		}
		voters++
		if m.Err == nil && m.Leader != 0 {
			votes[m.Leader]++
		}
	}
	for id, n := range votes {
		if n >= voters/2+1 {
			return id
		}
	}
	return 0
}

// MaxRevisionEndpoint finds the endpoint with the highest store revision,
// asking each separately with a serializable read, so a backup is taken from
// the most up-to-date member even without quorum. Endpoints that do not
// answer are skipped; the error lists all of them when none answered. Ties go
// to the earlier endpoint.
func MaxRevisionEndpoint(ctx context.Context, cfg ClientConfig, endpoints []string) (endpoint string, revision int64, err error) {
	if len(endpoints) == 0 {
		return "", 0, errors.New("max revision: no endpoints")
	}
	type result struct {
		rev int64
		err error
	}
	results := make([]result, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Go(func() {
			results[i].rev, results[i].err = endpointRevision(ctx, cfg, ep)
		})
	}
	wg.Wait()

	best := -1
	var errs []error
	for i, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		if best < 0 || r.rev > results[best].rev {
			best = i
		}
	}
	if best < 0 {
		return "", 0, fmt.Errorf("max revision: no endpoint answered: %w", errors.Join(errs...))
	}
	return endpoints[best], results[best].rev, nil
}

func endpointRevision(ctx context.Context, cfg ClientConfig, ep string) (int64, error) {
	resp, err := call(ctx, cfg.withEndpoints(ep), func(ctx context.Context, c *clientv3.Client) (*clientv3.GetResponse, error) {
		return c.Get(ctx, healthKey, clientv3.WithSerializable(), clientv3.WithCountOnly())
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", ep, err)
	}
	return resp.Header.Revision, nil
}

// MemberStatus asks the member at endpoint about itself, for callers that
// reach members by addresses of their own (a port-forward) rather than by
// the client URLs the members advertise. The ID comes from the answer; Name
// is left to the caller, since etcd's status does not carry it. A member
// that does not answer is reported with Err set, not as an error.
func MemberStatus(ctx context.Context, cfg ClientConfig, endpoint string) MemberHealth {
	mh := MemberHealth{ClientURL: endpoint}
	c, err := NewClientContext(ctx, cfg.withEndpoints(endpoint))
	if err != nil {
		mh.Err = err
		return mh
	}
	defer func() { _ = c.Close() }()
	sctx, cancel := context.WithTimeout(ctx, cfg.requestTimeout())
	defer cancel()
	resp, err := c.Status(sctx, endpoint)
	if err != nil {
		mh.Err = fmt.Errorf("status %s: %w", endpoint, err)
		return mh
	}
	mh.ID = resp.Header.MemberId
	mh.IsLearner = resp.IsLearner
	copyStatus(&mh, resp)
	return mh
}

// HealthOf assembles a Health from member reports gathered one by one
// (MemberStatus): the agreed leader and the alarms. Linearizable stays
// false: no quorum read was made.
func HealthOf(members []MemberHealth) Health {
	sorted := slices.Clone(members)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Name != sorted[j].Name {
			return sorted[i].Name < sorted[j].Name
		}
		return sorted[i].ID < sorted[j].ID
	})
	return Health{Members: sorted, LeaderID: agreedLeader(sorted), Alarms: mergeAlarms(sorted)}
}
