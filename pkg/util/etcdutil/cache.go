package etcdutil

import (
	"context"
	"crypto/tls"
	"slices"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// clientCacheSize is how many clients a ClientCache keeps: a cluster's
// passes ask the running members (health) and the leader alone (membership,
// version), two sets of endpoints.
const clientCacheSize = 2

// ClientCache keeps the clients of one etcd cluster across calls, so that a
// cluster asked every minute is not dialled every minute. A ClientConfig
// with a Cache uses it; a client is kept per set of endpoints and TLS
// configuration, the least recently used one is closed when a third is
// needed, and a client whose call failed is closed and dialled again next
// time (a member replaced under the same name has another address). The
// zero value is ready; Close closes every client and the cache stays usable.
type ClientCache struct {
	mu      sync.Mutex
	clients []*cachedClient // most recently used first
	dials   int
}

type cachedClient struct {
	endpoints string
	tls       *tls.Config
	client    *clientv3.Client
}

// Dials is how many clients the cache has dialled, for tests.
func (cc *ClientCache) Dials() int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.dials
}

// Len is how many clients the cache holds open.
func (cc *ClientCache) Len() int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return len(cc.clients)
}

// Close closes every client of the cache.
func (cc *ClientCache) Close() {
	cc.mu.Lock()
	clients := cc.clients
	cc.clients = nil
	cc.mu.Unlock()
	for _, c := range clients {
		_ = c.client.Close()
	}
}

// get returns the cache's client for cfg, dialling one if it has none.
func (cc *ClientCache) get(ctx context.Context, cfg ClientConfig) (*clientv3.Client, error) {
	key := strings.Join(cfg.Endpoints, ",") + " " + cfg.addressesKey()
	cc.mu.Lock()
	for i, c := range cc.clients {
		if c.endpoints == key && c.tls == cfg.TLS {
			cc.clients = slices.Insert(slices.Delete(cc.clients, i, i+1), 0, c)
			cc.mu.Unlock()
			return c.client, nil
		}
	}
	cc.mu.Unlock()
	// Dialled outside the lock: a dial may take the dial timeout.
	client, err := NewClientContext(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cc.mu.Lock()
	cc.dials++
	cc.clients = slices.Insert(cc.clients, 0, &cachedClient{endpoints: key, tls: cfg.TLS, client: client})
	var evicted []*cachedClient
	if len(cc.clients) > clientCacheSize {
		evicted = slices.Clone(cc.clients[clientCacheSize:])
		cc.clients = cc.clients[:clientCacheSize]
	}
	cc.mu.Unlock()
	for _, c := range evicted {
		_ = c.client.Close()
	}
	return client, nil
}

// drop closes a client whose call failed.
func (cc *ClientCache) drop(client *clientv3.Client) {
	cc.mu.Lock()
	cc.clients = slices.DeleteFunc(cc.clients, func(c *cachedClient) bool { return c.client == client })
	cc.mu.Unlock()
	_ = client.Close()
}

// acquire returns a client for cfg and the function to call when done with
// it, given the call's error: without a cache the client is closed, with
// one it is kept unless the call failed.
func acquire(ctx context.Context, cfg ClientConfig) (*clientv3.Client, func(error), error) {
	if cfg.Cache == nil {
		c, err := NewClientContext(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		return c, func(error) { _ = c.Close() }, nil
	}
	c, err := cfg.Cache.get(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return c, func(err error) {
		if err != nil {
			cfg.Cache.drop(c)
		}
	}, nil
}
