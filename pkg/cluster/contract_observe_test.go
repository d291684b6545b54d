package cluster

import (
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// What a pass of the model's operator sees of the world
// (contract_world_test.go): its pods as the informers' caches show them,
// etcd as observeEtcd reads it, and the snapshot built from them as observe
// builds it. Only what these hand over reaches decide; the ground truth
// stays in the world.

// podObject is the pod as the informer's cache shows it now.
func (w *world) podObject(p *wpod) *corev1.Pod {
	obj := p.obj
	obj.Spec.NodeName = nodeOf(p.name)
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
			// What observeVolumeNodes reads: for a member that does not
			// run, the node its claim's volume is tied to, NotFound.
			// Under the user's bound, the node not answering for that
			// long, too (nodelost.go).
			p := s.pods[name]
			if p != nil && p.Status.Phase == corev1.PodRunning {
				continue
			}
			lost := w.claimNodeLost(name)
			if cl.nodeGone || lost {
				if s.volumeNodeGone == nil {
					s.volumeNodeGone = map[string]string{}
				}
				s.volumeNodeGone[name] = nodeOf(name)
			}
			if lost && !cl.nodeGone {
				if s.nodesLost == nil {
					s.nodesLost = map[string]string{}
				}
				s.nodesLost[nodeOf(name)] = w.lostNodeWhy(name, cl.nodeDownSince)
			}
		}
	}
	// What observeLostNodes reads: the nodes of pods stuck terminating,
	// not answering for the user's bound.
	for _, name := range sortedKeys(w.pods) {
		p := w.pods[name]
		if w.nodeLostAfter > 0 && p.deleting() && p.nodeLost && stuckTerminating(s.terminating[name], w.now) && w.now.Sub(p.nodeLostAt) >= w.nodeLostAfter {
			if s.nodesLost == nil {
				s.nodesLost = map[string]string{}
			}
			s.nodesLost[nodeOf(name)] = w.lostNodeWhy(name, p.nodeLostAt)
		}
	}
	c.takeRecords(s)
	// What observePodNodes reads: whether the nodes of live pods answer.
	if c.readsPodNodes(s) {
		for _, name := range sortedKeys(s.pods) {
			if p := w.pods[name]; p != nil && p.nodeLost {
				if s.podNodesNotReady == nil {
					s.podNodesNotReady = map[string]string{}
				}
				s.podNodesNotReady[nodeOf(name)] = "its node " + nodeOf(name) + " is not Ready: what its pod shows may be out of date"
			}
		}
	}
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
