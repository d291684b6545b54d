package checker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchStallAfter is how long a watch may deliver nothing while an
// acknowledged append above its last event waits before it is made again
// from that event. A stream on a connection that no longer leads anywhere
// can stay open without an error; etcd delivers an event within
// milliseconds of its commit otherwise.
const watchStallAfter = 10 * time.Second

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
	// ackedRev is the revision of the newest acknowledged append; lastEvent
	// is when the watch last delivered an event or was made; restarts counts
	// the watches made again after a stall.
	ackedRev  int64
	lastEvent time.Time
	restarts  int
	log       *logrus.Entry
	answers   *answers
	done      chan struct{}
	cancel    context.CancelFunc
}

func newWatcher(ctx context.Context, cli *clientv3.Client, prefix string, log *logrus.Entry, ans *answers) *watcher {
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{seen: map[string]bool{}, done: make(chan struct{}), cancel: cancel, log: log, answers: ans}
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
		w.lastEvent = time.Now()
		w.mu.Unlock()
		wctx, stop := context.WithCancel(clientv3.WithRequireLeader(ctx))
		go w.unstick(wctx, stop, from)
		for resp := range cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from)) {
			if resp.CompactRevision > 0 {
				// The resume point was compacted away: no retry from it can
				// ever succeed, so go on from the oldest revision etcd kept.
				w.mu.Lock()
				w.compacted = max(w.compacted, resp.CompactRevision)
				w.lastRev = max(w.lastRev, resp.CompactRevision-1)
				w.mu.Unlock()
				w.logf("the watch from revision %d ran into a compaction at %d; it goes on from there", from, resp.CompactRevision)
				break
			}
			if err := resp.Err(); err != nil {
				w.ended(ctx, cli, from, err)
				break
			}
			w.answers.answered(ctx, "watch", cli, &resp.Header)
			w.mu.Lock()
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision <= w.lastRev {
					w.outOfOrder++
				}
				w.lastRev = max(w.lastRev, ev.Kv.ModRevision)
				w.seen[string(ev.Kv.Key)] = true
			}
			if len(resp.Events) > 0 {
				w.lastEvent = time.Now()
			}
			w.mu.Unlock()
		}
		stop()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ended logs why the watch from revision from ended, and what a read on the
// same connection gets: the watch's error says nothing of where its requests
// went. Both go through answers, which logs a run of the same outcome once.
func (w *watcher) ended(ctx context.Context, cli *clientv3.Client, from int64, err error) {
	w.answers.failed("watch", cli, fmt.Errorf("the watch from revision %d ended: %w", from, err))
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, rerr := cli.Get(rctx, "\x00", clientv3.WithSerializable(), clientv3.WithCountOnly())
	if rerr != nil {
		w.answers.failed("watch's connection, a serializable read", cli, rerr)
		return
	}
	w.answers.answered(ctx, "watch's connection, a serializable read", cli, resp.Header)
}

// unstick ends the watch made from revision from (stop) once it stalls, so
// that run makes it again from its last event: etcd must still deliver
// every event after that one, or say it compacted them.
func (w *watcher) unstick(ctx context.Context, stop context.CancelFunc, from int64) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			w.mu.Lock()
			stalled := w.stalled(now)
			lastRev, ackedRev := w.lastRev, w.ackedRev
			if stalled {
				w.restarts++
			}
			w.mu.Unlock()
			if stalled {
				w.logf("the watch from revision %d delivered nothing for %v while appends up to revision %d were acknowledged (its last event: %d); made again",
					from, watchStallAfter, ackedRev, lastRev)
				stop()
				return
			}
		}
	}
}

// stalled tells whether the watch has delivered nothing for watchStallAfter
// while an acknowledged append above its last event waits; w.mu is held.
func (w *watcher) stalled(now time.Time) bool {
	return w.ackedRev > w.lastRev && now.Sub(w.lastEvent) >= watchStallAfter
}

// acked records the revision of an acknowledged append.
func (w *watcher) acked(rev int64) {
	w.mu.Lock()
	w.ackedRev = max(w.ackedRev, rev)
	w.mu.Unlock()
}

func (w *watcher) logf(format string, args ...any) {
	if w.log != nil {
		w.log.Infof(format, args...)
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
	w.mu.Lock()
	w.logf("the watch delivered %d keys, its last event at revision %d, appends acknowledged up to %d; made again %d time(s) after a stall; %d acknowledged keys missed",
		len(w.seen), w.lastRev, w.ackedRev, w.restarts, missed)
	w.mu.Unlock()
	return missed, outOfOrder, compacted
}
