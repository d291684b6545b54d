package cluster

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// needEtcd returns the action that has to come first when a change needs the
// membership confirmed by etcd's leader in this pass: reading etcd, or
// waiting when it cannot be read.
func needEtcd(s *snapshot, what string) (action, bool) {
	switch {
	case s.etcd == nil:
		return readEtcd(what), true
	case s.etcd.err != nil:
		a := waiting(fmt.Sprintf("etcd cannot be asked before the change (%s): %v", what, s.etcd.err))
		a.backoff = true
		return a, true
	case !s.etcd.confirmed:
		a := waiting(fmt.Sprintf("etcd has no leader to confirm the membership before the change (%s)", what))
		a.backoff = true
		return a, true
	}
	return action{}, false
}

// readyForChange checks what etcd's strict reconfiguration check will before
// a member is added: every voting member's pod Ready, every voting member
// connected for etcd's health interval, a leader, a working quorum, and
// every voting member answering. The original tried anyway and lost a tick
// per member to etcd's refusal. Learners are left out, as etcd leaves them
// out: they count towards no quorum, and where etcd takes two, one still
// starting does not hold the next add back.
func readyForChange(s *snapshot, what string) (action, bool) {
	if q := s.quorum; q.ready < q.voters {
		return waiting(fmt.Sprintf("%d of %d voting members are ready; every one must be to %s", q.ready, q.voters, what)), true
	}
	if d := untilConnectedLongEnough(s); d > 0 {
		a := waiting("the newest member has not been connected for etcd's health interval")
		a.after = d
		return a, true
	}
	if a, ok := needEtcd(s, what); ok {
		return a, true
	}
	return everyMemberAnswers(s)
}

// readyForUpgrade checks what taking the next member down for its upgrade
// needs of the others: every pod Ready, a leader, a working quorum, and every
// member answering, following that leader and caught up with its log. A
// patch is no membership change, so etcd's health interval does not apply:
// a member restarted a moment ago that has caught up is what the next
// restart needs, and it gets there within a second or two, not five.
func readyForUpgrade(s *snapshot) (action, bool) {
	const what = "upgrade a member"
	if a, ok := everyMemberReady(s, what); ok {
		return a, true
	}
	if a, ok := needEtcd(s, what); ok {
		return a, true
	}
	if a, ok := everyMemberAnswers(s); ok {
		return a, true
	}
	h := s.etcd.health
	leader, ok := h.Member(h.LeaderID)
	if !ok {
		a := waiting(fmt.Sprintf("the leader %x is not in the member list", h.LeaderID))
		a.backoff = true
		return a, true
	}
	for _, m := range h.Members {
		if m.ID == leader.ID {
			continue
		}
		if m.Leader != leader.ID || leader.RaftIndex > m.RaftAppliedIndex+etcdutil.MaxTransfereeLag {
			a := waiting(fmt.Sprintf("member %s (%x) has not caught up with leader %s: it follows %x and applied %d of %d",
				m.Name, m.ID, leader.Name, m.Leader, m.RaftAppliedIndex, leader.RaftIndex))
			a.backoff = true
			return a, true
		}
	}
	return action{}, false
}

func everyMemberReady(s *snapshot, what string) (action, bool) {
	if ready := len(s.readyNames()); ready < len(s.views) {
		return waiting(fmt.Sprintf("%d of %d members are ready; every member must be to %s", ready, len(s.views), what)), true
	}
	return action{}, false
}

// everyMemberAnswers checks that every voting member answered etcd in this
// pass. A learner still starting counts towards no quorum and is left out:
// where etcd takes two, the next one is added meanwhile (an upgrade never
// runs with learners: step 14 comes first).
func everyMemberAnswers(s *snapshot) (action, bool) {
	for _, m := range s.etcd.health.Members {
		if m.Err != nil && !m.IsLearner {
			a := waiting(fmt.Sprintf("member %s (%x) does not answer etcd: %v", m.Name, m.ID, m.Err))
			a.backoff = true
			return a, true
		}
	}
	return action{}, false
}

// untilConnectedLongEnough is how long until every voting member's etcd has
// run for etcdHealthInterval, counted from its container's start (a little
// before it connects, so an add may still be refused once, and is then
// retried).
func untilConnectedLongEnough(s *snapshot) time.Duration {
	if s.quorum.voters <= 1 {
		// etcd counts itself as connected: a single member takes an add at once.
		return 0
	}
	var longest time.Duration
	for _, m := range s.views {
		if m.pod == nil || m.member.IsLearner {
			continue
		}
		if started := etcdStartedAt(m.pod); !started.IsZero() {
			longest = max(longest, started.Add(etcdHealthInterval).Sub(s.now))
		}
	}
	return longest
}

// etcdStartedAt is when the pod's etcd container started, zero when it does
// not run.
func etcdStartedAt(pod *corev1.Pod) time.Time {
	if st := k8sutil.EtcdContainerStatus(pod); st != nil && st.State.Running != nil {
		return st.State.Running.StartedAt.Time
	}
	return time.Time{}
}
