package operatorrun

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrNotLeading is what Fence.Held returns, wrapped, while this process may not
// act as the leader.
var ErrNotLeading = errors.New("not leading")

// Fence tells the leader's workers, by this process's own clock, whether it
// still holds the leader-election lock, so that they check it before every
// change they make.
//
// The elector alone is not enough. A leader that was frozen (SIGSTOP, a stalled
// node, a long GC pause) for longer than LeaseDuration finds, when it runs
// again, that a standby took the lock over, but client-go's elector only gives
// up after retrying its renewal for RenewDeadline: for up to 10 s its workers
// keep running beside the new leader's, at first on informer caches as old as
// the freeze. The Fence closes as soon as the last successful renewal began
// RenewDeadline ago; a standby takes over only once the lock went unrenewed for
// LeaseDuration, later, so the two never act at once. A healthy leader renews
// every RetryPeriod and never sees it closed.
type Fence struct {
	now func() time.Time

	mu sync.Mutex
	// renewed is when the last write of the lock naming this process began;
	// zero before the first and after a release.
	renewed time.Time
}

// NewFence returns a closed Fence: RunAsLeader opens it (LeaderConfig.Fence).
func NewFence() *Fence { return &Fence{now: time.Now} }

// Held returns nil while this process holds the lock, else an error wrapping
// ErrNotLeading that says why.
func (f *Fence) Held() error {
	f.mu.Lock()
	renewed := f.renewed
	f.mu.Unlock()
	if renewed.IsZero() {
		return fmt.Errorf("%w: this process does not hold the leader-election lock", ErrNotLeading)
	}
	if age := f.now().Sub(renewed); age >= RenewDeadline {
		return fmt.Errorf("%w: the leader-election lock was last renewed %s ago (the process was paused or cut off from the apiserver); a standby may have taken over",
			ErrNotLeading, age.Round(time.Second))
	}
	return nil
}

func (f *Fence) record(at time.Time, ours bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ours {
		f.renewed = at
	} else {
		f.renewed = time.Time{}
	}
}

// fencedLock is the elector's lock, telling the Fence of every write: a write
// naming this process is a renewal (counted from before the request, since the
// lease runs from when the apiserver took it); one naming nobody is the release.
// A write refused because a record of the other kind names another live
// holder (ErrOtherLockHeld) closes the Fence at once: that holder may already
// be acting.
type fencedLock struct {
	resourcelock.Interface
	fence *Fence
}

func (l fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.fence.now()
	err := l.Interface.Create(ctx, ler)
	l.wrote(start, ler, err)
	return err
}

func (l fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.fence.now()
	err := l.Interface.Update(ctx, ler)
	l.wrote(start, ler, err)
	return err
}

func (l fencedLock) wrote(start time.Time, ler resourcelock.LeaderElectionRecord, err error) {
	switch {
	case err == nil:
		l.fence.record(start, ler.HolderIdentity == l.Identity())
	case errors.Is(err, ErrOtherLockHeld):
		l.fence.record(start, false)
	}
}
