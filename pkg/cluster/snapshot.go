package cluster

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// snapshot is what one pass knows, taken at its start and never changed
// afterwards: the spec in force, etcd's membership, the pods and claims sorted
// out per member, the quorum and the version plan. decide, assess and the
// status read nothing else, so they are pure functions of it.
//
// observe fills the raw fields (the first block) from the informers' caches,
// the goroutine's own records and, when decide asks for it, from etcd;
// classify derives the rest.
type snapshot struct {
	now time.Time
	// spec is the spec in force, defaults filled in; nil while no spec was
	// ever valid.
	spec *api.EtcdCluster
	// specProblem is why the newest spec is not in force.
	specProblem *problem
	// phase, everAvailable and lastSize come from the status the server
	// holds: the phase is the hand-over signal of the restore operator, and
	// a cluster that was never available has no data to lose.
	phase         api.ClusterPhase
	everAvailable bool
	// beingDeleted is set when the EtcdCluster or its namespace is being
	// deleted: its pods go away on purpose.
	beingDeleted bool
	// pendingTimeout bounds a pod's start and a member's upgrade.
	pendingTimeout time.Duration

	// missingServices are the services to create; serviceConflict says why
	// one that exists cannot be used.
	missingServices []string
	serviceConflict string
	// tlsProblem is why the operator's etcd client TLS is not usable.
	tlsProblem *problem

	// membership is etcd's membership as this goroutine knows it; nil when
	// unknown (after a restart, a hand-over, an uncertain change).
	membership etcdutil.MemberSet
	// etcd is what etcd answered during this pass; nil when it was not
	// asked (a cluster at rest is never asked).
	etcd *etcdView

	// pods are the cluster's live pods by name; terminating are those being
	// deleted. Pods owned by anything else are not here at all.
	pods, terminating map[string]*corev1.Pod
	// claims are the cluster's PersistentVolumeClaims by name; the claim of
	// a member is named like it.
	claims map[string]*corev1.PersistentVolumeClaim

	// The goroutine's records of its own recent actions.
	podExpect     *podExpectation
	upgradeExpect *upgradeExpectation
	failedUpgrade *failedUpgrade

	// Derived by classify.

	// members are the members of a known membership, by name.
	members map[string]*memberView
	// joiners are pods made for members not added yet, by name.
	joiners map[string]*corev1.Pod
	// strayPods are live pods of the cluster that are no member and no
	// joiner; strayClaims are claims that belong to no member, no pod and
	// no joiner. Both are empty while the membership is unknown.
	strayPods, strayClaims []string
	quorum                 quorumView
	plan                   versionPlan
}

// etcdView is what etcd said in one pass.
type etcdView struct {
	// err is why etcd could not be asked; nothing else is set then.
	err error
	// health is every member's answer about itself.
	health etcdutil.Health
	// confirmed is set when the membership was read from the leader in this
	// pass: only then is it good enough for a change (etcd before 3.5 serves
	// member lists from the local member, which may lag).
	confirmed bool
}

// answers tells whether member id answered etcd's status call this pass.
func (e *etcdView) answers(id uint64) bool {
	if e == nil || e.err != nil {
		return false
	}
	for _, m := range e.health.Members {
		if m.ID == id {
			return m.Err == nil
		}
	}
	return false
}

// memberState is where a member's pod is.
type memberState int

const (
	// memberRunning: the pod is Running (Ready or not).
	memberRunning memberState = iota
	// memberStarting: the pod is Pending within the pending timeout, waits
	// for its membership, or was just created and is not in the cache yet.
	memberStarting
	// memberTerminating: the pod is being deleted.
	memberTerminating
	// memberGone: there is no pod.
	memberGone
	// memberFailed: the pod ended, its node is lost, or it has been Pending
	// longer than the pending timeout.
	memberFailed
)

var memberStateNames = map[memberState]string{
	memberRunning: "running", memberStarting: "starting", memberTerminating: "terminating",
	memberGone: "gone", memberFailed: "failed",
}

func (s memberState) String() string { return memberStateNames[s] }

// memberView is one member as the snapshot sees it.
type memberView struct {
	member *etcdutil.Member
	// pod is the member's live or terminating pod; nil when it has none.
	pod   *corev1.Pod
	state memberState
	ready bool
	// version is the etcd version its container runs, "" when unknown.
	version string
	// trouble is why its pod does not run, from the pod's own status.
	trouble string
}

// dead tells whether the member's pod will not run again by itself.
func (m *memberView) dead() bool {
	return m.state == memberGone || m.state == memberFailed || m.state == memberTerminating
}

// quorumView counts the voting members by the state of their pods.
type quorumView struct {
	voters, needed, up, ready, starting int
}

// held tells whether a quorum of voters runs: the condition for any change.
func (q quorumView) held() bool { return q.voters > 0 && q.up >= q.needed }

// classify derives the member views, joiners, strays, quorum and version plan
// from the raw fields.
func (s *snapshot) classify() {
	s.members = map[string]*memberView{}
	s.joiners = map[string]*corev1.Pod{}
	s.strayPods, s.strayClaims = nil, nil
	for _, name := range s.membership.Names() {
		s.members[name] = s.viewMember(s.membership[name])
	}
	if s.membership != nil {
		for _, name := range sortedKeys(s.pods) {
			pod := s.pods[name]
			switch _, member := s.members[name]; {
			case member:
			case k8sutil.WaitsForMembership(pod):
				s.joiners[name] = pod
			default:
				s.strayPods = append(s.strayPods, name)
			}
		}
		for _, name := range sortedKeys(s.claims) {
			_, member := s.members[name]
			_, live := s.pods[name]
			_, ending := s.terminating[name]
			expected := s.podExpect != nil && s.podExpect.name == name
			if !member && !live && !ending && !expected {
				s.strayClaims = append(s.strayClaims, name)
			}
		}
	}
	s.quorum = s.countQuorum()
	if s.spec != nil {
		s.plan = s.planVersions()
	}
}

func (s *snapshot) viewMember(m *etcdutil.Member) *memberView {
	v := &memberView{member: m}
	pod, live := s.pods[m.Name]
	if !live {
		if p, ok := s.terminating[m.Name]; ok {
			v.pod, v.state = p, memberTerminating
			return v
		}
		v.state = memberGone
		if s.podExpect != nil && s.podExpect.name == m.Name {
			v.state = memberStarting
		}
		return v
	}
	v.pod = pod
	v.version = runningVersion(pod)
	v.trouble = podTrouble(pod, s.claims[m.Name])
	switch {
	case pod.Status.Phase == corev1.PodRunning:
		v.state = memberRunning
		v.ready = k8sutil.IsPodReady(pod)
	case pod.Status.Phase == corev1.PodPending &&
		// A pod that waited for its member to be added may be older than
		// the timeout, but starts etcd a moment after the add; its own
		// timeout fails it otherwise.
		(!k8sutil.IsPodPendingTooLong(pod, s.now, s.pendingTimeout) || k8sutil.IsWaitingForMembership(pod)),
		pod.Status.Phase == "":
		v.state = memberStarting
	default:
		v.state = memberFailed
	}
	return v
}

func (s *snapshot) countQuorum() quorumView {
	var q quorumView
	for _, m := range s.members {
		if m.member.IsLearner {
			continue
		}
		q.voters++
		switch {
		case m.state == memberRunning:
			q.up++
			if m.ready {
				q.ready++
			}
		case m.state == memberStarting:
			q.starting++
		}
	}
	q.needed = q.voters/2 + 1
	return q
}

// names lists the members in one of the given states, sorted.
func (s *snapshot) names(states ...memberState) []string {
	var out []string
	for _, name := range sortedKeys(s.members) {
		if slices.Contains(states, s.members[name].state) {
			out = append(out, name)
		}
	}
	return out
}

// readyNames lists the members whose pod is Running and Ready, sorted.
func (s *snapshot) readyNames() []string {
	var out []string
	for _, name := range sortedKeys(s.members) {
		if m := s.members[name]; m.state == memberRunning && m.ready {
			out = append(out, name)
		}
	}
	return out
}

// allReady tells whether every member's pod is Running and Ready.
func (s *snapshot) allReady() bool { return len(s.readyNames()) == len(s.members) }

// usesClaims tells whether members keep their data on PersistentVolumeClaims.
func (s *snapshot) usesClaims() bool {
	return s.spec != nil && s.spec.Spec.Pod != nil && s.spec.Spec.Pod.PersistentVolumeClaimSpec != nil
}

// endpoints are the client URLs of voting members whose pod runs, ready
// ones first: a learner serves no linearizable request.
func (s *snapshot) endpoints() []string {
	var ready, running []string
	for _, name := range sortedKeys(s.members) {
		m := s.members[name]
		if m.state != memberRunning || m.member.IsLearner {
			continue
		}
		if m.ready {
			ready = append(ready, m.member.ClientURL())
		} else {
			running = append(running, m.member.ClientURL())
		}
	}
	return append(ready, running...)
}

// runningPodEndpoints are the client URLs of every running pod of the
// cluster, for reading a membership that is not known yet.
func runningPodEndpoints(template etcdutil.Member, pods map[string]*corev1.Pod) []string {
	var eps []string
	for _, name := range sortedKeys(pods) {
		if pods[name].Status.Phase == corev1.PodRunning {
			m := template
			m.Name = name
			eps = append(eps, m.ClientURL())
		}
	}
	return eps
}

// podTrouble says why a pod does not run, from what its status and its claim
// show: the scheduler's message, a claim that is not bound, a container that
// waits for something that will not come by itself (an image that cannot be
// pulled, a configuration error) or that ended. It reads as the rest of a
// sentence starting with the pod ("pod x cannot be scheduled: ..."); "" when
// the pod shows nothing wrong.
func podTrouble(pod *corev1.Pod, claim *corev1.PersistentVolumeClaim) string {
	if pod.Status.Reason != "" && pod.Status.Phase == corev1.PodFailed {
		// Evicted, NodeLost, OutOfpods and the like.
		return fmt.Sprintf("failed: %s: %s", pod.Status.Reason, pod.Status.Message)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "cannot be scheduled: " + c.Message
		}
	}
	if claim != nil && claim.Status.Phase == corev1.ClaimPending {
		return fmt.Sprintf("waits for its PersistentVolumeClaim %s, which is Pending (no volume bound: check its storage class and provisioner)", claim.Name)
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, st := range statuses {
			if msg := containerTrouble(st); msg != "" {
				return "has its container " + st.Name + " " + msg
			}
		}
	}
	return ""
}

// containerTrouble describes a container that waits for something that does
// not come by itself, or that ended with an error.
func containerTrouble(st corev1.ContainerStatus) string {
	switch {
	case st.State.Waiting != nil:
		switch st.State.Waiting.Reason {
		case "", "ContainerCreating", "PodInitializing":
			return ""
		}
		msg := "is waiting: " + st.State.Waiting.Reason
		if st.State.Waiting.Message != "" {
			msg += ": " + st.State.Waiting.Message
		}
		return msg
	case st.State.Terminated != nil && st.State.Terminated.ExitCode != 0:
		return "ended: " + terminationSummary(st.State.Terminated)
	}
	return ""
}

// terminationSummary is the evidence a container left when it ended: exit
// code, reason and the end of its termination message, which for etcd holds
// the last lines of its log (terminationMessagePolicy FallbackToLogsOnError).
func terminationSummary(t *corev1.ContainerStateTerminated) string {
	msg := fmt.Sprintf("exit code %d", t.ExitCode)
	if t.Reason != "" {
		msg += " (" + t.Reason + ")"
	}
	if t.Message != "" {
		msg += ": " + lastChars(t.Message, 400)
	}
	return msg
}

func lastChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
