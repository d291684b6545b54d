package cluster

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// The goroutine's records of its own recent actions: what no observation can
// tell yet (the ReplicaSet controller's "expectations"), or no longer.

// podExpectation is pods created that the lister has not shown yet.
type podExpectation struct {
	names    []string
	deadline time.Time
}

func (e *podExpectation) has(name string) bool { return e != nil && slices.Contains(e.names, name) }

// upgradeExpectation is a patched member pod whose container has not yet
// restarted on the new image and become Ready. Until then the lister may
// still show the old container as Ready, and taking down the next member
// would risk two being down at once.
type upgradeExpectation struct {
	name     string
	version  string
	from     string
	restarts int32
	image    string
	deadline time.Time
}

// failedUpgrade is a member that did not run the version it was patched to:
// its pod stopped, or it was not Ready within the pending timeout. The
// rollout halts on it until spec.version changes.
type failedUpgrade struct {
	member, version string
	// from is the version the member ran before; going back to it is always
	// allowed for a member that never ran the new one.
	from string
	// evidence is what the member's pod showed: exit code and last log
	// lines, or the reason its container waits.
	evidence string
}

// settleExpectations drops the records that observations have caught up
// with, and turns an upgrade that did not work out into a failedUpgrade.
func (c *Cluster) settleExpectations(pods, terminating map[string]*corev1.Pod, target string) {
	now := c.now()
	if e := c.podExpect; e != nil {
		var unseen []string
		for _, name := range e.names {
			_, live := pods[name]
			_, ending := terminating[name]
			if !live && !ending {
				unseen = append(unseen, name)
			}
		}
		switch {
		case len(unseen) == 0:
			c.podExpect = nil
		case now.After(e.deadline):
			c.log.Warnf("pods %v did not show up within %v; treating them as missing", unseen, c.cfg.ExpectationTimeout)
			c.podExpect = nil
		default:
			c.podExpect = &podExpectation{names: unseen, deadline: e.deadline}
		}
	}
	if e := c.upgradeExpect; e != nil {
		pod, ok := pods[e.name]
		switch {
		case !ok || k8sutil.IsPodDead(pod):
			evidence := "its pod is gone"
			if ok {
				evidence = "its pod stopped"
				if t := podTrouble(pod, nil, now); t != "" {
					evidence = "its pod " + t
				}
			}
			c.failUpgrade(e, evidence)
		case restartedOn(pod, e) && k8sutil.IsPodReady(pod):
			c.log.Infof("member %s is ready on %s", e.name, e.image)
			c.upgradeExpect = nil
		case target != e.version:
			// spec.version no longer asks for it (an upgrade to an image
			// that cannot be pulled, taken back): the member that did not
			// get there is patched to the version asked for now, at once.
			evidence := fmt.Sprintf("spec.version changed to %s before it ran %s", target, e.version)
			if t := podTrouble(pod, nil, now); t != "" {
				evidence += "; its pod " + t
			}
			c.failUpgrade(e, evidence)
		case now.After(e.deadline):
			evidence := fmt.Sprintf("it was not ready within %v", c.cfg.PendingTimeout)
			if t := podTrouble(pod, nil, now); t != "" {
				evidence += "; its pod " + t
			}
			c.failUpgrade(e, evidence)
		}
	}
	if f := c.failedUpgrade; f != nil {
		pod, ok := pods[f.member]
		switch {
		case target != f.version && target != f.from:
			// spec.version names a third version: a new attempt.
			c.failedUpgrade = nil
		case !ok && target == f.from:
			// The member was replaced and the rollout given up: nothing is
			// left to take back.
			c.failedUpgrade = nil
		case !ok:
			// The member was replaced; the halt stays while the target does.
		case target == f.from && runningVersion(pod) == f.from:
			c.log.Infof("member %s runs %s again", f.member, f.from)
			c.failedUpgrade = nil
		}
	}
}

func (c *Cluster) failUpgrade(e *upgradeExpectation, evidence string) {
	c.log.Warnf("member %s did not run %s after its upgrade: %s; halting the upgrade", e.name, e.version, evidence)
	c.failedUpgrade = &failedUpgrade{member: e.name, version: e.version, from: e.from, evidence: evidence}
	c.upgradeExpect = nil
}

// restartedOn tells whether the etcd container runs the image of the upgrade.
func restartedOn(pod *corev1.Pod, e *upgradeExpectation) bool {
	st := k8sutil.EtcdContainerStatus(pod)
	return st != nil && (st.RestartCount > e.restarts || sameImage(e.image, st.Image)) && st.State.Running != nil
}

// replacement records the members replaced for one cause: a member replaced
// because its pod keeps failing the same way (an OOM kill at every start
// after a resources edit, say) is followed by a new member that fails the
// same way, and replacing it at once would only churn the membership.
type replacement struct {
	count int
	last  time.Time
	// generation is the spec's generation at the last replacement: a spec
	// changed since may have removed the cause, and is tried at once.
	generation int64
}

// replacementBackoff is how long after the last replacement for a cause the
// next one for the same cause waits: a minute, doubling, at most 30 minutes.
func replacementBackoff(r replacement) time.Duration {
	d := time.Minute
	for i := 1; i < r.count && d < 30*time.Minute; i++ {
		d *= 2
	}
	return min(d, 30*time.Minute)
}

// recordReplacement counts a replacement for cause, made under the spec of
// generation, and forgets causes not met for an hour.
func (c *Cluster) recordReplacement(cause string, generation int64) {
	now := c.now()
	for k, r := range c.replaced {
		if now.Sub(r.last) > time.Hour {
			delete(c.replaced, k)
		}
	}
	if cause == "" {
		return
	}
	r := c.replaced[cause]
	r.count++
	r.last = now
	r.generation = generation
	c.replaced[cause] = r
}

// replacementWaits is the wait of a member (or seed) to be made again for
// cause when the ones made before it failed the same way under the spec in
// force: each repetition waits twice as long as the one before, up to a cap,
// and the pod that shows the cause stays meanwhile, for its status to say
// it. A new spec is tried at once.
func replacementWaits(s *snapshot, what, cause string) (action, bool) {
	r, again := s.replaced[cause]
	if !again || cause == "" || r.generation != s.spec.Generation {
		return action{}, false
	}
	next := r.last.Add(replacementBackoff(r))
	if !s.now.Before(next) {
		return action{}, false
	}
	a := waiting(fmt.Sprintf("%s fails as the %d member(s) made before it did (%s); it is made again at %s unless the spec changes: fix the cause (spec.pod, spec.version, the node) meanwhile",
		what, r.count, cause, next.UTC().Format(time.RFC3339)))
	a.after = next.Sub(s.now)
	return a, true
}

// recovering is a disaster recovery under way from a surviving member: its
// pod is deleted, and the member is restarted with --force-new-cluster.
type recovering struct {
	member   string
	started  time.Time
	revision int64
	// flagRemoved is set once the survivor's forced pod was deleted, to
	// restart it without the flag.
	flagRemoved bool
}

// quorumLoss is what the goroutine saw of a quorum lost: since when, and how
// many reads of etcd since then answered without error and without a leader.
// Only this record, never the status's Available condition, starts a
// disaster recovery's grace period: a condition may have turned False long
// ago for another reason, or before an operator restart, and tells nothing
// of what etcd says now.
type quorumLoss struct {
	since           time.Time
	leaderlessReads int
	// firstLeaderlessRead is when the first of those reads was: a survivor
	// is forced only once the grace period has passed since then, so that
	// the reads span it.
	firstLeaderlessRead time.Time
}

// leaderlessReadsNeeded is how many reads of etcd, each without a leader,
// a disaster recovery needs across its grace period.
const leaderlessReadsNeeded = 3

// windowKey names a pod's restart window: a pod made again under its name
// is another pod.
func windowKey(pod *corev1.Pod) string { return pod.Name + "/" + string(pod.UID) }

// expectUpgrade records member pod patched to another image. The kubelet
// restarts its container on the new image: a restart of the upgrade, no
// failure, which the pod's restart window leaves out from the patch on, also
// when the upgrade is over (ready, or failed: its pod ended) by the pass
// that first sees the restart.
func (c *Cluster) expectUpgrade(pod *corev1.Pod, e *upgradeExpectation) {
	c.upgradeExpect = e
	c.restartWindows[windowKey(pod)] = restartWindow{base: e.restarts + 1}
}

// restartWindow counts the kubelet's restarts of one pod's etcd container
// within the repair ladder's window. The container's restartCount counts
// the pod's whole life (in-place upgrades, node reboots, an OOM kill a month
// ago), which tells nothing of whether the member fails now.
type restartWindow struct {
	// base is restartCount when the pod was first seen or the last window
	// closed; opened is when a restart after it was first seen, zero while
	// no window is open.
	base   int32
	opened time.Time
}

// countWindowRestarts brings the restart windows up to the pods of s and
// returns the restarts within each open window, by pod name. A pod patched by
// an upgrade restarts on purpose: its window starts again, after that
// restart (expectUpgrade).
func (c *Cluster) countWindowRestarts(s *snapshot) map[string]int {
	counts := map[string]int{}
	seen := map[string]bool{}
	for name, pod := range s.pods {
		st := k8sutil.EtcdContainerStatus(pod)
		if st == nil {
			continue
		}
		key := windowKey(pod)
		seen[key] = true
		w, known := c.restartWindows[key]
		switch e := s.upgradeExpect; {
		case e != nil && e.name == name:
			// The restart on the new image is the upgrade's, seen yet or not.
			w = restartWindow{base: max(st.RestartCount, e.restarts+1)}
		case !known, st.RestartCount < w.base:
			w = restartWindow{base: st.RestartCount}
		case !w.opened.IsZero() && s.now.Sub(w.opened) >= ladderWindow:
			w = restartWindow{base: st.RestartCount}
		case w.opened.IsZero() && st.RestartCount > w.base:
			w.opened = s.now
		}
		c.restartWindows[key] = w
		if !w.opened.IsZero() {
			counts[name] = int(st.RestartCount - w.base)
		}
	}
	for key := range c.restartWindows {
		if !seen[key] {
			delete(c.restartWindows, key)
		}
	}
	return counts
}

// noteEndedPod records that the goroutine deleted member name's ended pod
// to restart the member in place: that restart follows a failure.
func (c *Cluster) noteEndedPod(name string) {
	if c.endedPods == nil {
		c.endedPods = map[string]bool{}
	}
	c.endedPods[name] = true
}

// restartFollowsFailure tells whether member name's restart in place, about
// to be made, follows a failure of the member, and forgets the record: only
// such restarts count on the repair ladder. A member whose pod is merely
// gone (a user's kubectl delete, a drain, every pod deleted at once) did not
// fail. Counted at the restart, not at the deletion, a pod the informer
// still shows after its deletion is not counted twice; and the record lives
// in memory, so that an operator restarting in between counts one failure
// fewer, never one more.
func (c *Cluster) restartFollowsFailure(name string) bool {
	ended := c.endedPods[name]
	delete(c.endedPods, name)
	return ended
}

// noteQuorumLoss keeps the record of a quorum lost: opened when a snapshot
// shows fewer voting members running or coming back than a quorum, counted
// up by each read of etcd that answers without a leader, and dropped as soon
// as the members hold a quorum again or any member reports a leader.
func (c *Cluster) noteQuorumLoss(s *snapshot) {
	q := s.quorum
	lost := q.voters > 0 && q.up+q.starting < q.needed
	switch {
	case !lost, s.etcd != nil && s.etcd.err == nil && !s.etcd.leaderless():
		c.quorumLoss = nil
		return
	case c.quorumLoss == nil:
		c.quorumLoss = &quorumLoss{since: s.now}
	}
	if s.etcd != nil && s.etcd.err == nil {
		if c.quorumLoss.leaderlessReads == 0 {
			c.quorumLoss.firstLeaderlessRead = s.now
		}
		c.quorumLoss.leaderlessReads++
	}
}
