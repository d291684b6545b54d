package cluster

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// hangingEtcd is a TCP listener that accepts connections and never answers:
// an etcd endpoint that hangs.
func hangingEtcd(t *testing.T) (url string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{}, 1)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case got <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String(), got
}

// healthyOrReal answers health checks at once, except for the hanging
// endpoint, which the real etcdutil is asked.
type healthyOrReal struct {
	EtcdAPI
	hanging string
	real    EtcdAPI
	answers atomic.Int64
}

func (h *healthyOrReal) ClusterHealth(ctx context.Context, cc etcdutil.ClientConfig) (etcdutil.Health, error) {
	if cc.Endpoints[0] == h.hanging {
		return h.real.ClusterHealth(ctx, cc)
	}
	h.answers.Add(1)
	return etcdutil.Health{LeaderID: 1, Linearizable: true}, nil
}

// TestAHangingEtcdDelaysNoOtherCluster: while one cluster's call hangs on an
// endpoint that never answers, the other clusters' calls go through the
// shared limit; the hanging call ends at the limit's timeout; and however
// many times it is tried, the goroutines it leaves behind do not add up.
func TestAHangingEtcdDelaysNoOtherCluster(t *testing.T) {
	url, accepted := hangingEtcd(t)
	api := &healthyOrReal{hanging: url, real: NewEtcdAPI()}
	hanging := etcdutil.ClientConfig{Endpoints: []string{url}, Cache: &etcdutil.ClientCache{}}
	healthy := etcdutil.ClientConfig{Endpoints: []string{"http://healthy:2379"}}

	// A limit of two calls: the hanging cluster holds one.
	limit := LimitEtcd(api, 2, time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	var returned atomic.Bool
	done := make(chan error, 1)
	go func() {
		_, err := limit.ClusterHealth(ctx, hanging)
		returned.Store(true)
		done <- err
	}()
	<-accepted
	for i := range 100 {
		if _, err := limit.ClusterHealth(t.Context(), healthy); err != nil {
			t.Fatalf("call %d of another cluster: %v", i, err)
		}
	}
	if returned.Load() {
		t.Fatal("the hanging call returned before the other cluster's calls were done: the test proves nothing")
	}
	cancel() // the hanging cluster is deleted
	if err := <-done; err == nil {
		t.Error("the hanging call succeeded")
	}

	// Every call ends at the limit's timeout (etcdutil's own dial timeout
	// is 5 s), and the clients of the calls that hung are closed.
	base := runtime.NumGoroutine()
	limit = LimitEtcd(api, 2, 200*time.Millisecond)
	for i := range 20 {
		_, err := limit.ClusterHealth(t.Context(), hanging)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("hanging call %d: %v, want the limit's deadline", i, err)
		}
	}
	waitFor(t, "the goroutines of the hanging calls to end", func() bool { return runtime.NumGoroutine() <= base+10 })
	if n := hanging.Cache.Len(); n != 0 {
		t.Errorf("%d clients kept for an endpoint that never answered, want 0", n)
	}
}

// TestALimitedCallGivesUpWhenItsContextEnds: a call that waits for a slot
// ends with its context, so that a stopped cluster does not wait behind
// others.
func TestALimitedCallGivesUpWhenItsContextEnds(t *testing.T) {
	url, accepted := hangingEtcd(t)
	api := &healthyOrReal{hanging: url, real: NewEtcdAPI()}
	limit := LimitEtcd(api, 1, time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _, _ = limit.ClusterHealth(ctx, etcdutil.ClientConfig{Endpoints: []string{url}}) }()
	<-accepted
	wctx, wcancel := context.WithCancel(t.Context())
	wcancel()
	if _, err := limit.ClusterHealth(wctx, etcdutil.ClientConfig{Endpoints: []string{"http://healthy:2379"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("a call waiting for the only slot with its context ended: %v, want context.Canceled", err)
	}
	if n := api.answers.Load(); n != 0 {
		t.Errorf("%d calls answered while the only slot was held, want 0", n)
	}
}
