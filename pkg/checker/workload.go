package checker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Config is one run of the workload.
type Config struct {
	// Endpoints of the cluster, e.g. the cluster's client service.
	Endpoints []string
	// TLS, if set, is the client's TLS (https endpoints of a cluster with
	// spec.TLS.static: its CA and, for --client-cert-auth, a client certificate).
	TLS *tls.Config
	// Clients run at once, each with its own etcd client (its own connection).
	Clients int
	// Keys is the size of the register key space: small, so that clients collide.
	Keys int
	// Prefix of every key the run writes; a run owns its prefix.
	Prefix string
	// Duration of the workload; the read-back afterwards is not counted.
	Duration time.Duration
	// Rate is the operations per second of each client, at most.
	Rate float64
	// OpTimeout bounds one operation; past it, a write's outcome is unknown.
	OpTimeout time.Duration
	// Settle bounds the read-back at the end, which waits for the cluster to serve.
	Settle time.Duration
	// Seed of the operation mix, for a run that can be told again.
	Seed uint64
	Log  *logrus.Entry
}

func (c *Config) defaults() {
	if c.Clients <= 0 {
		c.Clients = 4
	}
	if c.Keys <= 0 {
		c.Keys = 8
	}
	if c.Prefix == "" {
		c.Prefix = "/etcd-checker/"
	}
	if c.Rate <= 0 {
		c.Rate = 50
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = 2 * time.Second
	}
	if c.Settle <= 0 {
		c.Settle = 3 * time.Minute
	}
	if c.Log == nil {
		c.Log = logrus.NewEntry(logrus.StandardLogger())
	}
}

// History is what a run recorded.
type History struct {
	Ops []Op `json:"ops"`
	// Appended are the unique keys whose put was acknowledged: none of them may be
	// missing at the end. They are never overwritten, so unlike a register a lost
	// one cannot hide behind a later write.
	Appended []string `json:"appended"`
	// AppendedRevisions are the revisions of the Appended puts, in their order.
	AppendedRevisions []int64 `json:"appendedRevisions"`
	// AppendsUnknown counts appends of unknown outcome (present or not, both fine).
	AppendsUnknown int `json:"appendsUnknown"`
	// AppendsFailed counts appends etcd refused (NOSPACE): certainly not written.
	AppendsFailed int `json:"appendsFailed"`
	// Present are the unique keys found by the read-back at the end.
	Present []string `json:"present"`
	// Start and End of the workload, in the history's clock (ns).
	Start, End int64
	// WatchMissed counts acknowledged appends a watch of their prefix, open for the
	// whole run and resumed after every error, never delivered; WatchOutOfOrder
	// counts events whose revision was not above the one before. Both must be 0.
	WatchMissed     int `json:"watchMissed"`
	WatchOutOfOrder int `json:"watchOutOfOrder"`
	// WatchCompacted counts acknowledged appends the watch could not be asked for
	// any more: it had to resume below a revision the cluster had compacted
	// (the operator compacts, e.g. to recover from NOSPACE), and etcd keeps no
	// events below it. The read-back still checks that they exist.
	WatchCompacted int `json:"watchCompacted"`
	// WatchRestarts counts the watches made again, from their last event,
	// after one delivered nothing for watchStallAfter while acknowledged
	// appends waited: a stalled stream, not a loss (what it missed is still
	// counted above).
	WatchRestarts int `json:"watchRestarts"`
	// ReadBackErr is set when the cluster did not serve the read-back in time.
	ReadBackErr string `json:"readBackErr,omitempty"`
	// Errors counts the workload's operation errors by message: what the
	// clients were told when they were not served.
	Errors map[string]int `json:"errors,omitempty"`
}

// Run drives the workload against cfg.Endpoints for cfg.Duration, then reads every
// key back (retrying until the cluster serves, within cfg.Settle) and returns the
// history. Errors of single operations are part of the history, not of Run.
func Run(ctx context.Context, cfg Config) (*History, error) {
	cfg.defaults()
	// One connection per client, one for the read-back, one for the watch.
	clients := make([]*clientv3.Client, cfg.Clients+2)
	rem := newRemotes()
	for i := range clients {
		cli, err := newClient(cfg, rem)
		if err != nil {
			return nil, fmt.Errorf("etcd client for %v: %w", cfg.Endpoints, err)
		}
		defer cli.Close()
		clients[i] = cli
	}
	if err := checkPrefixUnused(ctx, clients[cfg.Clients], cfg.Prefix, cfg.Settle); err != nil {
		return nil, err
	}
	ans := newAnswers(cfg.Log, rem)
	ans.learn(ctx, clients[cfg.Clients])
	defer ans.flush()
	begin := time.Now()
	now := func() int64 { return int64(time.Since(begin)) }
	h := &History{Start: now()}

	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watch := newWatcher(wctx, clients[cfg.Clients+1], cfg.Prefix+"a/", cfg.Log, ans)

	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := worker{id: c, cli: clients[c], cfg: &cfg, now: now, watch: watch, answers: ans,
				rnd: rand.New(rand.NewPCG(cfg.Seed, uint64(c)))}
			w.loop(runCtx)
			mu.Lock()
			h.Ops = append(h.Ops, w.ops...)
			h.Appended = append(h.Appended, w.appended...)
			h.AppendedRevisions = append(h.AppendedRevisions, w.appendedRevs...)
			h.AppendsUnknown += w.appendsUnknown
			h.AppendsFailed += w.appendsFailed
			for msg, n := range w.errs {
				if h.Errors == nil {
					h.Errors = map[string]int{}
				}
				h.Errors[msg] += n
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	h.End = now()
	cfg.Log.WithField("ops", len(h.Ops)).Info("workload done, reading back")

	// The read-back is part of the history: a final read of every register key
	// that misses an acknowledged write makes the history non-linearizable.
	rb := worker{id: cfg.Clients, cli: clients[cfg.Clients], cfg: &cfg, now: now, answers: ans}
	if err := rb.readBack(ctx, h); err != nil {
		h.ReadBackErr = err.Error()
	}
	h.Ops = append(h.Ops, rb.ops...)
	watched, revisions := stillPresent(h)
	h.WatchMissed, h.WatchOutOfOrder, h.WatchCompacted = watch.finish(watched, revisions, cfg.Settle)
	h.WatchRestarts = watch.restarts
	sort.Slice(h.Ops, func(i, j int) bool { return h.Ops[i].Call < h.Ops[j].Call })
	return h, nil
}

// stillPresent are the acknowledged appends the read-back found, with their
// revisions. The watch is held only to those: a key that is gone is already an
// acknowledged write lost, and waiting for its event (which a restore to an
// older revision takes away for good) would only spend the whole settle time.
// Without a read-back every acknowledged append is waited for.
func stillPresent(h *History) ([]string, []int64) {
	if h.ReadBackErr != "" {
		return h.Appended, h.AppendedRevisions
	}
	present := make(map[string]bool, len(h.Present))
	for _, k := range h.Present {
		present[k] = true
	}
	var keys []string
	var revisions []int64
	for i, k := range h.Appended {
		if !present[k] {
			continue
		}
		keys = append(keys, k)
		if i < len(h.AppendedRevisions) {
			revisions = append(revisions, h.AppendedRevisions[i])
		}
	}
	return keys, revisions
}

// checkPrefixUnused refuses a prefix that already holds keys, e.g. an earlier
// run's: the model starts from keys never written, and a register that holds
// an old value would make a sound history look non-linearizable. It retries
// until the cluster answers, within settle.
func checkPrefixUnused(ctx context.Context, cli *clientv3.Client, prefix string, settle time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, settle)
	defer cancel()
	for {
		octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cli.Get(octx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		ocancel()
		switch {
		case err == nil && resp.Count > 0:
			return fmt.Errorf("prefix %s already holds %d keys (an earlier run's?): give each run a prefix of its own", prefix, resp.Count)
		case err == nil:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("look at prefix %s: the cluster did not answer within %s: %w", prefix, settle, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

type worker struct {
	id  int
	cli *clientv3.Client
	cfg *Config
	now func() int64
	// watch is told of every acknowledged append, so that it can tell a
	// stall from a quiet time.
	watch          *watcher
	rnd            *rand.Rand
	seq            int
	ops            []Op
	appended       []string
	appendedRevs   []int64
	appendsUnknown int
	appendsFailed  int
	// last value this client wrote per key, the usual expectation of its CAS.
	lastRead map[string]string
	// errs counts the errors of the workload's operations by message.
	errs map[string]int
	// answers is told which member answered each operation; lastErr is the
	// newest error (noteErr), which a read-back that never succeeds reports.
	answers *answers
	lastErr error
}

// conn names the worker's connection in the log.
func (w *worker) conn() string {
	if w.id >= w.cfg.Clients {
		return "read-back"
	}
	return fmt.Sprintf("client %d", w.id)
}

// answered records the member behind an operation's answer.
func (w *worker) answered(ctx context.Context, h *etcdserverpb.ResponseHeader) {
	w.answers.answered(ctx, w.conn(), w.cli, h)
}

// noteErr keeps err as the worker's last error, logs where it was made and
// counts it by its message; the read-back's retries are not counted.
func (w *worker) noteErr(err error) {
	if err == nil {
		return
	}
	w.lastErr = err
	w.answers.failed(w.conn(), w.cli, err)
	if w.id >= w.cfg.Clients {
		return
	}
	if w.errs == nil {
		w.errs = map[string]int{}
	}
	w.errs[errorKey(err)]++
}

// errorKey is err's message without what differs between occurrences.
func errorKey(err error) string {
	if desc := rpctypes.ErrorDesc(err); desc != "" {
		return desc
	}
	return err.Error()
}

func (w *worker) key(i int) string { return fmt.Sprintf("%sk/%d", w.cfg.Prefix, i) }

func (w *worker) appendPrefix() string { return w.cfg.Prefix + "a/" }

func (w *worker) loop(ctx context.Context) {
	w.lastRead = map[string]string{}
	tick := time.NewTicker(time.Duration(float64(time.Second) / w.cfg.Rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.seq++
		value := fmt.Sprintf("c%d-%d", w.id, w.seq)
		key := w.key(w.rnd.IntN(w.cfg.Keys))
		switch p := w.rnd.IntN(100); {
		case p < 45:
			w.get(ctx, key)
		case p < 75:
			w.put(ctx, key, value)
		case p < 90:
			w.cas(ctx, key, w.lastRead[key], value)
		default:
			w.append(ctx, w.appendPrefix()+value)
		}
	}
}

// opCtx is the per-operation context: the run's values without its end, so
// that an operation in flight when the run ends still gets its answer instead
// of becoming unknown.
func (w *worker) opCtx(run context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(run), w.cfg.OpTimeout)
}

func (w *worker) get(run context.Context, key string) bool {
	ctx, cancel := w.opCtx(run)
	defer cancel()
	op := Op{Client: w.id, Kind: Get, Key: key, Call: w.now()}
	resp, err := w.cli.Get(ctx, key)
	op.Return = w.now()
	w.noteErr(err)
	if err != nil {
		op.Result = Failed
	} else {
		w.answered(ctx, resp.Header)
		op.Result = OK
		if len(resp.Kvs) > 0 {
			op.Found, op.Value = true, string(resp.Kvs[0].Value)
			w.lastRead[key] = op.Value
		}
	}
	w.ops = append(w.ops, op)
	return err == nil
}

// writeFailed is the outcome of a write that got err: Failed when etcd says it
// refused the write, Unknown for any other error. NOSPACE is such a refusal: a
// member with the alarm raised refuses writes before proposing them, and one
// that learns of it later (the capped applier) refuses them without applying.
func writeFailed(err error) Outcome {
	if errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace) || rpctypes.ErrorDesc(err) == rpctypes.ErrNoSpace.Error() {
		return Failed
	}
	return Unknown
}

func (w *worker) put(run context.Context, key, value string) {
	ctx, cancel := w.opCtx(run)
	defer cancel()
	op := Op{Client: w.id, Kind: Put, Key: key, Value: value, Call: w.now()}
	resp, err := w.cli.Put(ctx, key, value)
	op.Return = w.now()
	w.noteErr(err)
	op.Result = OK
	if err != nil {
		op.Result = writeFailed(err)
	} else {
		w.answered(ctx, resp.Header)
		w.lastRead[key] = value
	}
	w.ops = append(w.ops, op)
}

func (w *worker) cas(run context.Context, key, expect, value string) {
	ctx, cancel := w.opCtx(run)
	defer cancel()
	op := Op{Client: w.id, Kind: CAS, Key: key, Value: value, Expect: expect, Call: w.now()}
	resp, err := w.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), "=", expect)).
		Then(clientv3.OpPut(key, value)).
		Commit()
	op.Return = w.now()
	w.noteErr(err)
	switch {
	case err != nil:
		op.Result = writeFailed(err)
	default:
		w.answered(ctx, resp.Header)
		op.Result, op.OK = OK, resp.Succeeded
		if resp.Succeeded {
			w.lastRead[key] = value
		}
	}
	w.ops = append(w.ops, op)
}

func (w *worker) append(run context.Context, key string) {
	ctx, cancel := w.opCtx(run)
	defer cancel()
	resp, err := w.cli.Put(ctx, key, "1")
	w.noteErr(err)
	if err != nil {
		if writeFailed(err) == Failed {
			w.appendsFailed++
		} else {
			w.appendsUnknown++
		}
		return
	}
	w.answered(ctx, resp.Header)
	w.appended = append(w.appended, key)
	w.appendedRevs = append(w.appendedRevs, resp.Header.Revision)
	if w.watch != nil {
		w.watch.acked(resp.Header.Revision)
	}
}

// readBack reads every register key once and lists the appended keys, each
// retried until the cluster answers or cfg.Settle has passed.
func (w *worker) readBack(ctx context.Context, h *History) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Settle)
	defer cancel()
	retry := func(what string, f func() bool) error {
		for !f() {
			select {
			case <-ctx.Done():
				return fmt.Errorf("the cluster did not answer %s within %s (its last error: %v)", what, w.cfg.Settle, w.lastErr)
			case <-time.After(500 * time.Millisecond):
			}
		}
		return nil
	}
	w.lastRead = map[string]string{}
	for i := range w.cfg.Keys {
		key := w.key(i)
		if err := retry("a read of "+key, func() bool { return w.get(ctx, key) }); err != nil {
			return err
		}
	}
	return retry("the list of appended keys", func() bool {
		octx, ocancel := w.opCtx(ctx)
		defer ocancel()
		resp, err := w.cli.Get(octx, w.appendPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		w.noteErr(err)
		if err != nil {
			return false
		}
		w.answered(ctx, resp.Header)
		h.Present = h.Present[:0]
		for _, kv := range resp.Kvs {
			h.Present = append(h.Present, strings.Clone(string(kv.Key)))
		}
		return true
	})
}

// newClient is one connection of the workload to cfg.Endpoints, whose
// requests' addresses rem records.
func newClient(cfg Config, rem *remotes) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		TLS:         cfg.TLS,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		// Keep-alives find a connection to a member that vanished (a deleted
		// pod sends no reset). Not under 5 s: etcd's default
		// --grpc-keepalive-min-time, below which it closes the connection.
		DialKeepAliveTime:    6 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		DialOptions:          append(rem.dialOptions(), grpc.WithConnectParams(reconnectParams)),
	})
}

// reconnectParams bound the wait between a client's attempts to reconnect.
// gRPC's default wait grows 1.6 times per failed attempt up to two minutes,
// so a client that lost its cluster for a minute or more (every member
// killed, then restored from a backup) tries again only tens of seconds after
// the cluster is back: the checker would measure that wait, not the
// cluster, and its watch would look stalled while writes of freshly
// reconnected clients are acknowledged. Clients of a cluster the operator
// restores want the same bound (docs/user-guide/recovery.md).
var reconnectParams = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
	MinConnectTimeout: 5 * time.Second,
}
