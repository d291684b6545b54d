package cluster

import (
	"fmt"
	"strings"
)

// How a failure tells its history: the world's truth, what each pass saw
// of it, and the story step by step.

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
		if m.original {
			d += " (the original's)"
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
