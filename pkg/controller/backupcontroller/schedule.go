package backupcontroller

import (
	"context"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// firstRetryAfterFailure is where the wait after a failed scheduled backup
// starts doubling (up to maxFailureBackoff): the next attempt is the first
// schedule time after it. A frequent schedule is thinned out while its
// backups keep failing; a daily one simply tries again the next day.
const firstRetryAfterFailure = time.Minute

// gapSamples is how many schedule times longestGap looks at: enough to see a
// weekend in a weekday schedule and a short month in a monthly one.
const gapSamples = 512

// runScheduled backs up at each time of the schedule until ctx is done.
//
// The first time comes from the last success the status recorded (or the
// EtcdBackup's creation), not from this process: an operator that restarts,
// or a new leader, keeps the schedule. A time that passed while no operator
// ran is made up once at start, however many were missed; Kubernetes
// CronJobs do the same, and a burst of backups of the same data would only
// push older ones out of retention.
func (c *Controller) runScheduled(ctx context.Context, key string, r *runner) {
	pol := r.spec.BackupPolicy
	sched, err := api.ParseBackupSchedule(pol.Schedule, pol.TimeZone)
	if err != nil {
		// checkSpec refused the spec before this runner started.
		c.logForKey(key).Errorf("scheduled backup not started: %v", err)
		return
	}
	backoff := failure.Backoff{Min: firstRetryAfterFailure, Max: c.maxFailureBackoff}
	// after is the time the next run is the first schedule time after.
	after := r.lastRun
	for {
		due := nextScheduledRun(sched, after, c.clock.Now())
		if due.IsZero() {
			c.logForKey(key).Warnf("the schedule %q has no time in the next five years; no backup is taken", pol.Schedule)
			<-ctx.Done()
			return
		}
		if wait := due.Sub(c.clock.Now()); wait > 0 {
			t := c.clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
		start, stored := c.clock.Now(), r.stored
		err := c.periodicBackup(ctx, key, r)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			backoff.Reset()
			// Without a stored backup (the spec changed under the runner)
			// the time is not used up: the next runner takes it.
			if r.stored > stored {
				r.lastRun = start
			}
			after = start
		case failure.IsPermanent(err):
			// Refused credentials or a missing bucket do not mend in a minute.
			after = start.Add(backoff.Max)
		default:
			after = start.Add(backoff.Next())
		}
	}
}

// nextScheduledRun is when a scheduled backup runs next: the first schedule
// time after last, or now if that time has already passed. Zero when the
// schedule has no time left (February 30th).
func nextScheduledRun(s *api.BackupSchedule, last, now time.Time) time.Time {
	next := s.Next(last)
	if !next.IsZero() && next.Before(now) {
		return now
	}
	return next
}

// scheduleStart is the time the first run of a new runner comes after: the
// later of the last success the status recorded and the last run this
// process saw (the status write may not be in the cache yet), or the
// EtcdBackup's creation when it never succeeded, or now.
func scheduleStart(eb *api.EtcdBackup, lastRun, now time.Time) time.Time {
	at := eb.Status.LastSuccessDate.Time
	if lastRun.After(at) {
		at = lastRun
	}
	if at.IsZero() {
		at = eb.CreationTimestamp.Time
	}
	if at.IsZero() {
		at = now
	}
	return at
}

// longestGap is the longest time between two of the next schedule times after
// from: what backup_interval_seconds reports for a schedule, so that the
// stale-backup alert does not fire over a weekend a weekday schedule skips.
func longestGap(s *api.BackupSchedule, from time.Time) time.Duration {
	var longest time.Duration
	prev := s.Next(from)
	for i := 0; i < gapSamples && !prev.IsZero(); i++ {
		next := s.Next(prev)
		if next.IsZero() {
			break
		}
		longest = max(longest, next.Sub(prev))
		prev = next
	}
	return longest
}
