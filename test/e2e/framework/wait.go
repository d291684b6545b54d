package framework

import (
	"context"
	"fmt"
	"time"
)

// Condition is polled by WaitFor. It reports whether the wait is over and, for the
// timeout message, what it saw ("2 of 3 pods Ready: a, b"). A non-nil error ends the
// wait at once: it means something happened that waiting cannot fix (a pod that
// must not exist appeared, a sampled invariant broke). Transient API errors should be
// returned as "not done" with the error in seen, so a blip does not fail a test.
type Condition func(ctx context.Context) (done bool, seen string, err error)

// TimeoutError is a wait that ran out of time; Seen is the last observation.
type TimeoutError struct {
	What    string
	Timeout time.Duration
	Seen    string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("timed out after %s waiting for %s; last seen: %s", e.Timeout, e.What, e.Seen)
}

// checkTimeout bounds one evaluation of a condition: a hung API call must not
// stretch a wait far past its deadline.
const checkTimeout = 30 * time.Second

// WaitFor polls cond every poll until it is done, fails, or timeout passes. The first
// check is immediate. There are no fixed sleeps in the suite: every wait is a poll
// with a deadline, so a fast operator makes a fast suite and a stuck one a clear
// timeout message.
//
// The deadline is kept apart from the context the checks get: a check made just
// before the deadline must see the cluster, not a client that refuses to start a
// request it cannot finish in time (client-go's rate limiter does that), or the
// timeout message would say "context deadline exceeded" instead of what was seen.
func WaitFor(ctx context.Context, timeout, poll time.Duration, what string, cond Condition) error {
	deadline := time.Now().Add(timeout)
	seen := "nothing yet"
	for {
		done, s, err := check(ctx, cond)
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for %s: %w (last seen: %s)", what, ctx.Err(), seen)
		}
		if s != "" {
			seen = s
		}
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if done {
			return nil
		}
		if !time.Now().Before(deadline) {
			return &TimeoutError{What: what, Timeout: timeout, Seen: seen}
		}
		if err := sleep(ctx, min(poll, time.Until(deadline))); err != nil {
			return fmt.Errorf("waiting for %s: %w (last seen: %s)", what, err, seen)
		}
	}
}

// Holds polls cond for the whole duration and fails as soon as it is false: the
// "it must not happen" counterpart of WaitFor ("the paused cluster stays at 2 pods").
func Holds(ctx context.Context, duration, poll time.Duration, what string, cond Condition) error {
	end := time.Now().Add(duration)
	for {
		ok, seen, err := check(ctx, cond)
		if ctx.Err() != nil {
			return fmt.Errorf("checking that %s: %w", what, ctx.Err())
		}
		if err != nil {
			return fmt.Errorf("checking that %s: %w", what, err)
		}
		if !ok {
			return fmt.Errorf("expected %s for %s, but saw: %s", what, duration, seen)
		}
		if !time.Now().Before(end) {
			return nil
		}
		if err := sleep(ctx, min(poll, time.Until(end))); err != nil {
			return fmt.Errorf("checking that %s: %w", what, err)
		}
	}
}

func check(ctx context.Context, cond Condition) (bool, string, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return cond(ctx)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
