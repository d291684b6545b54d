package cluster

import (
	"context"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// pass is one turn of the loop: observe the cluster, decide one action, act
// on it, then finish: write the status derived from what was observed and
// done, send the events and record the metrics. It returns when the
// next pass is wanted (0: at the next event or tick) and the error that
// ended it, which the run loop retries with backoff.
//
// A cluster at rest costs no request: pods, claims and services come from
// the informers' caches and the status is written only when it changed.
// etcd is asked only when decide needs its view for a change.
func (c *Cluster) pass(ctx context.Context) (time.Duration, error) {
	// However the pass ends, what its executors did is told.
	defer c.sendEvents()
	start := c.now()
	s, observed := c.observe(ctx, false)
	a := decide(s)
	if a.kind == actReadEtcd {
		s, observed = c.observe(ctx, true)
		a = decide(s)
	}
	// A leader that was frozen may wake on a view of the cluster as old as the
	// freeze, while another operator already acts on it.
	if err := c.mayAct(); err != nil {
		return 0, err
	}
	log := c.log.WithField("action", a.String())
	if a.kind == actIdle || a.kind == actWait || a.kind == actReadEtcd {
		log.Debug("pass")
	} else {
		log.Info("pass")
	}
	out := c.act(ctx, s, a)
	return c.finish(ctx, start, s, observed, a, out)
}

// finish is the end of a pass, and the only part of it that writes the
// status, sends events (the executors' first, then the problems') and
// records metrics; the snapshot is read, never changed.
func (c *Cluster) finish(ctx context.Context, start time.Time, s *snapshot, observed []problem, a action, out outcome) (time.Duration, error) {
	c.atRest = a.kind == actIdle && out.err == nil
	c.eventPace = eventPace(s, c.cfg.MinPassInterval)
	if c.atRest {
		// A kept client costs more memory than the rest of an idle cluster
		// (BenchmarkCachedClientMemory). It serves the passes of a cluster
		// that changes; one at rest reads etcd once a minute and dials once
		// for it.
		c.clients.Close()
	}
	if out.err != nil && ctx.Err() != nil {
		return 0, ctx.Err()
	}
	err := out.err
	if err != nil {
		c.log.WithError(err).Debug("action failed")
	} else if err = observationError(s, observed); err != nil {
		// What could not be observed is retried with the error backoff,
		// like a failed action.
		out.requeue = 0
	}
	problems := c.passProblems(s, observed, a, out.err)
	if err := c.mayAct(); err != nil {
		return 0, err
	}
	phase := c.status().Phase
	if out.phase != "" {
		phase = out.phase
	}
	// The status tells the membership after the action.
	after := s.withMembership(c.knownMembership.known())
	written, werr := c.writeStatus(ctx, statusOf(after, *c.status(), phase, c.latest.Generation, problems, out))
	switch {
	case werr != nil && ctx.Err() != nil:
		return 0, ctx.Err()
	case werr != nil:
		problems = append(problems, problemOf(werr))
		if err == nil {
			err = werr
		}
	case !written:
		// The object changed under the pass: the next one, soon, starts
		// from the fresh object.
		out.requeue = c.cfg.MinPassInterval
	}
	c.sendEvents()
	c.announce(problems)

	c.cfg.Metrics.observePass(c.namespace, c.name, c.now().Sub(start))
	st := c.status()
	desired := 0
	if s.spec != nil {
		desired = s.spec.Spec.Size
	}
	c.cfg.Metrics.setState(c.namespace, c.name, desired, st.Size, len(st.Members.Ready), st.Phase)
	c.cfg.Metrics.setCertificates(c.namespace, c.name, s.certs)
	if err != nil {
		c.log.WithFields(logrus.Fields{"action": a.String()}).WithError(err).Debug("pass failed")
	}
	return out.requeue, err
}

// passProblems is the one route of problems into the status, the events
// and the metric: what the snapshot shows wrong, what could not be
// observed, the error of the action, and a wait that has lasted too long.
func (c *Cluster) passProblems(s *snapshot, observed []problem, a action, actErr error) []problem {
	problems := append(assess(s), observed...)
	if actErr != nil {
		problems = append(problems, problemOf(actErr))
	}
	return c.noteWait(s, a, problems)
}

// stallAfter is how long a cluster may wait before its status says what it
// waits for, when nothing else in it does.
const stallAfter = time.Minute

// noteWait keeps when the passes started waiting, and returns problems with
// the wait added once it has lasted stallAfter with no problem to explain it:
// a wait is visible in the log only, and a user looking at the cluster must
// see why nothing happens. A cluster the user paused, or that is deleted,
// waits as asked.
func (c *Cluster) noteWait(s *snapshot, a action, problems []problem) []problem {
	deliberate := s.spec == nil || s.spec.Spec.Paused || s.beingDeleted || s.phase == api.ClusterPhaseFailed
	if a.kind != actWait || deliberate {
		c.waitingSince = time.Time{}
		return problems
	}
	if c.waitingSince.IsZero() {
		c.waitingSince = s.now
	}
	if slices.ContainsFunc(problems, blocking) || s.now.Sub(c.waitingSince) < stallAfter {
		return problems
	}
	return append(problems, newProblem(problemWaiting, "waiting since %s: %s", c.waitingSince.UTC().Format(time.RFC3339), a.reason))
}

// blocking tells a problem that may explain a wait from an advisory one.
func blocking(p problem) bool { return !p.kind.info().advisory }

// observationError is the error of a pass whose observation failed: etcd did
// not answer, or a cache or the API did not.
func observationError(s *snapshot, observed []problem) error {
	if s.etcd != nil && s.etcd.err != nil {
		return etcdError("ask etcd for its health and membership", s.etcd.err)
	}
	if s.tlsProblem != nil && (s.spec == nil || !s.spec.Spec.Paused) {
		return &passError{problem: *s.tlsProblem}
	}
	if len(observed) > 0 {
		return &passError{problem: observed[0]}
	}
	return nil
}

// mayAct asks cfg.MayAct, when set, whether the pass may change anything.
func (c *Cluster) mayAct() error {
	if c.cfg.MayAct == nil {
		return nil
	}
	if err := c.cfg.MayAct(); err != nil {
		c.log.WithError(err).Warn("not acting")
		return err
	}
	return nil
}

// startingPace is the least time between passes while a new cluster's
// members start. Each member's pod becoming Ready is what the status (and
// the user waiting on it) waits for, and MinPassInterval would hold the
// pass that sees the last one back by up to its whole length. A cluster
// being born sees a handful of events per pod, its passes read the caches,
// and a pod that fails and restarts is slowed by the kubelet's own backoff,
// so the loop cannot spin.
const startingPace = 50 * time.Millisecond

// eventPace is the least time between the pass that observed s and the
// next one a pod event or tick asks for: startingPace while the voting
// members of a cluster never available yet are not all ready, paced
// otherwise.
func eventPace(s *snapshot, paced time.Duration) time.Duration {
	if !s.everAvailable && s.quorum.voters > 0 && s.quorum.ready < s.quorum.voters {
		return min(startingPace, paced)
	}
	return paced
}
