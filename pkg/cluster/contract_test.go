package cluster

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// The operator's safety contract — what it never does — checked on random
// histories of the world of contract_world_test.go. A destructive step
// happens only on positive evidence read in the same pass, never on the
// absence of information. Each rule is judged against the world as it is
// when the pass acts, not against what the pass saw:
//
//	C1 A member is removed from etcd (remove dead member, remove member)
//	   only with the membership confirmed by etcd's leader in this pass,
//	   while etcd has a leader and the voters left keep a quorum running.
//	   A dead member whose claim holds its data is removed only when etcd
//	   refused the data (its log, a CORRUPT alarm) or when it is down after
//	   at least ladderRestarts restarts after failures within ladderWindow —
//	   the world counts those with their times. A failure is a pod that
//	   ended (Failed, evicted by the kubelet) or an etcd that exited; a
//	   container's lifetime restartCount, the restart of an upgrade in
//	   place, a pod deleted and a pod that never started are no failures.
//	   A member whose container restarts on a new image is not dead.
//	C2 A claim is deleted (stray claim, joiner) only with the membership
//	   confirmed by the leader in this pass, when etcd does not list its
//	   member, and never the claim of a member of a cluster that served that
//	   a new seed took the place of.
//	C3 A seed is made only while the cluster owns no claim and no pod.
//	C4 A new cluster is forced from a survivor only when etcd was read
//	   without error in this pass, etcd has no leader and no member reports
//	   one, the survivor answered with the highest raft index of those that
//	   answered, every member whose pod may still run (Running, on a node
//	   that does not answer, terminating) answered, etcd lost its leader at
//	   least the grace period ago, and the operator read it without a
//	   leader at least the grace period ago as well as now.
//	C5 A restore from a backup only while no member has a claim, nor a pod
//	   whose emptyDir holds its data.
//	C6 A seed is made again (reseed) only when the cluster never served:
//	   no member pod was ever Ready behind a leader.
//	L1 A pod being deleted is not deleted twice more; and while another
//	   pod is stuck terminating (past its deletion deadline and
//	   terminatingGrace), a member with no pod whose claim holds its data is
//	   restarted in place within a minute and three passes.
//	L2 Every wait says what it waits for, and the passes do not wait for
//	   more than a minute with an empty status.reason.
//	L3 The status a pass leaves does not say Available True while etcd has
//	   no leader (no voter is then Ready).

// violation is a rule broken at a pass.
type violation struct {
	// rule is the contract's rule ("C1"); what the check within it, stable
	// across histories, so that violations group by it; shape, for waits,
	// the wait without its names and figures.
	rule, what, shape string
	msg               string
	// step is the step of the history at which it happened.
	step int
}

func (v violation) bucket() string { return v.rule + " " + v.what }

func (v violation) String() string { return fmt.Sprintf("%s (%s): %s", v.rule, v.what, v.msg) }

// stepLog is what one step of a history did, for the failure's story.
type stepLog struct {
	at         time.Duration
	event      string
	passed     bool
	read       bool
	saw        string
	decided    string
	truth      string
	violations []violation
}

// history is a world's start and its steps.
type history struct {
	start worldConfig
	steps []step
}

// playOptions say how far a history is played and what is kept of it.
type playOptions struct {
	// until ends the history at the first violation in that bucket, at
	// the first violation of any kind when "*", never when "".
	until string
	// ignore leaves out the violations it matches (rules being fixed).
	ignore func(violation) bool
	// story keeps what each pass saw and decided, for the failure's
	// message.
	story bool
}

// run is one history played on a world.
type run struct {
	h          history
	o          playOptions
	w          *world
	log        []stepLog
	violations []violation

	// waitingSince is when the passes started waiting with an empty
	// status.reason, zero otherwise; goneSince and gonePasses track each
	// member whose pod is gone and whose claim holds its data until it is
	// restarted in place; redeleted counts the deletions of pods already
	// being deleted.
	waitingSince time.Time
	goneSince    map[string]time.Time
	gonePasses   map[string]int
	redeleted    map[string]int
	passes       int
}

// play runs a history.
func play(h history, o playOptions) *run {
	h.steps = slices.Clone(h.steps)
	r := &run{h: h, o: o, w: newWorld(h.start),
		goneSince: map[string]time.Time{}, gonePasses: map[string]int{}, redeleted: map[string]int{}}
	for i := range r.h.steps {
		st := &r.h.steps[i]
		l := stepLog{event: r.w.happen(st)}
		if st.ev == evOperatorRestart {
			// An operator starts with no memory: a wait it did not see
			// begin is told a minute after its start.
			r.waitingSince = time.Time{}
		}
		r.w.settle()
		if !st.held && !r.w.down && !r.w.restored {
			l.passed = true
			r.pass(i, &l)
		}
		l.at = r.w.now.Sub(testStart)
		r.log = append(r.log, l)
		if r.w.restored || r.reached() {
			break
		}
	}
	return r
}

// reached tells whether the history has broken the rule it was played for.
func (r *run) reached() bool {
	switch r.o.until {
	case "":
		return false
	case "*":
		return len(r.violations) > 0
	}
	return r.broke(r.o.until) >= 0
}

// quiet tells whether a check that breaks its rule on pass after pass can
// be skipped: the history broke it already and no story is told.
func (r *run) quiet(bucket string) bool { return !r.o.story && r.broke(bucket) >= 0 }

// broke is the step at which the history first broke bucket, -1 if never.
func (r *run) broke(bucket string) int {
	for _, v := range r.violations {
		if v.bucket() == bucket {
			return v.step
		}
	}
	return -1
}

// pass is one pass of the operator, as Cluster.pass runs it, with the
// contract checked on its decision and on the status it writes.
func (r *run) pass(i int, l *stepLog) {
	w := r.w
	r.passes++
	s := observeWorld(w, false)
	a := decide(s)
	if a.kind == actReadEtcd {
		l.read = true
		s = observeWorld(w, true)
		a = decide(s)
	}
	if r.o.story {
		l.saw, l.decided, l.truth = summarize(s), a.String(), w.truth()
	}
	vs := r.checkDecision(s, a)
	phase, err := w.act(s, a)
	w.settle()
	w.writeStatus(s, phase, w.op.passProblems(s, nil, a, err))
	vs = append(vs, r.checkAfterPass(a)...)
	for _, v := range vs {
		if r.o.ignore == nil || !r.o.ignore(v) {
			v.step = i
			l.violations = append(l.violations, v)
			r.violations = append(r.violations, v)
		}
	}
}

// checkDecision judges the action a pass decided against the world as it
// is when the pass acts.
func (r *run) checkDecision(s *snapshot, a action) []violation {
	w := r.w
	var vs []violation
	bad := func(rule, what, format string, args ...any) {
		vs = append(vs, violation{rule: rule, what: what, msg: fmt.Sprintf(format, args...)})
	}
	confirmed := s.etcd != nil && s.etcd.err == nil && s.etcd.confirmed
	switch a.kind {
	case actRemoveDeadMember, actRemoveMember:
		r.checkRemove(s, a, confirmed, bad)
	case actDeleteStrayClaim, actDeleteJoiner:
		if !confirmed {
			bad("C2", "deletes a claim without the leader's membership", "deletes claim %s without etcd's membership read from the leader in this pass", a.member)
		}
		if w.members[a.member] != nil && (a.kind == actDeleteStrayClaim || w.claims[a.member] != nil) {
			bad("C2", "deletes a member's claim", "deletes the claim of %s, which etcd lists as a member", a.member)
		}
		if slices.Contains(w.displaced, a.member) && w.claims[a.member] != nil {
			bad("C2", "deletes the claim of a member a seed displaced", "deletes the claim of %s, a member of the cluster that served, with its data, which a new seed took the place of", a.member)
		}
	case actSeed:
		// A seed may start on its predecessor's claim (etcd then resumes
		// from what is there); any other claim holding data, or any pod,
		// is a cluster beside which nothing is seeded.
		var held []string
		for _, name := range sortedKeys(w.claims) {
			if name != a.member && w.claims[name].data {
				held = append(held, name)
			}
		}
		if len(w.pods) > 0 || len(held) > 0 {
			bad("C3", "seeds beside claims or pods", "seeds a new cluster while the cluster owns claims %v holding data and pods %v", held, sortedKeys(w.pods))
		}
	case actForceNewCluster:
		r.checkForce(s, a, bad)
	case actRestoreFromBackup:
		var left []string
		for _, name := range sortedKeys(w.members) {
			if w.claims[name] != nil || w.pods[name] != nil && w.pods[name].data {
				left = append(left, name)
			}
		}
		if len(left) > 0 {
			bad("C5", "restores while data is left", "restores from a backup while members %v still have their data (claims %v)", left, sortedKeys(w.claims))
		}
	case actReseed:
		// The claim stays for the next seed; a pod whose emptyDir holds
		// what a cluster that served wrote must not go.
		if p := w.pods[a.member]; w.served && p != nil && p.data {
			bad("C6", "reseeds a cluster that served", "makes the seed %s again (its pod, with its data, deleted) although the cluster served clients", a.member)
		}
	case actWait:
		if a.reason == "" {
			bad("L2", "waits without a reason", "waits without saying what for")
		}
	}
	switch a.kind {
	case actDeleteFailedPod, actDeleteStrayPod, actDeleteJoiner, actForceNewCluster:
		if p := w.pods[a.member]; p != nil && p.deleting() {
			r.redeleted[string(p.obj.UID)]++
			if n := r.redeleted[string(p.obj.UID)]; n >= 2 {
				bad("L1", "deletes a terminating pod again", "deletes pod %s, terminating (deletion deadline %s), once more: %d deletions since it was deleted: %s",
					a.member, p.deadline.Format(time.TimeOnly), n, a)
			}
		}
	}
	return vs
}

// checkRemove is C1.
func (r *run) checkRemove(s *snapshot, a action, confirmed bool, bad func(rule, what, format string, args ...any)) {
	w := r.w
	name := a.member
	if !confirmed {
		bad("C1", "removes without the leader's membership", "removes member %s without etcd's membership confirmed by the leader in this pass", name)
	}
	m := w.members[name]
	if m == nil {
		return
	}
	left, running := 0, 0
	for _, v := range w.voters() {
		if v != name {
			left++
			if w.runsEtcd(v) {
				running++
			}
		}
	}
	if w.leader == "" || left > 0 && running < left/2+1 {
		bad("C1", "removes without a quorum", "removes member %s while etcd has no quorum without it (%d of %d other voters run)", name, running, left)
	}
	if a.kind != actRemoveDeadMember {
		return
	}
	// A pod deleted meanwhile is no upgrade any more: the member is
	// repaired as any whose pod is gone.
	if p := w.pods[name]; p != nil && p.ctr == ctrUpgrading && !p.deleting() && !m.refused && !m.corrupt {
		bad("C1", "removes a member being upgraded", "removes member %s while the kubelet restarts it on its new image (an upgrade in place, not a failure)", name)
	}
	if !w.onClaims || w.claims[name] == nil || !w.claims[name].data || m.refused || m.corrupt {
		return
	}
	within := w.restartsWithin(name, ladderWindow)
	if within < ladderRestarts || w.runsEtcd(name) {
		lifetime := int32(0)
		if p := w.pods[name]; p != nil {
			lifetime = p.restartCount
		}
		bad("C1", "removes a member whose claim holds its data", "removes member %s, whose claim holds its data, without evidence the data is unusable: "+
			"%d restart(s) after failures within %v (its container's lifetime restartCount is %d): %s", name, within, ladderWindow, lifetime, a)
	}
}

// checkForce is C4.
func (r *run) checkForce(s *snapshot, a action, bad func(rule, what, format string, args ...any)) {
	w := r.w
	e := s.etcd
	if e == nil || e.err != nil {
		why := "etcd was not read"
		if e != nil {
			why = fmt.Sprintf("etcd could not be read: %v", e.err)
		}
		bad("C4", "forces without reading etcd", "forces a new cluster from %s although %s in this pass: %s", a.member, why, a)
		return
	}
	if w.leader != "" {
		bad("C4", "forces while etcd has a leader", "forces a new cluster from %s while etcd has a leader (%s): %s", a.member, w.leader, a)
	}
	for _, m := range e.health.Members {
		if m.Err == nil && m.Leader != 0 {
			bad("C4", "forces while a member reports a leader", "forces a new cluster from %s although member %s reports leader %x in this pass", a.member, m.Name, m.Leader)
			break
		}
	}
	chosen, ok := e.healthOf(memberID(a.member))
	if !ok || chosen.Err != nil {
		bad("C4", "forces from a member that did not answer", "forces a new cluster from %s, which did not answer with its raft index: %s", a.member, a)
	}
	for _, m := range e.health.Members {
		if m.Err == nil && m.RaftIndex > chosen.RaftIndex {
			bad("C4", "forces from an older member", "forces a new cluster from %s (raft index %d) while %s answered with raft index %d", a.member, chosen.RaftIndex, m.Name, m.RaftIndex)
		}
	}
	for _, name := range sortedKeys(w.members) {
		p := w.pods[name]
		if name == a.member || p == nil || e.answers(memberID(name)) {
			continue
		}
		if p.nodeLost || p.deleting() || p.phase == corev1.PodRunning && p.ctr == ctrRunning {
			bad("C4", "forces with a member unaccounted for", "forces a new cluster from %s while member %s, which may still run (its pod %s), did not answer", a.member, name, w.podWord(p))
		}
	}
	// Leaderlessness held across the grace period: etcd lost its leader at
	// least that long ago, and the operator read it without a leader then
	// as well as now.
	grace := w.spec.Spec.DisasterRecovery.GracePeriod()
	reads := w.leaderlessReads
	switch {
	case w.leaderLostAt.IsZero():
	case w.now.Sub(w.leaderLostAt) < grace:
		bad("C4", "forces within the grace period", "forces a new cluster %v after etcd lost its leader, within the grace period of %v", w.now.Sub(w.leaderLostAt), grace)
	case len(reads) < 2 || w.now.Sub(reads[0]) < grace:
		first := "none before"
		if len(reads) > 1 {
			first = fmt.Sprintf("the first %v ago", w.now.Sub(reads[0]))
		}
		bad("C4", "forces without leaderless reads across the grace period", "forces a new cluster on %d read(s) of etcd without a leader (%s), not across the grace period of %v",
			len(reads), first, grace)
	}
}

// checkAfterPass judges the liveness of the passes and the status written.
func (r *run) checkAfterPass(a action) []violation {
	w := r.w
	var vs []violation
	bad := func(rule, what, format string, args ...any) {
		vs = append(vs, violation{rule: rule, what: what, msg: fmt.Sprintf(format, args...)})
	}
	st := w.op.status()

	// L2: a wait of more than a minute says why: the passes do not wait
	// longer than that with an empty status.reason.
	if (a.kind == actWait || a.kind == actReadEtcd) && st.Reason == "" && !r.quiet("L2 waits without status.reason") {
		if r.waitingSince.IsZero() {
			r.waitingSince = w.now
		}
		if d := w.now.Sub(r.waitingSince); d > time.Minute {
			bad("L2", "waits without status.reason", "has waited for %v with an empty status.reason: %s", d, a)
			vs[len(vs)-1].shape = waitShape(a.reason)
		}
	} else {
		r.waitingSince = time.Time{}
	}

	// L1: a member whose pod is gone and whose claim holds its data is
	// restarted in place, whatever another member's pod does.
	stuck := ""
	for _, name := range sortedKeys(w.pods) {
		if p := w.pods[name]; p.deleting() && w.now.After(p.deadline.Add(terminatingGrace)) {
			stuck = name
		}
	}
	for _, name := range sortedKeys(w.members) {
		m := w.members[name]
		c := w.claims[name]
		if stuck == "" || !w.onClaims || c == nil || !c.data || w.pods[name] != nil || m.refused || m.corrupt ||
			w.restartsWithin(name, ladderWindow) >= ladderRestarts || w.op.recovering != nil ||
			a.kind == actRestartMembers && slices.Contains(a.names, name) {
			delete(r.goneSince, name)
			delete(r.gonePasses, name)
			continue
		}
		if _, ok := r.goneSince[name]; !ok {
			r.goneSince[name] = w.now
		}
		r.gonePasses[name]++
		if d := w.now.Sub(r.goneSince[name]); d >= time.Minute && r.gonePasses[name] >= 3 {
			bad("L1", "leaves a gone member behind a stuck pod", "member %s has had no pod for %v (%d passes) while its claim holds its data, and is not restarted in place while pod %s is stuck terminating: %s",
				name, d, r.gonePasses[name], stuck, a)
		}
	}

	// L3: Available is not True while etcd has no leader.
	if w.leader == "" && len(w.voters()) > 0 && !r.quiet("L3 leaves Available True without a leader") {
		for _, c := range st.Conditions {
			if c.Type == api.ClusterConditionAvailable && c.Status == corev1.ConditionTrue {
				ready := 0
				for _, name := range w.voters() {
					if w.podReady(w.pods[name]) {
						ready++
					}
				}
				bad("L3", "leaves Available True without a leader", "leaves Available True while etcd has no leader and %d of %d voting members are ready", ready, len(w.voters()))
			}
		}
	}
	return vs
}

var shapeDigits = regexp.MustCompile(`[0-9]+|example-[a-z0-9]+|\([^)]*\)`)

// waitShape is a wait's reason without its names and figures, so that the
// same wait in two histories is one finding.
func waitShape(reason string) string {
	s := shapeDigits.ReplaceAllString(reason, "…")
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// truth says what the world is, beside what the operator saw.
func (w *world) truth() string {
	var b strings.Builder
	if w.leader != "" {
		fmt.Fprintf(&b, "leader %s", w.leader)
	} else {
		b.WriteString("no leader")
		if !w.leaderLostAt.IsZero() {
			fmt.Fprintf(&b, " (lost %v ago, %d leaderless read(s))", w.now.Sub(w.leaderLostAt), len(w.leaderlessReads))
		}
	}
	var ms []string
	for _, name := range sortedKeys(w.members) {
		m := w.members[name]
		d := name
		if m.learner {
			d += " learner"
		}
		if w.runsEtcd(name) {
			d += fmt.Sprintf(" runs (raft %d)", m.raftIndex)
		} else {
			d += " down"
		}
		if w.holdsData(name) {
			d += ", data"
		}
		if n := w.restartsWithin(name, ladderWindow); n > 0 {
			d += fmt.Sprintf(", %d restart(s) in %v", n, ladderWindow)
		}
		if m.refused {
			d += ", data refused"
		}
		if m.corrupt {
			d += ", CORRUPT"
		}
		ms = append(ms, d)
	}
	fmt.Fprintf(&b, "; etcd members: %s", strings.Join(ms, "; "))
	if w.partitioned {
		b.WriteString("; partitioned")
	}
	if !w.reachable {
		b.WriteString("; unreachable from the operator")
	}
	if !w.served {
		b.WriteString("; never served")
	}
	return b.String()
}

// summarize is what the pass saw, in a line.
func summarize(s *snapshot) string {
	var b strings.Builder
	phase := string(s.phase)
	if phase == "" {
		phase = `""`
	}
	fmt.Fprintf(&b, "phase %s", phase)
	if !s.everAvailable {
		b.WriteString(" (never available)")
	}
	if l := s.quorumLoss; l != nil {
		fmt.Fprintf(&b, ", quorum seen lost %v before (%d leaderless reads)", s.now.Sub(l.since), l.leaderlessReads)
	}
	if s.membership == nil {
		b.WriteString("; membership unknown")
	} else {
		var ms []string
		for _, name := range sortedKeys(s.views) {
			m := s.views[name]
			d := name + " " + m.state.String()
			if m.ready {
				d += " ready"
			}
			if m.member.IsLearner {
				d += " learner"
			}
			if m.restarts > 0 {
				d += fmt.Sprintf(" restarts %d", m.restarts)
			}
			if m.repair != repairNone {
				d += " [" + m.repair.String() + "]"
			}
			if m.claim == nil && s.usesClaims() {
				d += " no claim"
			}
			ms = append(ms, d)
		}
		fmt.Fprintf(&b, "; members %s", strings.Join(ms, ", "))
	}
	var pods []string
	for _, name := range sortedKeys(s.pods) {
		if _, member := s.views[name]; !member {
			pods = append(pods, name+" "+string(s.pods[name].Status.Phase))
		}
	}
	if len(pods) > 0 {
		fmt.Fprintf(&b, "; other pods %s", strings.Join(pods, ", "))
	}
	if len(s.terminating) > 0 {
		fmt.Fprintf(&b, "; terminating %s", strings.Join(sortedKeys(s.terminating), ", "))
	}
	if s.usesClaims() {
		fmt.Fprintf(&b, "; claims %s", strings.Join(sortedKeys(s.claims), ", "))
	}
	switch e := s.etcd; {
	case e == nil:
	case e.err != nil:
		fmt.Fprintf(&b, "; etcd: %v", e.err)
	default:
		var answered []string
		for _, m := range e.health.Members {
			if m.Err == nil {
				answered = append(answered, fmt.Sprintf("%s (raft %d)", m.Name, m.RaftIndex))
			}
		}
		leader := "no leader"
		if m, ok := e.health.Member(e.health.LeaderID); ok && e.health.LeaderID != 0 {
			leader = "leader " + m.Name
		}
		fmt.Fprintf(&b, "; etcd: %s, answered %s", leader, strings.Join(answered, ", "))
	}
	if e := s.upgradeExpect; e != nil {
		fmt.Fprintf(&b, "; upgrading %s", e.name)
	}
	return b.String()
}

// story is the history as a failure tells it, step by step.
func (r *run) story() string {
	var b strings.Builder
	fmt.Fprintf(&b, "start: %s\n", r.h.start)
	for i, l := range r.log {
		event := l.event
		if event == "" {
			event = "(nothing happens)"
		}
		fmt.Fprintf(&b, "%3d  +%-8v %s\n", i+1, l.at, event)
		if !l.passed {
			continue
		}
		fmt.Fprintf(&b, "       saw:     %s\n", l.saw)
		decided := l.decided
		if l.read {
			decided = "read etcd, then " + decided
		}
		fmt.Fprintf(&b, "       decided: %s\n", decided)
		fmt.Fprintf(&b, "       truth:   %s\n", l.truth)
		for _, v := range l.violations {
			fmt.Fprintf(&b, "       VIOLATION %s\n", v)
		}
	}
	return b.String()
}

// resolved is the history with every step's target named, as played.
func (r *run) resolved() history {
	h := history{start: r.h.start, steps: slices.Clone(r.h.steps[:len(r.log)])}
	for i := range h.steps {
		h.steps[i].idx = -1
	}
	return h
}

// shrink removes steps, shortens waits and drops the month-old restarts as
// long as the history still breaks bucket, and returns the shortest run
// found, with its story.
func shrink(h history, bucket string, ignore func(violation) bool) *run {
	fails := func(h history) *run {
		if r := play(h, playOptions{until: bucket, ignore: ignore}); r.broke(bucket) >= 0 {
			return r
		}
		return nil
	}
	r := fails(h)
	if r == nil {
		return play(h, playOptions{ignore: ignore, story: true})
	}
	h = r.resolved()
	try := func(c history) bool {
		if r := fails(c); r != nil {
			h = r.resolved()
			return true
		}
		return false
	}
	for changed := true; changed; {
		changed = false
		for i := len(h.steps) - 1; i >= 0; i-- {
			if i < len(h.steps) && try(history{start: h.start, steps: slices.Delete(slices.Clone(h.steps), i, i+1)}) {
				changed = true
			}
		}
		for i := 0; i < len(h.steps); i++ {
			c := history{start: h.start, steps: slices.Clone(h.steps)}
			switch st := &c.steps[i]; {
			case st.ev == evTick && int(st.param)%len(tickDurations) > 0:
				st.param = byte(int(st.param)%len(tickDurations) - 1)
			case st.held:
				st.held = false
			default:
				continue
			}
			if try(c) {
				changed = true
			}
		}
		for i, n := range h.start.lifetimeRestarts {
			if n == 0 {
				continue
			}
			c := history{start: h.start, steps: h.steps}
			c.start.lifetimeRestarts[i] = 0
			if try(c) {
				changed = true
			}
		}
	}
	return play(h, playOptions{until: bucket, ignore: ignore, story: true})
}

// Histories from bytes: 4 bytes for the start, then 3 for each step (the
// event, the target with whether the pass is held, a parameter).

const (
	historyHeader = 4
	maxSteps      = 80
)

var lifetimeChoices = [4]int32{0, 1, 4, 12}

func decodeHistory(data []byte) history {
	var hdr [historyHeader]byte
	copy(hdr[:], data)
	cfg := worldConfig{
		size:        []int{1, 3, 5}[int(hdr[0])%3],
		claims:      hdr[0]>>2&1 == 1,
		recovery:    hdr[0]>>3&1 == 1,
		fromBackup:  hdr[0]>>4&1 == 1,
		neverStored: hdr[0]>>5 == 0,
		warm:        hdr[3]&1 == 1,
		fresh:       hdr[3]>>1&7 == 0,
	}
	bits := uint16(hdr[1]) | uint16(hdr[2])<<8
	for i := range cfg.lifetimeRestarts {
		cfg.lifetimeRestarts[i] = lifetimeChoices[bits>>(2*i)&3]
	}
	h := history{start: cfg}
	for rest := data[min(len(data), historyHeader):]; len(rest) >= 3 && len(h.steps) < maxSteps; rest = rest[3:] {
		h.steps = append(h.steps, step{ev: eventTable[rest[0]%32], idx: int(rest[1] % 32), held: rest[1] >= 224, param: rest[2]})
	}
	return h
}

// randomHistory is the bytes of a random history.
func randomHistory(rng *rand.Rand) []byte {
	n := historyHeader + 3*(6+rng.IntN(30))
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return data
}

var (
	contractHistories = flag.Int("contract.histories", 24000, "how many random histories TestSafetyContract plays")
	contractSeed      = flag.Uint64("contract.seed", 2025, "the seed of TestSafetyContract's random histories")
)

var contractIgnore = flag.String("contract.ignore", "", "rules (C1,L2) or buckets of the safety contract not to report, comma-separated: to hunt for other violations while these are being fixed")

// ignoredRules reads -contract.ignore.
func ignoredRules() func(violation) bool {
	if *contractIgnore == "" {
		return nil
	}
	var skip []string
	for _, s := range strings.Split(*contractIgnore, ",") {
		if s = strings.TrimSpace(s); s != "" {
			skip = append(skip, s)
		}
	}
	return func(v violation) bool {
		return slices.Contains(skip, v.rule) || slices.Contains(skip, v.bucket())
	}
}

// TestSafetyContract plays random histories, the same on every run, and
// reports each rule of the contract they break with the shortest history
// that breaks it, shrunk.
func TestSafetyContract(t *testing.T) {
	histories := *contractHistories
	if testing.Short() {
		histories /= 10
	}
	ignore := ignoredRules()
	type found struct {
		h     history
		steps int
	}
	type result struct {
		steps, passes int
		broke         map[string]found
		shapes        map[string]string
	}
	results := make([]result, histories)
	start := time.Now()
	var wg sync.WaitGroup
	// One core is left to the other packages' tests, which go test runs
	// beside this one: some judge etcd's answers on time.
	workers := max(1, runtime.GOMAXPROCS(0)-1)
	for wk := range workers {
		wg.Go(func() {
			for i := wk; i < histories; i += workers {
				r := play(decodeHistory(randomHistory(rand.New(rand.NewPCG(*contractSeed, uint64(i))))), playOptions{ignore: ignore})
				res := result{steps: len(r.log), passes: r.passes, broke: map[string]found{}, shapes: map[string]string{}}
				for _, v := range r.violations {
					if _, ok := res.broke[v.bucket()]; !ok {
						h := r.resolved()
						h.steps = h.steps[:v.step+1]
						res.broke[v.bucket()] = found{h: h, steps: v.step + 1}
					}
					if v.shape != "" {
						res.shapes[v.shape] = v.bucket()
					}
				}
				results[i] = res
			}
		})
	}
	wg.Wait()
	took := time.Since(start)

	steps, passes := 0, 0
	shortest := map[string]found{}
	count := map[string]int{}
	shapes := map[string]map[string]int{}
	for _, res := range results {
		steps += res.steps
		passes += res.passes
		for b, f := range res.broke {
			count[b]++
			if old, ok := shortest[b]; !ok || f.steps < old.steps {
				shortest[b] = f
			}
		}
		for shape, b := range res.shapes {
			if shapes[b] == nil {
				shapes[b] = map[string]int{}
			}
			shapes[b][shape]++
		}
	}
	t.Logf("%d histories, %d steps, %d passes in %v on %d goroutines: %.0f histories/s, %.0f passes/s",
		histories, steps, passes, took.Round(time.Millisecond), workers, float64(histories)/took.Seconds(), float64(passes)/took.Seconds())
	var summary []string
	for _, b := range sortedKeys(shortest) {
		summary = append(summary, fmt.Sprintf("%s (%d)", b, count[b]))
		r := shrink(shortest[b].h, b, ignore)
		msg := fmt.Sprintf("%s — broken in %d of %d histories; the shortest, shrunk to %d steps:\n%s", b, count[b], histories, len(r.log), r.story())
		if ss := shapes[b]; len(ss) > 0 {
			msg += "the waits it was found on, with the histories they were found in:\n"
			for _, shape := range sortedKeys(ss) {
				msg += fmt.Sprintf("  %5d  %s\n", ss[shape], shape)
			}
		}
		t.Error(msg)
	}
	t.Logf("contract: %d histories, %d rules broken: %s", histories, len(summary), strings.Join(summary, "; "))
}

// FuzzSafetyContract is the contract on histories the fuzzer makes: `make
// fuzz` runs it, and the fuzzer shrinks what fails; the failure tells the
// history as a story. -contract.ignore leaves out the rules being fixed.
// The seeds are histories of a cluster that only waits and heals.
func FuzzSafetyContract(f *testing.F) {
	for _, start := range []byte{0x25, 0x24, 0x2d, 0x3d, 0x26} {
		f.Add([]byte{start, 0, 0, 0, 4, 0, 3, 4, 0, 0, 5, 0, 7})
	}
	ignore := ignoredRules()
	f.Fuzz(func(t *testing.T, data []byte) {
		r := play(decodeHistory(data), playOptions{until: "*", ignore: ignore, story: true})
		if len(r.violations) > 0 {
			t.Fatalf("%s\n%s", r.violations[0], r.story())
		}
	})
}

// TestContractKnownViolations are histories, told as sentences, each of
// which broke one rule of the contract on the code it was written against:
// they must keep that rule. Other rules they break are logged; the random
// histories of TestSafetyContract report those.
func TestContractKnownViolations(t *testing.T) {
	threeOnClaims := worldConfig{size: 3, claims: true}
	withRecovery := func(c worldConfig, fromBackup bool) worldConfig {
		c.recovery, c.fromBackup = true, fromBackup
		return c
	}
	monthOld := func(c worldConfig, member int, restarts int32) worldConfig {
		c.lifetimeRestarts[member] = restarts
		return c
	}
	unstored := threeOnClaims
	unstored.neverStored = true
	warmThree := threeOnClaims
	warmThree.warm = true
	tests := []struct {
		name string
		// rule is the rule the history must keep; bucket, when set, the one
		// check of it.
		rule, bucket string
		start        worldConfig
		steps        []step
	}{
		{
			name:  "a month-old member whose container restarted four times is not replaced after one OOM kill",
			rule:  "C1",
			start: monthOld(threeOnClaims, 2, 4),
			steps: []step{crash(memberC)},
		},
		{
			name:  "a month-old member is not replaced while an upgrade in place restarts its container",
			rule:  "C1",
			start: monthOld(threeOnClaims, 1, 4),
			steps: []step{upgrade(), tick(time.Second)},
		},
		{
			name:  "three crash-looping members whose claims hold their data are not restored from a backup",
			rule:  "C5",
			start: withRecovery(threeOnClaims, true),
			steps: slices.Concat(
				[]step{tick(time.Second), held(crash(memberA)), held(crash(memberB)), crash(memberC)},
				crashes(memberA, 4), crashes(memberB, 4), crashes(memberC, 4),
				[]step{tick(time.Minute), tick(6 * time.Minute)}),
		},
		{
			name:  "members on nodes that do not answer, whose etcd still leads, are not forced out by a new cluster",
			rule:  "C4",
			start: withRecovery(threeOnClaims, false),
			steps: []step{nodeLost(memberA, true, true), nodeLost(memberB, true, true), tick(6 * time.Minute)},
		},
		{
			name:  "etcd that cannot be reached is not taken for a cluster without a leader",
			rule:  "C4",
			start: withRecovery(threeOnClaims, false),
			steps: []step{nodeLost(memberB, true, false), nodeLost(memberC, true, false), unreachable(), tick(6 * time.Minute)},
		},
		{
			name:  "the grace period counts from the loss of the leader, not from an old Available condition found after an operator restart",
			rule:  "C4",
			start: withRecovery(threeOnClaims, false),
			steps: []step{
				nodeLost(memberB, true, true), nodeLost(memberC, true, true), operatorStops(),
				tick(time.Hour), nodeLost(memberB, true, true), nodeLost(memberC, true, true), operatorComesBack(),
			},
		},
		{
			name:  "an operator restarted under a status the server does not store restarts the members from their claims, never seeds",
			rule:  "C3",
			start: unstored,
			steps: []step{operatorStops(), allPodsGone(), operatorComesBack(), kubelet(), kubelet(), tick(time.Second)},
		},
		{
			name:  "the claims of members are not deleted as strays of a cluster seeded beside them",
			rule:  "C2",
			start: unstored,
			steps: []step{operatorStops(), allPodsGone(), operatorComesBack(), kubelet(), kubelet(), tick(time.Second)},
		},
		{
			name:  "a pod stuck terminating on a dead node is not deleted again and again, and does not keep another gone member from being restarted in place",
			rule:  "L1",
			start: threeOnClaims,
			steps: []step{
				held(nodeLost(memberB, false, false)), deletePod(memberB), tick(time.Minute), tick(20 * time.Second),
				held(deletePod(memberC)), podsGone(), tick(20 * time.Second), tick(20 * time.Second), tick(20 * time.Second), tick(20 * time.Second),
			},
		},
		{
			name:  "members whose pods were all deleted three times are restarted in place, not replaced, when one is then evicted: a deletion is no failure",
			rule:  "C1",
			start: warmThree,
			steps: []step{
				allPodsGone(), kubelet(), tick(time.Second), allPodsGone(), kubelet(), tick(time.Second), allPodsGone(), kubelet(),
				podEvicted(memberB), tick(time.Second),
			},
		},
		{
			name:  "a member evicted while an upgrade restarts its container, after two restarts in place, is restarted again: the upgrade's restart is no failure",
			rule:  "C1",
			start: warmThree,
			steps: []step{
				podEvicted(memberB), tick(time.Second), kubelet(), podEvicted(memberB), tick(time.Second), kubelet(),
				upgrade(), podEvicted(memberB), tick(time.Second),
			},
		},
		{
			name:  "after an operator restart, a member whose pod is gone is restarted before the pods that never started are deleted one by one",
			rule:  "L1",
			start: worldConfig{size: 5, claims: true},
			steps: []step{
				operatorStops(), allPodsDeleted(), nodeLost(memberC, true, false), tick(time.Second), operatorComesBack(),
				deletePod(memberD), tick(6 * time.Minute), tick(time.Minute), nothing(),
			},
		},
		{
			name:  "Available turns False when etcd loses its leader while its pods run",
			rule:  "L3",
			start: threeOnClaims,
			steps: []step{tick(time.Second), partition()},
		},

		// Found by TestSafetyContract beyond the histories above.
		{
			name:  "a member with a CORRUPT alarm is not removed while the quorum needs it, and the dead member beside it is replaced",
			rule:  "C1",
			start: worldConfig{size: 3, warm: true},
			steps: []step{corruptAlarm(memberA), podEvicted(memberB), tick(time.Minute), tick(6 * time.Minute)},
		},
		{
			name:  "a disaster recovery under way from a survivor is not followed by a restore from a backup while the survivor's pod terminates",
			rule:  "C5",
			start: withRecovery(warmThree, true),
			steps: []step{held(refuseData(memberA)), refuseData(memberB), tick(time.Minute), tick(6 * time.Minute), nothing()},
		},
		{
			name:   "a disaster recovery under way is not started again from another survivor while the first survivor's pod terminates",
			rule:   "C4",
			bucket: "C4 forces with a member unaccounted for",
			start:  withRecovery(worldConfig{size: 5, claims: true, warm: true}, false),
			steps: []step{
				held(refuseData(memberC)), held(refuseData(memberD)), refuseData(memberE), tick(time.Minute), tick(6 * time.Minute),
				nothing(),
			},
		},
		{
			name:   "the survivor with the newest data is chosen even when its pod shows phase Unknown",
			rule:   "C4",
			bucket: "C4 forces from an older member",
			start:  withRecovery(warmThree, false),
			steps: []step{
				crash(memberC), tick(time.Minute), held(nodeLost(memberA, true, true)), held(refuseData(memberB)), held(partition()), recoverPod(memberC),
				tick(6 * time.Minute),
			},
		},
		{
			name:  "a seed that ran is not made again: clients may have written to it",
			rule:  "C6",
			start: worldConfig{size: 1, claims: true, fresh: true},
			steps: []step{tick(time.Second), held(kubelet()), podEvicted(""), tick(time.Second)},
		},
		{
			name:  "a new cluster whose seed pod was deleted before it ran says why it waits",
			rule:  "L2",
			start: worldConfig{size: 3, fresh: true},
			steps: []step{tick(time.Second), deletePod(""), tick(5 * time.Second), tick(2 * time.Minute)},
		},
		{
			name:  "a member on a node that does not answer, found by an operator that just started, is a reason in status",
			rule:  "L2",
			start: worldConfig{size: 1, claims: true},
			steps: []step{nodeLost(memberA, true, false), tick(2 * time.Minute)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := play(history{start: tt.start, steps: tt.steps}, playOptions{story: true})
			var broken, other []string
			for _, v := range r.violations {
				kept := v.rule != tt.rule || tt.bucket != "" && v.bucket() != tt.bucket
				switch {
				case !kept && !slices.Contains(broken, v.bucket()):
					broken = append(broken, v.bucket())
				case kept && !slices.Contains(other, v.bucket()):
					other = append(other, v.bucket())
				}
			}
			if len(other) > 0 {
				t.Logf("the history also breaks: %s", strings.Join(other, "; "))
			}
			if len(broken) > 0 {
				t.Errorf("%s is broken (%s):\n%s", tt.rule, strings.Join(broken, "; "), r.story())
			}
		})
	}
}

// Steps of the named histories.

func tick(d time.Duration) step {
	i := slices.Index(tickDurations, d)
	if i < 0 {
		panic(fmt.Sprintf("no tick of %v", d))
	}
	return step{ev: evTick, idx: -1, param: byte(i)}
}

func kubelet() step                 { return step{ev: evKubelet, idx: -1} }
func crash(name string) step        { return step{ev: evCrash, target: name, idx: -1, param: 2} }
func deletePod(name string) step    { return byName(step{ev: evPodDeleted}, name) }
func podsGone() step                { return step{ev: evPodsGone, idx: -1} }
func partition() step               { return step{ev: evPartition, idx: -1} }
func unreachable() step             { return step{ev: evUnreachable, idx: -1} }
func upgrade() step                 { return step{ev: evSpecVersion, idx: -1} }
func allPodsGone() step             { return step{ev: evAllPodsDeleted, idx: -1, param: 1} }
func allPodsDeleted() step          { return step{ev: evAllPodsDeleted, idx: -1} }
func operatorStops() step           { return step{ev: evOperatorRestart, idx: -1, param: 1} }
func operatorComesBack() step       { return step{ev: evOperatorRestart, idx: -1} }
func nothing() step                 { return step{ev: evNothing, idx: -1} }
func held(st step) step             { st.held = true; return st }
func podEvicted(name string) step   { return byName(step{ev: evPodFails, param: 1}, name) }
func recoverPod(name string) step   { return step{ev: evRecover, target: name, idx: -1} }
func refuseData(name string) step   { return step{ev: evDataRefused, target: name, idx: -1} }
func corruptAlarm(name string) step { return step{ev: evDataRefused, target: name, idx: -1, param: 1} }

// byName aims the step at name; "" aims it at the first target (the seed
// of a new cluster, whose name is random).
func byName(st step, name string) step {
	st.target, st.idx = name, -1
	if name == "" {
		st.idx = 0
	}
	return st
}

// crashes are n more failures of a crash-looping member's etcd, one after
// the other.
func crashes(name string, n int) []step {
	var out []step
	for range n {
		out = append(out, crash(name))
	}
	return out
}

// nodeLost makes the node of name's pod stop answering: the pod shows phase
// Unknown when unknownPhase, and its etcd runs on when etcdRuns.
func nodeLost(name string, unknownPhase, etcdRuns bool) step {
	st := step{ev: evNodeLost, target: name, idx: -1}
	if unknownPhase {
		st.param |= 1
	}
	if etcdRuns {
		st.param |= 2
	}
	return st
}
