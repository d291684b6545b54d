package cluster

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// run is the goroutine. A panic outside a pass (safePass has its own) is
// reported like one inside, and the loop starts again after the error
// backoff from what it observes, so that the cluster stays looked after.
func (c *Cluster) run() {
	defer c.exited()
	for {
		err := failure.Safely(c.log, "the cluster's goroutine", func() { c.loop(c.ctx) })
		if err == nil || !c.backOffAfterPanic(err) {
			return // stopped
		}
	}
}

// backOffAfterPanic reports a panic of the loop and waits out the error
// backoff; false means the goroutine was stopped meanwhile.
func (c *Cluster) backOffAfterPanic(err error) bool {
	c.recovered(err)
	t := time.NewTimer(c.errBackoff.Next())
	defer t.Stop()
	select {
	case <-c.stop:
		return false
	case <-t.C:
		return true
	}
}

// exited ends what the goroutine held, and says it has exited.
func (c *Cluster) exited() {
	c.cancel()
	c.clients.Close()
	c.cfg.Metrics.forget(c.namespace, c.name)
	close(c.done)
}

// loop runs passes until the goroutine is stopped. Passes are scheduled
// rather than run on every signal: the earliest wanted time wins, pod events
// and ticks are held back by MinPassInterval and by the error backoff, spec
// changes only by MinPassInterval (a user fixing a problem should not wait
// out a backoff).
//
// The tick is ReconcileInterval while the cluster changes and doubles after
// each pass that finds it at rest, up to MaxIdleInterval: a thousand idle
// clusters then cost a few passes a minute each, and any event or spec change
// brings the tick back at once.
func (c *Cluster) loop(ctx context.Context) {
	// The loop's state lives on the heap and each signal is handled in a
	// call of its own: the goroutine spends its life parked in the select
	// below, and the less its frames take there, the smaller the stack it
	// keeps (the runtime halves a stack only while a quarter of it is
	// unused).
	l := c.newLoop()
	defer l.stop()

	for {
		select {
		case <-c.stop:
			return
		case cl := <-c.updates:
			c.updated(l, cl)
		case <-c.pokes:
			c.poked(l)
		case <-l.ticker.C:
			c.ticked(l)
		case <-l.timer.C:
			if c.due(ctx, l) {
				return
			}
		}
	}
}

// loopState is what loop keeps between signals: the tick, the time of the
// next pass and what paces passes.
type loopState struct {
	interval time.Duration
	ticker   *time.Timer
	scheduler
	pacer
}

// newLoop is the state of a loop whose first pass runs at once.
func (c *Cluster) newLoop() *loopState {
	l := &loopState{interval: c.cfg.ReconcileInterval, pacer: pacer{minInterval: c.cfg.MinPassInterval}}
	l.ticker = time.NewTimer(l.interval)
	l.timer = time.NewTimer(time.Hour)
	l.at(c.now(), c.now())
	return l
}

func (l *loopState) stop() {
	l.ticker.Stop()
	l.timer.Stop()
}

// busy brings the tick back to ReconcileInterval.
func (l *loopState) busy(cfg *Config) {
	if next := tickAfter(l.interval, false, cfg); next != l.interval {
		l.interval = next
		l.ticker.Reset(l.interval)
	}
}

func (c *Cluster) updated(l *loopState, cl *api.EtcdCluster) {
	if c.take(cl) {
		l.busy(&c.cfg)
		l.at(l.earliest(c.now(), false), c.now())
	}
}

func (c *Cluster) poked(l *loopState) {
	l.busy(&c.cfg)
	l.at(l.earliest(c.now(), true), c.now())
}

func (c *Cluster) ticked(l *loopState) {
	l.ticker.Reset(l.interval)
	l.at(l.earliest(c.now(), true), c.now())
}

// due runs the pass whose time has come, if one has, and schedules the
// next; it tells whether the goroutine was stopped meanwhile.
func (c *Cluster) due(ctx context.Context, l *loopState) (stopped bool) {
	if !l.fire(c.now()) {
		return false
	}
	pctx, cancelPass := context.WithTimeout(ctx, passTimeout)
	requeue, err := c.passAside(pctx)
	cancelPass()
	if ctx.Err() != nil {
		return true
	}
	now := c.now()
	l.lastPass = now
	if c.eventPace > 0 {
		l.minInterval = c.eventPace
	}
	if err != nil {
		l.busy(&c.cfg)
		l.backoffUntil = now.Add(c.errBackoff.Next())
		l.at(l.backoffUntil, now)
		return false
	}
	c.errBackoff.Reset()
	l.backoffUntil = time.Time{}
	if requeue > 0 {
		l.at(now.Add(requeue), now)
	}
	if next := tickAfter(l.interval, c.atRest && requeue == 0, &c.cfg); next != l.interval {
		l.interval = next
		l.ticker.Reset(l.interval)
	}
	return false
}

// tickAfter is the tick that follows one of cur: doubled after a pass that
// found the cluster at rest, up to MaxIdleInterval; ReconcileInterval as soon
// as anything happens.
func tickAfter(cur time.Duration, atRest bool, cfg *Config) time.Duration {
	if !atRest {
		return cfg.ReconcileInterval
	}
	return min(max(2*cur, cfg.ReconcileInterval), cfg.MaxIdleInterval)
}

// passAside runs a pass on a goroutine of its own and waits for it, so that
// the pass still has the cluster to itself. A pass grows its goroutine's
// stack to what its deepest call needs (an etcd dial through gRPC, a status
// write through client-go), and Go keeps a grown stack until garbage
// collections halve it again, one halving each: on the long-lived goroutine
// an idle cluster would keep most of that between passes many seconds apart.
// The helper's stack goes with it.
func (c *Cluster) passAside(ctx context.Context) (time.Duration, error) {
	type result struct {
		requeue time.Duration
		err     error
	}
	done := make(chan result, 1)
	go func() {
		requeue, err := c.safePass(ctx)
		done <- result{requeue, err}
	}()
	r := <-done
	return r.requeue, r.err
}

// safePass runs a pass and turns a panic into a reported problem, retried
// with backoff: a bug met by one cluster must not stop every other cluster
// of the operator.
func (c *Cluster) safePass(ctx context.Context) (requeue time.Duration, err error) {
	if perr := failure.Safely(c.log, "a pass", func() { requeue, err = c.pass(ctx) }); perr != nil {
		c.recovered(perr)
		return 0, perr
	}
	return requeue, err
}

// recovered reports a panic of the goroutine (logged by failure.Safely) with
// one Warning event and the metric, and forgets what the goroutine recorded,
// so that the next pass starts from what it observes.
func (c *Cluster) recovered(err error) {
	c.knownMembership.forget()
	c.podExpect, c.upgradeExpect = nil, nil
	p := newProblem(problemInternal, "internal error in the operator (reported in its log; the pass is retried): %v", err)
	if _, done := c.announced[p.key()]; !done {
		c.announced[p.key()] = announcement{seen: c.now()}
		c.event(corev1.EventTypeWarning, p.kind.info().event, p.msg)
	}
	c.cfg.Metrics.failed(c.namespace, c.name, p.kind.info().code)
}

// pacer decides how soon a pass may run.
type pacer struct {
	minInterval  time.Duration
	lastPass     time.Time
	backoffUntil time.Time
}

// earliest is the soonest a pass asked for at now may start: never closer
// than minInterval to the last one, so a flapping pod cannot spin the loop,
// and, when honourBackoff is set (pod events, ticks), not before the backoff
// after a failed pass has passed.
func (p pacer) earliest(now time.Time, honourBackoff bool) time.Time {
	t := now
	if !p.lastPass.IsZero() {
		t = later(t, p.lastPass.Add(p.minInterval))
	}
	if honourBackoff {
		t = later(t, p.backoffUntil)
	}
	return t
}

// scheduler keeps the time of the next pass on one timer.
type scheduler struct {
	timer *time.Timer
	due   time.Time // zero: no pass wanted
}

// at asks for a pass at t, unless one is already due earlier.
func (s *scheduler) at(t, now time.Time) {
	if !s.due.IsZero() && !t.Before(s.due) {
		return
	}
	s.due = t
	s.timer.Reset(max(0, t.Sub(now)))
}

// fire tells whether the timer's firing is a due pass, and clears it.
func (s *scheduler) fire(now time.Time) bool {
	if s.due.IsZero() {
		return false
	}
	if now.Before(s.due) {
		s.timer.Reset(s.due.Sub(now))
		return false
	}
	s.due = time.Time{}
	return true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
