package cluster

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/maintenance"
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
	// specProblems say why the newest spec is not in force, and what of it
	// is ignored.
	specProblems []problem
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
	// lastMembers are the members the status last listed: the membership as
	// it was known before an operator restart, when etcd cannot be asked.
	lastMembers []string
	// status is the status the server holds: the records of maintenance
	// (last compaction, last defragmentation of each member, the v2 entries
	// to outlive before 3.6) are read from it.
	status api.ClusterStatus
	// created is when the cluster was created.
	created time.Time
	// etcdReadAt is when this goroutine last read etcd's view; the day-2
	// care of a cluster at rest reads it every etcdObserveInterval.
	etcdReadAt time.Time

	// missingServices are the services to create; serviceConflict says why
	// one that exists cannot be used.
	missingServices []string
	serviceConflict string
	// tlsProblem is why the operator's etcd client TLS is not usable.
	tlsProblem *problem
	// certProblems are what is wrong with the certificates of the TLS
	// secrets: members given them would fail their handshakes.
	certProblems []problem
	// tlsSwitch is the stage of TLS of each member pod; nil without any.
	// holdClients: the user holds a switch before it drops a client
	// scheme (api.HoldClientsAnnotation).
	tlsSwitch   *tlsSwitchView
	holdClients bool
	// issued is what the secrets of issued TLS are; nil unless the
	// cluster's TLS is issued.
	issued *issuedView
	// certManager is what cert-manager's Certificates and secrets and the
	// operator's copies are; nil unless cert-manager issues the cluster's
	// certificates (then issued is nil).
	certManager *certManagerView
	// certs are the certificates of the TLS secrets, for their expiry.
	certs []etcdutil.Certificate
	// rotateRequest is the cluster's RotateCertificatesAnnotation: a
	// rotation of the issued certificates the user asked for.
	rotateRequest string
	// rotateCARequest is the cluster's rotateCAAnnotation: a CA rotation
	// the user asked for.
	rotateCARequest string
	// budgetsManaged is set when the operator manages PodDisruptionBudgets;
	// budget is the cluster's, nil when it has none.
	budgetsManaged bool
	budget         *policyv1.PodDisruptionBudget

	// adoption is what the pass sees of pods that coreos/etcd-operator
	// made; nil when the cluster has none. adoptionAnnounced is the
	// goroutine's record that their adoption was told.
	adoption          *adoptionView
	adoptionAnnounced bool

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
	// a member is named like it. claimsUnseen is set when the operator has
	// no view of claims at all: then no claim is known to be gone.
	claims       map[string]*corev1.PersistentVolumeClaim
	claimsUnseen bool
	// nodeZones are the zones of the nodes running members, by node, for
	// the nodes that have one; zonesUnknown says why some could not be read.
	nodeZones    map[string]string
	zonesUnknown string
	// volumeNodeGone maps each member whose claim's volume can only be used
	// on one node, read as deleted in this pass, to that node
	// (volumenode.go); volumeNodesUnknown says for which claims that could
	// not be read.
	volumeNodeGone     map[string]string
	volumeNodesUnknown string
	// nodesLost says, for each node read in this pass under
	// spec.pod.nodeLostAfterSeconds, why it counts as lost ("" when it does
	// not); nodesUnknown are the nodes that could not be read (nodelost.go).
	nodesLost    map[string]string
	nodesUnknown []string
	// podNodesNotReady are the nodes of live pods that are not Ready, or
	// could not be read, with why, read only for the disaster recovery
	// (readsPodNodes).
	podNodesNotReady map[string]string

	// The goroutine's records of its own recent actions.
	podExpect     *podExpectation
	upgradeExpect *upgradeExpectation
	failedUpgrade *failedUpgrade
	// replaced are the recent replacements of members, by cause.
	replaced map[string]replacement
	// recovering is the disaster recovery under way, if any.
	recovering *recovering
	// windowRestarts are the kubelet's restarts of each member's etcd
	// container within the repair ladder's window, by pod name, as the
	// goroutine counted them (restartWindows): a container's restartCount
	// counts the pod's whole life.
	windowRestarts map[string]int
	// quorumLoss is the goroutine's own record of the quorum it saw lost,
	// nil while it sees the quorum held.
	quorumLoss *quorumLoss

	// Derived by classify.

	// views are the member views (what the snapshot sees of each member) of
	// a known membership, by name.
	views map[string]*memberView
	// joiners are pods made for members not added yet, by name.
	joiners map[string]*corev1.Pod
	// strayPods are live pods of the cluster that are no member and no
	// joiner; strayClaims are claims that belong to no member, no pod and
	// no joiner. Both are empty while the membership is unknown.
	strayPods, strayClaims []string
	quorum                 quorumView
	plan                   versionPlan
	// versionMove is etcd's rules' verdict on moving the members to
	// spec.version, judged on the cluster version; set when members are to
	// be patched and etcd was read in this pass.
	versionMove *maintenance.VersionMove
	// learnerSlots is how many learners etcd takes in the membership at
	// once (countLearnerSlots).
	learnerSlots int
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
	// memberCrashing: the pod is there but its etcd has exited since it
	// started, and the kubelet restarts it (a crash, an OOM kill, a failed
	// liveness probe, an image it cannot pull after a patch).
	memberCrashing
)

var memberStateNames = map[memberState]string{
	memberRunning: "running", memberStarting: "starting", memberTerminating: "terminating",
	memberGone: "gone", memberFailed: "failed", memberCrashing: "crashing",
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
	// trouble is why its pod does not run, from the pod's own status, and
	// cause the part of it that stays the same when it happens again.
	trouble, cause string
	// claim is the member's PersistentVolumeClaim, nil when it has none.
	claim *corev1.PersistentVolumeClaim
	// restarts counts the member's restarts in place after failures in the
	// repair window: the operator's (on its claim, after a pod that ended)
	// and the kubelet's (of its container).
	restarts int
	// refused is the evidence that etcd refuses the member's data (its last
	// log lines), "" when there is none.
	refused string
	// dataGone is the evidence that the member's data went with a node
	// lost for good (volumenode.go), "" when there is none.
	dataGone string
	// repair is the step of the repair ladder the member is on.
	repair repairStep
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
	s.views = map[string]*memberView{}
	s.joiners = map[string]*corev1.Pod{}
	s.strayPods, s.strayClaims = nil, nil
	for _, name := range s.membership.Names() {
		s.views[name] = s.viewMember(s.membership[name])
	}
	if s.membership != nil {
		for _, name := range sortedKeys(s.pods) {
			pod := s.pods[name]
			switch _, member := s.views[name]; {
			case member:
			case k8sutil.WaitsForMembership(pod):
				s.joiners[name] = pod
			default:
				s.strayPods = append(s.strayPods, name)
			}
		}
		for _, name := range sortedKeys(s.claims) {
			_, member := s.views[name]
			_, live := s.pods[name]
			_, ending := s.terminating[name]
			expected := s.podExpect.has(name)
			if !member && !live && !ending && !expected {
				s.strayClaims = append(s.strayClaims, name)
			}
		}
	}
	s.quorum = s.countQuorum()
	if s.spec != nil {
		s.adoption = adoptionOf(s)
	}
	if s.spec != nil {
		s.plan = s.planVersions()
		s.judgeVersionMove()
	}
	s.learnerSlots = s.countLearnerSlots()
}

// withMembership is the snapshot as it would be with membership known:
// the one the end of a pass tells in the status, after an action changed
// the membership. The snapshot taken is not changed; a copy is classified.
func (s *snapshot) withMembership(known etcdutil.MemberSet) *snapshot {
	if known == nil {
		return s
	}
	after := *s
	after.membership = known
	after.classify()
	return &after
}

// judgeVersionMove asks etcd's rules about the move to spec.version once
// etcd's view is at hand: the cluster version decides what may move (one
// minor at a time up, 3.6 to 3.5 down through the downgrade API), and the
// move to 3.6 has preconditions of its own.
func (s *snapshot) judgeVersionMove() {
	s.versionMove = nil
	if len(s.plan.old) == 0 || s.plan.refused != nil || s.etcd == nil || !s.etcd.confirmed {
		return
	}
	var m api.MaintenanceStatus
	if s.status.Maintenance != nil {
		m = *s.status.Maintenance
	}
	until, _ := maintenance.TrackV2Entries(m, s.etcd.health)
	mv := maintenance.CheckVersionMove(maintenance.VersionMoveInput{
		Target:              s.spec.Spec.Version,
		Health:              s.etcd.health,
		ClusterVersion:      s.etcd.clusterVersion,
		V2EntriesUntilIndex: until,
		SnapshotCount:       maintenance.SnapshotCount(&s.spec.Spec, s.plan.current),
	})
	s.versionMove = &mv
	if mv.Kind == maintenance.MoveRefused {
		p := newProblem(problemUpgradeRefused, "upgrade refused: %s; nothing is patched until spec.version is changed", mv.Reason)
		s.plan.refused = &p
		// Nor replaced: a replacement would start on the refused version.
		s.plan.replace = nil
	}
}

func (s *snapshot) viewMember(m *etcdutil.Member) *memberView {
	v := &memberView{member: m, claim: s.claims[m.Name], restarts: s.claimRestarts(m.Name)}
	pod, live := s.pods[m.Name]
	switch {
	case !live && s.terminating[m.Name] != nil:
		v.pod, v.state = s.terminating[m.Name], memberTerminating
		if stuckTerminating(v.pod, s.now) {
			v.state = memberGone
		}
	case !live && s.podExpect.has(m.Name):
		v.state = memberStarting
	case !live:
		v.state = memberGone
	default:
		v.pod = pod
		v.version = runningVersion(pod)
		v.trouble, v.cause = podTroubleCause(pod, v.claim, s.now)
		v.refused = dataRefused(pod)
		v.state, v.ready = s.podState(pod)
		// The kubelet's restarts count within the ladder's window only:
		// restartCount counts the pod's whole life.
		v.restarts += s.windowRestarts[m.Name]
		if e := s.upgradeExpect; e != nil && e.name == m.Name && v.state == memberCrashing {
			// Patched on purpose: its container restarts on the new image.
			v.state = memberStarting
		}
	}
	v.dataGone = s.dataGoneWithNode(m.Name, v.state)
	if s.etcd.alarmFor(m.ID, etcdutil.AlarmCorrupt) {
		v.refused = "etcd raised a CORRUPT alarm for it: its data differs from the other members'"
	}
	v.repair = s.repairOf(v)
	return v
}

func (s *snapshot) countQuorum() quorumView {
	var q quorumView
	for _, m := range s.views {
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
		case m.state == memberStarting, m.repair == repairRestart:
			// A member restarted in place comes back with its data.
			q.starting++
		}
	}
	q.needed = q.voters/2 + 1
	return q
}

// names lists the members in one of the given states, sorted.
func (s *snapshot) names(states ...memberState) []string {
	var out []string
	for _, name := range sortedKeys(s.views) {
		if slices.Contains(states, s.views[name].state) {
			out = append(out, name)
		}
	}
	return out
}

// readyNames lists the members whose pod is Running and Ready, sorted.
func (s *snapshot) readyNames() []string {
	var out []string
	for _, name := range sortedKeys(s.views) {
		if m := s.views[name]; m.state == memberRunning && m.ready {
			out = append(out, name)
		}
	}
	return out
}

// allReady tells whether every member's pod is Running and Ready.
func (s *snapshot) allReady() bool { return len(s.readyNames()) == len(s.views) }

// usesClaims tells whether members keep their data on PersistentVolumeClaims.
func (s *snapshot) usesClaims() bool {
	return s.spec != nil && s.spec.Spec.Pod != nil && s.spec.Spec.Pod.PersistentVolumeClaimSpec != nil
}

// endpoints are the client URLs of voting members whose pod runs, ready
// ones first: a learner serves no linearizable request.
func (s *snapshot) endpoints() []string {
	var ready, running []string
	for _, name := range sortedKeys(s.views) {
		m := s.views[name]
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

// changeEndpoints are the client URLs a membership change about member
// changed is sent through: the leader's alone, when this pass read it and it
// is not that member, else every running voter but that member.
//
// etcd judges a change by the view of the member that receives it. Its strict
// reconfiguration check counts the voters that member has been connected to
// for its 5 s health interval: a member that joined a moment ago counts only
// itself and refuses every removal ("unhealthy cluster"), for instance the
// first steps of a scale-down right after a scale-up. A member asked to remove
// itself stops before it answers. The leader is connected to every member and
// proposes the change itself.
func (s *snapshot) changeEndpoints(changed string) []string {
	if s.etcd != nil && s.etcd.err == nil {
		for _, m := range s.etcd.health.Members {
			if m.ID == s.etcd.health.LeaderID && m.Err == nil && m.ClientURL != "" && m.Name != changed {
				return []string{m.ClientURL}
			}
		}
	}
	var eps []string
	for _, ep := range s.endpoints() {
		if v := s.views[changed]; v == nil || ep != v.member.ClientURL() {
			eps = append(eps, ep)
		}
	}
	if len(eps) == 0 {
		return s.endpoints()
	}
	return eps
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

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
