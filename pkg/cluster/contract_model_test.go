package cluster

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// The world of the contract checker (contract_test.go): a cluster as it
// truly is — etcd's membership, leader and raft indexes, the pods and claims
// with what their volumes hold, the status the API server stores — and the
// operator's goroutine with its records in memory. Events change the world;
// each pass observes it as observe does (observeWorld), decides, and the
// world carries the action out as act would. The ground truth the contract is
// judged by (which members hold data, whether the cluster ever served, the
// leader, the restarts within the ladder's window) lives here, never in the
// snapshot.

// world is one cluster and its operator.
type world struct {
	now     time.Time
	created time.Time
	// downed is the member the last action took down on purpose, for the
	// status the pass writes (outcome.downed).
	downed string

	// The spec: size, claims or emptyDir, opt-in disaster recovery.
	size                 int
	onClaims             bool
	recovery, fromBackup bool
	version              string
	generation           int64
	spec                 *api.EtcdCluster

	// etcd as it is.
	members map[string]*wmember
	// leader is the member that leads, "" while etcd has no leader.
	leader string
	// partitioned: the members cannot reach each other (peer network), so
	// etcd has no leader however many run.
	partitioned bool
	// reachable: the operator can reach the members (a NetworkPolicy or a
	// certificate can keep it out).
	reachable bool
	commit    uint64
	// served: etcd had a leader with a member pod Ready behind the client
	// service, so clients may have stored data.
	served bool
	// leaderLostAt is when etcd last lost its leader (zero while it has one);
	// leaderlessReads are the operator's reads of etcd since then, all of
	// which found no leader.
	leaderLostAt    time.Time
	leaderlessReads []time.Time

	// The cluster's pods (live and terminating) and claims, by name.
	pods   map[string]*wpod
	claims map[string]*wclaim

	// server is the status the API server stores; stores tells whether it
	// stores what is written (see Cluster.unstored).
	server api.ClusterStatus
	stores bool

	// op is the operator's goroutine; down, while the operator is not
	// running (no pass happens until it comes back, with a fresh memory).
	op   *Cluster
	down bool
	// addReplyLost: etcd takes the next add, but its reply is lost.
	addReplyLost bool
	// restored: the restore operator was asked to restore the cluster; the
	// history ends there.
	restored bool
	// displaced are the members of a cluster that served, with their data,
	// that a new seed took the place of.
	displaced []string
	// names and podsMade count the members named and the pods made, for
	// names and UIDs.
	names, podsMade int
}

// wmember is a member of etcd.
type wmember struct {
	name      string
	learner   bool
	started   bool
	raftIndex uint64
	// refused: etcd refuses its data directory (corrupt WAL or database);
	// corrupt: etcd raised a CORRUPT alarm for it.
	refused, corrupt bool
	// restarts are when it was restarted after failing: by the kubelet in
	// its pod, or by the operator in a new pod on its claim. Restarts of
	// an upgrade in place are not failures and are not here, nor are
	// restarts of a member whose pod was only deleted (by a user, a drain,
	// every pod deleted at once) or never started.
	restarts []time.Time
	// failed: its pod ended (Failed, evicted by the kubelet) or its etcd
	// exited, and it has not been restarted since: its next restart is
	// one after a failure.
	failed bool
}

// wpod is a pod of the cluster.
type wpod struct {
	name string
	// obj is the pod as the operator made it; its status is written from
	// the fields below at each observation.
	obj   *corev1.Pod
	phase corev1.PodPhase
	// evicted: a Failed pod the kubelet evicted.
	evicted bool
	ctr     ctrState
	// restartCount is its etcd container's, over the pod's whole life.
	restartCount int32
	lastExit     *corev1.ContainerStateTerminated
	startedAt    time.Time
	image        string
	// deadline is the pod's deletion timestamp, zero while it is not being
	// deleted.
	deadline time.Time
	// nodeLost: its node does not answer; unknownPhase makes the pod show
	// phase Unknown (else it stays Running, not ready).
	nodeLost, unknownPhase bool
	// etcdRuns: its etcd truly runs (a pod on a lost node may still run it).
	etcdRuns bool
	// joiner: made before its member was added, held by wait-membership;
	// dnsDone once its check-dns found its name.
	joiner, dnsDone bool
	forced          bool
	// data: its emptyDir holds its member's data.
	data bool
}

func (p *wpod) deleting() bool { return !p.deadline.IsZero() }

// ctrState is where a pod's etcd container is.
type ctrState int

const (
	ctrNone      ctrState = iota // not started (Pending)
	ctrRunning                   // runs
	ctrCrashLoop                 // exited, the kubelet waits to restart it
	ctrUpgrading                 // stopped by a patch, the new image not running yet
	ctrExited                    // the pod ended
)

// wclaim is a claim of the cluster; data tells whether it holds a member's
// data (its member's etcd ran on it).
type wclaim struct {
	obj  *corev1.PersistentVolumeClaim
	data bool
}

// worldConfig is how a history starts: a healthy cluster at rest that has
// run for a month.
type worldConfig struct {
	size                 int
	claims               bool
	recovery, fromBackup bool
	// neverStored: the API server never stored the status (a role without
	// etcdclusters/status): the operator keeps it in memory only.
	neverStored bool
	// lifetimeRestarts are the restarts of each initial member's container
	// over its month of life, by member index.
	lifetimeRestarts [5]int32
	// warm: the operator has run beside the cluster (it knows the
	// membership); else it has just started.
	warm bool
	// fresh: the cluster was just created: no member, pod or claim yet.
	fresh bool
}

func (c worldConfig) String() string {
	s := fmt.Sprintf("%d member(s) on ", c.size)
	if c.fresh {
		s = fmt.Sprintf("a new cluster of %d member(s) on ", c.size)
	}
	if c.claims {
		s += "claims"
	} else {
		s += "emptyDir"
	}
	switch {
	case c.recovery && c.fromBackup:
		s += ", disaster recovery on (from backups too)"
	case c.recovery:
		s += ", disaster recovery on"
	}
	if c.neverStored {
		s += ", the status never stored by the server"
	}
	switch {
	case c.fresh:
		return s
	case c.warm:
		s += ", the operator knowing the membership"
	default:
		s += ", the operator just started"
	}
	for i, n := range c.lifetimeRestarts[:c.size] {
		if n > 0 {
			s += fmt.Sprintf(", %s restarted %d times over its month", initialNames[i], n)
		}
	}
	return s
}

var initialNames = []string{memberA, memberB, memberC, memberD, memberE}

const (
	upgradeVersion = "3.5.22"
	// userGrace is a pod's grace period when a user deletes it.
	userGrace = 30 * time.Second
	month     = 30 * 24 * time.Hour
)

func newWorld(cfg worldConfig) *world {
	w := &world{
		now:        testStart,
		created:    testStart.Add(-month),
		size:       cfg.size,
		onClaims:   cfg.claims,
		recovery:   cfg.recovery,
		fromBackup: cfg.fromBackup,
		version:    testVersion,
		generation: 1,
		members:    map[string]*wmember{},
		reachable:  true,
		pods:       map[string]*wpod{},
		claims:     map[string]*wclaim{},
		stores:     !cfg.neverStored,
		served:     true,
	}
	w.buildSpec()
	if cfg.fresh {
		w.served = false
		w.op = newModelOperator(w)
		return w
	}
	var ready []string
	for i, name := range initialNames[:cfg.size] {
		m := &wmember{name: name, started: true}
		w.members[name] = m
		if w.onClaims {
			w.claims[name] = w.newClaim(name, w.version)
			w.claims[name].data = true
		}
		mm := w.member(name)
		p := w.newPod(name, k8sutil.NewEtcdPod(w.spec, mm, w.version, etcdutil.NewMemberSet(mm).PeerURLPairs(), k8sutil.ClusterStateExisting, ""))
		p.obj.CreationTimestamp = metav1.NewTime(w.created)
		p.phase, p.ctr, p.etcdRuns, p.data = corev1.PodRunning, ctrRunning, true, !w.onClaims
		p.startedAt, p.image = w.created, p.obj.Spec.Containers[0].Image
		if n := cfg.lifetimeRestarts[i]; n > 0 {
			p.restartCount = n
			p.lastExit = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
			p.startedAt = w.now.Add(-month / 2)
			for j := int32(0); j < n; j++ {
				m.restarts = append(m.restarts, w.created.Add(time.Duration(j+1)*24*time.Hour))
			}
		}
		ready = append(ready, name)
	}
	w.leader = initialNames[0]
	if !cfg.neverStored {
		at := w.created.Format(time.RFC3339)
		w.server = api.ClusterStatus{
			Phase: api.ClusterPhaseRunning,
			Size:  cfg.size,
			Conditions: []api.ClusterCondition{{Type: api.ClusterConditionAvailable, Status: corev1.ConditionTrue,
				Reason: reasonClusterAvailable, LastTransitionTime: at, LastUpdateTime: at}},
			Members: api.MembersStatus{Ready: ready},
		}
	}
	w.op = newModelOperator(w)
	if cfg.warm {
		ms := etcdutil.MemberSet{}
		for name := range w.members {
			ms.Add(w.member(name))
		}
		w.op.knownMembership.learn(ms)
		w.op.etcdReadAt = w.now.Add(-30 * time.Second)
	}
	if cfg.neverStored {
		// The operator that made the cluster kept its status in memory.
		st := api.ClusterStatus{Phase: api.ClusterPhaseRunning, Size: cfg.size, Members: api.MembersStatus{Ready: ready}}
		w.op.unstored = &st
	}
	w.settle()
	return w
}

// newModelOperator is the operator's goroutine as it starts: nothing in
// memory. Only the fields the passes read are set; passes are driven by the
// checker, not by the goroutine's loop.
func newModelOperator(w *world) *Cluster {
	log := logrus.New()
	log.SetOutput(io.Discard)
	log.SetLevel(logrus.PanicLevel)
	return &Cluster{
		cfg: Config{
			PendingTimeout:     DefaultPendingTimeout,
			ExpectationTimeout: DefaultExpectationTimeout,
			MembershipWait:     k8sutil.MembershipWait{Image: testJoinImage, PullPolicy: corev1.PullIfNotPresent, Timeout: DefaultPendingTimeout},
		},
		log:            logrus.NewEntry(log),
		name:           testName,
		namespace:      testNS,
		now:            func() time.Time { return w.now },
		replaced:       map[string]replacement{},
		announced:      map[string]announcement{},
		restartWindows: map[string]restartWindow{},
	}
}

func (w *world) buildSpec() {
	cl := newTestCluster(withSize(w.size), withVersion(w.version))
	cl.Generation = w.generation
	if w.onClaims {
		withPVC(cl)
	}
	if w.recovery {
		cl.Spec.DisasterRecovery = &api.DisasterRecoveryPolicy{Enabled: true, FromBackup: w.fromBackup}
	}
	w.spec = cl.WithDefaults()
}

// object is the EtcdCluster as the API server holds it, as far as the
// passes read it (Cluster.status): its status. Nothing changes it in place:
// statusOf works on a copy.
func (w *world) object() *api.EtcdCluster {
	return &api.EtcdCluster{Status: w.server}
}

// member is the etcd member called name, as the operator names it.
func (w *world) member(name string) *etcdutil.Member {
	m := memberTemplate(w.spec)
	m.Name, m.ID = name, memberID(name)
	return &m
}

func (w *world) newName() string {
	w.names++
	return fmt.Sprintf("%s-n%03d", testName, w.names)
}

func (w *world) newPod(name string, obj *corev1.Pod) *wpod {
	w.podsMade++
	obj.UID = types.UID(fmt.Sprintf("pod-uid-%s-%d", name, w.podsMade))
	obj.CreationTimestamp = metav1.NewTime(w.now)
	p := &wpod{name: name, obj: obj, phase: corev1.PodPending, joiner: k8sutil.WaitsForMembership(obj), forced: k8sutil.IsForcedNewCluster(obj)}
	w.pods[name] = p
	return p
}

func (w *world) newClaim(name, version string) *wclaim {
	pvc := k8sutil.NewEtcdPVC(w.spec, name, version)
	pvc.Status.Phase = corev1.ClaimBound
	c := &wclaim{obj: pvc}
	w.claims[name] = c
	return c
}

// runsEtcd tells whether member name's etcd truly runs.
func (w *world) runsEtcd(name string) bool {
	p := w.pods[name]
	return p != nil && p.etcdRuns && w.members[name] != nil
}

// holdsData tells whether member name's data truly exists: on its claim, or
// in the emptyDir of its pod.
func (w *world) holdsData(name string) bool {
	if c := w.claims[name]; c != nil && w.onClaims && c.data {
		return true
	}
	p := w.pods[name]
	return p != nil && p.data
}

// voters are etcd's voting members, sorted.
func (w *world) voters() []string {
	var out []string
	for _, name := range sortedKeys(w.members) {
		if !w.members[name].learner {
			out = append(out, name)
		}
	}
	return out
}

// restartsWithin counts member name's restarts after failures within d.
func (w *world) restartsWithin(name string, d time.Duration) int {
	n := 0
	if m := w.members[name]; m != nil {
		for _, t := range m.restarts {
			if w.now.Sub(t) < d {
				n++
			}
		}
	}
	return n
}

// settle brings etcd's state in line with the pods: a quorum of voters
// whose etcd runs elects a leader, commits, and writes its data on the
// members that run.
func (w *world) settle() {
	voters, running := w.voters(), 0
	for _, name := range voters {
		if w.runsEtcd(name) {
			running++
		}
	}
	if !w.partitioned && len(voters) > 0 && running >= len(voters)/2+1 {
		if w.leader == "" || !w.runsEtcd(w.leader) || w.members[w.leader].learner {
			w.leader = ""
			for _, name := range voters {
				if w.runsEtcd(name) {
					w.leader = name
					break
				}
			}
		}
		w.commit++
		for name, m := range w.members {
			if !w.runsEtcd(name) {
				continue
			}
			m.raftIndex, m.started = w.commit, true
			if c := w.claims[name]; c != nil {
				c.data = true
			}
			if p := w.pods[name]; !w.onClaims {
				p.data = true
			}
			if w.podReady(w.pods[name]) {
				w.served = true
			}
		}
		w.leaderLostAt, w.leaderlessReads = time.Time{}, nil
		return
	}
	if w.leader != "" {
		w.leaderLostAt = w.now
	}
	w.leader = ""
}

// podReady is the pod's readiness probe: etcd runs in it and has a leader.
func (w *world) podReady(p *wpod) bool {
	return p != nil && p.phase == corev1.PodRunning && !p.nodeLost && p.ctr == ctrRunning && p.etcdRuns &&
		w.leader != "" && w.members[p.name] != nil && !p.deleting()
}

// podObject is the pod as the informer's cache shows it now.
func (w *world) podObject(p *wpod) *corev1.Pod {
	obj := p.obj
	obj.DeletionTimestamp = nil
	if p.deleting() {
		ts := metav1.NewTime(p.deadline)
		obj.DeletionTimestamp = &ts
	}
	st := corev1.PodStatus{Phase: p.phase}
	if p.nodeLost && p.unknownPhase {
		st.Phase = corev1.PodUnknown
	}
	ready := w.podReady(p)
	if p.joiner {
		dns := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		if p.dnsDone || p.phase != corev1.PodPending {
			dns = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
		}
		st.InitContainerStatuses = []corev1.ContainerStatus{{Name: k8sutil.DNSCheckContainerName, State: dns}}
		if p.dnsDone || p.phase != corev1.PodPending {
			wait := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
			if p.phase != corev1.PodPending {
				wait = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
			}
			st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{Name: k8sutil.MembershipWaitContainerName, State: wait})
		}
	}
	if p.phase != corev1.PodPending {
		cond := corev1.ConditionFalse
		if ready {
			cond = corev1.ConditionTrue
		}
		st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}
		cs := corev1.ContainerStatus{Name: k8sutil.EtcdContainerName, Image: p.image, Ready: ready, RestartCount: p.restartCount}
		if p.lastExit != nil {
			cs.LastTerminationState = corev1.ContainerState{Terminated: p.lastExit}
		}
		switch p.ctr {
		case ctrRunning:
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(p.startedAt)}}
		case ctrCrashLoop:
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}}
		case ctrUpgrading:
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
		case ctrExited:
			exit := p.lastExit
			if exit == nil {
				exit = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}
			}
			cs.State = corev1.ContainerState{Terminated: exit}
		}
		st.ContainerStatuses = []corev1.ContainerStatus{cs}
	}
	if p.evicted {
		st.Reason, st.Message = "Evicted", "The node was low on resource: memory."
	}
	obj.Status = st
	return obj
}

// observeWorld is the snapshot a pass of the operator takes of the world,
// built as observe builds it: the status the operator goes on from, the
// informers' caches, the goroutine's records and, withEtcd, etcd's view;
// then classified. It is the one place that fills the snapshot's raw fields.
func observeWorld(w *world, withEtcd bool) *snapshot {
	c := w.op
	c.latest = w.object()
	st := c.status()
	s := &snapshot{
		now:            w.now,
		spec:           w.spec,
		pendingTimeout: c.cfg.PendingTimeout,
		phase:          st.Phase,
		lastMembers:    append(slices.Clone(st.Members.Ready), st.Members.Unready...),
		status:         *st.DeepCopy(),
		created:        w.created,
		etcdReadAt:     c.etcdReadAt,
		pods:           map[string]*corev1.Pod{},
		terminating:    map[string]*corev1.Pod{},
		claims:         map[string]*corev1.PersistentVolumeClaim{},
	}
	for _, name := range sortedKeys(w.pods) {
		p := w.pods[name]
		if p.deleting() {
			s.terminating[name] = w.podObject(p)
		} else {
			s.pods[name] = w.podObject(p)
		}
	}
	if w.onClaims {
		for name, cl := range w.claims {
			s.claims[name] = cl.obj
		}
	}
	c.takeRecords(s)
	s.membership = c.knownMembership.known()
	if withEtcd {
		s.etcd = w.readEtcd(s)
	}
	c.classify(s)
	return s
}

// readEtcd is observeEtcd against the world: every member's health through
// the running member pods, then the membership from the leader.
func (w *world) readEtcd(s *snapshot) *etcdView {
	c := w.op
	tmpl := memberTemplate(s.spec)
	if len(runningVoterEndpoints(tmpl, s.membership, s.pods)) == 0 {
		return &etcdView{err: fmt.Errorf("no member pod runs")}
	}
	if !w.reachable || !w.anyReachableRuns() {
		return &etcdView{err: errors.New("cluster health: context deadline exceeded")}
	}
	c.etcdReadAt = w.now
	var h etcdutil.Health
	var leaderID uint64
	if w.leader != "" {
		leaderID = memberID(w.leader)
	}
	for _, name := range sortedKeys(w.members) {
		m := w.members[name]
		mm := w.member(name)
		mh := etcdutil.MemberHealth{ID: mm.ID, IsLearner: m.learner, PeerURLs: []string{mm.PeerURL()}}
		switch {
		case !m.started:
			mh.Err = errors.New("member has not started: it advertises no client URL")
		case !w.runsEtcd(name):
			mh.Name, mh.ClientURL = name, mm.ClientURL()
			mh.Err = errors.New("connection refused")
		default:
			mh.Name, mh.ClientURL = name, mm.ClientURL()
			mh.Version = imageVersion(w.pods[name].image)
			mh.Leader = leaderID
			mh.RaftIndex, mh.RaftAppliedIndex = m.raftIndex, m.raftIndex
		}
		h.Members = append(h.Members, mh)
		if m.corrupt {
			h.Alarms = append(h.Alarms, etcdutil.Alarm{MemberID: mm.ID, Type: etcdutil.AlarmCorrupt})
		}
	}
	for i := range h.Members {
		if h.Members[i].Err == nil {
			h.Members[i].Alarms = slices.Clone(h.Alarms)
		}
	}
	view := &etcdView{health: h}
	if w.leader == "" {
		w.leaderlessReads = append(w.leaderlessReads, w.now)
		if s.membership == nil {
			if ms, err := etcdutil.MembersFromEtcd(membersOf(h), tmpl); err == nil {
				s.membership = ms
			}
		}
		return view
	}
	h.LeaderID, h.Linearizable = leaderID, true
	view.health = h
	ms, _ := etcdutil.MembersFromEtcd(membersOf(h), tmpl)
	c.knownMembership.learn(ms)
	s.membership = ms
	view.confirmed = true
	view.clusterVersion = "3.5.0"
	return view
}

// anyReachableRuns tells whether any member's etcd runs to answer.
func (w *world) anyReachableRuns() bool {
	for name := range w.members {
		if w.runsEtcd(name) {
			return true
		}
	}
	return false
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

// exitContainer makes the pod's etcd exit; the kubelet restarts it later.
func (w *world) exitContainer(p *wpod, exit *corev1.ContainerStateTerminated) {
	p.phase, p.ctr, p.etcdRuns, p.lastExit = corev1.PodRunning, ctrCrashLoop, false, exit
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
		if w.onClaims && w.claims[p.name] == nil {
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

// The operator's side: what act does, carried out on the world.

// act carries out action a decided on s, as Cluster.act does, and returns
// the phase it sets and the error that ends the pass.
func (w *world) act(s *snapshot, a action) (api.ClusterPhase, error) {
	c := w.op
	switch a.kind {
	case actRecordCreating:
		return api.ClusterPhaseCreating, nil
	case actSeed:
		name := a.member
		if name == "" {
			name = w.newName()
		}
		m := memberTemplate(s.spec)
		m.Name = name
		members := etcdutil.NewMemberSet(&m)
		resumed := w.onClaims && w.claims[name] != nil && w.claims[name].data
		if w.onClaims && w.claims[name] == nil {
			w.newClaim(name, a.version)
		}
		w.createPod(k8sutil.NewEtcdPod(s.spec, &m, a.version, members.PeerURLPairs(), k8sutil.ClusterStateNew, "token"))
		c.knownMembership.learn(members)
		if resumed {
			// etcd finds the data its predecessor wrote on the claim and
			// starts as that member: the same cluster goes on.
			return api.ClusterPhaseRunning, nil
		}
		for old := range w.members {
			if w.holdsData(old) {
				w.displaced = append(w.displaced, old)
			}
		}
		w.members = map[string]*wmember{name: {name: name}}
		w.leader, w.served, w.leaderLostAt, w.leaderlessReads = "", false, time.Time{}, nil
		return api.ClusterPhaseRunning, nil
	case actAdopt:
		c.knownMembership.forget()
		return api.ClusterPhaseRunning, nil
	case actReseed:
		if a.member != "" {
			w.deletePod(a.member, time.Duration(podDeleteGracePeriod)*time.Second)
			// The claim stays for the next seed; what etcd wrote on it
			// stays its data.
			if cl := w.claims[a.member]; cl == nil || !cl.data {
				delete(w.members, a.member)
			}
		}
		for _, name := range sortedKeys(s.pods) {
			if name != a.member && k8sutil.WaitsForMembership(s.pods[name]) && s.membership[name] == nil {
				w.deletePod(name, time.Duration(podDeleteGracePeriod)*time.Second)
				delete(w.claims, name)
			}
		}
		if a.member != "" && w.claims[a.member] != nil {
			m := memberTemplate(s.spec)
			m.Name = a.member
			c.knownMembership.learn(etcdutil.NewMemberSet(&m))
		} else {
			c.knownMembership.forget()
		}
		return api.ClusterPhaseCreating, nil
	case actDeleteStrayPod, actDeleteFailedPod:
		if m := s.views[a.member]; a.kind == actDeleteFailedPod && m != nil && m.pod != nil && k8sutil.IsForcedNewCluster(m.pod) {
			c.recovering = &recovering{member: a.member, started: w.now, flagRemoved: true}
		}
		if a.kind == actDeleteFailedPod {
			w.downed = a.member
			if a.failure {
				c.noteEndedPod(a.member)
			}
		}
		w.deletePod(a.member, time.Duration(podDeleteGracePeriod)*time.Second)
	case actDeleteJoiner:
		w.deletePod(a.member, time.Duration(podDeleteGracePeriod)*time.Second)
		delete(w.claims, a.member)
	case actDeleteStrayClaim:
		delete(w.claims, a.member)
	case actRemoveDeadMember, actRemoveMember:
		return "", w.removeMember(s, a)
	case actRestartMembers:
		return "", w.restartMembers(s, a)
	case actPromoteLearner:
		if w.leader == "" {
			return "", etcdError("promote learner "+a.member, errors.New("context deadline exceeded"))
		}
		if !w.runsEtcd(a.member) {
			return "", nil // etcd refuses until the learner has caught up
		}
		w.members[a.member].learner = false
		members := s.membership.Clone()
		members[a.member].IsLearner = false
		c.knownMembership.learn(members)
	case actCreateJoiner:
		name := w.newName()
		m := memberTemplate(s.spec)
		m.Name = name
		if w.onClaims {
			w.newClaim(name, a.version)
		}
		members := joiningMembership(s, a.behind, a.without)
		members.Add(&m)
		pairs := members.PeerURLPairs()
		w.createPod(k8sutil.NewEtcdPod(s.spec, &m, a.version, pairs, k8sutil.ClusterStateExisting, "",
			k8sutil.WithMembershipWait(&m, pairs, c.cfg.MembershipWait)))
	case actAddJoiner:
		if w.leader == "" {
			c.knownMembership.forget()
			return "", etcdError("add member "+a.member, errors.New("context deadline exceeded"))
		}
		w.members[a.member] = &wmember{name: a.member, learner: a.learner}
		if w.addReplyLost {
			w.addReplyLost = false
			c.knownMembership.forget()
			return "", etcdError("add member "+a.member, errors.New("context deadline exceeded"))
		}
		members := s.membership.Clone()
		members.Add(w.member(a.member))
		members[a.member].IsLearner = a.learner
		c.knownMembership.learn(members)
	case actUpgradeMember:
		w.downed = a.member
		p := w.pods[a.member]
		from := podVersion(s.views[a.member].pod)
		if v := runningVersion(s.views[a.member].pod); v != "" {
			from = v
		}
		if cl := w.claims[a.member]; cl != nil {
			cl.obj.Annotations[api.AnnotationVersion] = a.version
		}
		image := api.EtcdImage(s.spec.Spec.Repository, a.version)
		restarts := p.restartCount
		p.obj.Annotations[api.AnnotationVersion] = a.version
		p.obj.Spec.Containers[0].Image = image
		if p.ctr == ctrRunning || p.ctr == ctrCrashLoop {
			// The kubelet stops the container to run the new image: a
			// restart of the container, not a failure of the member.
			p.restartCount++
			p.lastExit = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}
			p.ctr, p.etcdRuns = ctrUpgrading, false
		}
		c.expectUpgrade(s.views[a.member].pod, &upgradeExpectation{name: a.member, version: a.version, from: from, restarts: restarts, image: image,
			deadline: w.now.Add(c.cfg.PendingTimeout)})
	case actMoveLeader:
		if w.leader != "" && w.runsEtcd(a.member) && !w.members[a.member].learner {
			w.leader = a.member
		}
	case actForceNewCluster:
		w.deletePod(a.member, time.Duration(podDeleteGracePeriod)*time.Second)
		c.recovering = &recovering{member: a.member, started: w.now}
	case actRestoreFromBackup:
		w.restored = true
	}
	return "", nil
}

func (w *world) createPod(obj *corev1.Pod) {
	c := w.op
	w.newPod(obj.Name, obj)
	e := c.podExpect
	if e == nil {
		e = &podExpectation{}
	}
	c.podExpect = &podExpectation{names: append(slices.Clone(e.names), obj.Name), deadline: w.now.Add(c.cfg.ExpectationTimeout)}
}

// removeMember is Cluster.removeMemberAndData: etcd removes the member when it has
// a leader and the members left keep a quorum, then its pod and claim go.
func (w *world) removeMember(s *snapshot, a action) error {
	c := w.op
	m := s.views[a.member].member
	if m.ID == 0 {
		return newPassError(problemEtcdMembership, "remove member "+m.Name, errors.New("its etcd ID is unknown"))
	}
	if w.leader == "" {
		c.knownMembership.forget()
		return etcdError("remove member "+m.Name, errors.New("context deadline exceeded"))
	}
	if wm := w.members[a.member]; wm != nil && !wm.learner {
		left, running := 0, 0
		for _, name := range w.voters() {
			if name != a.member {
				left++
				if w.runsEtcd(name) {
					running++
				}
			}
		}
		if left > 0 && running < left/2+1 {
			return nil // etcd refuses: "unhealthy cluster"; asked again later
		}
	}
	delete(w.members, a.member)
	members := s.membership.Clone()
	members.Remove(m.Name)
	c.knownMembership.learn(members)
	if a.kind == actRemoveDeadMember {
		c.recordReplacement(s.views[a.member].cause, s.spec.Generation)
	}
	w.deletePod(a.member, time.Duration(podDeleteGracePeriod)*time.Second)
	delete(w.claims, a.member)
	return nil
}

// restartMembers is Cluster.restartMembers: new pods on the members' claims.
// The ladder's count on the claim is the operator's (act, actDeleteFailedPod);
// the world counts a restart after a failure of the member as the truth.
func (w *world) restartMembers(s *snapshot, a action) error {
	c := w.op
	members := restartMembership(s, a.names)
	pairs := members.PeerURLPairs()
	recovery := c.recovering != nil && slices.Contains(a.names, c.recovering.member)
	for _, name := range a.names {
		if _, exists := w.pods[name]; exists {
			return kubeError("create pod "+name, fmt.Errorf("pods %q already exists", name))
		}
		if cl := w.claims[name]; c.restartFollowsFailure(name) && !recovery && cl != nil {
			n, since := k8sutil.ClaimRestarts(cl.obj)
			if n == 0 || w.now.Sub(since) >= ladderWindow {
				n, since = 0, w.now
			}
			cl.obj.Annotations[k8sutil.AnnotationRestarts] = fmt.Sprint(n + 1)
			cl.obj.Annotations[k8sutil.AnnotationRestartsSince] = since.UTC().Format(time.RFC3339)
		}
		if m := w.members[name]; m != nil && !recovery && m.failed {
			m.restarts, m.failed = append(m.restarts, w.now), false
		}
		opts := []k8sutil.PodOption{k8sutil.WithoutDNSCheck()}
		if a.force {
			opts = append(opts, k8sutil.WithForceNewCluster())
			c.knownMembership.forget()
		}
		w.createPod(k8sutil.NewEtcdPod(s.spec, members[name], a.version, pairs, k8sutil.ClusterStateExisting, "", opts...))
		if recovery && !a.force {
			c.recovering = nil
		}
	}
	return nil
}

// writeStatus is the end of a pass: the status derived from the snapshot,
// written where the server keeps it, or kept in memory when it does not
// store it.
func (w *world) writeStatus(s *snapshot, phase api.ClusterPhase, problems []problem) {
	c := w.op
	s = s.withMembership(c.knownMembership.known())
	if phase == "" {
		phase = c.status().Phase
	}
	st := statusOf(s, *c.status(), phase, w.generation, problems, outcome{downed: w.downed})
	w.downed = ""
	switch {
	case w.stores:
		w.server, c.unstored = st, nil
	case equality.Semantic.DeepEqual(st, w.server):
		c.unstored = nil
	default:
		c.unstored = &st
	}
	c.latest = w.object()
}

// Events: what happens to a cluster between two passes.

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
	// evNothing: nothing happens, a pass runs (an event of a pod the
	// operator changed itself, a resync).
	evNothing
)

// eventTable weighs the kinds of random histories: one byte picks one of
// its entries.
var eventTable = [32]eventKind{
	evTick, evTick, evTick, evTick,
	evKubelet, evKubelet, evKubelet, evKubelet, evKubelet,
	evCrash, evCrash, evCrash,
	evRecover, evRecover,
	evPodFails, evPodFails,
	evPodDeleted, evPodDeleted,
	evPodsGone, evPodsGone,
	evNodeLost, evNodeBack, evDataRefused, evPartition, evUnreachable,
	evOperatorRestart, evOperatorRestart,
	evStatusStore, evSpecSize, evSpecVersion, evAllPodsDeleted, evAddReplyLost,
}

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
		if !live || p.phase == corev1.PodFailed {
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
		p.nodeLost, p.unknownPhase = true, st.param&1 != 0
		p.etcdRuns = p.etcdRuns && st.param&2 != 0
		what := name + ": its node stops answering"
		if p.unknownPhase {
			what += ", its pod shows phase Unknown"
		}
		if p.etcdRuns {
			what += "; its etcd runs on"
		}
		return what
	case evNodeBack:
		if p == nil || !p.nodeLost {
			return ""
		}
		p.nodeLost = false
		switch {
		case p.deleting():
			delete(w.pods, name)
			return name + ": its node answers again and its pod's deletion completes"
		case !p.etcdRuns && p.phase == corev1.PodRunning && p.ctr == ctrRunning:
			w.restartContainer(p)
		}
		return name + ": its node answers again: " + w.podWord(p)
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
