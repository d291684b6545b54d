package backuptest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startTimeout bounds the start of an embedded member; a loaded CI machine
// needs a few seconds.
const startTimeout = 30 * time.Second

// EtcdOptions say how to run an embedded member.
type EtcdOptions struct {
	// Dir is the data directory; it must exist and be empty or absent.
	Dir string
	// QuotaBytes raises the backend quota (etcd's default is 2 GiB).
	QuotaBytes int64
}

// Etcd is one embedded etcd member running in this process.
type Etcd struct {
	// Endpoint is its client URL.
	Endpoint string
	e        *embed.Etcd
}

// ID is the member's etcd ID.
func (e *Etcd) ID() uint64 { return uint64(e.e.Server.ID()) }

// StartEtcd starts a single-member cluster on free loopback ports and waits
// until it serves.
func StartEtcd(opts EtcdOptions) (*Etcd, error) {
	ms, err := StartCluster(1, opts)
	if err != nil {
		return nil, err
	}
	return ms[0], nil
}

// StartCluster starts an n-member cluster on free loopback ports and waits
// until every member serves and they follow one leader. Ports are picked by
// the kernel a moment before etcd binds them; a lost race is retried on new
// ports. The caller closes every member.
func StartCluster(n int, opts EtcdOptions) ([]*Etcd, error) {
	var lastErr error
	for attempt := range 5 {
		ms, err := startCluster(n, opts, attempt)
		if err == nil {
			return ms, nil
		}
		if !isAddrInUse(err) {
			return nil, err
		}
		lastErr = err
	}
	return nil, lastErr
}

func startCluster(n int, opts EtcdOptions, attempt int) ([]*Etcd, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	cfgs := make([]*embed.Config, n)
	var initial []string
	for i := range n {
		client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i])}
		peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])}
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("backuptest%d", i)
		cfg.Dir = fmt.Sprintf("%s/member-%d-%d", opts.Dir, attempt, i)
		cfg.ListenClientUrls = []url.URL{client}
		cfg.AdvertiseClientUrls = []url.URL{client}
		cfg.ListenPeerUrls = []url.URL{peer}
		cfg.AdvertisePeerUrls = []url.URL{peer}
		cfg.InitialClusterToken = "backuptest"
		cfg.LogLevel = "error"
		// Throwaway data: fsync only slows the fill of large test databases.
		cfg.UnsafeNoFsync = true
		if opts.QuotaBytes > 0 {
			cfg.QuotaBackendBytes = opts.QuotaBytes
		}
		cfgs[i] = cfg
		initial = append(initial, cfg.Name+"="+peer.String())
	}
	var started []*Etcd
	closeAll := func() {
		for _, m := range started {
			m.Close()
		}
	}
	for _, cfg := range cfgs {
		cfg.InitialCluster = strings.Join(initial, ",")
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			closeAll()
			return nil, err
		}
		started = append(started, &Etcd{Endpoint: cfg.AdvertiseClientUrls[0].String(), e: e})
	}
	for _, m := range started {
		select {
		case <-m.e.Server.ReadyNotify():
		case err := <-m.e.Err():
			closeAll()
			return nil, fmt.Errorf("embedded etcd failed: %w", err)
		case <-time.After(startTimeout):
			closeAll()
			return nil, fmt.Errorf("embedded etcd not ready after %v", startTimeout)
		}
	}
	deadline := time.Now().Add(startTimeout)
	for {
		lead := started[0].e.Server.Leader()
		agreed := lead != 0
		for _, m := range started {
			agreed = agreed && m.e.Server.Leader() == lead
		}
		if agreed {
			return started, nil
		}
		if time.Now().After(deadline) {
			closeAll()
			return nil, fmt.Errorf("the %d members agree on no leader after %v", n, startTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Close stops the member.
func (e *Etcd) Close() { e.e.Close() }

// Stop is Close; it reads better where a test kills a member on purpose.
func (e *Etcd) Stop() { e.Close() }

// Client returns a client of this member; the caller closes it.
func (e *Etcd) Client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// Fill writes keys "<prefix>00000000", "<prefix>00000001", ... each holding
// valueSize bytes, with a few writers at once.
func (e *Etcd) Fill(ctx context.Context, prefix string, keys, valueSize int) error {
	c, err := e.Client()
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	value := strings.Repeat("x", valueSize)
	const writers = 8
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := w; i < keys; i += writers {
				if _, err := c.Put(ctx, fmt.Sprintf("%s%08d", prefix, i), value); err != nil {
					errs <- fmt.Errorf("put key %d: %w", i, err)
					return
				}
			}
			errs <- nil
		}()
	}
	var all []error
	for range writers {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// DeadEndpoint is a loopback client URL nobody listens on.
func DeadEndpoint() (string, error) {
	ports, err := freePorts(1)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("http://127.0.0.1:%d", ports[0]), nil
}

// freePorts holds all listeners until every port is chosen, so the ports differ.
func freePorts(n int) ([]int, error) { return etcdtest.Ports(n) }

func isAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}
