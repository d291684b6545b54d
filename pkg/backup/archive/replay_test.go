package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/openetcd/etcd-operator/pkg/backup"
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

// restored is a new cluster restored from the snapshot in file, and its revision.
func restored(t *testing.T, file string) (*clientv3.Client, int64) {
	t.Helper()
	c := newClient(t, restoreEtcd(t, file).endpoint)
	return c, keyRevision(t, c)
}

// saveSnapshot takes a snapshot of the source as a backup does, into the
// store, and copies it to a file for etcdutl.
func saveSnapshot(t *testing.T, endpoint string, store backup.Store) (*backup.Snapshot, string) {
	t.Helper()
	ctx := t.Context()
	snap, err := backup.SaveSnapshot(ctx, backup.Source{Endpoints: []string{endpoint}}, store, func(rev int64) string { return fmt.Sprintf("full/%d", rev) })
	mustOK(t, err)
	rc, _, err := store.Get(ctx, snap.Key)
	mustOK(t, err)
	defer func() { _ = rc.Close() }()
	file := filepath.Join(t.TempDir(), "snapshot.db")
	f, err := os.Create(file)
	mustOK(t, err)
	_, err = io.Copy(f, rc)
	mustOK(t, err)
	mustOK(t, f.Close())
	return snap, file
}

func TestReplayGivesTheClusterAsOfARevisionOrATime(t *testing.T) {
	ctx := t.Context()
	e := startEtcd(t)
	src := newClient(t, e.endpoint)
	store := startStore(t)
	r := runArchiver(t, small(src, store))

	write(t, src, "a", 100)
	snap, file := saveSnapshot(t, e.endpoint, store)
	snapshotAt := snap.Revision
	afterB := write(t, src, "b", 100)
	r.waitArchived(t, afterB)
	// Every event of b was received before cut, every one of c after.
	cut := time.Now()
	last := write(t, src, "c", 100)
	r.waitArchived(t, last)
	mustOK(t, r.stopped())

	t.Run("to a revision", func(t *testing.T) {
		target := afterB + 37
		dst, loaded := restored(t, file)
		if loaded != snapshotAt {
			t.Fatalf("the restored cluster is at revision %d, the snapshot was taken at %d", loaded, snapshotAt)
		}
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
		dst, _ := restored(t, file)
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
		dst, _ := restored(t, file)
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
