package cluster

import (
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// The operator's side: what act does, carried out on the world
// (contract_world_test.go) rather than on the API server and etcd, and the
// status a pass ends by writing.

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
	case actStartTogether:
		members := etcdutil.MemberSet{}
		for range s.spec.Spec.Size {
			m := memberTemplate(s.spec)
			m.Name = w.newName()
			members.Add(&m)
		}
		w.starts++
		w.makeTogether(s, members.Names(), members.PeerURLPairs(), fmt.Sprintf("token-%d", w.starts), a.version)
		c.knownMembership.learn(members)
		for old := range w.members {
			if w.holdsData(old) {
				w.displaced = append(w.displaced, old)
			}
		}
		w.members = map[string]*wmember{}
		for _, name := range members.Names() {
			w.members[name] = &wmember{name: name}
		}
		w.leader, w.served, w.leaderLostAt, w.leaderlessReads = "", false, time.Time{}, nil
		return api.ClusterPhaseRunning, nil
	case actResumeTogether:
		plan := startedTogether(s)
		for _, name := range a.names {
			if _, exists := w.pods[name]; exists {
				return "", kubeError("create pod "+name, fmt.Errorf("pods %q already exists", name))
			}
		}
		w.makeTogether(s, a.names, plan.pairs, plan.token, a.version)
		members := etcdutil.MemberSet{}
		for _, name := range plan.names {
			m := memberTemplate(s.spec)
			m.Name = name
			members.Add(&m)
		}
		c.knownMembership.learn(members)
		return api.ClusterPhaseRunning, nil
	case actRestartTogether:
		for _, name := range a.names {
			delete(w.claims, name)
			w.deletePod(name, time.Duration(podDeleteGracePeriod)*time.Second)
		}
		// Their data went with their claims and pods: etcd as it was is
		// gone, and the next start makes new members.
		w.members = map[string]*wmember{}
		w.leader, w.leaderLostAt, w.leaderlessReads = "", time.Time{}, nil
		c.knownMembership.forget()
		return api.ClusterPhaseCreating, nil
	case actAdopt:
		c.knownMembership.forget()
		return api.ClusterPhaseRunning, nil
	case actAnnounceAdoption:
		return c.announceAdoption(s).phase, nil
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
	case actConvertInPlace:
		w.downed = a.member
		w.deletePod(a.member, time.Duration(podDeleteGracePeriod)*time.Second)
	case actForceDeletePod:
		// The pod object goes at once, whatever its node does; an etcd
		// still running there runs on, in no pod (rule C7).
		if p := w.pods[a.member]; p != nil && p.obj.UID == a.uid {
			delete(w.pods, a.member)
		}
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

// makeTogether is Cluster.makeTogether: the claims and pods of the named
// members, with the plan's flags; a pod made with its claim is the first
// on it.
func (w *world) makeTogether(s *snapshot, names, pairs []string, token, version string) {
	for _, name := range names {
		m := memberTemplate(s.spec)
		m.Name = name
		var opts []k8sutil.PodOption
		if w.onClaims && w.claims[name] == nil {
			w.newClaim(name, version)
			opts = append(opts, k8sutil.WithFirstOnClaim())
		}
		w.createPod(k8sutil.NewEtcdPod(s.spec, &m, version, pairs, k8sutil.ClusterStateNew, token, opts...))
	}
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
		if m := w.members[name]; m != nil {
			// It runs in a pod of this operator's layout now.
			m.original = false
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
