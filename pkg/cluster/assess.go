package cluster

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// assess lists what is wrong in a snapshot, most urgent first: the user's
// own mistakes, then what keeps etcd from serving, then what keeps a member
// from starting. It depends on the snapshot only, not on the action decided,
// so that a problem is reported on every pass it lasts (and announced once).
func assess(s *snapshot) []problem {
	var ps []problem
	ps = append(ps, s.specProblems...)
	if s.spec == nil {
		return ps
	}
	if s.serviceConflict != "" {
		ps = append(ps, newProblem(problemServiceConflict, "%s", s.serviceConflict))
	}
	if s.tlsProblem != nil {
		ps = append(ps, *s.tlsProblem)
	}
	ps = append(ps, s.certProblems...)
	if s.etcd != nil && s.etcd.err != nil {
		ps = append(ps, problemOf(etcdError("ask etcd for its health and membership", s.etcd.err)))
	}
	if p, ok := quorumProblem(s); ok {
		ps = append(ps, p)
	}
	if s.plan.refused != nil {
		ps = append(ps, *s.plan.refused)
	}
	if alarmed(s, etcdutil.AlarmNoSpace) {
		ps = append(ps, problem{kind: problemNoSpace, msg: alarmProblemMessage(s, etcdutil.AlarmNoSpace)})
	}
	if alarmed(s, etcdutil.AlarmCorrupt) {
		ps = append(ps, problem{kind: problemDataCorrupt, msg: alarmProblemMessage(s, etcdutil.AlarmCorrupt)})
	}
	ps = append(ps, adoptionProblems(s)...)
	ps = append(ps, startProblems(s)...)
	// Advisory last: what holds the cluster up is the more urgent.
	ps = append(ps, expiringCertificates(s.certs, s.now, s.spec.Spec.TLS)...)
	if p, ok := placementProblem(s); ok {
		ps = append(ps, p)
	}
	return ps
}

// alarmed tells whether an etcd alarm of type typ is active: as etcd said in
// this pass, or, when it was not asked, as the status last said.
func alarmed(s *snapshot, typ string) bool {
	if s.etcd != nil && s.etcd.err == nil {
		return s.etcd.hasAlarm(typ)
	}
	cond := map[string]api.ClusterConditionType{etcdutil.AlarmNoSpace: api.ClusterConditionNoSpace, etcdutil.AlarmCorrupt: api.ClusterConditionCorrupt}[typ]
	for _, c := range s.status.Conditions {
		if c.Type == cond {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func alarmProblemMessage(s *snapshot, typ string) string {
	if s.etcd != nil && s.etcd.err == nil {
		return alarmMessage(s, typ)
	}
	cond := map[string]api.ClusterConditionType{etcdutil.AlarmNoSpace: api.ClusterConditionNoSpace, etcdutil.AlarmCorrupt: api.ClusterConditionCorrupt}[typ]
	for _, c := range s.status.Conditions {
		if c.Type == cond {
			return c.Message
		}
	}
	return typ + " alarm"
}

// quorumProblem reports a cluster that served and cannot any more: no member
// running, or fewer than a quorum. A cluster that has not been available yet
// lost nothing; its Available condition says NotYetAvailable, and what keeps
// its members from starting is reported on its own.
func quorumProblem(s *snapshot) (problem, bool) {
	if s.phase != api.ClusterPhaseRunning || s.spec.Spec.Paused || s.beingDeleted || !s.everAvailable {
		return problem{}, false
	}
	if s.membership == nil {
		running, starting := 0, 0
		for _, pod := range s.pods {
			if m := s.viewPod(pod); m.state == memberRunning {
				running++
			} else if m.state == memberStarting {
				starting++
			}
		}
		if running > 0 || starting > 0 {
			return problem{}, false
		}
		if _, restarting := restartFromClaims(s); restarting {
			// Every member comes back on its claim.
			return problem{}, false
		}
		return newProblem(problemNoMembersRunning, "%s", noMembersMessage(s, len(s.pods)+len(s.terminating))), true
	}
	q := s.quorum
	switch {
	case q.voters == 0:
		return problem{}, false
	case q.up == 0 && q.starting == 0:
		return newProblem(problemNoMembersRunning, "%s", noMembersMessage(s, q.voters)), true
	case q.up+q.starting < q.needed:
		return newProblem(problemLostQuorum,
			"lost quorum: %d of %d members are up, %d are needed; nothing is removed or deleted while quorum is lost: bring the members back or restore the cluster from a backup with an EtcdRestore",
			q.up, q.voters, q.needed), true
	case q.up >= q.needed && q.ready < q.needed && s.etcd.leaderless():
		return newProblem(problemLostQuorum,
			"lost quorum: %d of %d members run but etcd has no leader and %d are ready: the members cannot reach each other (a network partition) or cannot write (a stalled disk); nothing is removed or deleted meanwhile",
			q.up, q.voters, q.ready), true
	}
	return problem{}, false
}

// noMembersMessage says what a cluster whose members are all down can still
// hope for.
func noMembersMessage(s *snapshot, n int) string {
	switch {
	case len(s.terminating) > 0 && len(s.pods) == 0:
		return fmt.Sprintf("no member is running: the pods of %d members are being deleted", len(s.terminating))
	case n == 0:
		return "no member pod exists; restore the cluster from a backup with an EtcdRestore"
	case s.usesClaims():
		return fmt.Sprintf("no member is running (all %d are down) and their data cannot be used again (their claims are gone, or they failed again after every restart in place): restore the cluster from a backup with an EtcdRestore", n)
	}
	return fmt.Sprintf("no member is running (all %d are down); their data was on emptyDir volumes and is gone: restore the cluster from a backup with an EtcdRestore", n)
}

// startProblems reports the member and joining pods that do not start, with
// the cause their status shows. Terminating pods are on their way out and
// not reported.
func startProblems(s *snapshot) []problem {
	var ps []problem
	report := func(what, name, trouble, cause string) {
		ps = append(ps, problem{kind: problemMemberNotStarting, topic: cause,
			msg: fmt.Sprintf("%s %s does not start: its pod %s", what, name, trouble)})
	}
	for _, name := range sortedKeys(s.views) {
		m := s.views[name]
		if m.trouble == "" || m.state == memberTerminating || m.state == memberRunning && m.ready {
			continue
		}
		what := "member"
		if e := s.upgradeExpect; e != nil && e.name == name {
			what = "member being upgraded to " + e.version + ","
		}
		report(what, name, m.trouble+volumeNodeHint(s, name), m.cause)
	}
	for _, name := range sortedKeys(s.joiners) {
		if t, c := podTroubleCause(s.joiners[name], s.claims[name], s.now); t != "" {
			report("joining member", name, t+antiAffinityHint(s, t), c)
		}
	}
	if s.membership == nil {
		for _, name := range sortedKeys(s.pods) {
			if t, c := podTroubleCause(s.pods[name], s.claims[name], s.now); t != "" {
				report("member", name, t, c)
			}
		}
	}
	for _, name := range sortedKeys(s.pods) {
		if pod := s.pods[name]; pod.Status.Phase == corev1.PodUnknown {
			ps = append(ps, problem{kind: problemMemberNotStarting, topic: "node does not answer " + name,
				msg: fmt.Sprintf("member %s may be down: the node %s of its pod does not answer; it is repaired once the node answers or the pod is gone", name, pod.Spec.NodeName)})
		}
	}
	for _, name := range sortedKeys(s.terminating) {
		if pod := s.terminating[name]; stuckTerminating(pod, s.now) {
			ps = append(ps, problem{kind: problemMemberNotStarting, topic: "pod stuck terminating " + name,
				msg: fmt.Sprintf("member %s does not start: %s", name, stuckMessage(pod))})
		}
	}
	return ps
}

// volumeNodeHint says, for a member that does not start, that whether its
// claim's volume is on a node that is gone could not be read: the member is
// then restarted in place, and waits for its node, rather than replaced.
func volumeNodeHint(s *snapshot, name string) string {
	for _, part := range strings.Split(s.volumeNodesUnknown, "; ") {
		if rest, ok := strings.CutPrefix(part, "claim "+name+": "); ok {
			return " (whether its volume is on a node that is gone is unknown: " + rest + ")"
		}
	}
	return ""
}

// viewPod is viewMember for a pod whose membership is not known.
func (s *snapshot) viewPod(pod interface{ GetName() string }) *memberView {
	m := *s.memberTemplate()
	m.Name = pod.GetName()
	return s.viewMember(&m)
}

// antiAffinityHint explains an unschedulable joining pod that the spec no
// longer keeps off other members' nodes: required pod anti-affinity works
// both ways, so the members made while spec.pod asked for one member per
// node keep every new member off their nodes until they are made again.
func antiAffinityHint(s *snapshot, trouble string) string {
	if !strings.Contains(trouble, "anti-affinity") || specAntiAffinity(s.spec.Spec.Pod) {
		return ""
	}
	var ruled []string
	for _, name := range sortedKeys(s.views) {
		if pod := s.views[name].pod; pod != nil && pod.Spec.Affinity != nil && pod.Spec.Affinity.PodAntiAffinity != nil &&
			len(pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			ruled = append(ruled, name)
		}
	}
	if len(ruled) == 0 {
		return ""
	}
	return fmt.Sprintf(" (members %s were made when spec.pod asked for one member per node, and that rule keeps new members off their nodes: %s)",
		strings.Join(ruled, ", "), remakeRuledAdvice(s))
}

// remakeRuledAdvice says how members made under an older spec.pod can be
// made again under the current one, as the cluster's storage allows: a
// member on a claim restarts with its data in a new pod, whereas a pod on an
// emptyDir volume takes its member's data with it, which the member made in
// its place copies from the others only while they keep a quorum.
func remakeRuledAdvice(s *snapshot) string {
	q := s.quorum
	switch {
	case s.usesClaims():
		return "add a node, or make those members again one at a time by deleting one's pod: it restarts on its claim, with its data, in a pod made from the current spec"
	case q.up-1 >= q.needed:
		return "add a node, or replace those members one at a time by deleting one's pod while every other member is ready: " +
			"its data is on an emptyDir volume and goes with the pod, and the member made in its place copies it from the others"
	}
	return "add a node. Do not delete their pods: their data is on emptyDir volumes, goes with the pod, and no other member holds enough of it to keep a quorum; " +
		"to make them again without a node, back the cluster up (EtcdBackup) and restore it (EtcdRestore)"
}

func specAntiAffinity(p *api.PodPolicy) bool {
	return p != nil && p.Affinity != nil && p.Affinity.PodAntiAffinity != nil &&
		len(p.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}
