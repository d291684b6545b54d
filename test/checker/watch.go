package checker

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// watcher follows the appended keys with one watch, resumed from the revision after
// the last event it had whenever the watch ends (a member gone, the connection
// lost): etcd promises every event once, in revision order, across resumes.
type watcher struct {
	mu         sync.Mutex
	seen       map[string]bool
	lastRev    int64
	outOfOrder int
	// compacted is the highest compaction revision a resume ran into: events
	// below it are gone from etcd, so the watch cannot be held to them.
	compacted int64
	done      chan struct{}
	cancel    context.CancelFunc
}

func newWatcher(ctx context.Context, cli *clientv3.Client, prefix string) *watcher {
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{seen: map[string]bool{}, done: make(chan struct{}), cancel: cancel}
	// Start from the revision now, so that keys of an earlier run with the same
	// prefix are not counted (it is retried until the cluster answers).
	var start int64
	for start == 0 && ctx.Err() == nil {
		octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cli.Get(octx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		ocancel()
		if err == nil {
			start = resp.Header.Revision + 1
		}
	}
	w.lastRev = start - 1
	go w.run(ctx, cli, prefix)
	return w
}

func (w *watcher) run(ctx context.Context, cli *clientv3.Client, prefix string) {
	defer close(w.done)
	for ctx.Err() == nil {
		w.mu.Lock()
		from := w.lastRev + 1
		w.mu.Unlock()
		wctx := clientv3.WithRequireLeader(ctx)
		for resp := range cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from)) {
			if resp.CompactRevision > 0 {
				// The resume point was compacted away: no retry from it can
				// ever succeed, so go on from the oldest revision etcd kept.
				w.mu.Lock()
				w.compacted = max(w.compacted, resp.CompactRevision)
				w.lastRev = max(w.lastRev, resp.CompactRevision-1)
				w.mu.Unlock()
				break
			}
			if resp.Err() != nil {
				break
			}
			w.mu.Lock()
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision <= w.lastRev {
					w.outOfOrder++
				}
				w.lastRev = max(w.lastRev, ev.Kv.ModRevision)
				w.seen[string(ev.Kv.Key)] = true
			}
			w.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// finish waits, within timeout, until the watch has delivered every acknowledged
// key (written at revisions, in the same order), then stops it and counts the
// keys it missed, the events out of order, and the keys below a compaction it
// had to skip.
func (w *watcher) finish(acked []string, revisions []int64, timeout time.Duration) (missed, outOfOrder, compacted int) {
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		missed, compacted = 0, 0
		for i, k := range acked {
			switch {
			case w.seen[k]:
			case i < len(revisions) && revisions[i] < w.compacted:
				compacted++
			default:
				missed++
			}
		}
		outOfOrder = w.outOfOrder
		w.mu.Unlock()
		if missed == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.cancel()
	<-w.done
	return missed, outOfOrder, compacted
}
