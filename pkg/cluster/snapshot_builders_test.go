package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// The snapshot builders of decide's table: testSnapshot is a healthy
// cluster of three, each snapMod one fact added to it. The cluster and its
// pods are shaped with the builders of builders_test.go.

// snapMod changes the raw fields of a test snapshot before it is classified.
type snapMod func(*snapshot)

func mods(ms ...snapMod) []snapMod { return ms }

// testSnapshot is a complete, healthy three-member cluster at rest on
// testVersion, changed by mods, then classified as observe does.
func testSnapshot(ms ...snapMod) *snapshot {
	cl := newTestCluster().WithDefaults()
	s := &snapshot{
		now:            testStart,
		spec:           cl,
		phase:          api.ClusterPhaseRunning,
		everAvailable:  true,
		pendingTimeout: 5 * time.Minute,
		pods:           map[string]*corev1.Pod{},
		terminating:    map[string]*corev1.Pod{},
		claims:         map[string]*corev1.PersistentVolumeClaim{},
		etcdReadAt:     testStart.Add(-time.Second),
	}
	members(memberA, memberB, memberC)(s)
	onlyPods(memberA, memberB, memberC)(s)
	for _, m := range ms {
		m(s)
	}
	if s.spec != nil {
		// The status the snapshot was taken with is the cluster's own.
		s.phase = s.spec.Status.Phase
	}
	s.classify()
	return s
}

// spec shapes the snapshot's cluster with the fixtures' builders
// (withSize, withVersion, withPVC, withPhase...): one vocabulary for both.
func spec(opts ...func(*api.EtcdCluster)) snapMod {
	return func(s *snapshot) {
		for _, o := range opts {
			o(s.spec)
		}
	}
}

// snapPod is the pod of member name as the operator makes it, Running and
// Ready on the spec's version.
func snapPod(s *snapshot, name string, opts ...podOpt) *corev1.Pod {
	m := memberTemplate(s.spec)
	m.Name = name
	return memberPod(s.spec, &m, testStart.Add(-time.Hour), opts...)
}

func noSpec(s *snapshot) { s.spec = nil }

func beingDeleted(s *snapshot) { s.beingDeleted = true }

func noMembership(s *snapshot) { s.membership = nil }

func noPods(s *snapshot) { s.pods = map[string]*corev1.Pod{} }

func notYetAvailable(s *snapshot) { s.everAvailable = false }

func missingServices(s *snapshot) {
	s.missingServices = []string{k8sutil.PeerServiceName(testName), k8sutil.ClientServiceName(testName)}
}

func serviceConflict(s *snapshot) {
	s.serviceConflict = "service example belongs to EtcdCluster example (uid old), not to this cluster; waiting for it to be deleted"
}

func tlsMissing(s *snapshot) {
	p := newProblem(problemTLSSecret, "read TLS secret operator-tls: not found")
	s.tlsProblem = &p
}

// issuedSecrets makes the cluster's TLS issued, with its CA and
// certificate secrets all there, their certificates of 90 days issued a
// day ago.
// certManagerCopies makes the cluster's TLS issued by a cert-manager
// issuer, with every Certificate made and every copy up to date; change
// alters the leaves.
func certManagerCopies(change func([]certManagerLeaf)) snapMod {
	return func(s *snapshot) {
		withCertManagerIssuer(s.spec)
		s.certManager = &certManagerView{}
		names := s.spec.Spec.TLS.Secrets(s.spec.Name)
		for _, k := range tlsissue.Kinds {
			secret := secretOf(names, k)
			certificate, issuedSecret := api.CertManagerCertificate(secret)
			s.certManager.leaves = append(s.certManager.leaves, certManagerLeaf{kind: k, certificate: certificate, issuedSecret: issuedSecret, secret: secret, exists: true, current: true, hasCopy: true})
		}
		change(s.certManager.leaves)
	}
}

func issuedSecrets(s *snapshot) {
	withIssuedTLS(s.spec)
	s.issued = &issuedView{}
	names := s.spec.Spec.TLS.Secrets(s.spec.Name)
	for _, k := range tlsissue.Kinds {
		s.issued.leaves = append(s.issued.leaves, issuedLeaf{kind: k, secret: secretOf(names, k), resourceVersion: "1",
			notBefore: testStart.Add(-24 * time.Hour), notAfter: testStart.Add(89 * 24 * time.Hour)})
	}
}

// issuedAge: the certificate of kind k, of 90 days, was issued age ago.
func issuedAge(k tlsissue.Kind, age time.Duration) snapMod {
	return func(s *snapshot) {
		l := &s.issued.leaves[slices.IndexFunc(s.issued.leaves, func(l issuedLeaf) bool { return l.kind == k })]
		l.notBefore = testStart.Add(-age)
		l.notAfter = l.notBefore.Add(api.DefaultCertificateValidity)
	}
}

// rotationAsked: the cluster's rotate-certificates annotation is value.
func rotationAsked(value string) snapMod {
	return func(s *snapshot) { s.rotateRequest = value }
}

// rotatedFor: the secrets of kinds were renewed for the rotation value.
func rotatedFor(value string, kinds ...tlsissue.Kind) snapMod {
	return func(s *snapshot) {
		for i := range s.issued.leaves {
			if slices.Contains(kinds, s.issued.leaves[i].kind) {
				s.issued.leaves[i].rotatedFor = value
			}
		}
	}
}

// noIssuedSecrets: no secret of issued TLS exists yet.
func noIssuedSecrets(s *snapshot) {
	issuedSecrets(s)
	s.issued.caMissing, s.issued.missing = true, slices.Clone(tlsissue.Kinds)
}

// noIssuedSecret: the secret of a kind of certificate is missing.
func noIssuedSecret(k tlsissue.Kind) snapMod {
	return func(s *snapshot) { s.issued.missing = append(s.issued.missing, k) }
}

// caRotationAt: the CA secret records a CA rotation at step.
func caRotationAt(step caStep) snapMod {
	return func(s *snapshot) { s.issued.caStep, s.issued.rotation.hasNext, s.issued.rotation.id = step, true, "r1" }
}

// caRotationAsked: the cluster's rotate-ca annotation is value; done is
// the last rotation the CA secret records as carried out.
func caRotationAsked(value, done string) snapMod {
	return func(s *snapshot) { s.rotateCARequest, s.issued.rotation.done = value, done }
}

// caAged: the CA secret's CA, of ten years, was made age ago, by the
// operator (ours) or brought by the user.
func caAged(age time.Duration, ours bool) snapMod {
	return func(s *snapshot) {
		r := &s.issued.rotation
		r.caNotBefore = testStart.Add(-age)
		r.caNotAfter = r.caNotBefore.Add(tlsissue.CAValidity)
		r.madeByOperator = ours
	}
}

func unusableCA(s *snapshot) {
	s.issued.problems = append(s.issued.problems, "CA secret example-ca (spec.TLS.issued.caSecret) lacks key(s) ca.key")
}

func issuedSecretOfAnotherCluster(s *snapshot) {
	s.issued.conflict = "secret example-ca belongs to EtcdCluster example (uid old), not to this cluster; waiting for it to be deleted"
}

func badCertificate(s *snapshot) {
	s.certProblems = []problem{newProblem(problemTLSCertificate, "TLS: peer.crt of secret peer-tls (spec.TLS.static.member.peerSecret) expired on 2025-01-01T00:00:00Z")}
}

// members makes names the membership, every one voting.
func members(names ...string) snapMod {
	return func(s *snapshot) {
		set := etcdutil.MemberSet{}
		for _, n := range names {
			m := memberTemplate(s.spec)
			m.Name, m.ID = n, memberID(n)
			set.Add(&m)
		}
		s.membership = set
		for _, n := range names {
			if _, ok := s.pods[n]; !ok {
				s.pods[n] = snapPod(s, n)
			}
		}
	}
}

// v36 is an etcd whose members take more than one learner (ETCD_MAX_LEARNERS).
const v36 = "3.6.6"

// on36 moves the spec and every pod made so far to etcd 3.6.
func on36(s *snapshot) {
	s.spec.Spec.Version = v36
	for _, p := range s.pods {
		onVersion(v36)(p)
	}
}

// notStarted makes member name one etcd lists without a name and that does
// not answer: added, its etcd not started yet. etcdLeader goes before it.
func notStarted(name string) snapMod {
	return func(s *snapshot) {
		for i, m := range s.etcd.health.Members {
			if m.ID == memberID(name) {
				s.etcd.health.Members[i].Name = ""
				s.etcd.health.Members[i].Err = errors.New("member has not started")
			}
		}
	}
}

func learner(name string) snapMod { return func(s *snapshot) { s.membership[name].IsLearner = true } }

// onlyPods makes the named members' pods the only ones.
func onlyPods(names ...string) snapMod {
	return func(s *snapshot) {
		s.pods = map[string]*corev1.Pod{}
		for _, n := range names {
			s.pods[n] = snapPod(s, n)
		}
	}
}

func noPod(name string) snapMod { return func(s *snapshot) { delete(s.pods, name) } }

func podIs(name string, opts ...podOpt) snapMod {
	return func(s *snapshot) {
		p := s.pods[name]
		if p == nil {
			p = snapPod(s, name)
		}
		for _, o := range opts {
			o(p)
		}
		s.pods[name] = p
	}
}

func terminatingPod(name string) snapMod {
	return func(s *snapshot) {
		p := snapPod(s, name, terminating)
		delete(s.pods, name)
		s.terminating[name] = p
	}
}

func strayPod(name string) snapMod { return func(s *snapshot) { s.pods[name] = snapPod(s, name) } }

// joiningPod is the pod the operator makes for member name joining the
// given members, resolvable (check-dns done, the membership wait running)
// unless opts say otherwise.
func joiningPod(name string, joins []string, opts ...podOpt) snapMod {
	return func(s *snapshot) {
		set := etcdutil.MemberSet{}
		for _, n := range append(slices.Clone(joins), name) {
			m := memberTemplate(s.spec)
			m.Name = n
			set.Add(&m)
		}
		m := set[name]
		pairs := set.PeerURLPairs()
		p := k8sutil.NewEtcdPod(s.spec, m, s.spec.Spec.Version, pairs, k8sutil.ClusterStateExisting, "",
			k8sutil.WithMembershipWait(m, pairs, k8sutil.MembershipWait{Image: testJoinImage, Timeout: 5 * time.Minute}))
		p.CreationTimestamp = metav1.NewTime(testStart.Add(-time.Minute))
		resolvable(p)
		for _, o := range opts {
			o(p)
		}
		s.pods[name] = p
	}
}

func claims(names ...string) snapMod {
	return func(s *snapshot) {
		for _, n := range names {
			pvc := k8sutil.NewEtcdPVC(s.spec, n, s.spec.Spec.Version)
			pvc.Status.Phase = corev1.ClaimBound
			s.claims[n] = pvc
		}
	}
}

func expectPod(name string, in time.Duration) snapMod {
	return func(s *snapshot) { s.podExpect = &podExpectation{names: []string{name}, deadline: testStart.Add(in)} }
}

func upgrading(name, version string) snapMod {
	return func(s *snapshot) {
		s.upgradeExpect = &upgradeExpectation{name: name, version: version, deadline: testStart.Add(time.Minute)}
	}
}

func failedOn(name, version, from string) snapMod {
	return func(s *snapshot) {
		s.failedUpgrade = &failedUpgrade{member: name, version: version, from: from, evidence: "its pod has its container etcd waiting: ErrImagePull"}
	}
}

// etcdLeader makes the pass's etcd view a confirmed membership led by
// leader, every member answering but the down ones.
func etcdLeader(leader string, down ...string) snapMod {
	return func(s *snapshot) {
		h := etcdutil.Health{LeaderID: memberID(leader), Linearizable: true}
		for _, name := range s.membership.Names() {
			mh := etcdutil.MemberHealth{ID: memberID(name), Name: name, Leader: memberID(leader), IsLearner: s.membership[name].IsLearner,
				ClientURL: s.membership[name].ClientURL(), RaftIndex: 100, RaftAppliedIndex: 100}
			if pod := s.pods[name]; pod != nil {
				mh.Version = podVersion(pod)
			}
			if slices.Contains(down, name) {
				mh.Err = errors.New("connection refused")
			}
			h.Members = append(h.Members, mh)
		}
		s.etcd = &etcdView{health: h, confirmed: true, clusterVersion: "3.5.0"}
	}
}

// appliedUpTo makes member name report its applied index and the leader its
// raft index; etcdLeader goes before it.
func appliedUpTo(name string, applied, leaderIndex uint64) snapMod {
	return func(s *snapshot) {
		for i, m := range s.etcd.health.Members {
			if m.ID == memberID(name) {
				s.etcd.health.Members[i].RaftAppliedIndex = applied
			}
			if m.ID == s.etcd.health.LeaderID {
				s.etcd.health.Members[i].RaftIndex = leaderIndex
			}
		}
	}
}

// followsNoLeader makes member name report no leader; etcdLeader goes
// before it.
func followsNoLeader(name string) snapMod {
	return func(s *snapshot) {
		for i, m := range s.etcd.health.Members {
			if m.ID == memberID(name) {
				s.etcd.health.Members[i].Leader = 0
			}
		}
	}
}

func etcdWithoutLeader(s *snapshot) { s.etcd = &etcdView{} }

func budgets(s *snapshot) { s.budgetsManaged = true }

func downgradeEnabled(s *snapshot) {
	for i := range s.etcd.health.Members {
		s.etcd.health.Members[i].Downgrade = etcdutil.DowngradeInfo{Enabled: true, TargetVersion: "3.5.0"}
	}
}

func budgetKeeps(n int32) snapMod {
	return func(s *snapshot) {
		min := intstr.FromInt32(n)
		s.budget = &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: testName, Namespace: testNS},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &min}}
	}
}

func clusterVersion(v string) snapMod { return func(s *snapshot) { s.etcd.clusterVersion = v } }

func etcdReadAgo(d time.Duration) snapMod {
	return func(s *snapshot) { s.etcdReadAt = testStart.Add(-d) }
}

func alarmOn(name, typ string) snapMod {
	return func(s *snapshot) {
		s.etcd.health.Alarms = append(s.etcd.health.Alarms, etcdutil.Alarm{MemberID: memberID(name), Type: typ})
	}
}

func revision(rev int64) snapMod {
	return func(s *snapshot) {
		for i := range s.etcd.health.Members {
			s.etcd.health.Members[i].Revision = rev
		}
	}
}

func compactedTo(rev int64) snapMod {
	return func(s *snapshot) { s.status.Maintenance = &api.MaintenanceStatus{LastCompactedRevision: rev} }
}

// dbSizes gives every member a database of size bytes, inUse of them used.
func dbSizes(size, inUse int64) snapMod {
	return func(s *snapshot) {
		for i := range s.etcd.health.Members {
			s.etcd.health.Members[i].DBSize, s.etcd.health.Members[i].DBSizeInUse = size, inUse
		}
	}
}

func dbSize(name string, size, inUse int64) snapMod {
	return func(s *snapshot) {
		for i := range s.etcd.health.Members {
			if s.etcd.health.Members[i].Name == name {
				s.etcd.health.Members[i].DBSize, s.etcd.health.Members[i].DBSizeInUse = size, inUse
			}
		}
	}
}

func etcdFailed(s *snapshot) { s.etcd = &etcdView{err: errors.New("context deadline exceeded")} }

func claimVersion(name, version string) snapMod {
	return func(s *snapshot) { s.claims[name].Annotations[api.AnnotationVersion] = version }
}

func claimRestarts(name string, n int, ago time.Duration) snapMod {
	return func(s *snapshot) {
		s.claims[name].Annotations[k8sutil.AnnotationRestarts] = fmt.Sprint(n)
		s.claims[name].Annotations[k8sutil.AnnotationRestartsSince] = testStart.Add(-ago).Format(time.RFC3339)
	}
}

func replacedFor(cause string, count int, ago time.Duration) snapMod {
	return func(s *snapshot) {
		s.replaced = map[string]replacement{cause: {count: count, last: testStart.Add(-ago), generation: s.spec.Generation}}
	}
}

// specEdited is an edit of the spec that keeps what pods are made from: a
// new generation, as any edit of the spec makes.
func specEdited(s *snapshot) { s.spec.Generation++ }

func recoveryOn(fromBackup bool) snapMod {
	return func(s *snapshot) {
		s.spec.Spec.DisasterRecovery = &api.DisasterRecoveryPolicy{Enabled: true, FromBackup: fromBackup}
	}
}

// quorumLostAgo is a quorum lost d ago, as the status says it and as the
// goroutine saw it, with enough reads of etcd that found no leader.
func quorumLostAgo(d time.Duration) snapMod {
	return func(s *snapshot) {
		availableFalseSince(d)(s)
		lossSeen(d, leaderlessReadsNeeded)(s)
	}
}

func recoveringFrom(name string) snapMod {
	return func(s *snapshot) { s.recovering = &recovering{member: name, started: testStart.Add(-time.Second)} }
}

func statusMembers(names ...string) snapMod {
	return func(s *snapshot) { s.lastMembers = names }
}

// restartsInWindow makes member name's container one that the kubelet
// restarted n times within the repair ladder's window.
func restartsInWindow(name string, n int) snapMod {
	return func(s *snapshot) {
		if s.windowRestarts == nil {
			s.windowRestarts = map[string]int{}
		}
		s.windowRestarts[name] = n
	}
}

// lossSeen is the goroutine's record of a quorum it saw lost ago, with reads
// of etcd that found no leader.
func lossSeen(ago time.Duration, reads int) snapMod {
	return func(s *snapshot) {
		s.quorumLoss = &quorumLoss{since: testStart.Add(-ago), leaderlessReads: reads}
		if reads > 0 {
			s.quorumLoss.firstLeaderlessRead = s.quorumLoss.since
		}
	}
}

// firstLeaderlessReadAgo moves the first read without a leader of the
// goroutine's record; lossSeen goes before it.
func firstLeaderlessReadAgo(d time.Duration) snapMod {
	return func(s *snapshot) { s.quorumLoss.firstLeaderlessRead = testStart.Add(-d) }
}

// availableFalseSince is an Available condition that turned False ago, with
// no record of the goroutine's own (an operator restart).
func availableFalseSince(ago time.Duration) snapMod {
	return func(s *snapshot) {
		at := testStart.Add(-ago).Format(time.RFC3339)
		s.status.Conditions = []api.ClusterCondition{{Type: api.ClusterConditionAvailable, Status: corev1.ConditionFalse,
			Reason: "LostQuorum", LastTransitionTime: at, LastUpdateTime: at}}
	}
}

// stuckPod makes member name's pod one deleted an hour ago on a node
// that never confirmed it.
func stuckPod(name string) snapMod {
	return func(s *snapshot) {
		p := snapPod(s, name)
		ts := metav1.NewTime(testStart.Add(-time.Hour))
		p.DeletionTimestamp = &ts
		p.Spec.NodeName = "node-lost"
		delete(s.pods, name)
		s.terminating[name] = p
	}
}

// etcdWithoutLeaderFrom is etcd read in this pass through the named members,
// which answer without a leader; the others do not answer.
func etcdWithoutLeaderFrom(answering ...string) snapMod {
	return func(s *snapshot) {
		etcdLeader(memberA)(s)
		s.etcd.health.LeaderID, s.etcd.health.Linearizable, s.etcd.confirmed = 0, false, false
		for i, m := range s.etcd.health.Members {
			s.etcd.health.Members[i].Leader = 0
			answers := false
			for _, name := range answering {
				answers = answers || m.Name == name
			}
			if !answers {
				s.etcd.health.Members[i].Err = errors.New("context deadline exceeded")
			}
		}
	}
}

// raftIndex makes member name report raft index i.
func raftIndex(name string, i uint64) snapMod {
	return func(s *snapshot) {
		for j, m := range s.etcd.health.Members {
			if m.Name == name {
				s.etcd.health.Members[j].RaftIndex = i
			}
		}
	}
}

// volumeNodeGone records that member name's claim's volume is tied to node,
// read as deleted in this pass.
func volumeNodeGone(name, node string) snapMod {
	return func(s *snapshot) {
		if s.volumeNodeGone == nil {
			s.volumeNodeGone = map[string]string{}
		}
		s.volumeNodeGone[name] = node
	}
}

// volumeNodesUnknown records that whether member name's volume is on a node
// that is gone could not be read, and why.
func volumeNodesUnknown(name, why string) snapMod {
	return func(s *snapshot) { s.volumeNodesUnknown = "claim " + name + ": " + why }
}

// nodeLostForLong records that the node of stuckPod's pods ("node-lost")
// was read in this pass as not Ready for longer than the user's bound.
func nodeLostForLong(s *snapshot) {
	if s.nodesLost == nil {
		s.nodesLost = map[string]string{}
	}
	s.nodesLost["node-lost"] = lostNodeWhy
}

// lostNodeWhy is what nodeLostForLong says of the node.
const lostNodeWhy = "node node-lost has not been Ready since 2026-11-28T10:00:00Z, longer than spec.pod.nodeLostAfterSeconds (600s)"

// podNodeNotReady puts member name's pod on node "node-of-<name>", read in
// this pass for the disaster recovery as not Ready.
func podNodeNotReady(name string) snapMod {
	return func(s *snapshot) {
		node := "node-of-" + name
		s.pods[name].Spec.NodeName = node
		if s.podNodesNotReady == nil {
			s.podNodesNotReady = map[string]string{}
		}
		s.podNodesNotReady[node] = "its node " + node + " is not Ready: what its pod shows may be out of date"
	}
}

// caTrusts: every certificate secret trusts what trust says.
func caTrusts(trust caTrust) snapMod {
	return func(s *snapshot) {
		for i := range s.issued.leaves {
			s.issued.leaves[i].trusts = trust
		}
	}
}

// caSince: the CA secret's step began at since.
func caSince(since time.Time) snapMod {
	return func(s *snapshot) { s.issued.rotation.since = since }
}

// podsStartedTogether makes the named members' pods the only ones, made to
// start together with members a, b and c from one static initial cluster
// (the first on their claims, when the spec uses claims): running, never
// ready. members goes before it: it makes pods of its own.
func podsStartedTogether(names ...string) snapMod {
	return func(s *snapshot) {
		plan := etcdutil.MemberSet{}
		for _, n := range []string{memberA, memberB, memberC} {
			m := memberTemplate(s.spec)
			m.Name = n
			plan.Add(&m)
		}
		s.pods = map[string]*corev1.Pod{}
		for _, n := range names {
			var opts []k8sutil.PodOption
			if s.usesClaims() {
				opts = append(opts, k8sutil.WithFirstOnClaim())
			}
			p := k8sutil.NewEtcdPod(s.spec, plan[n], s.spec.Spec.Version, plan.PeerURLPairs(), k8sutil.ClusterStateNew, "uid-token", opts...)
			p.UID = types.UID("pod-uid-" + n)
			p.CreationTimestamp = metav1.NewTime(testStart.Add(-time.Hour))
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
				Name: k8sutil.EtcdContainerName, Image: p.Spec.Containers[0].Image,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(testStart.Add(-50 * time.Minute))}},
			}}}
			neverReady(p)
			s.pods[n] = p
		}
	}
}

// answeredBefore makes the status say what member name's etcd told an
// earlier pass: its role.
func answeredBefore(name string, role api.MemberRole) snapMod {
	return func(s *snapshot) {
		s.status.MemberDetails = append(s.status.MemberDetails, api.MemberDetail{Name: name, Role: role})
	}
}

// inTLSStage makes the pods of names those of members in stage st of a TLS
// switch, etcd recording their peer URLs in its scheme, and reads the
// stages of every pod as a pass does; the spec's TLS goes before it.
func inTLSStage(st k8sutil.TLSStage, names ...string) snapMod {
	return func(s *snapshot) {
		for _, name := range names {
			m := memberTemplate(s.spec)
			m.Name = name
			m.SecurePeer = st >= k8sutil.TLSPeersSecure
			m.SwitchingTLS = st == k8sutil.TLSCertificates || st == k8sutil.TLSPeersSecure
			m.SecureClient = st == k8sutil.TLSSecure
			s.pods[name] = memberPod(s.spec, &m, testStart.Add(-time.Hour))
			if em := s.membership[name]; em != nil {
				em.SecurePeer = m.SecurePeer
			}
		}
		s.tlsSwitch = tlsSwitchOf(s.spec, s.pods, s.holdClients)
	}
}

// peerURLOf: etcd records member name's peer URL with https or http.
func peerURLOf(name string, https bool) snapMod {
	return func(s *snapshot) { s.membership[name].SecurePeer = https }
}

// peersOnlyPod makes member name's pod one of static TLS of peers alone.
func peersOnlyPod(name string) snapMod {
	return func(s *snapshot) {
		cl := s.spec.DeepCopy()
		cl.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{Member: &api.MemberSecret{PeerSecret: "peer-tls"}}}
		m := memberTemplate(cl)
		m.Name = name
		s.pods[name] = memberPod(cl, &m, testStart.Add(-time.Hour))
		s.tlsSwitch = tlsSwitchOf(s.spec, s.pods, s.holdClients)
	}
}

// holdingClients: the user holds a TLS switch before it drops a client
// scheme.
func holdingClients(s *snapshot) {
	s.holdClients = true
	if s.tlsSwitch != nil {
		s.tlsSwitch.holdClients = true
	}
}

// issuerCAs are an issuer's CA before and after it changed, and
// issuerLeafPEMs the certificates each issued, by CA and kind.
var (
	issuerCABefore, issuerCAAfter = mustIssuerCA("the issuer's CA before"), mustIssuerCA("the issuer's CA after")
	issuerLeafPEMs                = map[*tlsissue.CA]map[tlsissue.Kind][]byte{}
	issuerBothPEM                 = tlsissue.Bundle(issuerCABefore.CertPEM, issuerCAAfter.CertPEM)
)

func mustIssuerCA(name string) *tlsissue.CA {
	ca, err := tlsissue.NewCA(name, testStart.Add(-48*time.Hour))
	if err != nil {
		panic(err)
	}
	return ca
}

// issuerLeaf is the certificate (PEM) ca issued for kind k: a day before
// the test starts from the CA before, an hour before from the CA after.
func issuerLeaf(ca *tlsissue.CA, k tlsissue.Kind) []byte {
	if issuerLeafPEMs[ca] == nil {
		issuerLeafPEMs[ca] = map[tlsissue.Kind][]byte{}
	}
	if pem, ok := issuerLeafPEMs[ca][k]; ok {
		return pem
	}
	at := testStart.Add(-24 * time.Hour)
	if ca == issuerCAAfter {
		at = testStart.Add(-time.Hour)
	}
	data, err := ca.Issue(k, tlsissue.Cluster{Name: testName, Namespace: testNS}, at, api.DefaultCertificateValidity)
	if err != nil {
		panic(err)
	}
	certKey, _, _ := k.Keys()
	issuerLeafPEMs[ca][k] = data[certKey]
	return data[certKey]
}

// issuedFrom: cert-manager's secrets of the kinds named hold a certificate
// of ca (none named: every kind).
func issuedFrom(ca *tlsissue.CA, kinds ...tlsissue.Kind) snapMod {
	return func(s *snapshot) {
		for i := range s.certManager.leaves {
			l := &s.certManager.leaves[i]
			if len(kinds) > 0 && !slices.Contains(kinds, l.kind) {
				continue
			}
			l.issuedCert, l.issuedCA, l.issuingCA = issuerLeaf(ca, l.kind), ca.CertPEM, ca.Cert
			leaf := firstCertificate(l.issuedCert)
			l.issuedNotBefore, l.issuedNotAfter = leaf.NotBefore, leaf.NotAfter
			l.fresh = !bytes.Equal(l.issuedCert, l.copyCert)
		}
	}
}

// copiesOfIssuer: every copy holds the certificate ca issued, copied at
// copiedAt, and trusts trust (PEM), written at trustWritten (zero: never
// rewritten since the copy was made). Goes before issuedFrom.
func copiesOfIssuer(ca *tlsissue.CA, copiedAt time.Time, trust []byte, trustWritten time.Time) snapMod {
	return func(s *snapshot) {
		for i := range s.certManager.leaves {
			l := &s.certManager.leaves[i]
			l.copyCert = issuerLeaf(ca, l.kind)
			l.copyLeaf, l.copyTrust = firstCertificate(l.copyCert), trust
			l.copiedAt, l.trustWritten = copiedAt, trustWritten
		}
	}
}

// etcdStartedOn: every member's etcd started at t.
func etcdStartedOn(t time.Time) snapMod {
	return func(s *snapshot) {
		for _, p := range s.pods {
			p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(t)
		}
	}
}
