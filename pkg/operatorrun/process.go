package operatorrun

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// errStoppedOnItsOwn is what a background server that returned without an error,
// while nothing asked it to stop, ends the process with.
var errStoppedOnItsOwn = errors.New("stopped on its own")

// Process is what the three binaries run besides their start-up: servers in the
// background and the leader's work. A server that stops on its own ends the process
// with an error, so that the Deployment restarts the pod rather than leaving it
// running without its probes, metrics or backup downloads. And the process returns
// only once the leader's work has stopped, so that a SIGTERM ends every worker
// before the process exits.
type Process struct {
	ctx    context.Context
	cancel context.CancelFunc
	log    *logrus.Entry

	mu    sync.Mutex
	fatal error
	// stopping is set once RunAsLeader waits: what starts after that is not waited
	// for, since a WaitGroup must not grow from zero while it is waited on.
	stopping bool
	running  sync.WaitGroup
}

// NewProcess returns a Process and its context, which ends with parent or at the
// first fatal error. Callers defer Cancel, for the returns before RunAsLeader.
func NewProcess(parent context.Context, log *logrus.Entry) (*Process, context.Context) {
	ctx, cancel := context.WithCancel(parent)
	return &Process{ctx: ctx, cancel: cancel, log: log}, ctx
}

// Cancel ends the process's context without waiting for anything.
func (p *Process) Cancel() { p.cancel() }

// Fail ends the process with err, unless it already failed: the first error is the
// cause, later ones are mostly the shutdown it set off.
func (p *Process) Fail(err error) {
	p.mu.Lock()
	first := p.fatal == nil
	if first {
		p.fatal = err
	}
	p.mu.Unlock()
	if first {
		// Said now, since the shutdown may take a while before the error is returned.
		p.log.WithError(err).Error("shutting down")
	}
	p.cancel()
}

// Go runs serve in the background until ctx ends. An error, a panic, or serve returning
// while ctx is not done, is fatal (see Fail); name prefixes the error. ctx may be
// the process's or a leader's: a server that only serves while leading stops with
// its leadership, which is not a failure.
func (p *Process) Go(ctx context.Context, name string, serve func(context.Context) error) {
	waited := p.startWaitedFor()
	go func() {
		if waited {
			defer p.running.Done()
		}
		var err error
		if perr := failure.Safely(p.log, name, func() { err = serve(ctx) }); perr != nil {
			err = perr
		}
		if err == nil && ctx.Err() == nil {
			err = errStoppedOnItsOwn
		}
		if err != nil {
			p.Fail(fmt.Errorf("%s: %w", name, err))
		}
	}()
}

// RunAsLeader runs lead under the package's RunAsLeader, then cancels the process
// and waits, up to shutdownTimeout, for lead and the background servers to return:
// RunAsLeader returns as soon as the Lease is released, while they are still
// stopping. It returns the process's first fatal error if there was one, which
// explains the shutdown better than how the election ended, else RunAsLeader's.
func (p *Process) RunAsLeader(cfg LeaderConfig, shutdownTimeout time.Duration, lead func(ctx context.Context)) error {
	err := RunAsLeader(p.ctx, cfg, func(ctx context.Context) {
		// Leadership won just as the process stops: there is nothing left to do.
		if !p.startWaitedFor() {
			return
		}
		defer p.running.Done()
		// A panic of the leader's work ends the process cleanly, with the
		// Lease released and the cause said, rather than by a crash.
		if err := failure.Safely(p.log, "the leader's work", func() { lead(ctx) }); err != nil {
			p.Fail(err)
		}
	})
	p.stopAndWait(shutdownTimeout)
	if fatal := p.fatalError(); fatal != nil {
		return fatal
	}
	return err
}

// startWaitedFor counts a goroutine that stopAndWait waits for, unless the process
// is already stopping.
func (p *Process) startWaitedFor() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return false
	}
	p.running.Add(1)
	return true
}

func (p *Process) stopAndWait(timeout time.Duration) {
	p.cancel()
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	stopped := make(chan struct{})
	go func() {
		p.running.Wait()
		close(stopped)
	}()
	// Bounded, and said: past the pod's termination grace period the kubelet kills
	// the process anyway, and nothing would tell why the shutdown was not clean.
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		p.log.Warnf("the controller or a server did not stop within %v; exiting without waiting for it", timeout)
	}
}

func (p *Process) fatalError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fatal
}
