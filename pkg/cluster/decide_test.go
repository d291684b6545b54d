package cluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// TestDecide is the specification of the algorithm: for a snapshot of a
// cluster, the one action a pass takes. No fake is involved: snapshots are
// built from pods, claims and etcd answers as observe would read them.
//
// Unless a case says otherwise the cluster is a complete, healthy cluster of
// three members (example-a leads when etcd is asked) at rest, and the pass
// has not asked etcd yet.
func TestDecide(t *testing.T) {
	const (
		joiner   = "example-new"
		joiner2  = "example-new2"
		day      = 24 * time.Hour
		rotation = "2026-11-28T23:00:00Z"
	)
	three := []string{memberA, memberB, memberC}
	tests := []struct {
		name string
		mods []snapMod
		// want is the action as action.String() starts.
		want string
		// after, when set, is the wanted time to the next pass; polls, that
		// the next pass comes after the growing wait backoff (etcd asked
		// again soon, not at the next tick).
		after time.Duration
		polls bool
	}{
		// 1. Hands off.
		{name: "a cluster with no valid spec yet waits", mods: mods(noSpec), want: "wait (no valid spec yet)"},
		{name: "a cluster the original marked Failed is left alone", mods: mods(spec(withPhase(api.ClusterPhaseFailed))), want: "wait (the cluster is Failed)"},
		{name: "a cluster being deleted is left alone, even with members gone", mods: mods(beingDeleted, noPod(memberB)), want: "wait (the cluster is being deleted)"},

		// 2. Services.
		{name: "missing services are created first", mods: mods(missingServices, noPod(memberB)), want: "create services (example, example-client)"},
		{name: "a service of another cluster of the same name is waited for", mods: mods(serviceConflict), want: "wait (service example belongs to"},
		{name: "a cluster of three gets a disruption budget that keeps two members", mods: mods(budgets), want: "sync disruption budget (keep 2 members available through voluntary disruptions)"},
		{name: "the disruption budget follows spec.size", mods: mods(budgets, budgetKeeps(2), spec(withSize(5)), etcdLeader(memberA)), want: "sync disruption budget (keep 3 members available (spec.size changed))"},
		{name: "a single member's disruption budget is deleted", mods: mods(budgets, budgetKeeps(2), spec(withSize(1)), members(memberA), onlyPods(memberA)), want: "sync disruption budget (a single member has no disruption budget)"},
		{name: "a cluster whose budget keeps a quorum is left alone", mods: mods(budgets, budgetKeeps(2)), want: "idle"},

		// 2, under issued TLS: the secrets it lacks.
		{name: "a new cluster of issued TLS gets its CA and certificates before its seed", mods: mods(spec(withPhase(api.ClusterPhaseNone)), noMembership, noPods, noIssuedSecrets),
			want: "issue certificates (example-ca, example-peer-tls, example-server-tls, example-operator-tls, example-client-tls)"},
		{name: "the services of a new cluster of issued TLS come before its certificates", mods: mods(spec(withPhase(api.ClusterPhaseNone)), noMembership, noPods, missingServices, noIssuedSecrets), want: "create services"},
		{name: "a paused cluster of issued TLS still gets its certificates, for a restore seed to mount", mods: mods(spec(withPaused), noIssuedSecrets), want: "issue certificates (example-ca"},
		{name: "a cluster whose certificates cert-manager issues gets its Certificates first", mods: mods(spec(withPhase(api.ClusterPhaseNone)), noMembership, noPods, certManagerCopies(func(l []certManagerLeaf) {
			for i := range l {
				l[i].exists, l[i].hasCopy = false, false
			}
		})), want: "make certificates (example-peer, example-server, example-operator, example-client)"},
		{name: "a certificate cert-manager renewed is copied, even in a paused cluster", mods: mods(spec(withPaused), certManagerCopies(func(l []certManagerLeaf) { l[0].fresh = true })), want: "copy certificate peer (renewed by cert-manager)"},
		{name: "a rotation asked for has cert-manager issue each certificate again", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), func(s *snapshot) { s.rotateRequest = "r1" }), want: "reissue certificate peer"},
		{name: "a cluster whose certificates cert-manager issues is left alone once its copies are up to date", mods: mods(certManagerCopies(func([]certManagerLeaf) {})), want: "idle"},
		{name: "a certificate secret deleted from a running cluster is issued again from its CA", mods: mods(issuedSecrets, noIssuedSecret(tlsissue.Client)), want: "issue certificates (example-client-tls)"},
		{name: "nothing is issued from a CA secret that cannot issue; the cluster waits for it to be fixed", mods: mods(issuedSecrets, noIssuedSecret(tlsissue.Client), unusableCA),
			want: "wait (no certificate is issued while the TLS secrets that exist are not usable)"},
		{name: "secrets of a deleted cluster of the same name are waited for, not used", mods: mods(spec(withPhase(api.ClusterPhaseNone)), noMembership, noPods, noIssuedSecrets, issuedSecretOfAnotherCluster), want: "wait (secret example-ca belongs to"},
		{name: "a cluster of issued TLS with every secret goes on to its seed", mods: mods(spec(withSeedAndJoin, withPhase(api.ClusterPhaseCreating)), noMembership, noPods, issuedSecrets), want: "seed to " + testVersion},
		{name: "a running cluster of issued TLS with every secret is left alone", mods: mods(issuedSecrets), want: "idle"},

		// 3. Paused, TLS.
		{name: "a paused cluster changes nothing", mods: mods(spec(withPaused)), want: "wait (spec.paused is true)"},
		{name: "a paused cluster does not even replace a dead member", mods: mods(spec(withPaused), podIs(memberB, failed)), want: "wait (spec.paused is true)"},
		{name: "without the operator's client TLS secret nothing is changed", mods: mods(tlsMissing, noPod(memberB)), want: "wait (the operator's etcd client TLS secret is not usable)"},

		// 3b. Expired issued certificates: renewed before anything is decided from the failures they cause.
		{name: "an expired peer certificate is renewed while no member is ready and etcd does not answer", mods: mods(issuedSecrets, issuedAge(tlsissue.Peer, 91*day), podIs(memberA, notReady), podIs(memberB, notReady), podIs(memberC, notReady), etcdFailed),
			want: "renew certificate example-peer-tls (expired on 2025-02-28T12:00:00Z: every handshake with it fails)"},
		{name: "an expired server certificate is renewed before a failed member is replaced", mods: mods(issuedSecrets, issuedAge(tlsissue.Server, 95*day), podIs(memberB, failed)), want: "renew certificate example-server-tls (expired on"},
		{name: "an expired certificate is renewed even though others are merely due, and before them", mods: mods(issuedSecrets, issuedAge(tlsissue.Peer, 70*day), issuedAge(tlsissue.Client, 91*day), podIs(memberB, notReady)), want: "renew certificate example-client-tls (expired on"},
		{name: "expired certificates are renewed one secret per pass, the peer's first", mods: mods(issuedSecrets, issuedAge(tlsissue.Server, 91*day), issuedAge(tlsissue.Peer, 91*day), etcdFailed), want: "renew certificate example-peer-tls (expired on"},
		{name: "a paused cluster renews no expired certificate", mods: mods(issuedSecrets, issuedAge(tlsissue.Peer, 91*day), spec(withPaused)), want: "wait (spec.paused is true)"},
		{name: "no expired certificate is renewed from a CA secret that cannot issue", mods: mods(issuedSecrets, issuedAge(tlsissue.Peer, 91*day), unusableCA), want: "idle"},
		{name: "no expired certificate is renewed while a secret of issued TLS is missing; the missing one is issued first", mods: mods(issuedSecrets, issuedAge(tlsissue.Peer, 91*day), noIssuedSecret(tlsissue.Client)), want: "issue certificates (example-client-tls)"},
		{name: "a certificate due but not expired still waits for every member to be ready", mods: mods(issuedSecrets, issuedAge(tlsissue.Peer, 89*day), podIs(memberB, failed)), want: "read etcd (remove member example-b)"},

		// 4. Bootstrap.
		{name: "a new cluster is recorded Creating before anything is made", mods: mods(spec(withPhase(api.ClusterPhaseNone)), noMembership, noPods), want: "record phase Creating"},
		{name: "a new cluster recorded Creating that asks for seed and join gets a seed at spec.version", mods: mods(spec(withSeedAndJoin, withPhase(api.ClusterPhaseCreating)), noMembership, noPods), want: "seed to " + testVersion},
		{name: "a Creating cluster of seed and join without pods (a restart before the seed) gets its seed", mods: mods(spec(withSeedAndJoin, withPhase(api.ClusterPhaseCreating)), noMembership, noPods), want: "seed to " + testVersion},
		{name: "a new cluster recorded Creating whose spec names no bootstrap mode gets every member at once", mods: mods(spec(withPhase(api.ClusterPhaseCreating)), noMembership, noPods), want: "start together to " + testVersion},
		{name: "pods found while Creating are adopted, not failed or duplicated", mods: mods(spec(withPhase(api.ClusterPhaseCreating)), noMembership), want: "adopt"},
		{name: "the restore operator's seed of a new cluster is adopted", mods: mods(spec(withPhase(api.ClusterPhaseNone)), noMembership, onlyPods(memberA)), want: "adopt"},
		{name: "a new seed waits for usable TLS certificates rather than fail its handshakes", mods: mods(spec(withPhase(api.ClusterPhaseNone)), noMembership, noPods, badCertificate), want: "wait (the TLS certificates are not usable)"},
		{name: "a status stored no further than Creating, with the claims of several members and no pod, adopts them rather than seed beside their data", mods: mods(spec(withPVC), spec(withPhase(api.ClusterPhaseCreating)), noMembership, noPods, claims(memberA, joiner)),
			want: "adopt (member claims exist for a cluster whose status says Creating: more than a seed's)"},
		{name: "a new seed waits for the pods of an earlier one to be gone", mods: mods(spec(withPhase(api.ClusterPhaseCreating)), noMembership, noPods, terminatingPod(memberA)), want: "wait (pods of an earlier seed are being deleted)"},

		// 3c and 4. Members started together (spec.bootstrap.mode Together).
		{name: "a new cluster recorded Creating whose members start together gets every member at once", mods: mods(spec(withTogether, withPhase(api.ClusterPhaseCreating)), noMembership, noPods),
			want: "start together to " + testVersion + " (3 members from one static initial cluster)"},
		{name: "a one-member cluster gets a seed whatever the mode", mods: mods(spec(withTogether, withSize(1), withPhase(api.ClusterPhaseCreating)), noMembership, noPods), want: "seed to " + testVersion},
		{name: "the claim of an earlier try is started on as a seed's, not beside members started together", mods: mods(spec(withTogether, withPVC, withPhase(api.ClusterPhaseCreating)), noMembership, noPods, claims(memberA)), want: "seed example-a to"},
		{name: "members started together that all start are adopted, not made again", mods: mods(spec(withTogether, withPhase(api.ClusterPhaseCreating)), notYetAvailable, noMembership, podsStartedTogether(memberA, memberB, memberC)), want: "adopt"},
		{name: "an operator restarted in the middle of a start together makes the pods it had not made, from the plan on those it had", mods: mods(spec(withTogether, withPhase(api.ClusterPhaseCreating)), notYetAvailable, noMembership, podsStartedTogether(memberA), podIs(memberA, pendingFor(time.Second))),
			want: "resume start together example-b example-c"},
		{name: "members started together whose pods are gone are not made again beside a member whose etcd ran: with them it may have formed a quorum, and the wait says so", mods: mods(spec(withTogether), notYetAvailable, noMembership, podsStartedTogether(memberA)),
			want: "wait (members example-b, example-c started together have no pod and are not made again: the etcd of example-a ran, and with them a quorum may have formed and served"},
		{name: "members started together whose pods are gone are made again from the plan when no member left ever ran etcd", mods: mods(spec(withTogether), notYetAvailable, noMembership, podsStartedTogether(memberA), podIs(memberA, etcdNeverStarted)),
			want: "resume start together example-b example-c to " + testVersion + " (members started together whose pods are gone are made again: no member left ran with them)"},
		{name: "a member started together whose pod is gone is replaced as a dead member once the others formed a quorum", mods: mods(spec(withTogether), notYetAvailable, members(memberA, memberB, memberC), podsStartedTogether(memberA, memberB), etcdLeader(memberA, memberC)),
			want: "remove dead member example-c (its pod is gone"},
		{name: "a member started together whose pod is gone is not made again once etcd named a member's role to an earlier pass", mods: mods(spec(withTogether), notYetAvailable, members(memberA, memberB, memberC), podsStartedTogether(memberA, memberB), answeredBefore(memberA, api.MemberRoleLeader)),
			want: "read etcd (remove member example-c)"},
		{name: "a member started together whose pod is gone is not made again beside a member that was ready: it may have served", mods: mods(spec(withTogether), notYetAvailable, members(memberA, memberB, memberC), podsStartedTogether(memberA, memberB), podIs(memberA, readyOnce)),
			want: "read etcd (remove member example-c)"},
		{name: "a member started together whose pod is gone comes back on its claim, whatever it wrote there", mods: mods(spec(withTogether, withPVC), notYetAvailable, noMembership, podsStartedTogether(memberA, memberB), claims(memberA, memberB, memberC)),
			want: "resume start together example-c to " + testVersion + " (members started together whose pods are gone come back on their claims)"},
		{name: "members started together, one of which cannot start while fewer than a quorum ever ran etcd, start again with a new token", mods: mods(spec(withTogether), notYetAvailable, noMembership, podsStartedTogether(memberA, memberB, memberC), podIs(memberB, pendingFor(time.Minute)), podIs(memberC, pendingFor(6*time.Minute))),
			want: "start together again example-a example-b example-c (example-c cannot start and no quorum ever formed: they start again with a new token)"},
		{name: "members started together, one of which cannot start while a quorum of them ran etcd, are repaired as any cluster's", mods: mods(spec(withTogether), notYetAvailable, noMembership, podsStartedTogether(memberA, memberB, memberC), podIs(memberC, pendingFor(6*time.Minute))),
			want: "read etcd (the membership is unknown)"},
		{name: "members started together, one of whose claims went with its node while the others never ran, start again with a new token rather than make it on that claim", mods: mods(spec(withTogether, withPVC), notYetAvailable, noMembership, podsStartedTogether(memberA, memberB), podIs(memberA, etcdNeverStarted), podIs(memberB, pendingFor(time.Minute)), claims(memberA, memberB, memberC), volumeNodeGone(memberC, "node-c")),
			want: "start together again example-a example-b example-c (example-c cannot start"},
		{name: "members started together that fail as those before them did wait longer each time", mods: mods(spec(withTogether), notYetAvailable, noMembership, podsStartedTogether(memberA, memberB, memberC), podIs(memberB, pendingFor(time.Minute)), podIs(memberC, sysctlForbidden), replacedFor("failed: SysctlForbidden", 1, 10*time.Second)),
			want: "wait (member example-c fails as the 1 member(s) made before it did (failed: SysctlForbidden)"},
		{name: "members started together are not started again when a claim an earlier pod may have written and a member that ran make a quorum", mods: mods(spec(withTogether, withPVC), notYetAvailable, noMembership, podsStartedTogether(memberA, memberB, memberC), claims(memberA, memberB, memberC), podIs(memberA, unmarkedOnClaim, etcdNeverStarted), podIs(memberC, pendingFor(6*time.Minute))),
			want: "read etcd (the membership is unknown)"},
		{name: "a cluster started together that never served and owns nothing any more is started again", mods: mods(spec(withTogether), notYetAvailable, noMembership, noPods), want: "record phase Creating (a cluster that never served owns no pod and no claim: it is started again)"},
		{name: "a cluster started together that was available is repaired as any other", mods: mods(spec(withTogether), members(memberA, memberB, memberC), podsStartedTogether(memberA, memberB)), want: "read etcd (remove member example-c)"},

		// 5. Unknown membership.
		{name: "an unknown membership is read from etcd once a member pod runs", mods: mods(noMembership), want: "read etcd (the membership is unknown)"},
		{name: "an unknown membership etcd did not tell is waited for", mods: mods(noMembership, etcdFailed), want: "wait (etcd did not tell its membership)"},
		{name: "an unknown membership waits while member pods only start", mods: mods(noMembership, podIs(memberA, pendingFor(time.Minute)), podIs(memberB, pendingFor(time.Minute)), podIs(memberC, pendingFor(time.Minute))), want: "wait (the membership is unknown and no member pod runs yet)"},
		{name: "the failed only pod of a cluster never available is made again from the spec", mods: mods(notYetAvailable, noMembership, onlyPods(memberA), podIs(memberA, failed, etcdNeverStarted)), want: "reseed example-a"},
		{name: "the failed seed of a cluster never available is made again beside the joining pod made while it started", mods: mods(notYetAvailable, noMembership, onlyPods(memberA), podIs(memberA, failed, etcdNeverStarted), joiningPod(joiner, []string{memberA})), want: "reseed example-a"},
		{name: "the failed only pod of a cluster that was available is not made again", mods: mods(noMembership, onlyPods(memberA), podIs(memberA, failed)), want: "wait (no member pod runs)"},
		{name: "a failed seed of the restore operator is that operator's to make again", mods: mods(notYetAvailable, noMembership, onlyPods(memberA), podIs(memberA, failed, restoreSeed)), want: "wait (no member pod runs)"},
		{name: "a running cluster without any pod waits and says so", mods: mods(noMembership, noPods), want: "wait (no member pod runs)"},

		// 6. Expectations.
		{name: "a pod just created is waited for until the cache shows it", mods: mods(expectPod(memberC, time.Minute), noPod(memberC)), want: "wait (pod example-c was created and is not in the cache yet)", after: time.Minute},

		// 7. A seed that never started.
		{name: "a seed that failed before the cluster was ever available is made again", mods: mods(notYetAvailable, members(memberA), onlyPods(memberA), podIs(memberA, failed, etcdNeverStarted)), want: "reseed example-a"},
		{name: "a seed on a claim that failed before the cluster was ever available is made again: the next seed starts on its claim", mods: mods(notYetAvailable, spec(withPVC), members(memberA), onlyPods(memberA), claims(memberA), podIs(memberA, failed)), want: "reseed example-a"},
		{name: "a seed on an emptyDir whose etcd ran is not made again: it may have served between two passes", mods: mods(notYetAvailable, members(memberA), onlyPods(memberA), podIs(memberA, failed)), want: "wait (quorum lost: 0 of 1"},
		{name: "a Creating cluster's seed starts on the claim of the seed made before it", mods: mods(spec(withPVC), spec(withPhase(api.ClusterPhaseCreating)), noMembership, noPods, claims(memberA, "example-joiner"), statusMembers(memberA)), want: "seed example-a to " + testVersion},
		{name: "a seed pending longer than the timeout in a cluster never available is made again", mods: mods(notYetAvailable, members(memberA), onlyPods(memberA), podIs(memberA, pendingFor(6*time.Minute))), want: "reseed example-a"},
		{name: "a seed that crash-loops on a spec fixed since, and never served, is made again at once from the spec in force", mods: mods(notYetAvailable, spec(withSize(1)), members(memberA), onlyPods(memberA), podIs(memberA, crashLooping(5), neverReady), spec(withNodeSelector("disk", "ssd"))), want: "reseed example-a (the seed never served and spec.pod changed since it was made)"},
		{name: "a seed that crash-loops on a spec fixed since is not made again once it was ready: it may have served", mods: mods(notYetAvailable, spec(withSize(1)), members(memberA), onlyPods(memberA), podIs(memberA, crashLooping(5), readyOnce), spec(withNodeSelector("disk", "ssd"))), want: "wait (0 of 1 voting members run"},
		{name: "a seed that crash-loops on the spec in force is left to the kubelet", mods: mods(notYetAvailable, spec(withSize(1)), members(memberA), onlyPods(memberA), podIs(memberA, crashLooping(5), neverReady)), want: "wait (0 of 1 voting members run"},
		{name: "a seed waiting for an image whose repository was fixed since is made again at once, not at the pending timeout", mods: mods(notYetAvailable, spec(withSize(1)), members(memberA), onlyPods(memberA), podIs(memberA, createdAgo(time.Minute), imagePullFailing), spec(withRepository("registry.example/etcd"))), want: "reseed example-a (the seed never served and spec.repository changed since it was made)"},
		{name: "a seed waiting for a version fixed since is made again at once", mods: mods(notYetAvailable, spec(withSize(1)), members(memberA), onlyPods(memberA), podIs(memberA, createdAgo(time.Minute), imagePullFailing), spec(withVersion(oldVersion))), want: "reseed example-a (the seed never served and spec.version changed since it was made)"},
		{name: "a seed whose pod was deleted in a cluster that never served is made again", mods: mods(notYetAvailable, spec(withSize(1)), members(memberA), noPods), want: "reseed example-a (the seed's pod is gone and the cluster was never available)"},
		{name: "a seed the kubelet rejects as it rejected the seed made a moment ago waits, longer each time", mods: mods(notYetAvailable, spec(withSize(1)), members(memberA), onlyPods(memberA), podIs(memberA, sysctlForbidden), replacedFor("failed: SysctlForbidden", 2, 30*time.Second)), want: "wait (seed example-a fails as the 2 member(s) made before it did (failed: SysctlForbidden)", after: 90 * time.Second},
		{name: "a seed the kubelet rejects is made again once its back-off has passed", mods: mods(notYetAvailable, spec(withSize(1)), members(memberA), onlyPods(memberA), podIs(memberA, sysctlForbidden), replacedFor("failed: SysctlForbidden", 2, 3*time.Minute)), want: "reseed example-a (the seed never ran"},
		{name: "a seed the kubelet rejects is made again at once after the spec changed", mods: mods(notYetAvailable, spec(withSize(1)), members(memberA), onlyPods(memberA), podIs(memberA, sysctlForbidden), replacedFor("failed: SysctlForbidden", 2, 30*time.Second), specEdited), want: "reseed example-a (the seed never ran"},
		{name: "the only pod the kubelet rejects, with the membership unknown, waits as the seed before it did", mods: mods(notYetAvailable, noMembership, spec(withSize(1)), onlyPods(memberA), podIs(memberA, sysctlForbidden), replacedFor("failed: SysctlForbidden", 1, 10*time.Second)), want: "wait (seed example-a fails as the 1 member(s) made before it did", after: 50 * time.Second},
		{name: "the only member of a cluster that was available is not made again", mods: mods(members(memberA), onlyPods(memberA), podIs(memberA, failed)), want: "wait (quorum lost: 0 of 1"},

		// 8. Pods stuck terminating on lost nodes.
		{name: "a pod stuck terminating on a node lost for longer than the user's bound is force-deleted once the leader confirms its member is down", mods: mods(spec(withPVC, withNodeLostAfter(600)), claims(memberA, memberB, memberC), stuckPod(memberC), nodeLostForLong, etcdLeader(memberA, memberC)),
			want: "force-delete pod example-c (it is stuck terminating and " + lostNodeWhy + "; etcd's leader confirms its member does not answer)"},
		{name: "a pod stuck terminating on a lost node waits for etcd to be asked", mods: mods(spec(withPVC, withNodeLostAfter(600)), claims(memberA, memberB, memberC), stuckPod(memberC), nodeLostForLong), want: "read etcd (force-delete pod example-c)"},
		{name: "a pod stuck terminating on a lost node whose member answers etcd is not force-deleted", mods: mods(spec(withPVC, withNodeLostAfter(600)), claims(memberA, memberB, memberC), stuckPod(memberC), nodeLostForLong, etcdLeader(memberA)),
			want: "wait (pod example-c has been terminating since"},
		{name: "without a leader to confirm its member is down, a stuck pod is not forced and does not hold back another member's restart", mods: mods(spec(withPVC, withNodeLostAfter(600)), claims(memberA, memberB, memberC), stuckPod(memberC), noPod(memberB), nodeLostForLong, etcdWithoutLeaderFrom(memberA)),
			want: "restart in place example-b"},
		{name: "a pod stuck terminating on a node not counted as lost is only waited for", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), stuckPod(memberC), etcdLeader(memberA, memberC)), want: "wait (pod example-c has been terminating since"},
		{name: "a pod of no member stuck terminating on a lost node is force-deleted", mods: mods(spec(withNodeLostAfter(600)), stuckPod("example-old"), nodeLostForLong, etcdLeader(memberA)),
			want: "force-delete pod example-old (it is stuck terminating and " + lostNodeWhy + "; it belongs to no member)"},
		{name: "a member whose local volume's node counts as lost is replaced on a new claim", mods: mods(spec(withPVC, withNodeLostAfter(600)), claims(memberA, memberB, memberC), noPod(memberC), volumeNodeGone(memberC, "node-lost"), nodeLostForLong, etcdLeader(memberA, memberC)),
			want: "remove dead member example-c (its claim's volume can only be used on node node-lost, which counts as lost: " + lostNodeWhy + ")"},

		// 9. Restart in place.
		{name: "a member whose pod is gone and whose claim holds its data is restarted in place", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), noPod(memberC)), want: "restart in place example-c to " + testVersion},
		{name: "the ended pod of a member with a claim is deleted first, to restart it in place", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), podIs(memberC, failed)), want: "delete failed pod example-c"},
		{name: "an evicted member with a claim is restarted in place, not replaced", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), podIs(memberC, evicted)), want: "delete failed pod example-c"},
		{name: "members whose pods are all gone are restarted together, without a quorum", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), noPods), want: "restart in place example-a example-b example-c to " + testVersion},
		{name: "a quorum lost with claims heals by restarting the lost members in place", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), noPod(memberB), noPod(memberC)), want: "restart in place example-b example-c"},
		{name: "a member restarted in place runs the version its claim records", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), claimVersion(memberC, oldVersion), noPod(memberC)), want: "restart in place example-c to " + oldVersion},
		{name: "after an operator restart every member is restarted from the claims the status listed", mods: mods(spec(withPVC), noMembership, noPods, claims(memberA, memberB, memberC, "example-gone"), statusMembers(memberA, memberB, memberC)), want: "restart in place example-a example-b example-c to " + testVersion},
		{name: "after an operator restart the ended pods are deleted before the members restart", mods: mods(spec(withPVC), noMembership, claims(memberA, memberB, memberC), podIs(memberA, failed), podIs(memberB, failed), podIs(memberC, failed)), want: "delete failed pod example-a"},
		{name: "after an operator restart a member on a node that does not answer is waited for", mods: mods(spec(withPVC), noMembership, claims(memberA, memberB, memberC), podIs(memberA, failed), podIs(memberB, unknownPhase), podIs(memberC, failed), statusMembers(memberA, memberB, memberC)), want: "delete failed pod example-a"},
		{name: "a member restarted too often in the window is replaced", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), claimRestarts(memberC, 3, time.Minute), podIs(memberC, failed), etcdLeader(memberA, memberC)), want: "remove dead member example-c (it failed again after 3 restarts in place within 10m0s)"},
		{name: "restarts older than the window do not count", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), claimRestarts(memberC, 3, time.Hour), podIs(memberC, failed)), want: "delete failed pod example-c"},
		{name: "a member whose data etcd refuses is replaced at once", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), podIs(memberC, failed, exitedWith("panic: wal: crc mismatch")), etcdLeader(memberA, memberC)), want: "remove dead member example-c (etcd refuses its data: exit code 2"},
		{name: "a member whose local volume's node is gone is replaced, not restarted on a claim no pod can use", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), noPod(memberC), volumeNodeGone(memberC, "node-c"), etcdLeader(memberA, memberC)),
			want: "remove dead member example-c (its claim's volume can only be used on node node-c, which is gone from the cluster)"},
		{name: "the pod made on a claim whose volume's node is gone is removed with its member", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), podIs(memberC, pendingFor(time.Minute), unschedulable), volumeNodeGone(memberC, "node-c"), etcdLeader(memberA, memberC)),
			want: "remove dead member example-c (its claim's volume can only be used on node node-c"},
		{name: "a member whose volume's node is gone but which answers etcd is not removed", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), noPod(memberC), volumeNodeGone(memberC, "node-c"), etcdLeader(memberA)),
			want: "wait (member example-c answers etcd although its claim's volume can only be used on node node-c"},
		{name: "a member whose volume's node is gone waits for a quorum to be removed", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), noPod(memberB), noPod(memberC), volumeNodeGone(memberC, "node-c")),
			want: "restart in place example-b"},
		{name: "a running member is not replaced for a volume's node read as gone", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), volumeNodeGone(memberC, "node-c")), want: "idle"},
		{name: "without evidence that its volume's node is gone, a member on a claim is restarted in place", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), noPod(memberC), volumeNodesUnknown(memberC, "the operator's role does not grant get on persistentvolumes")),
			want: "restart in place example-c"},
		{name: "a crashing member is left to the kubelet, which restarts it with its data", mods: mods(podIs(memberC, crashLooping(1))), want: "idle"},
		{name: "a member crashing more often than the ladder allows is replaced", mods: mods(podIs(memberC, crashLooping(4)), restartsInWindow(memberC, 4), etcdLeader(memberA, memberC)), want: "remove dead member example-c (it failed again after 4 restarts"},
		{name: "a member failing as the one replaced a moment ago waits before it is replaced", mods: mods(podIs(memberC, crashLooping(4)), restartsInWindow(memberC, 4), replacedFor("container etcd keeps failing: exit code 137 (OOMKilled)", 1, 30*time.Second), etcdLeader(memberA, memberC)), want: "wait (member example-c fails as the 1 member(s) made before it did (container etcd keeps failing: exit code 137 (OOMKilled))", after: 30 * time.Second},
		{name: "a member failing as one replaced earlier is replaced once the back-off has passed", mods: mods(podIs(memberC, crashLooping(4)), restartsInWindow(memberC, 4), replacedFor("container etcd keeps failing: exit code 137 (OOMKilled)", 1, 2*time.Minute), etcdLeader(memberA, memberC)), want: "remove dead member example-c (it failed again after 4 restarts"},
		{name: "a member's pod that cannot be scheduled is made again on its claim as soon as spec.pod changed, not at the pending timeout", mods: mods(spec(withPVC), onlyPods(memberA, memberB, memberC), claims(memberA, memberB, memberC), podIs(memberC, pendingFor(time.Minute), unschedulable), spec(withNodeSelector("disk", "ssd"))), want: "delete failed pod example-c (its pod has not started and spec.pod changed since it was made: to restart the member in place on its claim)"},
		{name: "a member's pod that cannot be scheduled under the spec in force waits for the pending timeout", mods: mods(spec(withPVC), onlyPods(memberA, memberB, memberC), claims(memberA, memberB, memberC), podIs(memberC, pendingFor(time.Minute), unschedulable)), want: "idle"},
		{name: "a member on a node that does not answer is not restarted elsewhere", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), podIs(memberC, unknownPhase)), want: "idle"},

		// 10. Quorum.
		{name: "with two of three members dead nothing is changed", mods: mods(podIs(memberB, failed), noPod(memberC)), want: "wait (quorum lost: 1 of 3 voting members run, 2 are needed)"},
		{name: "with every member dead nothing is changed", mods: mods(podIs(memberA, failed), podIs(memberB, failed), podIs(memberC, failed)), want: "wait (quorum lost: 0 of 3"},
		{name: "while a new cluster's seed starts, the first joining pod is made", mods: mods(notYetAvailable, members(memberA), onlyPods(memberA), podIs(memberA, pendingFor(time.Second))), want: "create joiner to " + testVersion + " (while the seed starts)"},
		{name: "while a new cluster's seed starts with its joining pod made, the seed is waited for", mods: mods(notYetAvailable, members(memberA), onlyPods(memberA), podIs(memberA, pendingFor(time.Second)), joiningPod(joiner, []string{memberA})), want: "wait (0 of 1 voting members run and 1 are starting"},
		{name: "a seed that starts again in a cluster that was available makes no joining pod", mods: mods(members(memberA), onlyPods(memberA), podIs(memberA, pendingFor(time.Second))), want: "wait (0 of 1 voting members run and 1 are starting"},
		{name: "a one-member cluster makes no joining pod while its seed starts", mods: mods(notYetAvailable, spec(withSize(1)), members(memberA), onlyPods(memberA), podIs(memberA, pendingFor(time.Second))), want: "wait (0 of 1 voting members run and 1 are starting"},
		{name: "while members start, the quorum is waited for", mods: mods(podIs(memberB, pendingFor(time.Minute)), podIs(memberC, pendingFor(time.Minute))), want: "wait (1 of 3 voting members run and 2 are starting; 2 are needed)"},
		{name: "a learner does not count towards the quorum", mods: mods(learner(memberB), noPod(memberC)), want: "wait (quorum lost: 1 of 2"},
		{name: "with quorum lost even stray pods are left alone", mods: mods(podIs(memberB, failed), noPod(memberC), strayPod("example-stray")), want: "wait (quorum lost"},

		// Opt-in disaster recovery, at the quorum step.
		{name: "without disaster recovery a quorum lost for good is reported and waited on", mods: mods(spec(withPVC), claims(memberA), noPod(memberB), noPod(memberC), quorumLostAgo(time.Hour)), want: "wait (quorum lost: 1 of 3"},
		{name: "disaster recovery waits out its grace period", mods: mods(spec(withPVC), recoveryOn(false), claims(memberA), noPod(memberB), noPod(memberC), quorumLostAgo(time.Minute), etcdWithoutLeaderFrom(memberA)), want: "wait (quorum lost since 2025-03-01T11:59:00Z; disaster recovery starts at 2025-03-01T12:04:00Z", after: 4 * time.Minute},
		{name: "disaster recovery reads etcd to find the survivor with the newest data", mods: mods(spec(withPVC), recoveryOn(false), claims(memberA, memberB), noPod(memberC), podIs(memberB, failed), claimRestarts(memberB, 3, time.Minute), quorumLostAgo(time.Hour)), want: "read etcd (disaster recovery: ask every member for its leader and raft index)"},
		{name: "after the grace period the survivor with the newest data becomes a one-member cluster", mods: mods(spec(withPVC), recoveryOn(false), claims(memberA), noPod(memberB), noPod(memberC), quorumLostAgo(time.Hour), etcdWithoutLeaderFrom(memberA)), want: "force a new cluster from example-a (the survivor with the newest data"},
		{name: "the survivor is restarted with --force-new-cluster once its pod is gone", mods: mods(spec(withPVC), recoveryOn(false), claims(memberA), noPods, recoveringFrom(memberA), quorumLostAgo(time.Hour)), want: "restart in place example-a to " + testVersion + " with --force-new-cluster"},
		{name: "the survivor is restarted with --force-new-cluster once its pod is gone, though the forced restart made the membership unknown", mods: mods(spec(withPVC), recoveryOn(false), claims(memberA), noPods, noMembership, recoveringFrom(memberA), quorumLostAgo(time.Hour)), want: "restart in place example-a to " + testVersion + " with --force-new-cluster"},
		{name: "the survivor running alone is restarted without --force-new-cluster before the cluster regrows", mods: mods(spec(withPVC), recoveryOn(false), members(memberA), onlyPods(memberA), podIs(memberA, forced), claims(memberA)), want: "delete failed pod example-a (to restart it without --force-new-cluster"},
		{name: "with no member's data left, the cluster is restored from its newest backup", mods: mods(recoveryOn(true), noPods, quorumLostAgo(time.Hour)), want: "restore from the newest backup"},
		{name: "members that survive on emptyDir volumes cannot be recovered from", mods: mods(recoveryOn(true), noPod(memberB), noPod(memberC), quorumLostAgo(time.Hour)), want: "wait (disaster recovery cannot start"},

		// 12. Clean-up.
		{name: "a stray pod makes the pass read etcd first", mods: mods(strayPod("example-stray")), want: "read etcd (delete a pod that belongs to no member)"},
		{name: "a stray pod is deleted once etcd's leader confirmed the membership", mods: mods(strayPod("example-stray"), etcdLeader(memberA)), want: "delete stray pod example-stray"},
		{name: "a stray pod is not deleted while etcd has no leader", mods: mods(strayPod("example-stray"), etcdWithoutLeader), want: "wait (etcd has no leader to confirm the membership"},
		{name: "a stray pod is not deleted while etcd does not answer", mods: mods(strayPod("example-stray"), etcdFailed), want: "wait (etcd cannot be asked before the change"},
		{name: "a joining pod that ended is deleted", mods: mods(spec(withSize(4)), joiningPod(joiner, three, failed), etcdLeader(memberA)), want: "delete joiner example-new (it ended before its member was added)"},
		{name: "a joining pod the kubelet rejects as it rejected the one before stays until its back-off has passed", mods: mods(spec(withSize(4)), joiningPod(joiner, three, sysctlForbidden), replacedFor("failed: SysctlForbidden", 1, 20*time.Second), etcdLeader(memberA)), want: "wait (joining member example-new fails as the 1 member(s) made before it did (failed: SysctlForbidden)", after: 40 * time.Second},
		{name: "a joining pod the kubelet rejects is deleted once its back-off has passed", mods: mods(spec(withSize(4)), joiningPod(joiner, three, sysctlForbidden), replacedFor("failed: SysctlForbidden", 1, 2*time.Minute), etcdLeader(memberA)), want: "delete joiner example-new (it ended before its member was added)"},
		{name: "a joining pod made for another version is deleted", mods: mods(spec(withSize(4)), joiningPod(joiner, three, onVersion(oldVersion)), etcdLeader(memberA)), want: "delete joiner example-new (it was made for etcd 3.4.23"},
		{name: "a joining pod made for another membership is deleted", mods: mods(spec(withSize(4)), joiningPod(joiner, []string{memberA, memberB}), etcdLeader(memberA)), want: "delete joiner example-new (the membership changed since it was made)"},
		{name: "a joining pod is deleted once no member is to be added", mods: mods(joiningPod(joiner, three), etcdLeader(memberA)), want: "delete joiner example-new (no member is to be added any more)"},
		{name: "a joining pod made for an older spec.pod is deleted: new members follow the spec in force", mods: mods(spec(withSize(4)), joiningPod(joiner, three), spec(withNodeSelector("disk", "ssd")), etcdLeader(memberA)), want: "delete joiner example-new (spec.pod changed since it was made)"},
		{name: "a joining pod that never resolved within the timeout is deleted", mods: mods(spec(withSize(4)), joiningPod(joiner, three, resolving, createdAgo(6*time.Minute)), etcdLeader(memberA)), want: "delete joiner example-new (it has not started within 5m0s)"},
		{name: "of two usable joining pods the second is deleted", mods: mods(spec(withSize(4)), joiningPod(joiner, three), joiningPod(joiner2, three), etcdLeader(memberA)), want: "delete joiner example-new2 (another joining pod is used)"},
		{name: "a joining pod that waits for its add, however old, is kept and added", mods: mods(spec(withSize(4)), joiningPod(joiner, three, createdAgo(time.Hour)), etcdLeader(memberA)), want: "add joiner example-new as learner"},
		{name: "a claim of no member is deleted once etcd confirmed the membership", mods: mods(spec(withPVC), claims(memberA, memberB, memberC, "example-gone"), etcdLeader(memberA)), want: "delete stray claim example-gone"},
		{name: "a claim of no member makes the pass read etcd first", mods: mods(spec(withPVC), claims(memberA, memberB, memberC, "example-gone")), want: "read etcd (delete a claim that belongs to no member)"},
		{name: "the claims of members and of a joining pod are kept", mods: mods(spec(withSize(4)), spec(withPVC), claims(memberA, memberB, memberC, joiner), joiningPod(joiner, three), etcdLeader(memberA)), want: "add joiner example-new"},
		{name: "the claim of a pod being created is kept", mods: mods(spec(withPVC), claims(memberA, memberB, memberC, joiner), expectPod(joiner, time.Minute)), want: "wait (pod example-new was created"},

		// 13. Replacement.
		{name: "a failed member makes the pass read etcd", mods: mods(podIs(memberC, failed)), want: "read etcd (remove member example-c)"},
		{name: "a failed member is removed once etcd confirms it does not answer", mods: mods(podIs(memberC, failed), etcdLeader(memberA, memberC)), want: "remove dead member example-c (its pod is failed and its data was on an emptyDir volume)"},
		{name: "a member without a pod is removed", mods: mods(noPod(memberC), etcdLeader(memberA, memberC)), want: "remove dead member example-c (its pod is gone and its data was on an emptyDir volume)"},
		{name: "a member pending longer than the timeout is removed", mods: mods(podIs(memberC, pendingFor(6*time.Minute)), etcdLeader(memberA, memberC)), want: "remove dead member example-c (its pod is failed"},
		{name: "a member whose pod the cache lacks but whose etcd answers is not dead; its successor's pod is made meanwhile", mods: mods(noPod(memberC), etcdLeader(memberA)), want: "create joiner to " + testVersion + " (ahead of the replacement of example-c)"},
		{name: "a member whose pod the cache lacks but whose etcd answers is not dead, and is asked about again soon", mods: mods(noPod(memberC), etcdLeader(memberA), joiningPod(joiner, []string{memberA, memberB}, resolving)), want: "wait (member example-c answers etcd although its pod is not seen", polls: true},
		{name: "a joining pod made ahead of a replacement stays while the dead member is removed", mods: mods(noPod(memberC), etcdLeader(memberA, memberC), joiningPod(joiner, []string{memberA, memberB}, resolving)), want: "remove dead member example-c"},
		{name: "a joining pod made ahead of a replacement goes when the member's pod shows up after all", mods: mods(etcdLeader(memberA), joiningPod(joiner, []string{memberA, memberB}, resolving)), want: "delete joiner example-new (no member is to be added any more)"},
		{name: "a member whose pod is being deleted is replaced only once the pod is gone", mods: mods(terminatingPod(memberC)), want: "wait (pod example-c is being deleted"},
		{name: "a dead member is removed while another member still starts", mods: mods(spec(withSize(5)), members(memberA, memberB, memberC, memberD, memberE), podIs(memberD, failed), podIs(memberE, pendingFor(time.Minute)), etcdLeader(memberA, memberD, memberE)), want: "remove dead member example-d"},

		// 14. Learners.
		{name: "a running learner is promoted before anything else changes", mods: mods(spec(withSize(5)), learner(memberC)), want: "promote learner example-c"},
		{name: "a learner that does not run yet is waited for", mods: mods(spec(withSize(4)), members(memberA, memberB, memberC, memberD), learner(memberD), podIs(memberD, pendingFor(time.Minute))), want: "wait (learner example-d does not run yet)"},
		{name: "while a learner starts, the next joining pod is made once etcd confirms the membership", mods: mods(spec(withSize(5)), members(memberA, memberB, memberC, memberD), learner(memberD), podIs(memberD, pendingFor(time.Second))), want: "read etcd (create a joining pod)"},
		{name: "while a learner starts, the next joining pod is made", mods: mods(spec(withSize(5)), members(memberA, memberB, memberC, memberD), learner(memberD), podIs(memberD, pendingFor(time.Second)), etcdLeader(memberA, memberD)), want: "create joiner to " + testVersion + " (while learner example-d starts)"},
		{name: "while a learner starts with the next joining pod made, the learner is waited for", mods: mods(spec(withSize(5)), members(memberA, memberB, memberC, memberD), learner(memberD), podIs(memberD, pendingFor(time.Second)), joiningPod(joiner, []string{memberA, memberB, memberC, memberD})), want: "wait (learner example-d does not run yet)"},
		{name: "a running learner is promoted before its successor's pod is made", mods: mods(spec(withSize(5)), members(memberA, memberB, memberC, memberD), learner(memberD)), want: "promote learner example-d"},

		// 14. Learners side by side: every member on etcd 3.6 with ETCD_MAX_LEARNERS.
		{name: "on 3.6, while the seed starts, a second joining pod is made behind the first", mods: mods(notYetAvailable, on36, members(memberA), onlyPods(memberA), podIs(memberA, pendingFor(time.Second)), joiningPod(joiner, []string{memberA})), want: "create joiner to " + v36 + " behind example-new (while the seed starts)"},
		{name: "on 3.6, with two joining pods made, the seed is waited for", mods: mods(notYetAvailable, on36, members(memberA), onlyPods(memberA), podIs(memberA, pendingFor(time.Second)), joiningPod(joiner, []string{memberA}), joiningPod(joiner2, []string{memberA, joiner})), want: "wait (0 of 1 voting members run and 1 are starting"},
		{name: "on 3.6, a joining pod is made behind the one not added yet", mods: mods(on36, spec(withSize(5)), joiningPod(joiner, three, resolving), etcdLeader(memberA)), want: "create joiner to " + v36 + " behind example-new (while example-new starts)"},
		{name: "on 3.6, no pod is made behind when spec.size has room for one member", mods: mods(on36, spec(withSize(4)), joiningPod(joiner, three, resolving), etcdLeader(memberA)), want: "wait (the pod of joining member example-new does not resolve in DNS yet)"},
		{name: "on 3.6, of a joining pod and the one made behind it the first is added", mods: mods(on36, spec(withSize(5)), joiningPod(joiner, three), joiningPod(joiner2, append(slices.Clone(three), joiner)), etcdLeader(memberA)), want: "add joiner example-new as learner"},
		{name: "on 3.6, a joining pod made behind one that is gone is deleted", mods: mods(on36, spec(withSize(5)), joiningPod(joiner2, append(slices.Clone(three), joiner)), etcdLeader(memberA)), want: "delete joiner example-new2 (the membership changed since it was made)"},
		{name: "before 3.6, a joining pod made behind another is deleted", mods: mods(spec(withSize(5)), joiningPod(joiner, three), joiningPod(joiner2, append(slices.Clone(three), joiner)), etcdLeader(memberA)), want: "delete joiner example-new2 (the membership changed since it was made)"},
		{name: "on 3.6, the next learner waits until the one before it has started: its etcd would refuse a membership other than its --initial-cluster", mods: mods(on36, spec(withSize(5)), members(memberA, memberB, memberC, memberD), learner(memberD), podIs(memberD, pendingFor(time.Second)), joiningPod(joiner, []string{memberA, memberB, memberC, memberD}), etcdLeader(memberA, memberD), notStarted(memberD)), want: "wait (learner example-d does not run yet)"},
		{name: "on 3.6, a running learner whose etcd has not joined yet holds the next add, and etcd is asked again soon", mods: mods(on36, spec(withSize(5)), members(memberA, memberB, memberC, memberD), learner(memberD), podIs(memberD, startedAgo(time.Second), notReady), joiningPod(joiner, []string{memberA, memberB, memberC, memberD}), etcdLeader(memberA, memberD), notStarted(memberD)), want: "wait (learner example-d votes once the next learner example-new is added)", polls: true},
		{name: "on 3.6, the next learner is added once the one before it has started", mods: mods(on36, spec(withSize(5)), members(memberA, memberB, memberC, memberD), learner(memberD), podIs(memberD, startedAgo(time.Second), notReady), joiningPod(joiner, []string{memberA, memberB, memberC, memberD}), etcdLeader(memberA)), want: "add joiner example-new as learner"},
		{name: "on 3.6, a running learner votes only once the next one is added", mods: mods(on36, spec(withSize(5)), members(memberA, memberB, memberC, memberD), learner(memberD), joiningPod(joiner, []string{memberA, memberB, memberC, memberD}), etcdLeader(memberA)), want: "add joiner example-new as learner"},
		{name: "on 3.6, a learner that started a moment ago waits for the next joining pod to resolve", mods: mods(on36, spec(withSize(5)), members(memberA, memberB, memberC, memberD), learner(memberD), podIs(memberD, startedAgo(2*time.Second)), joiningPod(joiner, []string{memberA, memberB, memberC, memberD}, resolving), etcdLeader(memberA)), want: "wait (learner example-d votes once the next learner example-new is added", after: 3 * time.Second},
		{name: "on 3.6, a learner that has run for etcd's health interval votes, the next joining pod still resolving", mods: mods(on36, spec(withSize(5)), members(memberA, memberB, memberC, memberD), learner(memberD), podIs(memberD, startedAgo(5*time.Second)), joiningPod(joiner, []string{memberA, memberB, memberC, memberD}, resolving), etcdLeader(memberA)), want: "promote learner example-d"},
		{name: "on 3.6, of two learners the running one votes first", mods: mods(on36, spec(withSize(5)), members(memberA, memberB, memberC, memberD, memberE), learner(memberD), learner(memberE), podIs(memberD, pendingFor(time.Second))), want: "promote learner example-e"},
		{name: "on 3.6, a third learner waits for a promotion", mods: mods(on36, spec(withSize(7)), members(memberA, memberB, memberC, memberD, memberE), learner(memberD), learner(memberE), podIs(memberD, pendingFor(time.Second)), podIs(memberE, pendingFor(time.Second)), joiningPod(joiner, []string{memberA, memberB, memberC, memberD, memberE}), joiningPod(joiner2, []string{memberA, memberB, memberC, memberD, memberE, joiner}), etcdLeader(memberA, memberD, memberE)), want: "wait (learners example-d, example-e do not run yet)"},
		{name: "on 3.6, a learner whose pod failed is removed before the pod made behind it is used", mods: mods(on36, spec(withSize(5)), members(memberA, memberB, memberC, memberD), learner(memberD), podIs(memberD, failed), joiningPod(joiner, []string{memberA, memberB, memberC, memberD}), etcdLeader(memberA, memberD)), want: "remove dead member example-d"},
		{name: "on 3.6, a pod made behind a learner that was removed since is deleted", mods: mods(on36, spec(withSize(5)), joiningPod(joiner, []string{memberA, memberB, memberC, memberD}), etcdLeader(memberA)), want: "delete joiner example-new (the membership changed since it was made)"},
		{name: "on 3.6 with a member made without ETCD_MAX_LEARNERS, one learner at a time", mods: mods(on36, spec(withSize(5)), members(memberA, memberB, memberC, memberD), podIs(memberA, withoutMaxLearners), learner(memberD), podIs(memberD, pendingFor(time.Second)), joiningPod(joiner, []string{memberA, memberB, memberC, memberD}), etcdLeader(memberA, memberD)), want: "wait (learner example-d does not run yet)"},
		{name: "on 3.6 with a member that still runs 3.5, one learner at a time", mods: mods(on36, spec(withSize(5)), members(memberA, memberB, memberC, memberD), podIs(memberA, runs(testVersion)), learner(memberD), podIs(memberD, pendingFor(time.Second)), joiningPod(joiner, []string{memberA, memberB, memberC, memberD}), etcdLeader(memberA, memberD)), want: "wait (learner example-d does not run yet)"},

		// 15. Size.
		{name: "scaling up reads etcd before making a joining pod", mods: mods(spec(withSize(4))), want: "read etcd (create a joining pod)"},
		{name: "scaling up makes the new member's pod first, at spec.version", mods: mods(spec(withSize(4)), etcdLeader(memberA)), want: "create joiner to " + testVersion},
		{name: "a joining pod is added only once it resolves in DNS", mods: mods(spec(withSize(4)), joiningPod(joiner, three, resolving)), want: "wait (the pod of joining member example-new does not resolve in DNS yet)"},
		{name: "a joining pod is added only once every member is ready", mods: mods(spec(withSize(4)), joiningPod(joiner, three), podIs(memberB, notReady)), want: "wait (2 of 3 voting members are ready"},
		{name: "a joining pod is added only once every member has been connected for etcd's health interval", mods: mods(spec(withSize(4)), joiningPod(joiner, three), podIs(memberC, startedAgo(2*time.Second))), want: "wait (the newest member has not been connected", after: 3 * time.Second},
		{name: "a joining pod makes the pass read etcd before its add", mods: mods(spec(withSize(4)), joiningPod(joiner, three)), want: "read etcd (add member example-new)"},
		{name: "a joining pod is not added while a member does not answer etcd", mods: mods(spec(withSize(4)), joiningPod(joiner, three), etcdLeader(memberA, memberC)), want: "wait (member example-c"},
		{name: "a joining pod is added as a learner", mods: mods(spec(withSize(4)), joiningPod(joiner, three), etcdLeader(memberA)), want: "add joiner example-new as learner"},
		{name: "a joining pod of a cluster with an etcd 3.3 member is added as a voter", mods: mods(spec(withSize(4)), podIs(memberA, onVersion("3.3.27")), joiningPod(joiner, three, onVersion("3.3.27")), spec(withVersion("3.3.27")), podIs(memberB, onVersion("3.3.27")), podIs(memberC, onVersion("3.3.27")), etcdLeader(memberA)), want: "add joiner example-new ("},
		{name: "scaling down reads etcd for the leader", mods: mods(spec(withSize(2))), want: "read etcd (remove a member)"},
		{name: "scaling down removes a follower, not the leader", mods: mods(spec(withSize(2)), etcdLeader(memberA)), want: "remove member example-b (a follower)"},
		{name: "scaling down removes a follower when the leader sorts first", mods: mods(spec(withSize(2)), etcdLeader(memberB)), want: "remove member example-a (a follower)"},
		{name: "scaling down removes a member that is not ready before any ready one", mods: mods(spec(withSize(2)), podIs(memberC, notReady), etcdLeader(memberA)), want: "remove member example-c (its pod is not ready)"},
		{name: "scaling down to one keeps the leader", mods: mods(spec(withSize(1)), members(memberA, memberB), onlyPods(memberA, memberB), etcdLeader(memberB)), want: "remove member example-a (a follower)"},

		// 16. Version.
		{name: "an upgrade reads etcd for the leader and the health", mods: mods(spec(withVersion("3.5.22"))), want: "read etcd (upgrade a member)"},
		{name: "an upgrade patches a follower first", mods: mods(spec(withVersion("3.5.22")), etcdLeader(memberA)), want: "upgrade member example-b to 3.5.22 (a follower)"},
		{name: "an upgrade moves leadership away before patching the leader", mods: mods(spec(withVersion("3.5.22")), podIs(memberB, onVersion("3.5.22")), podIs(memberC, onVersion("3.5.22")), etcdLeader(memberA)), want: "move leader to example-b (moving leadership from example-a to example-b first)"},
		{name: "an upgrade patches the last member once leadership has moved away", mods: mods(spec(withVersion("3.5.22")), podIs(memberB, onVersion("3.5.22")), podIs(memberC, onVersion("3.5.22")), etcdLeader(memberB)), want: "upgrade member example-a to 3.5.22 (a follower)"},
		{name: "an upgrade patches the next member as soon as the restarted one has caught up, without etcd's health interval", mods: mods(spec(withVersion("3.5.22")), podIs(memberB, onVersion("3.5.22"), startedAgo(time.Second)), etcdLeader(memberA)), want: "upgrade member example-c to 3.5.22 (a follower)"},
		{name: "an upgrade waits for the restarted member to catch up with the leader's log", mods: mods(spec(withVersion("3.5.22")), podIs(memberB, onVersion("3.5.22"), startedAgo(time.Second)), etcdLeader(memberA), appliedUpTo(memberB, 10, 5000)), want: "wait (member example-b (", polls: true},
		{name: "an upgrade waits for the restarted member to follow the leader", mods: mods(spec(withVersion("3.5.22")), podIs(memberB, onVersion("3.5.22"), startedAgo(time.Second)), etcdLeader(memberA), followsNoLeader(memberB)), want: "wait (member example-b (", polls: true},
		{name: "an upgrade waits for a restarted member whose pod is not ready yet", mods: mods(spec(withVersion("3.5.22")), podIs(memberB, onVersion("3.5.22"), notReady), etcdLeader(memberA)), want: "wait (2 of 3 members are ready; every member must be to upgrade a member)"},
		{name: "an upgrade waits for every member to answer etcd", mods: mods(spec(withVersion("3.5.22")), podIs(memberB, onVersion("3.5.22")), etcdLeader(memberA, memberB)), want: "wait (member example-b (", polls: true},
		{name: "an upgrade patches the only member, the leader, without a handoff", mods: mods(spec(withSize(1)), members(memberA), onlyPods(memberA), spec(withVersion("3.5.22")), etcdLeader(memberA)), want: "upgrade member example-a to 3.5.22 (the leader, last)"},
		{name: "a move to 3.6 from a 3.5 release etcd's guide does not allow is refused", mods: mods(spec(withVersion("3.6.6")), etcdLeader(memberA)), want: "wait (upgrade refused: "},
		{name: "a downgrade from 3.6 to 3.5 enables etcd's downgrade first", mods: mods(spec(withVersion("3.5.35")), podIs(memberA, onVersion("3.6.6")), podIs(memberB, onVersion("3.6.6")), podIs(memberC, onVersion("3.6.6")), etcdLeader(memberA), clusterVersion("3.6.0")), want: "enable downgrade to 3.5"},
		{name: "an enabled downgrade is waited for, not enabled again", mods: mods(spec(withVersion("3.5.35")), podIs(memberA, onVersion("3.6.6")), podIs(memberB, onVersion("3.6.6")), podIs(memberC, onVersion("3.6.6")), etcdLeader(memberA), clusterVersion("3.6.0"), downgradeEnabled), want: "wait (the downgrade is enabled; waiting for the cluster version to drop)"},
		{name: "a downgrade patches members once the cluster version has dropped", mods: mods(spec(withVersion("3.5.35")), podIs(memberA, onVersion("3.6.6")), podIs(memberB, onVersion("3.6.6")), podIs(memberC, onVersion("3.6.6")), etcdLeader(memberA), clusterVersion("3.5.0")), want: "upgrade member example-b to 3.5.35 (a follower)"},
		{name: "an upgrade waits for the member being restarted", mods: mods(spec(withVersion("3.5.22")), podIs(memberB, onVersion("3.5.22")), upgrading(memberB, "3.5.22")), want: "wait (member example-b is restarting on 3.5.22)"},
		{name: "an upgrade patches a member that is not ready first, without asking etcd", mods: mods(spec(withVersion("3.5.22")), podIs(memberC, notReady)), want: "upgrade member example-c to 3.5.22 (it is not ready)"},
		{name: "an upgrade to an image that never started is taken back on the member that is not ready", mods: mods(podIs(memberB, onVersion("3.5.99"), waitingForImage), failedOn(memberB, "3.5.99", testVersion)), want: "upgrade member example-b to " + testVersion + " (it is not ready)"},
		{name: "an upgrade that skips a minor version is refused", mods: mods(spec(withVersion("3.6.6")), podIs(memberA, onVersion(oldVersion)), podIs(memberB, onVersion(oldVersion)), podIs(memberC, onVersion(oldVersion))), want: "wait (upgrade refused: member example-a runs etcd 3.4.23 and cannot go to 3.6.6"},
		{name: "a minor downgrade is refused", mods: mods(spec(withVersion(oldVersion))), want: "wait (upgrade refused: member example-a runs etcd 3.5.21 and cannot go to 3.4.23"},
		{name: "a member whose pod never ran its version goes to spec.version whichever way: it holds no data of it", mods: mods(podIs(memberC, onVersion("3.7.99"), waitingForImage)), want: "upgrade member example-c to " + testVersion + " (it is not ready)"},
		{name: "a failed upgrade halts the rollout", mods: mods(spec(withVersion("3.5.22")), podIs(memberB, onVersion("3.5.22"), waitingForImage), failedOn(memberB, "3.5.22", testVersion)), want: "wait (upgrade to 3.5.22 halted: member example-b did not run it"},
		{name: "a member made for etcd 3.2 is replaced on the way to 3.5: its replacement's pod first, at the target", mods: mods(podIs(memberA, onVersion("3.4.23"), madeFor32), podIs(memberB, onVersion("3.4.23")), podIs(memberC, onVersion("3.4.23")), etcdLeader(memberB)), want: "create joiner to " + testVersion},
		{name: "a member made for etcd 3.2 is removed once its replacement is ready", mods: mods(members(memberA, memberB, memberC, memberD), podIs(memberA, onVersion("3.4.23"), madeFor32), podIs(memberB, onVersion("3.4.23")), podIs(memberC, onVersion("3.4.23")), etcdLeader(memberB)), want: "remove member example-a (it was replaced because it cannot run the new version in place)"},
		{name: "a member whose flags etcd 3.7 refuses is replaced on the way to 3.7: its replacement's pod first, at the target", mods: mods(spec(withVersion("3.7.3")), podIs(memberA, onVersion("3.6.16")), podIs(memberB, onVersion("3.6.16")), podIs(memberC, onVersion("3.6.16")), etcdLeader(memberB), clusterVersion("3.6.0")), want: "create joiner to 3.7.3"},
		{name: "a move to 3.7 from a 3.6 release etcd's guide does not allow is refused", mods: mods(spec(withVersion("3.7.3")), podIs(memberA, onVersion("3.6.6")), podIs(memberB, onVersion("3.6.6")), podIs(memberC, onVersion("3.6.6")), etcdLeader(memberB), clusterVersion("3.6.0")), want: "wait (upgrade refused: etcd's 3.7 upgrade guide requires every member on 3.6.11 or later first"},
		{name: "mid-upgrade a new member starts at the oldest version made", mods: mods(spec(withSize(4)), podIs(memberA, onVersion(oldVersion)), etcdLeader(memberB)), want: "create joiner to " + oldVersion},
		{name: "while an upgrade is refused new members start at the newest version made", mods: mods(spec(withSize(4)), spec(withVersion("3.6.6")), podIs(memberA, onVersion(oldVersion)), etcdLeader(memberB)), want: "create joiner to " + testVersion},

		// 11 and 17. Space and day-2 care.
		{name: "with a NOSPACE alarm the history is compacted first", mods: mods(etcdLeader(memberA), alarmOn(memberA, "NOSPACE"), revision(500), dbSizes(200<<20, 20<<20)), want: "compact"},
		{name: "with a NOSPACE alarm and the history compacted, a follower is defragmented", mods: mods(etcdLeader(memberA), alarmOn(memberA, "NOSPACE"), revision(500), compactedTo(500), dbSizes(1950<<20, 100<<20)), want: "defragment example-b"},
		{name: "with a NOSPACE alarm and every member with room again, the alarm is disarmed", mods: mods(etcdLeader(memberA), alarmOn(memberA, "NOSPACE"), revision(500), compactedTo(500), dbSizes(20<<20, 20<<20)), want: "disarm NOSPACE"},
		{name: "a NOSPACE alarm comes before a pending scale-up", mods: mods(spec(withSize(4)), etcdLeader(memberA), alarmOn(memberA, "NOSPACE"), revision(500), dbSizes(200<<20, 20<<20)), want: "compact"},
		{name: "a cluster at rest is looked at once a minute", mods: mods(etcdReadAgo(61 * time.Second)), want: "read etcd (day-2 care"},
		{name: "members that run but are not ready make the pass look at etcd", mods: mods(podIs(memberA, notReady), podIs(memberB, notReady), podIs(memberC, notReady)), want: "read etcd (day-2 care"},
		{name: "a member with most of its database free is defragmented", mods: mods(etcdLeader(memberA), dbSize(memberC, 400<<20, 50<<20)), want: "defragment example-c"},
		{name: "the leader is defragmented only after leadership moved away", mods: mods(etcdLeader(memberA), dbSize(memberA, 400<<20, 50<<20)), want: "move leader to"},
		{name: "a member with a CORRUPT alarm is replaced", mods: mods(etcdLeader(memberA), alarmOn(memberC, "CORRUPT")), want: "remove dead member example-c (etcd refuses its data: etcd raised a CORRUPT alarm"},

		// 18. Renewal of issued certificates.
		{name: "an issued certificate past two thirds of its lifetime is renewed", mods: mods(issuedSecrets, issuedAge(tlsissue.Server, 61*day)),
			want: "renew certificate example-server-tls (two thirds of its lifetime passed on 2025-02-28T12:00:00Z; it expires on 2025-03-30T12:00:00Z)"},
		{name: "an issued certificate short of two thirds of its lifetime is left alone", mods: mods(issuedSecrets, issuedAge(tlsissue.Server, 59*day)), want: "idle"},
		{name: "a due certificate is renewed once etcd was asked too", mods: mods(issuedSecrets, issuedAge(tlsissue.Client, 61*day), etcdLeader(memberA)), want: "renew certificate example-client-tls"},
		{name: "certificates due together are renewed one secret per pass, the peer's first", mods: mods(issuedSecrets, issuedAge(tlsissue.Client, 70*day), issuedAge(tlsissue.Peer, 70*day)), want: "renew certificate example-peer-tls"},
		{name: "a rotation the user asks for renews the certificates before they are due, the peer's first", mods: mods(issuedSecrets, rotationAsked(rotation)),
			want: `renew certificate example-peer-tls (etcd.database.coreos.com/rotate-certificates is "` + rotation + `")`},
		{name: "a rotation goes on with the secrets it has not reached", mods: mods(issuedSecrets, rotationAsked(rotation), rotatedFor(rotation, tlsissue.Peer, tlsissue.Server)), want: "renew certificate example-operator-tls"},
		{name: "a rotation every secret was renewed for is not done again", mods: mods(issuedSecrets, rotationAsked(rotation), rotatedFor(rotation, tlsissue.Kinds...)), want: "idle"},
		{name: "a new value of the annotation is a new rotation", mods: mods(issuedSecrets, rotationAsked(rotation), rotatedFor("2026-01-01T00:00:00Z", tlsissue.Kinds...)), want: "renew certificate example-peer-tls"},
		{name: "nothing is renewed while a member is not ready: etcd is looked at instead", mods: mods(issuedSecrets, issuedAge(tlsissue.Server, 61*day), podIs(memberB, notReady)), want: "read etcd (day-2 care"},
		{name: "nothing is renewed while etcd does not answer", mods: mods(issuedSecrets, issuedAge(tlsissue.Server, 61*day), etcdFailed), want: "idle"},
		{name: "nothing is renewed while a certificate is unusable", mods: mods(issuedSecrets, rotationAsked(rotation), badCertificate), want: "idle"},
		{name: "nothing is renewed from a CA secret that cannot issue", mods: mods(issuedSecrets, issuedAge(tlsissue.Server, 61*day), unusableCA), want: "idle"},
		{name: "a paused cluster renews nothing", mods: mods(issuedSecrets, issuedAge(tlsissue.Server, 61*day), spec(withPaused)), want: "wait (spec.paused is true)"},
		{name: "no certificate due is renewed while the CA secret records a CA rotation: the rotation issues every leaf itself", mods: mods(issuedSecrets, issuedAge(tlsissue.Server, 61*day), caRotationAt(caStepTrustBoth)), want: "rotate CA: example-peer-tls (CA rotation: certificate secrets are given the trusted CA of step trust-both)"},
		{name: "no rotation asked for is carried out while the CA secret records a CA rotation", mods: mods(issuedSecrets, rotationAsked(rotation), caRotationAt(caStepReissue)), want: "rotate CA: example-peer-tls (CA rotation: leaves are issued from the new CA)"},
		{name: "an expired certificate is renewed even while the CA secret records a CA rotation: every member trusts ca.crt through each step", mods: mods(issuedSecrets, issuedAge(tlsissue.Server, 91*day), caRotationAt(caStepTrustNew), podIs(memberB, notReady)), want: "renew certificate example-server-tls (expired on"},
		{name: "a scale-up comes before a renewal", mods: mods(issuedSecrets, issuedAge(tlsissue.Server, 61*day), spec(withSize(4)), etcdLeader(memberA)), want: "create joiner"},

		// 3b. Clusters coreos/etcd-operator made: adopted as they run.
		{name: "the members the original made are read from etcd first", mods: mods(originalMembers, noMembership), want: "read etcd (read the membership of the members the original made)"},
		{name: "the original's members that do not answer are not adopted, and nothing is changed", mods: mods(originalMembers, noMembership, etcdFailed), want: "wait (not adopted yet: the members the original made do not answer"},
		{name: "the original's members are told adopted once etcd's leader named them", mods: mods(originalMembers, etcdLeader(memberA)), want: "announce adoption (example-a, example-b, example-c)"},
		{name: "the original's cluster whose status names no phase is adopted, not seeded", mods: mods(originalMembers, spec(withPhase(api.ClusterPhaseNone)), etcdLeader(memberA)), want: "announce adoption"},
		{name: "an adopted cluster at rest is left alone", mods: mods(originalMembers, announced), want: "idle"},
		{name: "an adopted member whose pod ended is neither restarted nor replaced", mods: mods(originalMembers, announced, podIs(memberB, failed)), want: "wait (adopted members are kept as they are: the pod of member example-b is Failed"},
		{name: "an adopted member whose pod is gone is not replaced", mods: mods(originalMembers, announced, noPod(memberB)), want: "wait (adopted members are kept as they are: member example-b has no pod"},
		{name: "an adopted member whose pod is terminating is not replaced", mods: mods(originalMembers, announced, func(s *snapshot) { s.terminating[memberB] = s.pods[memberB]; delete(s.pods, memberB) }),
			want: "wait (adopted members are kept as they are: the pod of member example-b is being deleted"},
		{name: "a pod the original made that etcd does not list is not deleted", mods: mods(originalMembers, announced, originalPodOf(memberD)), want: "wait (adopted members are kept as they are: pod example-d is no member of etcd"},
		{name: "an adopted cluster is not resized", mods: mods(originalMembers, announced, spec(withSize(5))), want: "wait (adopted members are kept as they are: spec.size is 5 and etcd has 3 members"},
		{name: "an adopted cluster is not upgraded", mods: mods(originalMembers, announced, spec(withVersion("3.5.22"))), want: "wait (adopted members are kept as they are: spec.version asks for 3.5.22 and members run other versions (example-a on 3.5.21"},

		// 3b, spec.adoption.convert: each member the original made is replaced by one of this layout, added first.
		{name: "converting starts with a joining pod of this operator's layout, the membership read first", mods: mods(originalMembers, announced, spec(converting)), want: "read etcd (create a joining pod)"},
		{name: "converting an adopted cluster at rest makes a joining pod of this operator's layout", mods: mods(originalMembers, announced, spec(converting), etcdLeader(memberA)), want: "create joiner to " + testVersion},
		{name: "converting adds the joining pod as a learner once it resolves", mods: mods(originalMembers, announced, spec(converting), joiningPod(joiner, three), etcdLeader(memberA)), want: "add joiner example-new as learner"},
		{name: "converting promotes the new member before any member the original made goes", mods: mods(originalMembers, announced, spec(converting), members(memberA, memberB, memberC, memberD), learner(memberD), etcdLeader(memberA)), want: "promote learner example-d"},
		{name: "converting removes a follower the original made once the new member votes", mods: mods(originalMembers, announced, spec(converting), members(memberA, memberB, memberC, memberD), etcdLeader(memberA)),
			want: "remove member example-b (converted: one of 3 members coreos/etcd-operator made"},
		{name: "converting moves leadership away from the last member the original made before it goes", mods: mods(members(memberA, memberB, memberC, memberD), originalMembers, onlyOriginal(memberA), announced, spec(converting), etcdLeader(memberA)),
			want: "move leader to example-b"},
		{name: "converting removes the last member the original made once it no longer leads", mods: mods(members(memberA, memberB, memberC, memberD), originalMembers, onlyOriginal(memberA), announced, spec(converting), etcdLeader(memberB)),
			want: "remove member example-a (converted: the last member coreos/etcd-operator made"},
		{name: "converting waits while the pod of a member it removed terminates", mods: mods(originalMembers, announced, spec(converting), terminatingPod(memberD), etcdLeader(memberA)),
			want: "wait (adopted members are not converted while pod example-d is being deleted"},
		{name: "converting waits for a member that is not ready; it is not replaced", mods: mods(originalMembers, announced, spec(converting), podIs(memberB, notReady), etcdLeader(memberA)),
			want: "wait (adopted members are not converted while member example-b is not ready"},
		{name: "converting replaces first a member whose pod ended for good with its emptyDir, as one of this operator's own", mods: mods(originalMembers, announced, spec(converting), podIs(memberB, failed), etcdLeader(memberA)),
			want: "remove dead member example-b (its pod is failed and its data was on an emptyDir volume)"},
		{name: "converting replaces a lost member only once etcd was asked in the pass", mods: mods(originalMembers, announced, spec(converting), podIs(memberB, failed)),
			want: "read etcd (remove member example-b)"},
		{name: "converting restarts on its claim a member whose pod ended: its pod is deleted first, it is not replaced", mods: mods(originalMembers, announced, spec(converting, withPVC), claims(memberA, memberB, memberC), podIs(memberB, failed), etcdLeader(memberA)),
			want: "delete failed pod example-b (its pod ended: restart 1 of 3 in place within 10m0s, on its claim)"},
		{name: "converting restarts on its claim, in this layout, a member whose pod is gone", mods: mods(originalMembers, announced, spec(converting, withPVC), claims(memberA, memberB, memberC), noPod(memberB), etcdLeader(memberA)),
			want: "restart in place example-b"},
		{name: "converting members on claims restarts them in place, a follower first", mods: mods(originalMembers, announced, spec(converting, withPVC), claims(memberA, memberB, memberC), etcdLeader(memberA)),
			want: "convert in place example-b (converted in place: restarted on its claim in this operator's layout (3 of the original's members left))"},
		{name: "converting members on claims in place asks etcd first", mods: mods(originalMembers, announced, spec(converting, withPVC), claims(memberA, memberB, memberC)),
			want: "read etcd (upgrade a member)"},
		{name: "an original cluster caught mid-scale (a member added to etcd whose pod the original never made) is adopted with the member reported and kept",
			mods: mods(members(memberA, memberB, memberC, memberD), originalMembers, noPod(memberD), announced, spec(withSize(4)), etcdLeader(memberA, memberD)),
			want: "wait (adopted members are kept as they are: member example-d has no pod; it is not replaced)"},
		{name: "converting a cluster caught mid-scale removes first the member the original added and never started, once etcd confirms it does not answer",
			mods: mods(members(memberA, memberB, memberC, memberD), originalMembers, noPod(memberD), announced, spec(converting, withSize(4)), etcdLeader(memberA, memberD)),
			want: "remove dead member example-d (its pod is gone and its data was on an emptyDir volume)"},
		{name: "converting does not resize at the same time", mods: mods(originalMembers, announced, spec(converting), spec(withSize(5)), etcdLeader(memberA)),
			want: "wait (adopted members are not converted while spec.size is 5 and etcd has 3 members"},
		{name: "converting does not upgrade at the same time", mods: mods(originalMembers, announced, spec(converting), spec(withVersion("3.5.22")), etcdLeader(memberA)),
			want: "wait (adopted members are not converted while spec.version asks for 3.5.22"},
		{name: "converting leaves a pod the original made that etcd does not list", mods: mods(originalMembers, announced, spec(converting), originalPodOf(memberD), etcdLeader(memberA)),
			want: "wait (adopted members are not converted while pod example-d is no member of etcd"},
		{name: "the original's pods without the TLS spec.TLS asks for are not adopted", mods: mods(originalMembers, spec(withTLS), noMembership), want: "wait (not adopted: pod example-a has peer TLS off, spec.TLS on"},
		{name: "the original's pods under another cluster domain are not adopted", mods: mods(originalMembers, spec(withClusterDomain("cluster.local")), noMembership),
			want: "wait (not adopted: pod example-a runs etcd with --initial-advertise-peer-urls=http://example-a.example.ns.svc:2380, not http://example-a.example.ns.svc.cluster.local:2380"},
		{name: "a pod of neither layout beside the original's is not adopted", mods: mods(originalMembers, lookAlike(memberC), noMembership), want: "wait (not adopted: pod example-c has a layout of neither operator"},
		{name: "a paused adopted cluster stays paused", mods: mods(originalMembers, spec(withPaused), noMembership), want: "wait (spec.paused is true)"},

		// 18b. CA rotation of issued TLS (the steps themselves: TestNextCAChange).
		{name: "a CA rotation asked for begins with a new CA", mods: mods(issuedSecrets, caRotationAsked("2026-11-29", "")), want: `rotate CA: (etcd.database.coreos.com/rotate-ca is "2026-11-29")`},
		{name: "a CA rotation carried out to its end is not carried out again", mods: mods(issuedSecrets, caRotationAsked("2026-11-29", "2026-11-29")), want: "idle"},
		{name: "a CA rotation does not begin while a member is not ready: etcd is looked at instead", mods: mods(issuedSecrets, caRotationAsked("2026-11-29", ""), podIs(memberB, notReady)), want: "read etcd (day-2 care"},
		{name: "a CA rotation waits for every member once etcd was asked", mods: mods(issuedSecrets, caRotationAsked("2026-11-29", ""), podIs(memberB, notReady), etcdLeader(memberA)), want: "wait (a CA rotation is due"},
		{name: "a CA rotation under way goes on without a request: a restart of each member to read its trusted CA, once etcd confirms the others are caught up", mods: mods(issuedSecrets, caRotationAt(caStepTrustBoth), caTrusts(trustBoth), caSince(testStart.Add(-time.Hour)), etcdLeader(memberA)),
			want: "rotate CA: example-a (CA rotation: etcd reads its trusted CA only when it starts (step trust-both))"},
		{name: "a member is restarted for the CA only after etcd was asked in the pass", mods: mods(issuedSecrets, caRotationAt(caStepTrustBoth), caTrusts(trustBoth), caSince(testStart.Add(-time.Hour))), want: "read etcd (upgrade a member)"},
		{name: "a CA rotation comes after a scale-up", mods: mods(issuedSecrets, caRotationAsked("2026-11-29", ""), spec(withSize(4)), etcdLeader(memberA)), want: "create joiner"},
		{name: "a CA the operator made is rotated unasked once four fifths of its lifetime have passed", mods: mods(issuedSecrets, caAged(8*365*day+day, true)),
			want: "rotate CA: (the CA the operator made expires on 2027-02-28T12:00:00Z, within the last fifth of its lifetime: it is rotated unasked)"},
		{name: "a CA the user brought is never rotated unasked, however near its expiry", mods: mods(issuedSecrets, caAged(9*365*day+300*day, false)), want: "idle"},
		{name: "an unasked CA rotation comes after a scale-up", mods: mods(issuedSecrets, caAged(8*365*day+day, true), spec(withSize(4)), etcdLeader(memberA)), want: "create joiner"},

		// 18c. A CA changed at the cert-manager issuer, carried in (the steps: TestCarryIssuerCA).
		{name: "a cluster whose issuer's CA is unchanged is left alone", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCABefore, testStart.Add(-day), issuerCABefore.CertPEM, time.Time{}), issuedFrom(issuerCABefore)), want: "idle"},
		{name: "a certificate of a new issuer's CA is not copied: the copies come to trust that CA beside theirs first", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCABefore, testStart.Add(-day), issuerCABefore.CertPEM, time.Time{}), issuedFrom(issuerCABefore), issuedFrom(issuerCAAfter, tlsissue.Server)),
			want: `carry the issuer's CA: peer (cert-manager issued from CA "the issuer's CA after", which secret example-peer-tls does not trust yet`},
		{name: "once every copy trusts both, cert-manager issues every certificate again from the new CA", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCABefore, testStart.Add(-day), issuerBothPEM, testStart.Add(-time.Hour)), issuedFrom(issuerCABefore), issuedFrom(issuerCAAfter, tlsissue.Server)),
			want: `reissue certificate peer (the issuer's CA is now "the issuer's CA after"`},
		{name: "members are restarted to read both CAs once the kubelet has updated their files, after etcd was asked", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCABefore, testStart.Add(-day), issuerBothPEM, testStart.Add(-time.Hour)), issuedFrom(issuerCAAfter), etcdStartedOn(testStart.Add(-2*time.Hour))),
			want: "read etcd (upgrade a member)"},
		{name: "a member is restarted to read both CAs, one at a time, once etcd confirms the others caught up", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCABefore, testStart.Add(-day), issuerBothPEM, testStart.Add(-time.Hour)), issuedFrom(issuerCAAfter), etcdStartedOn(testStart.Add(-2*time.Hour)), etcdLeader(memberA)),
			want: `carry the issuer's CA: example-a (carrying the issuer's CA "the issuer's CA after" in: etcd reads its trusted CAs only when it starts)`},
		{name: "a member whose etcd does not run is not restarted for the trust (it reads the files when it starts); the others wait for it to be ready", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCABefore, testStart.Add(-day), issuerBothPEM, testStart.Add(-time.Hour)), issuedFrom(issuerCAAfter), etcdStartedOn(testStart.Add(-2*time.Hour)), podIs(memberA, crashLooping(3)), etcdLeader(memberB)),
			want: `wait (carrying the issuer's CA "the issuer's CA after" in: example-b is restarted to read its trusted CAs once every member is ready)`},
		{name: "no member is restarted before the kubelet has updated its files", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCABefore, testStart.Add(-day), issuerBothPEM, testStart.Add(-time.Minute)), issuedFrom(issuerCAAfter), etcdLeader(memberA)),
			want: `wait (carrying the issuer's CA "the issuer's CA after" in: members are restarted from 2025-03-01T12:02:00Z`},
		{name: "a certificate of the new CA is not copied while a member started before the copies trusted it", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCABefore, testStart.Add(-day), issuerBothPEM, testStart.Add(-time.Hour)), issuedFrom(issuerCAAfter), etcdStartedOn(testStart.Add(-58*time.Minute)), etcdLeader(memberA)),
			want: `carry the issuer's CA: example-a`},
		{name: "a certificate of the new CA is copied once every member started since the copies trusted it, even while paused", mods: mods(spec(withPaused), certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCABefore, testStart.Add(-day), issuerBothPEM, testStart.Add(-time.Hour)), issuedFrom(issuerCAAfter), etcdStartedOn(testStart.Add(-30*time.Minute))),
			want: "copy certificate peer (issued by cert-manager from the issuer's CA, which every member trusts now)"},
		{name: "the old CA is trusted until the kubelet has given every member its certificate of the new CA", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCAAfter, testStart.Add(-time.Minute), issuerBothPEM, testStart.Add(-time.Hour)), issuedFrom(issuerCAAfter), etcdStartedOn(testStart.Add(-30*time.Minute))),
			want: `wait (carrying the issuer's CA "the issuer's CA after" in: the CAs before it are no longer trusted from`},
		{name: "then every copy trusts the new CA alone", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCAAfter, testStart.Add(-10*time.Minute), issuerBothPEM, testStart.Add(-time.Hour)), issuedFrom(issuerCAAfter), etcdStartedOn(testStart.Add(-30*time.Minute))),
			want: `carry the issuer's CA: peer (every certificate is of the issuer's CA "the issuer's CA after": secret example-peer-tls trusts it alone)`},
		{name: "and every member is restarted again, so that the old CA is trusted nowhere", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCAAfter, testStart.Add(-20*time.Minute), issuerCAAfter.CertPEM, testStart.Add(-10*time.Minute)), issuedFrom(issuerCAAfter), etcdStartedOn(testStart.Add(-30*time.Minute)), etcdLeader(memberA)),
			want: `carry the issuer's CA: example-a`},
		{name: "a new issuer's CA carried in to its end is left alone", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCAAfter, testStart.Add(-20*time.Minute), issuerCAAfter.CertPEM, testStart.Add(-time.Hour)), issuedFrom(issuerCAAfter), etcdStartedOn(testStart.Add(-30*time.Minute))),
			want: "idle"},
		{name: "a carry ended long ago is not what a member whose etcd does not run waits for", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCAAfter, testStart.Add(-20*time.Minute), issuerCAAfter.CertPEM, testStart.Add(-time.Hour)), issuedFrom(issuerCAAfter), etcdStartedOn(testStart.Add(-30*time.Minute)), podIs(memberA, crashLooping(3)), etcdLeader(memberB)),
			want: "idle"},
		{name: "the issuer's CA is carried in after a scale-up", mods: mods(certManagerCopies(func([]certManagerLeaf) {}), copiesOfIssuer(issuerCABefore, testStart.Add(-day), issuerCABefore.CertPEM, time.Time{}), issuedFrom(issuerCAAfter), spec(withSize(4)), etcdLeader(memberA)),
			want: "create joiner"},

		// 16b. TLS switched on or off in a running cluster.
		{name: "TLS switched on gives a follower the certificates first, the leader last", mods: mods(issuedSecrets, inTLSStage(k8sutil.TLSPlain, memberA, memberB, memberC), etcdLeader(memberA)), want: "switch TLS: restart " + memberB},
		{name: "TLS switched on waits for every member to be ready", mods: mods(issuedSecrets, inTLSStage(k8sutil.TLSPlain, memberA, memberB, memberC), podIs(memberC, notReady)), want: "wait (2 of 3 members are ready"},
		{name: "TLS switched on asks etcd before a restart", mods: mods(issuedSecrets, inTLSStage(k8sutil.TLSPlain, memberA, memberB, memberC)), want: "read etcd"},
		{name: "TLS switched on moves the members still plain first", mods: mods(issuedSecrets, inTLSStage(k8sutil.TLSPlain, memberA, memberB, memberC), inTLSStage(k8sutil.TLSCertificates, memberB), etcdLeader(memberA)), want: "switch TLS: restart " + memberC},
		{name: "TLS switched on: a member on a claim has its peer URL updated before it restarts", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), issuedSecrets, inTLSStage(k8sutil.TLSCertificates, memberA, memberB, memberC), etcdLeader(memberA)), want: "switch TLS: update the peer URL to https of " + memberB + " (switching TLS on: members move from stage certificates to peers secure)"},
		{name: "TLS switched on: a member whose peer URL was updated restarts next", mods: mods(spec(withPVC), claims(memberA, memberB, memberC), issuedSecrets, inTLSStage(k8sutil.TLSCertificates, memberA, memberB, memberC), peerURLOf(memberC, true), etcdLeader(memberA)), want: "switch TLS: restart " + memberC + " (switching TLS on: members move from stage certificates to peers secure; its peer URL is already https)"},
		{name: "TLS switched on: a member on an emptyDir is replaced in the next stage, no update first", mods: mods(issuedSecrets, inTLSStage(k8sutil.TLSCertificates, memberA, memberB, memberC), etcdLeader(memberA)), want: "switch TLS: restart " + memberB},
		{name: "TLS switched on ends with clients served https alone", mods: mods(issuedSecrets, inTLSStage(k8sutil.TLSPeersSecure, memberA, memberB, memberC), inTLSStage(k8sutil.TLSSecure, memberB), etcdLeader(memberA)), want: "switch TLS: restart " + memberC},
		{name: "TLS switched on holds before clients lose http while the user asks", mods: mods(issuedSecrets, inTLSStage(k8sutil.TLSPeersSecure, memberA, memberB, memberC), holdingClients, etcdLeader(memberA)), want: "wait (switching TLS on holds with clients served http and https"},
		{name: "TLS switched off holds before clients lose https while the user asks", mods: mods(inTLSStage(k8sutil.TLSCertificates, memberA, memberB, memberC), holdingClients, etcdLeader(memberA)), want: "wait (switching TLS off holds with clients served http and https"},
		{name: "a hold of clients does not hold the stages before", mods: mods(issuedSecrets, inTLSStage(k8sutil.TLSCertificates, memberA, memberB, memberC), holdingClients, etcdLeader(memberA)), want: "switch TLS: restart " + memberB},
		{name: "TLS switched on is done when every member serves https alone", mods: mods(issuedSecrets, inTLSStage(k8sutil.TLSSecure, memberA, memberB, memberC), etcdLeader(memberA)), want: "idle"},
		{name: "TLS switched off moves the members of the highest stage down", mods: mods(inTLSStage(k8sutil.TLSSecure, memberA, memberB), inTLSStage(k8sutil.TLSPeersSecure, memberC), etcdLeader(memberA)), want: "switch TLS: restart " + memberB},
		{name: "TLS switched off is done when every member is plain", mods: mods(inTLSStage(k8sutil.TLSPlain, memberA, memberB, memberC), etcdLeader(memberA)), want: "idle"},
		{name: "TLS switched off waits on a member of TLS of peers alone", mods: mods(inTLSStage(k8sutil.TLSPlain, memberA, memberB), peersOnlyPod(memberC), etcdLeader(memberA)), want: "wait (TLS cannot be switched: member " + memberC},
		{name: "a scale-up comes before a TLS switch", mods: mods(issuedSecrets, inTLSStage(k8sutil.TLSPlain, memberA, memberB, memberC), spec(withSize(4)), etcdLeader(memberA)), want: "create joiner"},

		// 19 and 20. At rest.
		{name: "a complete healthy cluster is left alone", want: "idle"},
		{name: "a complete healthy cluster is left alone after etcd was asked", mods: mods(etcdLeader(memberA)), want: "idle"},
		{name: "a complete cluster with claims is left alone", mods: mods(spec(withPVC), claims(memberA, memberB, memberC)), want: "idle"},
	}
	decided := map[actionKind]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSnapshot(tt.mods...)
			got := decide(s)
			decided[got.kind] = true
			if !strings.HasPrefix(got.String(), tt.want) {
				t.Errorf("decide = %q\n    want %q...", got, tt.want)
			}
			if tt.after != 0 && got.after != tt.after {
				t.Errorf("after = %v, want %v", got.after, tt.after)
			}
			if tt.polls && !got.backoff {
				t.Errorf("the wait does not ask etcd again soon: nothing else would end it before the next tick")
			}
		})
	}
	if len(tests) < 60 {
		t.Errorf("%d cases; the specification wants at least 60", len(tests))
	}
	for kind, name := range actionNames {
		if !decided[kind] {
			t.Errorf("no case decides %q: every action needs its case", name)
		}
	}
}
