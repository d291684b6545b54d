package cluster

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// decide is the algorithm: from the snapshot of a pass, the one action the
// pass takes. It is a pure function, and its table test (decide_test.go) is
// the specification of what the operator does. The steps run in order and the
// first one with something to do decides:
//
//  1. handsOff: no valid spec yet, a cluster the original marked Failed, a
//     cluster being deleted.
//  2. servicesAndBudget (services.go): the peer and client services are created
//     when missing (even while paused: the restore operator's seed waits for
//     the peer service), and the PodDisruptionBudget keeps a quorum through
//     voluntary disruptions (kubectl drain, evictions). Then, under issued
//     TLS, issueCertificates (issue.go) makes the missing CA and certificate
//     secrets, before any member pod, which would wait for them; with
//     an issuer of cert-manager, certificatesFromCertManager
//     (certmanager.go) makes its Certificates and copies what it issues
//     into those secrets, once members trust the CA that issued it.
//  3. paused: nothing else is touched; nor without the operator's client TLS
//     secret, when the cluster serves clients over TLS. Then (step 3a)
//     renewExpiredCertificates (renew.go): under issued TLS, a certificate
//     secret that has expired is renewed from its CA in place, one a pass,
//     whatever the members' readiness (an expired certificate is why they
//     are not ready). Then (step 3b) adoptedFromTheOriginal (adoption.go): a cluster with pods that
//     coreos/etcd-operator v0.9.4 made is adopted as it runs: its membership
//     is read from etcd through the existing Services and told once; then
//     nothing is changed (no member restarted, replaced, resized or
//     upgraded) and what would have been done is said instead, unless
//     spec.adoption.convert asks for its members to be moved to this
//     layout one at a time (conversion.go): a member on a claim restarted
//     on it, one on an emptyDir replaced by a member added before it is
//     removed, a member lost meanwhile first. Pods it cannot adopt safely
//     are refused and left as they are.
//     Then (step 3c) bootstrapTogether (together.go), before a cluster
//     whose members started together was ever available: those whose pods
//     are gone are made again from the plan their pods' flags tell, and
//     when some cannot start they all start again with a new token, on
//     proof from the pods that no quorum ever formed.
//  4. bootstrap (bootstrap.go): a new cluster is recorded Creating, then gets
//     a seed member (or, under spec.bootstrap.mode Together, every member
//     at once) in the next pass; pods found while the phase still says
//     Creating (an operator restart, the restore hand-over) are adopted, and
//     so are claims under a status that names no phase (one the server did
//     not store): nothing is seeded while the cluster owns claims or member
//     pods.
//  5. unknownMembership (repair.go): unknown membership (operator restart,
//     hand-over, an uncertain change): read from etcd once a member pod runs;
//     with no member running, every member is restarted from the claims the
//     status listed. A seed that never ran, in a cluster that was never
//     available, is made again.
//  6. expectations: pods just created and not in the cache yet are waited for.
//  7. neverStartedSeed (bootstrap.go): the seed of a cluster that never
//     served is made again from the spec in force when it never started, when
//     its pod is gone, or when it never served and the spec changed since it
//     was made (a fix is acted on at once); one that fails as the seeds before
//     it did waits longer each time.
//  8. releaseStuckPods (nodelost.go): with spec.pod.nodeLostAfterSeconds, a
//     pod stuck terminating on a node not Ready for that long is
//     force-deleted, once etcd's leader confirms its member does not answer.
//  9. restartInPlace (repair.go): a member whose pod is gone or failed, and
//     whose claim holds its data, gets a new pod on that claim: same name, same
//     member ID, no membership change and no copy of the data. Members stopped
//     together are restarted together (they need each other for a quorum); this
//     is how a cluster comes back after a node restart or after every pod was
//     deleted, with or without a quorum. A pod stuck terminating holds back its
//     own member only.
//  10. withoutQuorum (recovery.go): without a quorum of voting members running,
//     nothing is changed but the opt-in disaster recovery, on proof read from
//     etcd (recoverQuorum).
//  11. recoverNoSpace (maintenance.go): with a NOSPACE alarm (the cluster takes
//     no write), the history is compacted, the members defragmented one at a
//     time (the leader last, after leadership moved away) and the alarm
//     disarmed once every member has room again.
//  12. cleanUp (join.go): pods, joining pods and claims that belong to no
//     member.
//  13. replaceDeadMembers (repair.go): a member that cannot come back (its data
//     was on an emptyDir, it keeps failing after restarts in place, etcd
//     refuses its data or raised a CORRUPT alarm for it) is removed from etcd —
//     once its pod is gone and etcd confirms it does not answer — and a new
//     member replaces it in step 15. While a member whose pod is gone still
//     answers (a pod deleted at once, its etcd stopped a moment later), its
//     successor's pod is made, without it in --initial-cluster.
//  14. promoteLearners (join.go): learners are promoted once they run.
//  15. resize (join.go, remove.go): one member is added (its pod first, then
//     MemberAdd once the pod resolves in DNS and etcd can take the change) or
//     removed (not-ready members first, the leader last).
//  16. upgradeMembers (upgrade.go): one member is patched to spec.version
//     (not-ready members first, the leader last after leadership moved away),
//     one at a time, as etcd's rules for the cluster version allow (3.6 to 3.5
//     through etcd's downgrade API).
//     Then (step 16b) switchTLS (tlsswitch.go): TLS switched on or off in a
//     running cluster, one member at a time through stages in which every
//     two members can talk (certificates held, peers on https, clients on
//     https alone), as an upgrade restarts members.
//  17. routineMaintenance (maintenance.go): a cluster at rest is looked at
//     every minute; a member whose free space passes the threshold, or whose
//     scheduled run is due, is defragmented (followers first, the leader last).
//  18. renewCertificates (renew.go): under issued TLS, in a cluster at rest,
//     one certificate secret is renewed from its CA in place, once two thirds
//     of its certificate's lifetime have passed or when the
//     rotate-certificates annotation asks for it. Then (step 18b) rotateCA
//     (carotation.go): the CA's rotation the rotate-ca annotation asks for,
//     or, unasked, of a CA the operator made once four fifths of its
//     lifetime have passed, in steps recorded on the CA secret (both CAs trusted, members restarted
//     one at a time, leaves issued again from the new CA, the old CA
//     dropped, members restarted again). Then (step 18c) carryIssuerCA
//     (certmanager_ca.go): under cert-manager, a CA changed at the issuer
//     is carried in the same steps, read from the copies (the copies trust
//     both, members restarted, leaves of the new CA copied, the old CA
//     dropped, members restarted again).
//  19. stuckPods: a pod stuck terminating (its node never confirms the
//     deletion) is waited for, and said to be; it is never deleted again,
//     but for the force-deletion of step 8.
//  20. Otherwise the cluster is what its spec asks for.
//
// Every change that depends on the membership (steps 8, 12, 13, 15, 16) needs it
// confirmed by etcd's leader in this very pass: decide then answers "read
// etcd", the pass asks etcd and decides again. The gates every change
// passes first are in gates.go.
func decide(s *snapshot) action {
	for _, step := range decisionSteps {
		if a, decided := step(s); decided {
			return a
		}
	}
	return action{kind: actIdle}
}

var decisionSteps = []func(*snapshot) (action, bool){
	handsOff,
	servicesAndBudget,
	issueCertificates,
	certificatesFromCertManager,
	paused,
	renewExpiredCertificates,
	adoptedFromTheOriginal,
	bootstrapTogether,
	bootstrap,
	unknownMembership,
	expectations,
	neverStartedSeed,
	releaseStuckPods,
	restartInPlace,
	withoutQuorum,
	recoverNoSpace,
	cleanUp,
	replaceDeadMembers,
	promoteLearners,
	resize,
	upgradeMembers,
	switchTLS,
	routineMaintenance,
	renewCertificates,
	rotateCA,
	carryIssuerCA,
	stuckPods,
}

// handsOff is step 1.
func handsOff(s *snapshot) (action, bool) {
	switch {
	case s.spec == nil:
		return waiting("no valid spec yet"), true
	case s.phase == api.ClusterPhaseFailed:
		// Never set by this operator: a cluster failed by the original is
		// left alone.
		return waiting("the cluster is Failed"), true
	case s.beingDeleted:
		return waiting("the cluster is being deleted"), true
	}
	return action{}, false
}

// servicesAndBudget is step 2.
func servicesAndBudget(s *snapshot) (action, bool) {
	switch {
	case len(s.missingServices) > 0:
		return action{kind: actCreateServices, reason: strings.Join(s.missingServices, ", ")}, true
	case s.serviceConflict != "":
		return waiting(s.serviceConflict), true
	}
	if why := budgetOutOfDate(s); why != "" {
		return action{kind: actSyncBudget, reason: why}, true
	}
	return action{}, false
}

// paused is step 3.
func paused(s *snapshot) (action, bool) {
	switch {
	case s.spec.Spec.Paused:
		return waiting("spec.paused is true"), true
	case s.tlsProblem != nil:
		return waiting("the operator's etcd client TLS secret is not usable"), true
	}
	return action{}, false
}

// bootstrap is step 4.
func bootstrap(s *snapshot) (action, bool) {
	if s.phase != api.ClusterPhaseNone && s.phase != api.ClusterPhaseCreating {
		return action{}, false
	}
	switch {
	case len(s.pods) > 0:
		return action{kind: actAdopt, reason: fmt.Sprintf("member pods exist for a %q cluster", s.phase)}, true
	case len(s.claims) > 0 && s.phase == api.ClusterPhaseNone:
		// A status the server did not store (the original's roles) reads
		// empty after an operator restart: the claims are the members'
		// data, restarted in place once the membership is looked for.
		// Creating is written before a seed's claim, so one claim found
		// then is that seed's, from an interrupted try: the next seed
		// starts on it.
		return action{kind: actAdopt, reason: "member claims exist for a cluster whose status names no phase"}, true
	case len(s.claims) > 1 && !statusListsAClaim(s):
		// A seed starts on its predecessor's claim, so one try leaves one
		// claim. More, with no member listed by the status (a reseed lists
		// the seed), are members' (joiners made while the seed started,
		// members added since) under a status the server stored no further
		// than Creating. Their data is restarted in place, never seeded
		// beside.
		return action{kind: actAdopt, reason: "member claims exist for a cluster whose status says Creating: more than a seed's"}, true
	case len(s.terminating) > 0:
		return waiting("pods of an earlier seed are being deleted"), true
	case len(s.certProblems) > 0:
		// The seed would only fail its handshakes, over and over.
		return waiting("the TLS certificates are not usable"), true
	case s.podExpect != nil:
		return waiting(fmt.Sprintf("pod %s was created and is not in the cache yet", strings.Join(s.podExpect.names, ", "))), true
	}
	if s.phase == api.ClusterPhaseNone {
		// Creating is in the status before the seed's claim and pod exist.
		return action{kind: actRecordCreating, reason: "a new cluster"}, true
	}
	if a, ok := startTogether(s); ok {
		return a, true
	}
	// A seed made again, or one whose pod was never made, starts on the
	// claim its predecessor had: whatever etcd wrote there is kept.
	return action{kind: actSeed, member: seedClaim(s), version: s.spec.Spec.Version}, true
}

// statusListsAClaim tells whether the status lists a member whose claim
// exists: the seed's, as a reseed leaves it.
func statusListsAClaim(s *snapshot) bool {
	for _, name := range s.lastMembers {
		if s.claims[name] != nil {
			return true
		}
	}
	return false
}

// expectations is step 6.
func expectations(s *snapshot) (action, bool) {
	if e := s.podExpect; e != nil {
		// Until the created pod is in the cache its member would look dead,
		// and the next change would be made on a wrong picture. Its informer
		// event wakes the loop; the deadline bounds the wait.
		a := waiting(fmt.Sprintf("pod %s was created and is not in the cache yet", strings.Join(e.names, ", ")))
		a.after = e.deadline.Sub(s.now)
		return a, true
	}
	return action{}, false
}

// neverStartedSeed is step 7.
func neverStartedSeed(s *snapshot) (action, bool) {
	if len(s.views) != 1 || s.everAvailable {
		return action{}, false
	}
	for name, m := range s.views {
		why := seedToMakeAgain(s, m)
		if why == "" {
			continue
		}
		if a, ok := replacementWaits(s, "seed "+name, m.cause); ok {
			return a, true
		}
		return action{kind: actReseed, member: name, reason: why}, true
	}
	return action{}, false
}

// stuckPods is step 19.
func stuckPods(s *snapshot) (action, bool) {
	for _, name := range sortedKeys(s.views) {
		if pod := s.views[name].pod; s.views[name].state == memberGone && pod != nil {
			return waiting(stuckMessage(pod) + "; its member is restarted or replaced once it is gone"), true
		}
	}
	return action{}, false
}

// stuckMessage says since when a pod has been terminating, and where.
func stuckMessage(pod *corev1.Pod) string {
	msg := fmt.Sprintf("pod %s has been terminating since %s", pod.Name, pod.DeletionTimestamp.UTC().Format(time.RFC3339))
	if pod.Spec.NodeName != "" {
		msg += fmt.Sprintf(" on node %s, which has not confirmed the deletion (if the node is lost for good, delete its Node object)", pod.Spec.NodeName)
	}
	return msg
}

// waiting is the action of a step that waits; reason says for what.
func waiting(reason string) action { return action{kind: actWait, reason: reason} }

// readEtcd asks the pass to read etcd and decide again.
func readEtcd(why string) action { return action{kind: actReadEtcd, reason: why} }
