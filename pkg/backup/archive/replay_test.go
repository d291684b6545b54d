package archive

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// keyValues is every key of the cluster and its value, at revision rev (0: now).
func keyValues(t *testing.T, c *clientv3.Client, rev int64) map[string]string {
	t.Helper()
	resp, err := c.Get(context.Background(), "\x00", clientv3.WithFromKey(), clientv3.WithRev(rev))
	mustOK(t, err)
	kvs := map[string]string{}
	for _, kv := range resp.Kvs {
		kvs[string(kv.Key)] = string(kv.Value)
	}
	return kvs
}

// restoredAt is a new cluster holding the source's keys as of revision rev,
// as one restored from a snapshot taken then would, and its own revision.
func restoredAt(t *testing.T, src *clientv3.Client, rev int64) (*clientv3.Client, int64) {
	t.Helper()
	c := newClient(t, startEtcd(t).endpoint)
	var last int64
	for k, v := range keyValues(t, src, rev) {
		resp, err := c.Put(context.Background(), k, v)
		mustOK(t, err)
		last = resp.Header.Revision
	}
	return c, last
}

func TestReplayGivesTheClusterAsOfARevisionOrATime(t *testing.T) {
	ctx := t.Context()
	src := newClient(t, startEtcd(t).endpoint)
	store := startStore(t)
	r := runArchiver(t, small(src, store))

	snapshotAt := write(t, src, "a", 100)
	afterB := write(t, src, "b", 100)
	r.waitArchived(t, afterB)
	// Every event of b was received before cut, every one of c after.
	cut := time.Now()
	last := write(t, src, "c", 100)
	r.waitArchived(t, last)
	mustOK(t, r.stopped())

	t.Run("to a revision", func(t *testing.T) {
		target := afterB + 37
		dst, loaded := restoredAt(t, src, snapshotAt)
		done, err := Replay(ctx, dst, ReplayOptions{Store: store, Prefix: "archive/", After: snapshotAt, Revision: target, Log: testLog(t)})
		mustOK(t, err)
		if done.Revision != target || done.Time.IsZero() {
			t.Fatalf("replayed to %d at %v, want %d", done.Revision, done.Time, target)
		}
		if got, want := keyValues(t, dst, 0), keyValues(t, src, target); !maps.Equal(got, want) {
			t.Fatalf("after the replay the cluster holds\n%v\nthe source held at %d\n%v", got, target, want)
		}
		// One transaction per source revision: the target's revision moved
		// by as many as were replayed.
		if now := keyRevision(t, dst); now-loaded != int64(done.Revisions) || done.Revisions != int(target-snapshotAt) {
			t.Fatalf("%d revisions replayed (%d to %d) moved the target's revision by %d", done.Revisions, snapshotAt, target, now-loaded)
		}
	})

	t.Run("to a time", func(t *testing.T) {
		dst, _ := restoredAt(t, src, snapshotAt)
		done, err := Replay(ctx, dst, ReplayOptions{Store: store, Prefix: "archive/", After: snapshotAt, Time: cut, Log: testLog(t)})
		mustOK(t, err)
		if done.Revision != afterB || done.Time.After(cut) {
			t.Fatalf("replayed to %d received at %v, want %d, received before %v", done.Revision, done.Time, afterB, cut)
		}
		if got, want := keyValues(t, dst, 0), keyValues(t, src, afterB); !maps.Equal(got, want) {
			t.Fatalf("after the replay the cluster holds\n%v\nthe source held at %v (revision %d)\n%v", got, cut, afterB, want)
		}
	})

	t.Run("past the end of the archive", func(t *testing.T) {
		dst, _ := restoredAt(t, src, snapshotAt)
		_, err := Replay(ctx, dst, ReplayOptions{Store: store, Prefix: "archive/", After: snapshotAt, Revision: last + 1, Log: testLog(t)})
		var hole *HoleError
		if !errors.As(err, &hole) || hole.Missing != last+1 {
			t.Fatalf("a replay to a revision the archive does not hold returned %v, want a HoleError", err)
		}
	})
}

func keyRevision(t *testing.T, c *clientv3.Client) int64 {
	t.Helper()
	resp, err := c.Get(context.Background(), "health")
	mustOK(t, err)
	return resp.Header.Revision
}
