package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

// Defaults of Config.
const (
	DefaultInterval        = 5 * time.Second
	DefaultMaxChunkBytes   = 4 << 20
	DefaultMaxPendingBytes = 64 << 20
	DefaultStopFlush       = 10 * time.Second
)

// Waits between attempts: a watch made again and an upload tried again
// start soon after a failure, and never wait longer than the bound, so that
// the archive catches up within seconds of the cluster's or the store's
// return rather than after an exponential wait grown over a long outage.
// The client's own reconnects need the same bound: give it grpc ConnectParams
// with a small MaxDelay (pkg/checker's newClient says why).
const (
	retryFirst = 250 * time.Millisecond
	retryMax   = 2 * time.Second
)

// Config says what to archive where.
type Config struct {
	// Client reaches the cluster; the Archiver does not close it.
	Client *clientv3.Client
	// Store and Prefix are where chunks go: keys are Prefix + ChunkName's tail.
	Store  backup.Store
	Prefix string
	// Codec compresses and encrypts chunks as it does snapshots.
	Codec backup.Codec
	// After is the revision the archive starts after when the store holds no
	// chunk beyond it: that of the full snapshot the archive continues.
	After int64
	// Interval bounds how long a received event waits before its chunk is
	// closed and uploaded: what a total loss of the cluster loses at most
	// (plus the upload). 0 means DefaultInterval.
	Interval time.Duration
	// MaxChunkBytes closes a chunk that reaches it. 0 means DefaultMaxChunkBytes.
	MaxChunkBytes int
	// MaxPendingBytes bounds what is held in memory while the store fails;
	// past it Run stops with ErrBacklog rather than drop events. 0 means
	// DefaultMaxPendingBytes.
	MaxPendingBytes int
	// StopFlush bounds the upload of what was received when Run's context
	// ends. 0 means DefaultStopFlush.
	StopFlush time.Duration
	Log       *logrus.Entry
}

// Progress is how far the archive is.
type Progress struct {
	// Revision is the last revision stored, and Time when its event was received.
	Revision int64
	Time     time.Time
	// Newest is the newest revision of the cluster the archiver has seen.
	Newest int64
	// LagRevisions is Newest - Revision.
	LagRevisions int64
	// Lag is how long the oldest received event not yet stored has waited.
	Lag time.Duration
	// PendingBytes are held in memory, not yet stored.
	PendingBytes int
	// Rewatches counts the watches made again after one ended.
	Rewatches int
	// Spans are the runs of revisions the archive holds without a hole: the
	// chunks listed when Run started, and each chunk stored since. Chunks
	// deleted since (pruned, as they end before every kept snapshot) are
	// still counted: a restore never starts before them.
	Spans []Span
}

// ErrBacklog: the store failed for so long that what waits for it passed
// Config.MaxPendingBytes.
var ErrBacklog = errors.New("the store has failed for too long: the archive's backlog passed its bound")

// GapError: revisions the archive needs next were compacted away.
type GapError struct {
	// From is the first revision the archive lacks.
	From int64
	// CompactedTo is the cluster's compaction revision: nothing before it
	// can be watched any more.
	CompactedTo int64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("the archive needs revision %d but the cluster compacted up to %d: take a full snapshot and start the archive again after it",
		e.From, e.CompactedTo)
}

// RestartAfter is the Config.After of an archive started again after snap, a
// full snapshot taken once the gap was found. A snapshot older than the
// compaction does not fill the gap.
func (e *GapError) RestartAfter(snap *backup.Snapshot) (int64, error) {
	if snap.Revision < e.CompactedTo {
		return 0, fmt.Errorf("the snapshot at revision %d is older than the compaction at %d: take a new one", snap.Revision, e.CompactedTo)
	}
	return snap.Revision, nil
}

// Archiver ships a cluster's changes to a store; see the package doc.
type Archiver struct {
	cfg Config

	mu        sync.Mutex
	progress  Progress
	queue     []*sealed // closed chunks, oldest first, the head being uploaded
	queued    int       // their plain bytes
	openSize  int       // plain bytes of the open chunk
	openSince time.Time // receipt of its first event; zero when it is empty
	wake      chan struct{}
}

// sealed is a closed chunk waiting for the store.
type sealed struct {
	info   Chunk
	plain  []byte
	count  int64
	opened time.Time // receipt of its first event
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Archiver, error) {
	if cfg.Client == nil || cfg.Store == nil {
		return nil, errors.New("an archiver needs an etcd client and a store")
	}
	if err := cfg.Codec.Check(); err != nil {
		return nil, err
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxChunkBytes <= 0 {
		cfg.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if cfg.MaxPendingBytes <= 0 {
		cfg.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if cfg.StopFlush <= 0 {
		cfg.StopFlush = DefaultStopFlush
	}
	if cfg.Log == nil {
		cfg.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	cfg.Log = cfg.Log.WithField("archive", cfg.Prefix)
	return &Archiver{cfg: cfg, wake: make(chan struct{}, 1)}, nil
}

// Progress is how far the archive is now; it may be called at any time.
func (a *Archiver) Progress() Progress {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.progress
	p.Spans = slices.Clone(p.Spans)
	p.LagRevisions = max(0, p.Newest-p.Revision)
	p.PendingBytes = a.queued + a.openSize
	oldest := a.openSince
	if len(a.queue) > 0 {
		oldest = a.queue[0].opened
	}
	if !oldest.IsZero() {
		p.Lag = time.Since(oldest)
	}
	return p
}

// Resume is the last revision archived under prefix, or after when the
// archive holds nothing beyond it (a new archive, or one started again after
// a gap).
func Resume(ctx context.Context, store backup.Store, prefix string, after int64) (int64, time.Time, error) {
	chunks, err := List(ctx, store, prefix)
	if err != nil {
		return 0, time.Time{}, err
	}
	last, at := resumeAfter(chunks, after)
	return last, at, nil
}

// resumeAfter is Resume's answer from the chunks listed.
func resumeAfter(chunks []Chunk, after int64) (int64, time.Time) {
	last, at := after, time.Time{}
	for _, c := range chunks {
		if c.Last > last {
			last, at = c.Last, c.Time
		}
	}
	return last, at
}

// Run archives until ctx ends (it then stores what it received, within
// Config.StopFlush, and returns ctx's error), or until it cannot go on: a
// *GapError, ErrBacklog, or a store that cannot be listed at the start.
// Losing the cluster or the store is not such a reason: the watch is made
// again from the next revision, and uploads are tried again.
func (a *Archiver) Run(ctx context.Context) error {
	chunks, err := List(ctx, a.cfg.Store, a.cfg.Prefix)
	if err != nil {
		return err
	}
	last, at := resumeAfter(chunks, a.cfg.After)
	a.mu.Lock()
	a.progress = Progress{Revision: last, Time: at, Newest: last, Spans: Spans(chunks)}
	a.mu.Unlock()
	a.cfg.Log.WithFields(logrus.Fields{"revision": last, "received": at}).Info("archive resumes")

	upCtx, stopUploads := context.WithCancel(context.WithoutCancel(ctx))
	uploadsDone := make(chan struct{})
	go func() { defer close(uploadsDone); a.uploadLoop(upCtx) }()
	w := &watchLoop{a: a, next: last + 1, chunkFirst: last + 1, open: newChunkWriter()}
	runErr := w.run(ctx)

	// What was received is stored before returning, so that a stop loses
	// nothing and a gap leaves the archive as long as it can be; a stop with
	// the store down waits StopFlush at most.
	a.seal(w)
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.StopFlush)
	defer cancel()
	if err := a.waitStored(flushCtx); err != nil {
		a.cfg.Log.WithError(err).WithField("pendingBytes", a.Progress().PendingBytes).Warn("archive stops with chunks not stored; the next run watches them again")
	}
	stopUploads()
	<-uploadsDone
	return runErr
}

// watchLoop is the state of Run's receiving side.
type watchLoop struct {
	a          *Archiver
	next       int64 // first revision not yet received
	chunkFirst int64 // first revision of the open chunk
	open       *chunkWriter
	timer      *time.Timer
}

func (w *watchLoop) run(ctx context.Context) error {
	a := w.a
	retry := retryFirst
	progress := time.NewTicker(a.cfg.Interval)
	defer progress.Stop()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		a.cfg.Log.WithField("from", w.next).Debug("watch the whole key space")
		wch := a.cfg.Client.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(w.next))
		delivered, err := w.receive(ctx, wch, progress.C)
		cancel()
		var gap *GapError
		if errors.As(err, &gap) || errors.Is(err, ErrBacklog) || ctx.Err() != nil {
			return err
		}
		// What was received is stored while the watch is away, rather than
		// wait for its return.
		a.seal(w)
		if delivered {
			retry = retryFirst
		}
		a.mu.Lock()
		a.progress.Rewatches++
		a.mu.Unlock()
		a.cfg.Log.WithError(err).WithFields(logrus.Fields{"from": w.next, "wait": retry}).Warn("the archive's watch ended; making it again from the next revision")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retry):
		}
		retry = min(2*retry, retryMax)
	}
}

// receive handles one watch until it ends, and says whether it delivered
// events and why it ended.
func (w *watchLoop) receive(ctx context.Context, wch clientv3.WatchChan, progressTick <-chan time.Time) (delivered bool, err error) {
	a := w.a
	for {
		var timerC <-chan time.Time
		if w.timer != nil {
			timerC = w.timer.C
		}
		select {
		case <-ctx.Done():
			return delivered, ctx.Err()
		case <-timerC:
			w.timer = nil
			a.seal(w)
		case <-progressTick:
			// The answer's header revision is how far the cluster is, for
			// the lag, when no event came for a while; etcd answers only a
			// watch that is caught up. A request that fails only leaves the
			// lag as it was until the next tick or event.
			_ = a.cfg.Client.RequestProgress(clientv3.WithRequireLeader(ctx))
		case resp, ok := <-wch:
			if !ok {
				// A stop cancels the watch as well: its channel may close
				// before the loop sees the stop itself.
				if err := ctx.Err(); err != nil {
					return delivered, err
				}
				return delivered, errors.New("the watch channel closed")
			}
			if resp.CompactRevision != 0 {
				return delivered, &GapError{From: w.next, CompactedTo: resp.CompactRevision}
			}
			if err := resp.Err(); err != nil {
				return delivered, err
			}
			a.sawRevision(resp.Header.Revision)
			if len(resp.Events) == 0 {
				continue
			}
			delivered = true
			if err := w.add(&resp); err != nil {
				return delivered, err
			}
		}
	}
}

// add puts a response's events into the open chunk, closing it at a revision
// boundary when it is full.
func (w *watchLoop) add(resp *clientv3.WatchResponse) error {
	a := w.a
	now := time.Now()
	prev := int64(0)
	for _, ev := range resp.Events {
		rev := ev.Kv.ModRevision
		if rev < w.next && rev != prev {
			// Already received: a watch made again from the next revision
			// never sends these, but a duplicate must not reach a chunk.
			continue
		}
		prev = rev
		if rev != w.open.last && w.open.buf.Len() >= a.cfg.MaxChunkBytes {
			a.seal(w)
		}
		if err := w.open.add((*mvccpb.Event)(ev), now); err != nil {
			return err
		}
		w.next = rev + 1
	}
	a.mu.Lock()
	a.openSize = w.open.buf.Len()
	if !w.open.empty() {
		a.openSince = w.open.opened
	}
	over := a.queued+a.openSize > a.cfg.MaxPendingBytes
	a.mu.Unlock()
	if w.timer == nil && !w.open.empty() {
		w.timer = time.NewTimer(a.cfg.Interval - time.Since(w.open.opened))
	}
	if over {
		return ErrBacklog
	}
	return nil
}

func (a *Archiver) sawRevision(rev int64) {
	a.mu.Lock()
	a.progress.Newest = max(a.progress.Newest, rev)
	a.mu.Unlock()
}

// seal closes the open chunk, if it holds events, and queues it for upload.
func (a *Archiver) seal(w *watchLoop) {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if w.open.empty() {
		return
	}
	plain := w.open.seal(w.chunkFirst)
	s := &sealed{info: Chunk{First: w.open.first, Last: w.open.last, Time: w.open.lastTime}, plain: plain, count: w.open.count, opened: w.open.opened}
	w.chunkFirst = w.open.last + 1
	w.open = newChunkWriter()
	a.mu.Lock()
	a.queue = append(a.queue, s)
	a.queued += len(plain)
	a.openSize = 0
	a.openSince = time.Time{}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// uploadLoop stores queued chunks one at a time, in order, trying the head
// again until the store takes it: a later chunk stored before an earlier one
// would leave a hole if the archiver stopped in between.
func (a *Archiver) uploadLoop(ctx context.Context) {
	retry := retryFirst
	for {
		a.mu.Lock()
		var head *sealed
		if len(a.queue) > 0 {
			head = a.queue[0]
		}
		a.mu.Unlock()
		if head == nil {
			select {
			case <-ctx.Done():
				return
			case <-a.wake:
				continue
			}
		}
		err := a.store(ctx, head)
		if err == nil {
			retry = retryFirst
			continue
		}
		if ctx.Err() != nil {
			return
		}
		a.cfg.Log.WithError(err).WithFields(logrus.Fields{"first": head.info.First, "last": head.info.Last, "wait": retry}).
			Warn("archive chunk not stored; trying again")
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
		retry = min(2*retry, retryMax)
	}
}

// store uploads one chunk and, once the store holds it, takes it off the queue.
func (a *Archiver) store(ctx context.Context, s *sealed) error {
	stored, sum, err := encodeChunk(a.cfg.Codec, s.plain)
	if err != nil {
		return err
	}
	s.info.SHA256 = sum
	s.info.Key = ChunkName(a.cfg.Prefix, s.info)
	n, got, err := a.cfg.Store.Put(ctx, s.info.Key, bytes.NewReader(stored))
	if err != nil {
		return fmt.Errorf("store %s: %w", s.info.Key, err)
	}
	if got != sum || n != int64(len(stored)) {
		return fmt.Errorf("the store took %d bytes with sha256 %s at %s, not the %d with %s sent", n, got, s.info.Key, len(stored), sum)
	}
	a.mu.Lock()
	a.queue = a.queue[1:]
	a.queued -= len(s.plain)
	a.progress.Revision = s.info.Last
	a.progress.Time = s.info.Time
	a.progress.Spans = addChunk(a.progress.Spans, s.info)
	a.mu.Unlock()
	a.cfg.Log.WithFields(logrus.Fields{"first": s.info.First, "last": s.info.Last, "events": s.count, "bytes": n}).Debug("archive chunk stored")
	return nil
}

// waitStored waits until every queued chunk is stored.
func (a *Archiver) waitStored(ctx context.Context) error {
	for {
		a.mu.Lock()
		n := len(a.queue)
		a.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d chunks not stored: %w", n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
