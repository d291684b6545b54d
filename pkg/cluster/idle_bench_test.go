package cluster

import (
	"context"
	"runtime"
	"testing"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// BenchmarkIdlePass is what a pass costs over a healthy cluster of three at
// rest: the caches read, decide, the status derived and found unchanged (no
// write). A cluster at rest runs one every 8 s doubling up to every 30 s
// (tickAfter), 2 a minute once settled; it ran one every 8 s (7.5 a minute)
// before.
func BenchmarkIdlePass(b *testing.B) {
	f := newFixture(b, newTestCluster())
	f.withMembers(memberA, memberB, memberC)
	f.pod(memberA)
	f.pod(memberB)
	f.pod(memberC)
	f.mustPass() // day-2 care reads etcd, and the status is written
	f.mustPass()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.c.pass(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if !f.c.atRest {
		b.Fatal("the cluster was not at rest")
	}
}

// BenchmarkEtcdRead is the read of etcd's view that day-2 care makes of a
// cluster at rest once a minute (health of every member, the membership and
// the cluster version from the leader), against a real one-member etcd in
// this process (so the figures include the server's side): dialled for every
// call as before; with one client for the three calls, as a cluster at rest
// now does (its client is closed after each pass at rest); and through a
// client kept across reads, as a cluster that changes does.
func BenchmarkEtcdRead(b *testing.B) {
	url := loopbackURLs(b, 1)[0]
	m := startEmbedded(b, "bench", url, "bench="+url, "new")
	api := NewEtcdAPI()
	read := func(b *testing.B, cc etcdutil.ClientConfig) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := api.ClusterHealth(ctx, cc); err != nil {
				b.Fatal(err)
			}
			if _, err := api.MemberList(ctx, cc); err != nil {
				b.Fatal(err)
			}
			if _, err := api.ClusterVersion(ctx, cc); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("dialled", func(b *testing.B) { read(b, etcdutil.ClientConfig{Endpoints: []string{m.clientURL}}) })
	b.Run("one client per read", func(b *testing.B) {
		cache := &etcdutil.ClientCache{}
		defer cache.Close()
		ctx := context.Background()
		cc := etcdutil.ClientConfig{Endpoints: []string{m.clientURL}, Cache: cache}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := api.ClusterHealth(ctx, cc); err != nil {
				b.Fatal(err)
			}
			if _, err := api.MemberList(ctx, cc); err != nil {
				b.Fatal(err)
			}
			if _, err := api.ClusterVersion(ctx, cc); err != nil {
				b.Fatal(err)
			}
			cache.Close()
		}
	})
	b.Run("cached", func(b *testing.B) {
		cache := &etcdutil.ClientCache{}
		defer cache.Close()
		read(b, etcdutil.ClientConfig{Endpoints: []string{m.clientURL}, Cache: cache})
	})
}

// BenchmarkCachedClientMemory is the memory an idle cluster's cached client
// holds (Go heap in use per client, after a GC), against a real etcd in this
// process: the price of not dialling once a minute.
func BenchmarkCachedClientMemory(b *testing.B) {
	url := loopbackURLs(b, 1)[0]
	m := startEmbedded(b, "bench", url, "bench="+url, "new")
	api := NewEtcdAPI()
	const clients = 50
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	for b.Loop() {
		caches := make([]*etcdutil.ClientCache, clients)
		before := heap()
		for i := range caches {
			caches[i] = &etcdutil.ClientCache{}
			if _, err := api.ClusterHealth(context.Background(), etcdutil.ClientConfig{Endpoints: []string{m.clientURL}, Cache: caches[i]}); err != nil {
				b.Fatal(err)
			}
		}
		after := heap()
		b.ReportMetric(float64(after-before)/clients, "heap-B/client")
		for _, c := range caches {
			c.Close()
		}
	}
}
