package cluster

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// Defaults of LimitEtcd for an operator's clusters.
const (
	// DefaultEtcdConcurrency is how many etcd calls the operator's clusters
	// make at once. A cluster's goroutine makes one call at a time, so a
	// cluster that hangs holds one slot and the others keep the rest.
	DefaultEtcdConcurrency = 32
	// DefaultEtcdCallTimeout bounds every etcd call but a defragmentation,
	// dial, request and the look behind a failure included (etcdutil's own
	// timeouts are 5 s each).
	DefaultEtcdCallTimeout = 30 * time.Second
)

// LimitEtcd bounds the etcd calls made through api by every cluster that
// shares the result: at most n at once, each ended after timeout (a
// defragmentation after etcdutil.DefaultDefragmentTimeout, as it may rewrite
// gigabytes). A call waiting for a slot gives up when its context ends. So a
// cluster whose endpoints accept connections and never answer costs one slot
// and one client at a time, for a bounded time, and its error backoff spaces
// its tries; the other clusters go on.
func LimitEtcd(api EtcdAPI, n int, timeout time.Duration) EtcdAPI {
	return &limitedEtcd{api: api, slots: make(chan struct{}, max(n, 1)), timeout: timeout}
}

type limitedEtcd struct {
	api     EtcdAPI
	slots   chan struct{}
	timeout time.Duration
}

// enter waits for a slot and returns the call's context and the function
// that ends the call.
func (l *limitedEtcd) enter(ctx context.Context, timeout time.Duration) (context.Context, func(), error) {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	return cctx, func() { cancel(); <-l.slots }, nil
}

func limited[T any](l *limitedEtcd, ctx context.Context, timeout time.Duration, fn func(context.Context) (T, error)) (T, error) {
	cctx, leave, err := l.enter(ctx, timeout)
	if err != nil {
		var zero T
		return zero, err
	}
	defer leave()
	return fn(cctx)
}

func (l *limitedEtcd) MemberList(ctx context.Context, cc etcdutil.ClientConfig) ([]*etcdserverpb.Member, error) {
	return limited(l, ctx, l.timeout, func(ctx context.Context) ([]*etcdserverpb.Member, error) { return l.api.MemberList(ctx, cc) })
}

func (l *limitedEtcd) MemberAdd(ctx context.Context, cc etcdutil.ClientConfig, peerURL string) (*etcdserverpb.Member, error) {
	return limited(l, ctx, l.timeout, func(ctx context.Context) (*etcdserverpb.Member, error) { return l.api.MemberAdd(ctx, cc, peerURL) })
}

func (l *limitedEtcd) MemberAddAsLearner(ctx context.Context, cc etcdutil.ClientConfig, peerURL string) (*etcdserverpb.Member, error) {
	return limited(l, ctx, l.timeout, func(ctx context.Context) (*etcdserverpb.Member, error) {
		return l.api.MemberAddAsLearner(ctx, cc, peerURL)
	})
}

func (l *limitedEtcd) MemberPromote(ctx context.Context, cc etcdutil.ClientConfig, id uint64) error {
	_, err := limited(l, ctx, l.timeout, func(ctx context.Context) (struct{}, error) { return struct{}{}, l.api.MemberPromote(ctx, cc, id) })
	return err
}

func (l *limitedEtcd) MemberUpdatePeerURL(ctx context.Context, cc etcdutil.ClientConfig, id uint64, peerURL string) error {
	_, err := limited(l, ctx, l.timeout, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, l.api.MemberUpdatePeerURL(ctx, cc, id, peerURL)
	})
	return err
}

func (l *limitedEtcd) MemberRemove(ctx context.Context, cc etcdutil.ClientConfig, id uint64) error {
	_, err := limited(l, ctx, l.timeout, func(ctx context.Context) (struct{}, error) { return struct{}{}, l.api.MemberRemove(ctx, cc, id) })
	return err
}

func (l *limitedEtcd) ClusterHealth(ctx context.Context, cc etcdutil.ClientConfig) (etcdutil.Health, error) {
	return limited(l, ctx, l.timeout, func(ctx context.Context) (etcdutil.Health, error) { return l.api.ClusterHealth(ctx, cc) })
}

func (l *limitedEtcd) ClusterVersion(ctx context.Context, cc etcdutil.ClientConfig) (string, error) {
	return limited(l, ctx, l.timeout, func(ctx context.Context) (string, error) { return l.api.ClusterVersion(ctx, cc) })
}

func (l *limitedEtcd) MoveLeader(ctx context.Context, cc etcdutil.ClientConfig, toID uint64) error {
	_, err := limited(l, ctx, l.timeout, func(ctx context.Context) (struct{}, error) { return struct{}{}, l.api.MoveLeader(ctx, cc, toID) })
	return err
}

func (l *limitedEtcd) Compact(ctx context.Context, cc etcdutil.ClientConfig) (int64, error) {
	return limited(l, ctx, l.timeout, func(ctx context.Context) (int64, error) { return l.api.Compact(ctx, cc) })
}

func (l *limitedEtcd) Defragment(ctx context.Context, cc etcdutil.ClientConfig, endpoint string) error {
	_, err := limited(l, ctx, max(l.timeout, etcdutil.DefaultDefragmentTimeout), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, l.api.Defragment(ctx, cc, endpoint)
	})
	return err
}

func (l *limitedEtcd) DisarmNoSpace(ctx context.Context, cc etcdutil.ClientConfig) error {
	_, err := limited(l, ctx, l.timeout, func(ctx context.Context) (struct{}, error) { return struct{}{}, l.api.DisarmNoSpace(ctx, cc) })
	return err
}

func (l *limitedEtcd) EnableDowngrade(ctx context.Context, cc etcdutil.ClientConfig, target string) error {
	_, err := limited(l, ctx, l.timeout, func(ctx context.Context) (struct{}, error) { return struct{}{}, l.api.EnableDowngrade(ctx, cc, target) })
	return err
}
