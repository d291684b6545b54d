package checker

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// outageLongerThanBackoff is an outage long enough for gRPC's default
// reconnection backoff (1 s, growing 1.6 times per failed attempt, up to two
// minutes) to have grown past the checker's stall limit by its end, as it
// does while every member of a cluster is killed and restored from a backup.
const outageLongerThanBackoff = 75 * time.Second

// TestAWatchFindsTheClusterBackWithinItsStallLimitAfterALongOutage kills the
// only member for outageLongerThanBackoff and starts it again: the watch of
// the checker's own client must deliver the first write made after it is
// back within watchStallAfter. With gRPC's default backoff the client tried
// again only tens of seconds later, and the checker took its silence for a
// stalled watch (or, past its settle time, for missed writes).
func TestAWatchFindsTheClusterBackWithinItsStallLimitAfterALongOutage(t *testing.T) {
	t.Parallel()
	c := startEtcd(t, 1)
	cfg := Config{Endpoints: c.endpoints()}
	watching, err := newClient(cfg, newRemotes())
	if err != nil {
		t.Fatal(err)
	}
	defer watching.Close()
	events := watching.Watch(clientv3.WithRequireLeader(t.Context()), "/reconnect/", clientv3.WithPrefix())
	put(t, c, "/reconnect/before")
	select {
	case resp := <-events:
		if len(resp.Events) != 1 {
			t.Fatalf("the watch delivered %+v before the outage, want the one write", resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch delivered nothing of a write before the outage")
	}

	c.members[0].kill()
	time.Sleep(outageLongerThanBackoff)
	c.members[0].start(t)
	back := time.Now()
	put(t, c, "/reconnect/after")
	for {
		select {
		case resp, ok := <-events:
			if !ok {
				t.Fatal("the watch ended instead of resuming")
			}
			if resp.Err() != nil {
				// A watch that requires a leader may end with "no
				// leader" while the member starts: the checker makes it
				// again, and so does this test.
				events = watching.Watch(clientv3.WithRequireLeader(t.Context()), "/reconnect/", clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision))
				continue
			}
			for _, ev := range resp.Events {
				if string(ev.Kv.Key) == "/reconnect/after" {
					t.Logf("the watch delivered the first write after the outage %.1fs after the member was back", time.Since(back).Seconds())
					return
				}
			}
		case <-time.After(time.Until(back.Add(watchStallAfter))):
			t.Fatalf("the watch delivered nothing within %v after the member came back from a %v outage: its client's reconnection backoff outgrew the checker's stall limit",
				watchStallAfter, outageLongerThanBackoff)
		}
	}
}

// put writes key with a client of its own, made after the outage, retrying
// until the member serves.
func put(t *testing.T, c *etcdCluster, key string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err := cli.Put(ctx, key, "v")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("put %s: %v", key, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
