package cluster

import (
	"fmt"
	"io"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// The world of the contract checker (contract_test.go): a cluster as it
// truly is — etcd's membership, leader and raft indexes, the pods and claims
// with what their volumes hold, the status the API server stores — and the
// operator's goroutine with its records in memory. Events change the world
// (contract_events_test.go); each pass observes it as observe does
// (observeWorld, contract_observe_test.go), decides, and the world carries
// the action out as act would (contract_act_test.go). The ground truth the
// contract is judged by (which members hold data, whether the cluster ever
// served, the leader, the restarts within the ladder's window) lives here,
// never in the snapshot.

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
	// nodeLostAfter is spec.pod.nodeLostAfterSeconds, 0 when unset.
	nodeLostAfter time.Duration
	// together: a new cluster's members start together (the default),
	// not from a seed.
	together bool
	// convert: spec.adoption.convert is set: the members
	// coreos/etcd-operator made are to be replaced by members of this
	// operator's layout.
	convert    bool
	version    string
	generation int64
	spec       *api.EtcdCluster

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
	// names and UIDs; starts counts the starts together, for their tokens.
	names, podsMade, starts int
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
	// original: coreos/etcd-operator made it (the world started adopted).
	original bool
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
	// nodeLost: its node does not answer (since nodeLostAt); unknownPhase
	// makes the pod show phase Unknown (else it stays Running, not ready).
	nodeLost, unknownPhase bool
	nodeLostAt             time.Time
	// etcdRuns: its etcd truly runs (a pod on a lost node may still run it).
	etcdRuns bool
	// joiner: made before its member was added, held by wait-membership;
	// dnsDone once its check-dns found its name.
	joiner, dnsDone bool
	forced          bool
	// never: the pod's restartPolicy is Never (the original's layout): an
	// etcd that exits ends the pod, and the kubelet restarts nothing.
	never bool
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
// data (its member's etcd ran on it); nodeGone, that its volume could only
// be used on a node that was deleted for good, and its data went with it.
type wclaim struct {
	obj      *corev1.PersistentVolumeClaim
	data     bool
	nodeGone bool
	// nodeDownSince is when the node its volume is tied to stopped
	// answering; zero while it answers.
	nodeDownSince time.Time
}

// nodeOf is the node the model places member name's pod and volume on.
func nodeOf(name string) string { return "node-of-" + name }

// claimNodeLost tells whether member name's claim is on a node that counts
// as lost under the user's bound: not answering for at least that long.
func (w *world) claimNodeLost(name string) bool {
	c := w.claims[name]
	return w.nodeLostAfter > 0 && c != nil && !c.nodeDownSince.IsZero() && w.now.Sub(c.nodeDownSince) >= w.nodeLostAfter
}

// lostNodeWhy is what observe says of a node lost under the user's bound.
func (w *world) lostNodeWhy(name string, since time.Time) string {
	return fmt.Sprintf("node %s has not been Ready since %s, longer than spec.pod.nodeLostAfterSeconds (%ds)",
		nodeOf(name), since.UTC().Format(time.RFC3339), int64(w.nodeLostAfter/time.Second))
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
	// nodeLostAfter: spec.pod.nodeLostAfterSeconds is set (to
	// modelNodeLostAfter).
	nodeLostAfter bool
	// together: the spec names no bootstrap mode and a new cluster's
	// members start together, the default; otherwise it asks for
	// SeedAndJoin. Only a new cluster's start reads it.
	together bool
	// adopted: coreos/etcd-operator v0.9.4 made the cluster and ran it
	// until it was stopped: its member pods have the original's layout
	// (restartPolicy Never), and this operator finds them. Not with fresh.
	adopted bool
	// convert: spec.adoption.convert is set from the start.
	convert bool
}

// modelNodeLostAfter is the user's bound of the histories that set one.
const modelNodeLostAfter = 2 * time.Minute

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
	if c.nodeLostAfter {
		s += fmt.Sprintf(", a node not Ready for %v counting as lost", modelNodeLostAfter)
	}
	if c.together {
		s += ", members started together"
	}
	if c.adopted {
		s += ", made by coreos/etcd-operator v0.9.4 (restartPolicy Never) and adopted"
	}
	if c.convert {
		s += ", spec.adoption.convert set"
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
		nodeLostAfter: func() time.Duration {
			if cfg.nodeLostAfter {
				return modelNodeLostAfter
			}
			return 0
		}(),
		together:   cfg.together,
		convert:    cfg.convert,
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
	var ready, peers []string
	for _, name := range initialNames[:cfg.size] {
		peers = append(peers, name+"="+w.member(name).PeerURL())
	}
	for i, name := range initialNames[:cfg.size] {
		m := &wmember{name: name, started: true, original: cfg.adopted}
		w.members[name] = m
		if w.onClaims {
			w.claims[name] = w.newClaim(name, w.version)
			w.claims[name].data = true
		}
		mm := w.member(name)
		obj := k8sutil.NewEtcdPod(w.spec, mm, w.version, etcdutil.NewMemberSet(mm).PeerURLPairs(), k8sutil.ClusterStateExisting, "")
		if cfg.adopted {
			// The first member was the original's seed; the others
			// were added one by one.
			state := "existing"
			if i == 0 {
				state = "new"
			}
			obj = originalPod(w.spec, name, peers[:i+1], state)
		}
		p := w.newPod(name, obj)
		p.obj.CreationTimestamp = metav1.NewTime(w.created)
		p.phase, p.ctr, p.etcdRuns, p.data = corev1.PodRunning, ctrRunning, true, !w.onClaims
		p.startedAt, p.image = w.created, p.obj.Spec.Containers[0].Image
		// The kubelet restarts nothing in the original's pods: their
		// containers never restarted.
		if n := cfg.lifetimeRestarts[i]; n > 0 && !cfg.adopted {
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
	if w.nodeLostAfter > 0 {
		withNodeLostAfter(int64(w.nodeLostAfter / time.Second))(cl)
	}
	if !w.together {
		// Members start together by default: the spec names no mode.
		withSeedAndJoin(cl)
	}
	if w.convert {
		converting(cl)
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
	p := &wpod{name: name, obj: obj, phase: corev1.PodPending, joiner: k8sutil.WaitsForMembership(obj), forced: k8sutil.IsForcedNewCluster(obj),
		never: obj.Spec.RestartPolicy == corev1.RestartPolicyNever}
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
	if c := w.claims[name]; c != nil && w.onClaims && c.data && !c.nodeGone {
		return true
	}
	p := w.pods[name]
	return p != nil && p.data
}

// originals are the members of etcd that coreos/etcd-operator made, sorted.
func (w *world) originals() []string {
	var out []string
	for _, name := range sortedKeys(w.members) {
		if w.members[name].original {
			out = append(out, name)
		}
	}
	return out
}

// originalPods are the pods of the original's layout, live or terminating,
// sorted: while one is there, the cluster is adopted (adoption.go).
func (w *world) originalPods() []string {
	var out []string
	for _, name := range sortedKeys(w.pods) {
		if k8sutil.IsOriginalPod(w.pods[name].obj) {
			out = append(out, name)
		}
	}
	return out
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
