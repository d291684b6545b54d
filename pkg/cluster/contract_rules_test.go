package cluster

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// The judges of the contract's rules (stated in contract_test.go): the
// action each pass decides and the status it leaves, weighed against the
// world's ground truth as the pass acts.

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
	case actStartTogether:
		var held []string
		for _, name := range sortedKeys(w.claims) {
			if w.claims[name].data {
				held = append(held, name)
			}
		}
		if len(w.pods) > 0 || len(held) > 0 {
			bad("C3", "starts together beside claims or pods", "starts members together while the cluster owns claims %v holding data and pods %v", held, sortedKeys(w.pods))
		}
	case actResumeTogether:
		r.checkResumeTogether(a, bad)
	case actRestartTogether:
		for _, name := range a.names {
			if p := w.pods[name]; p != nil && p.data || w.claims[name] != nil && w.claims[name].data && !w.claims[name].nodeGone {
				bad("C8", "starts together again over data", "starts the members again with a new token, deleting %s, which holds data a quorum committed", name)
			}
		}
		if w.served {
			bad("C8", "starts together again a cluster that served", "starts the members again with a new token although the cluster served clients")
		}
	case actForceNewCluster:
		r.checkForce(s, a, bad)
	case actForceDeletePod:
		p := w.pods[a.member]
		switch {
		case p == nil:
		case w.nodeLostAfter == 0:
			bad("C7", "force-deletes without the user's bound", "force-deletes pod %s although spec.pod.nodeLostAfterSeconds is not set", a.member)
		case !p.deleting() || !p.nodeLost || w.now.Sub(p.nodeLostAt) < w.nodeLostAfter:
			bad("C7", "force-deletes a pod not stuck on a lost node", "force-deletes pod %s (%s), whose node has not been lost for %v", a.member, w.podWord(p), w.nodeLostAfter)
		case p.etcdRuns && w.members[a.member] != nil:
			// A pod of no member may be forced with its etcd running:
			// etcd refuses a removed member, and the pod's deletion takes
			// it out of the Service's endpoints.
			bad("C7", "force-deletes a member's pod whose etcd runs", "force-deletes pod %s while its etcd runs on its node, a member", a.member)
		}
		if w.members[a.member] != nil && !confirmed {
			bad("C7", "force-deletes without the leader's membership", "force-deletes the pod of member %s without etcd's membership confirmed by the leader in this pass", a.member)
		}
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
	r.checkAdopted(a, bad)
	switch a.kind {
	case actDeleteFailedPod, actDeleteStrayPod, actDeleteJoiner, actForceNewCluster, actConvertInPlace:
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

// keepsAdopted are the actions that change no member, pod or claim: the
// only ones an adopted cluster that is not converted sees (C9).
var keepsAdopted = map[actionKind]bool{
	actIdle: true, actWait: true, actReadEtcd: true, actAnnounceAdoption: true, actAdopt: true, actRecordCreating: true,
	actCreateServices: true, actSyncBudget: true, actIssueCertificates: true, actRenewCertificate: true,
}

// checkAdopted is C9 and C10: while etcd has members coreos/etcd-operator
// made and a pod of its layout is there, nothing changes the cluster unless
// spec.adoption.convert asks for it; and a conversion adds a member of this
// layout before it removes one of the original's, one replacement at a
// time, but for a member lost with its data, which is replaced first.
func (r *run) checkAdopted(a action, bad func(rule, what, format string, args ...any)) {
	w := r.w
	// The cluster is adopted while a pod of the original's layout is
	// there: once the last is gone, nothing tells its members from this
	// operator's, and C1 to C8 judge their repair.
	originals, pods := w.originals(), w.originalPods()
	if len(originals) == 0 || len(pods) == 0 {
		return
	}
	if !w.convert {
		if !keepsAdopted[a.kind] {
			bad("C9", "changes an adopted cluster not converted", "%s while etcd has members %v that coreos/etcd-operator made, pods %v of its layout are there and spec.adoption.convert is not set",
				a, originals, pods)
		}
		return
	}
	voters := w.voters()
	switch a.kind {
	case actRemoveMember, actRemoveDeadMember:
		// A member that cannot come back (no etcd runs it, its pod is gone,
		// ended for good under restartPolicy Never, stuck terminating past
		// its deadline or on a node that counts as lost, and no claim it
		// can be restarted on holds its data) is replaced as this
		// operator's own would be.
		p, c := w.pods[a.member], w.claims[a.member]
		ended := p == nil || p.phase == corev1.PodFailed || p.phase == corev1.PodSucceeded || w.claimNodeLost(a.member) ||
			(p.deleting() && w.now.After(p.deadline.Add(terminatingGrace)))
		usableClaim := w.onClaims && c != nil && c.data && !c.nodeGone && !w.claimNodeLost(a.member)
		lost := !w.runsEtcd(a.member) && ended && !usableClaim
		if m := w.members[a.member]; m != nil && (m.refused || m.corrupt) {
			// etcd refuses its data: replaced as this operator's own.
			lost = true
		}
		if m := w.members[a.member]; m != nil && m.original && len(voters) <= w.size && !lost {
			bad("C10", "removes an original member before its replacement votes", "removes %s, a member coreos/etcd-operator made, while etcd has %d voting members %v and spec.size is %d: %s",
				a.member, len(voters), voters, w.size, a)
		}
		if a.kind == actRemoveMember && w.members[a.member] != nil && w.members[a.member].original && w.leader == a.member {
			bad("C10", "removes an original member that leads", "removes %s, a member coreos/etcd-operator made, while it leads: %s", a.member, a)
		}
	case actConvertInPlace:
		// A restart in place takes the member down for a moment: only
		// while every other voting member runs, and never the leader.
		for _, name := range voters {
			if name != a.member && !w.runsEtcd(name) {
				bad("C10", "converts a member in place while another is down", "restarts %s in place while member %s does not run: %s", a.member, name, a)
				break
			}
		}
		if w.leader == a.member {
			bad("C10", "converts the leader in place", "restarts %s in place while it leads: %s", a.member, a)
		}
		if len(voters) < 3 {
			bad("C10", "converts in place a member the quorum needs", "restarts %s in place while etcd has %d voting members %v: %s", a.member, len(voters), voters, a)
		}
	case actAddJoiner:
		if len(w.members) > w.size {
			bad("C10", "adds a second replacement", "adds %s while etcd already has %d members %v, more than spec.size %d: %s", a.member, len(w.members), sortedKeys(w.members), w.size, a)
		}
	}
}

// checkResumeTogether is C8 for the members made again from the plan: a
// member that took part in a quorum is never made again without its data
// while another member holds what that quorum committed (it would vote and
// take entries as if it had never seen them).
func (r *run) checkResumeTogether(a action, bad func(rule, what, format string, args ...any)) {
	w := r.w
	for _, name := range a.names {
		m := w.members[name]
		if m == nil || m.raftIndex == 0 || w.holdsData(name) {
			continue
		}
		for _, other := range sortedKeys(w.members) {
			if other != name && w.holdsData(other) {
				bad("C8", "makes a member that took part in a quorum again without its data",
					"makes %s again from the plan, without the data it had when a quorum committed, while %s holds that data", name, other)
				return
			}
		}
	}
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
	if p := w.pods[name]; p != nil && p.ctr == ctrUpgrading && !p.deleting() && !m.refused && !m.corrupt && !w.claimNodeLost(name) {
		bad("C1", "removes a member being upgraded", "removes member %s while the kubelet restarts it on its new image (an upgrade in place, not a failure)", name)
	}
	if !w.onClaims || w.claims[name] == nil || !w.claims[name].data || w.claims[name].nodeGone || w.claimNodeLost(name) || m.refused || m.corrupt {
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
	// An adopted cluster restarts no member (adoption.go), converted or
	// not, while a pod of the original's layout is there: C9 holds it.
	stuck, adopted := "", len(w.originalPods()) > 0
	for _, name := range sortedKeys(w.pods) {
		if p := w.pods[name]; p.deleting() && w.now.After(p.deadline.Add(terminatingGrace)) {
			stuck = name
		}
	}
	for _, name := range sortedKeys(w.members) {
		m := w.members[name]
		c := w.claims[name]
		if stuck == "" || adopted || !w.onClaims || c == nil || !c.data || c.nodeGone || w.claimNodeLost(name) || w.pods[name] != nil || m.refused || m.corrupt ||
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
