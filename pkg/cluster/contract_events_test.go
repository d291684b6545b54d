package cluster

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Events: what happens to a cluster between two passes — the kinds of
// event a history is made of, how each changes the world
// (contract_world_test.go), and the kubelet's side, which moves the pods
// along.

// eventKind is one kind of event.
type eventKind int

const (
	// evTick: time passes; pods being deleted on nodes that answer are gone.
	evTick eventKind = iota
	// evKubelet: the kubelet moves pods along (kubelet), the target's only
	// when param&1.
	evKubelet
	// evCrash: the target's etcd exits (an OOM kill when param&2, else an
	// error); with param&1 the kubelet restarts it at once, else it waits in
	// CrashLoopBackOff. A container already waiting is restarted and fails
	// again.
	evCrash
	// evRecover: the kubelet restarts the target's waiting container and it
	// runs.
	evRecover
	// evPodFails: the target's pod ends, Failed (Evicted when param&1).
	evPodFails
	// evPodDeleted: a user deletes the target's pod (30 s grace).
	evPodDeleted
	// evPodsGone: the deletions of pods on nodes that answer complete (the
	// target's only when param&1).
	evPodsGone
	// evNodeLost: the target's node stops answering; its pod shows phase
	// Unknown when param&1 (else Running, not ready); its etcd runs on when
	// param&2. On a node lost already, the etcd that ran on stops.
	evNodeLost
	// evNodeBack: the target's node answers again.
	evNodeBack
	// evNodeDeleted: the target's node is deleted for good: its pod goes at
	// once (the pod garbage collector), and its claim's volume, which could
	// only be used there, with its data.
	evNodeDeleted
	// evDataRefused: etcd raises a CORRUPT alarm for the target (param&1),
	// or its etcd refuses its data and exits saying so.
	evDataRefused
	// evPartition: the members stop reaching each other, or reach each
	// other again.
	evPartition
	// evUnreachable: the operator stops reaching etcd (a NetworkPolicy, a
	// certificate), or reaches it again.
	evUnreachable
	// evOperatorRestart: the operator restarts with an empty memory; with
	// param&1 it stays down (no pass) until the next one.
	evOperatorRestart
	// evStatusStore: the API server stops storing status writes, or stores
	// them again.
	evStatusStore
	// evSpecSize: spec.size becomes 1, 3 or 5 (param%3).
	evSpecSize
	// evSpecVersion: spec.version moves between two patch releases.
	evSpecVersion
	// evAllPodsDeleted: every pod is deleted at once (param&1: and gone).
	evAllPodsDeleted
	// evAddReplyLost: etcd takes the next add but its reply is lost.
	evAddReplyLost
	// evConvert: the user sets spec.adoption.convert, or unsets it.
	evConvert
	// evNothing: nothing happens, a pass runs (an event of a pod the
	// operator changed itself, a resync).
	evNothing
)

var tickDurations = []time.Duration{time.Second, 5 * time.Second, 20 * time.Second, time.Minute, 2 * time.Minute, 6 * time.Minute, 11 * time.Minute, time.Hour}

// step is one event of a history, then one pass of the operator unless held
// (events that come together) or the operator is down.
type step struct {
	ev eventKind
	// target is the member, pod or claim the event is about; a history
	// decoded from bytes names it by idx in targets() when it happens.
	target string
	idx    int
	param  byte
	held   bool
}

// targets are what an event can be about: members, pods and claims.
func (w *world) targets() []string {
	set := map[string]bool{}
	for name := range w.members {
		set[name] = true
	}
	for name := range w.pods {
		set[name] = true
	}
	for name := range w.claims {
		set[name] = true
	}
	return sortedKeys(set)
}

// happen applies the event and says what happened, "" when it changed
// nothing.
func (w *world) happen(st *step) string {
	if st.target == "" && st.idx >= 0 {
		if ts := w.targets(); len(ts) > 0 {
			st.target = ts[st.idx%len(ts)]
		}
	}
	name := st.target
	p := w.pods[name]
	live := p != nil && !p.deleting()
	switch st.ev {
	case evTick:
		d := tickDurations[int(st.param)%len(tickDurations)]
		w.now = w.now.Add(d)
		w.finishDeletions("")
		return fmt.Sprintf("%v pass", d)
	case evKubelet:
		var moved []string
		for _, n := range sortedKeys(w.pods) {
			if st.param&1 != 0 && n != name {
				continue
			}
			q := w.pods[n]
			before := fmt.Sprint(q.phase, q.ctr, q.dnsDone)
			w.kubelet(q)
			if fmt.Sprint(q.phase, q.ctr, q.dnsDone) != before {
				moved = append(moved, n)
			}
		}
		w.settle()
		for i, n := range moved {
			moved[i] = n + " " + w.podWord(w.pods[n])
		}
		if len(moved) == 0 {
			return ""
		}
		return "the kubelet moves pods along: " + strings.Join(moved, ", ")
	case evCrash:
		if !live || p.phase != corev1.PodRunning || p.nodeLost {
			return ""
		}
		exit := &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "etcd exited"}
		if st.param&2 != 0 {
			exit = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
		}
		switch {
		case p.never && p.ctr == ctrRunning:
			w.exitContainer(p, exit)
			return fmt.Sprintf("%s: its etcd exits (%s) and its pod ends (restartPolicy Never)", name, exit.Reason)
		case p.ctr == ctrCrashLoop:
			w.restartContainer(p)
			if p.ctr == ctrRunning {
				w.exitContainer(p, exit)
			}
			return fmt.Sprintf("%s: the kubelet restarts its etcd, which fails again (restartCount %d)", name, p.restartCount)
		case p.ctr != ctrRunning:
			return ""
		case st.param&1 != 0:
			w.exitContainer(p, exit)
			w.restartContainer(p)
			return fmt.Sprintf("%s: its etcd exits (%s) once and the kubelet restarts it at once (restartCount %d)", name, exit.Reason, p.restartCount)
		}
		w.exitContainer(p, exit)
		return fmt.Sprintf("%s: its etcd exits (%s) and waits in CrashLoopBackOff (restartCount %d)", name, exit.Reason, p.restartCount)
	case evRecover:
		if !live || p.ctr != ctrCrashLoop || p.nodeLost {
			return ""
		}
		w.restartContainer(p)
		return fmt.Sprintf("%s: the kubelet restarts its etcd: %s (restartCount %d)", name, w.podWord(p), p.restartCount)
	case evPodFails:
		// Only the kubelet reports a pod Failed: not one on a node that
		// does not answer.
		if !live || p.phase == corev1.PodFailed || p.nodeLost {
			return ""
		}
		p.phase, p.ctr, p.etcdRuns, p.data = corev1.PodFailed, ctrExited, false, false
		if m := w.members[name]; m != nil {
			m.failed = true
		}
		if st.param&1 != 0 {
			p.evicted = true
			return name + ": its pod is evicted"
		}
		return name + ": its pod fails"
	case evPodDeleted:
		if !live {
			return ""
		}
		w.deletePod(name, userGrace)
		return name + ": a user deletes its pod"
	case evPodsGone:
		only := ""
		if st.param&1 != 0 {
			only = name
		}
		n := len(w.pods)
		w.finishDeletions(only)
		if len(w.pods) == n {
			return ""
		}
		return "the deleted pods on nodes that answer are gone"
	case evNodeLost:
		switch {
		case p == nil:
			return ""
		case p.nodeLost && p.etcdRuns:
			p.etcdRuns = false
			return name + ": its etcd, on the node that does not answer, stops too"
		case p.nodeLost:
			return ""
		}
		p.nodeLost, p.unknownPhase, p.nodeLostAt = true, st.param&1 != 0, w.now
		p.etcdRuns = p.etcdRuns && st.param&2 != 0
		if c := w.claims[name]; c != nil && w.onClaims && c.nodeDownSince.IsZero() {
			c.nodeDownSince = w.now
		}
		what := name + ": its node stops answering"
		if p.unknownPhase {
			what += ", its pod shows phase Unknown"
		}
		if p.etcdRuns {
			what += "; its etcd runs on"
		}
		return what
	case evNodeBack:
		c := w.claims[name]
		if (p == nil || !p.nodeLost) && c != nil && !c.nodeDownSince.IsZero() {
			// Its pod was force-deleted meanwhile: the volume is there
			// again, with its data.
			c.nodeDownSince = time.Time{}
			return name + ": the node of its claim's volume answers again"
		}
		if p == nil || !p.nodeLost {
			return ""
		}
		p.nodeLost = false
		if c != nil {
			c.nodeDownSince = time.Time{}
		}
		switch {
		case p.deleting():
			delete(w.pods, name)
			return name + ": its node answers again and its pod's deletion completes"
		case !p.etcdRuns && p.phase == corev1.PodRunning && p.ctr == ctrRunning && p.never:
			// Its etcd stopped while the node was away: under
			// restartPolicy Never the pod ends.
			w.exitContainer(p, &corev1.ContainerStateTerminated{ExitCode: 255, Reason: "Error"})
		case !p.etcdRuns && p.phase == corev1.PodRunning && p.ctr == ctrRunning:
			w.restartContainer(p)
		}
		return name + ": its node answers again: " + w.podWord(p)
	case evNodeDeleted:
		c := w.claims[name]
		if !w.onClaims {
			c = nil
		}
		if p == nil && (c == nil || c.nodeGone) {
			return ""
		}
		delete(w.pods, name)
		what := name + ": its node is deleted for good, and its pod with it"
		if c != nil && !c.nodeGone {
			c.nodeGone = true
			what += "; its claim's volume could only be used there and is gone with its data"
		}
		return what
	case evDataRefused:
		m := w.members[name]
		if m == nil {
			return ""
		}
		if st.param&1 != 0 {
			m.corrupt = true
			return "etcd raises a CORRUPT alarm for " + name
		}
		m.refused = true
		if live && p.etcdRuns {
			w.exitContainer(p, refusalExit())
		}
		return name + ": etcd refuses its data (wal: crc mismatch)"
	case evPartition:
		w.partitioned = !w.partitioned
		if w.partitioned {
			return "the members stop reaching each other"
		}
		return "the members reach each other again"
	case evUnreachable:
		w.reachable = !w.reachable
		if !w.reachable {
			return "the operator stops reaching etcd"
		}
		return "the operator reaches etcd again"
	case evOperatorRestart:
		w.op = newModelOperator(w)
		switch {
		case w.down:
			w.down = false
			return "the operator comes back, its memory empty"
		case st.param&1 != 0:
			w.down = true
			return "the operator stops"
		}
		return "the operator restarts, its memory empty"
	case evStatusStore:
		w.stores = !w.stores
		if w.stores {
			return "the API server stores status writes again"
		}
		return "the API server stops storing status writes"
	case evSpecSize:
		size := []int{1, 3, 5}[int(st.param)%3]
		if size == w.size {
			return ""
		}
		w.size = size
		w.generation++
		w.buildSpec()
		return fmt.Sprintf("spec.size becomes %d", size)
	case evSpecVersion:
		w.version = map[string]string{testVersion: upgradeVersion, upgradeVersion: testVersion}[w.version]
		w.generation++
		w.buildSpec()
		return "spec.version becomes " + w.version
	case evAllPodsDeleted:
		for _, n := range sortedKeys(w.pods) {
			w.deletePod(n, userGrace)
		}
		if st.param&1 != 0 {
			w.finishDeletions("")
			return "every pod is deleted, and gone"
		}
		return "every pod is deleted"
	case evAddReplyLost:
		w.addReplyLost = true
		return "the reply to the next add will be lost"
	case evConvert:
		w.convert = !w.convert
		w.generation++
		w.buildSpec()
		if w.convert {
			return "spec.adoption.convert is set"
		}
		return "spec.adoption.convert is unset"
	}
	return ""
}

// podWord says where a pod is, in a word or two.
func (w *world) podWord(p *wpod) string {
	switch {
	case p.deleting() && p.nodeLost:
		return "terminating on a lost node"
	case p.deleting():
		return "terminating"
	case p.nodeLost && p.etcdRuns:
		return "on a lost node, etcd running"
	case p.nodeLost:
		return "on a lost node"
	case p.phase == corev1.PodPending && p.joiner && p.dnsDone:
		return "pending, resolvable"
	case p.phase == corev1.PodPending:
		return "pending"
	case p.phase == corev1.PodFailed:
		return "failed"
	case p.ctr == ctrCrashLoop:
		return fmt.Sprintf("crash-looping (restartCount %d)", p.restartCount)
	case p.ctr == ctrUpgrading:
		return "restarting on a new image"
	case w.podReady(p):
		return "running, ready"
	}
	return "running, not ready"
}

// The kubelet's side.

// startContainer starts a pod's etcd: it runs as its member, unless etcd
// refuses its data or no longer lists it.
func (w *world) startContainer(p *wpod) {
	m := w.members[p.name]
	switch {
	case m != nil && m.refused:
		w.exitContainer(p, refusalExit())
	case m == nil:
		w.exitContainer(p, &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			Message: "the member has been permanently removed from the cluster"})
	default:
		p.phase, p.ctr, p.etcdRuns = corev1.PodRunning, ctrRunning, true
		p.startedAt, p.image = w.now, p.obj.Spec.Containers[0].Image
		m.started = true
		if p.forced {
			// --force-new-cluster: a one-member cluster with its data.
			w.members = map[string]*wmember{p.name: m}
			m.learner = false
		}
	}
}

// exitContainer makes the pod's etcd exit; the kubelet restarts it later,
// but under restartPolicy Never, where the pod ends (its emptyDir stays
// with the pod object).
func (w *world) exitContainer(p *wpod, exit *corev1.ContainerStateTerminated) {
	p.phase, p.ctr, p.etcdRuns, p.lastExit = corev1.PodRunning, ctrCrashLoop, false, exit
	if p.never {
		p.phase, p.ctr = corev1.PodFailed, ctrExited
	}
	if m := w.members[p.name]; m != nil {
		m.failed = true
	}
}

// restartContainer is the kubelet restarting a failed container.
func (w *world) restartContainer(p *wpod) {
	p.restartCount++
	if m := w.members[p.name]; m != nil {
		m.restarts, m.failed = append(m.restarts, w.now), false
	}
	w.startContainer(p)
}

func refusalExit() *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error",
		Message: `{"level":"panic","msg":"failed to recover v3 backend from snapshot","error":"wal: crc mismatch"}`}
}

// kubelet moves a pod along: a pending pod starts (a pod made for a claim
// that is gone waits for it), a joining pod resolves its name, then starts
// once its member is added; a patched container runs its new image.
func (w *world) kubelet(p *wpod) {
	if p.deleting() || p.nodeLost {
		return
	}
	switch {
	case p.phase == corev1.PodPending && p.joiner && !p.dnsDone:
		p.dnsDone = true
	case p.phase == corev1.PodPending && p.joiner:
		if w.members[p.name] != nil {
			w.startContainer(p)
		}
	case p.phase == corev1.PodPending:
		if w.onClaims && (w.claims[p.name] == nil || w.claims[p.name].nodeGone || !w.claims[p.name].nodeDownSince.IsZero()) {
			// No node can take a pod on a claim whose node is gone, or
			// does not answer: the volume can be used there only.
			return
		}
		w.startContainer(p)
	case p.ctr == ctrUpgrading:
		w.startContainer(p)
	}
}

// deletePod deletes a pod with a grace period; deleting a pod being deleted
// changes nothing.
func (w *world) deletePod(name string, grace time.Duration) {
	p := w.pods[name]
	if p == nil || p.deleting() {
		return
	}
	p.deadline = w.now.Add(grace)
	if !p.nodeLost {
		// etcd stops on SIGTERM; on a node that does not answer nothing is
		// known to stop.
		p.etcdRuns = false
	}
}

// finishDeletions removes the pods being deleted whose node answers (not
// one created this very moment: the informer shows it first).
func (w *world) finishDeletions(only string) {
	for name, p := range w.pods {
		if p.deleting() && !p.nodeLost && (only == "" || only == name) && p.obj.CreationTimestamp.Time.Before(w.now) {
			delete(w.pods, name)
		}
	}
}
