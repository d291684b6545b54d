package cluster

import (
	"sort"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// This file is the cluster's vocabulary as users see it, exported for the
// documentation (hack/gen-docs writes docs/reference/events.md from it): the
// Warning events of problems, the Normal events of actions, and the
// conditions with their reasons. It reads the tables the operator itself
// uses, so a problem added there shows up in the docs, and a problem without
// a line here fails TestVocabularyDescribesEveryProblem.

// Problem is one kind of problem: what a cluster reports while it lasts.
type Problem struct {
	// Event is the reason of its Warning event.
	Event string
	// Code is the Reason label of etcd_operator_cluster_reconcile_failed
	// (reason of etcd_operator_cluster_reconcile_failures_total).
	Code string
	// Condition is the reason of the Available=False condition it sets, ""
	// when it leaves Available alone.
	Condition string
	// PerMessage is true when each new message is a new event (a new
	// mistake), false when one event stands for the problem while it lasts.
	PerMessage bool
	// Advisory is true for a problem that holds nothing up and counts in
	// no metric of failed passes: it is told in status.reason, an event
	// and the log only.
	Advisory bool
	// When says when it is reported.
	When string
}

// problemWhen describes each problem kind for the documentation.
var problemWhen = map[problemKind]string{
	problemInvalidSpec:            "the spec does not validate, or a change of a running cluster is refused (the previous spec stays in force); reserved `pod.etcdEnv` variables that got past admission are named as ignored",
	problemTLSSecret:              "a TLS secret named in `spec.TLS` cannot be read",
	problemTLSCertificate:         "a certificate in the TLS secrets is unusable: missing keys, not PEM, expired, not signed by its CA, not naming the members' DNS names; under a cert-manager issuer (`spec.TLS.issued.issuerRef`), also what keeps cert-manager's certificates from the cluster: its API not served or not allowed by the operator's role, a certificate without the CA that issued it, or of a CA the members do not trust yet",
	problemTLSCertificateExpiring: "a certificate in the TLS secrets (a leaf, or a CA of a bundle) expires within 30 days, or within the last third of its lifetime (at most 90 days ahead), whichever comes first; one event per certificate and expiry date, so a renewed certificate that also expires soon is announced again. The cluster carries on; renew the certificate as docs/user-guide/tls.md#renewing-static-certificates says. A certificate of issued TLS, which the operator renews at two thirds of its lifetime, is told only once its renewal is overdue (the last sixth of its lifetime): something holds the renewal up. The CA of issued TLS is told with how to rotate it: a CA the user brought is never rotated unasked, while one the operator made is rotated long before (at four fifths of its lifetime)",
	problemKubeAPI:                "a Kubernetes API call failed (forbidden, conflict, unavailable)",
	problemEtcdUnreachable:        "etcd does not answer; the message names what a closer look found (no such name, connection refused, a TLS handshake error, no leader)",
	problemEtcdMembership:         "etcd's member list cannot be used (it does not match the pods, or a member cannot be identified)",
	problemServiceConflict:        "a Service the cluster needs exists and belongs to something else",
	problemLostQuorum:             "fewer than a majority of the voting members run, or etcd answers without a leader; no member is removed or replaced while it lasts",
	problemNoMembersRunning:       "no member pod runs and none can be restarted on its data (emptyDir storage): restore from a backup",
	problemUpgradeRefused:         "`spec.version` asks for a move etcd does not allow (a skipped minor version, a downgrade other than 3.7 → 3.6 or 3.6 → 3.5, 3.5 → 3.6 before every member runs 3.5.32 and has snapshotted past its v2 entries, 3.6 → 3.7 before every member runs 3.6.11)",
	problemUpgradeFailed:          "an upgraded member stopped, or was not Ready on the new version within `-pending-timeout`; the rollout halts until `spec.version` changes",
	problemMemberNotStarting:      "a member pod cannot start: unschedulable, an image that cannot be pulled, a claim that stays Pending, a container that ended, a pod stuck terminating or on a node that does not answer (one event per cause)",
	problemNoSpace:                "etcd raised the NOSPACE alarm: the operator compacts, defragments and disarms it (also the `NoSpace` condition)",
	problemDataCorrupt:            "etcd raised the CORRUPT alarm, or refuses a member's data: the member is replaced on a fresh claim while quorum allows (also the `DataCorrupt` condition)",
	problemWaiting:                "the operator has waited more than a minute and no other problem says why; the wait itself is in `status.reason`",
	problemInternal:               "a bug: the pass is retried, and no other cluster is affected",
	problemMembersNotSpread:       "in a cluster of three members or more, two running members are on one node, or (when the nodes' zones can be read and the members are in two zones or more) one zone holds a quorum of them: losing that node or zone takes several members, or the quorum. The cluster carries on and no member is moved; one event per arrangement. See docs/user-guide/clusters.md#placement",
	problemAdoptionRefused:        "pods that coreos/etcd-operator v0.9.4 made cannot be adopted safely: a pod layout of neither operator, a member name, data directory or URL other than this operator would use, TLS other than `spec.TLS` says, or members that do not answer. Nothing is changed; see docs/user-guide/coming-from-the-original.md#taking-over-running-clusters",
	problemAdoptedMembersHeld:     "a cluster adopted from coreos/etcd-operator v0.9.4 needs a change this operator holds back until its members are converted: a member whose pod ended or is gone, a pod that is no member, `spec.size` or `spec.version` other than the members, `spec.adoption.convert` (not carried out yet). No member is restarted, replaced, resized or upgraded",
}

// Problems lists every kind of problem, in the operator's order.
func Problems() []Problem {
	kinds := make([]problemKind, 0, len(problemKinds))
	for k := range problemKinds {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	out := make([]Problem, 0, len(kinds))
	for _, k := range kinds {
		info := k.info()
		out = append(out, Problem{Event: info.event, Code: info.code, Condition: info.condition, PerMessage: info.byMessage, Advisory: info.advisory, When: problemWhen[k]})
	}
	return out
}

// Event is an event a cluster's actions record on the EtcdCluster.
type Event struct {
	// Type is Normal or Warning.
	Type string
	// Reason is the event's reason.
	Reason string
	// Message is the message's pattern, <placeholders> in angle brackets.
	Message string
	// Original is true for the original operator's events, kept with their
	// texts.
	Original bool
}

// ActionEvents lists the events of the operator's actions (problems aside).
func ActionEvents() []Event {
	return []Event{
		{"Normal", eventNewMemberAdded, "New member <member> added to cluster", true},
		{"Normal", eventMemberRemoved, "Existing member <member> removed from the cluster", true},
		{"Normal", eventReplacingDeadMember, "The dead member <member> is being replaced", true},
		{"Normal", eventMemberUpgraded, "Member <member> upgraded from <old> to <new> ", true},
		{"Normal", eventConvertedInPlace, "Member <member>, made by coreos/etcd-operator, is restarted on its claim in this operator's layout", false},
		{"Normal", eventAdoptedFromTheOriginal, "Adopted <n> members coreos/etcd-operator made, as they run, without restarting any: <member> (ID <id>), ...; their pods are kept as they are", false},
		{"Normal", eventMemberRestarted, "Member <member> restarted in place on its data", false},
		{"Normal", eventLeaderMoved, "Leadership moved to <member>: <why>", false},
		{"Normal", eventCompacted, "History compacted to revision <revision>: <why>", false},
		{"Normal", eventDefragmented, "Member <member> defragmented: <why>", false},
		{"Normal", eventNoSpaceDisarmed, "NOSPACE alarm disarmed: <why>", false},
		{"Normal", eventDowngradeEnabled, "<what etcd's downgrade API was asked>", false},
		{"Normal", eventCARotation, "CA rotation <change> <secret or member> (<why>), or, under a cert-manager issuer whose CA changed, issuer's CA: trusted CAs written into <secret>|restarting member <member> (<why>)", false},
		{"Normal", eventTLSSwitch, "Member <member> restarted (switching TLS on|off: members move from stage <stage> to <stage>), after, on a claim, Member <member>'s peer URL is now <url> (<why>); it restarts next", false},
		{"Normal", eventCertificateRenewed, "Secret <secret> renewed from CA secret <ca>: it expired on <old notAfter>, now on <new notAfter> (<why>), or, under a cert-manager issuer, Secret <secret> now holds the certificate cert-manager issued in secret <secret>-cert-manager... (<why>)", false},
		{"Normal", eventCertificateRequested, "Certificate <certificate> created for secret <issued secret>: cert-manager issues it, the operator copies it into secret <secret>", false},
		{"Warning", eventDisasterRecovery, "<which member or backup the cluster is recovered from, and what may be lost>", false},
		{"Warning", eventPodForceDeleted, "force-deleted pod <pod>: it is stuck terminating and node <node> has not been Ready since <time>, longer than spec.pod.nodeLostAfterSeconds (<bound>); <what etcd's leader confirmed>", false},
		{"Warning", eventVersionNoLongerFixed, "etcd <minor> is no longer fixed upstream; ... set spec.version to a <next minor> release next", false},
	}
}

// Condition is one reason a condition of an EtcdCluster can carry.
type Condition struct {
	Type   string
	Status string
	Reason string
	// When says when it is set.
	When string
}

// Conditions lists the conditions of an EtcdCluster with their reasons.
// Available=False also carries the Condition of a Problem.
func Conditions() []Condition {
	out := []Condition{
		{string(api.ClusterConditionAvailable), "True", reasonClusterAvailable, "a quorum of voting members is running and ready"},
		{string(api.ClusterConditionAvailable), "False", reasonNotYetAvailable, "the cluster has not had a ready quorum yet (whatever the problem); the message says how many members are ready"},
		{string(api.ClusterConditionAvailable), "False", reasonQuorumRecovering, "fewer than a quorum run and the others are starting or restarting in place with their data, or the membership is being read again"},
		{string(api.ClusterConditionAvailable), "False", reasonQuorumNotReady, "a quorum runs but fewer than a quorum are ready"},
	}
	for _, p := range Problems() {
		if p.Condition != "" {
			out = append(out, Condition{string(api.ClusterConditionAvailable), "False", p.Condition, p.When})
		}
	}
	return append(out,
		Condition{string(api.ClusterConditionScaling), "True", reasonScalingUp, "members are being added; `Current cluster size: X, desired cluster size: Y`; removed when the membership equals `spec.size`"},
		Condition{string(api.ClusterConditionScaling), "True", reasonScalingDown, "members are being removed; removed when the membership equals `spec.size`"},
		Condition{string(api.ClusterConditionUpgrading), "True", reasonUpgrading, "`upgrading to <version>`; removed when every member runs `spec.version`"},
		Condition{string(api.ClusterConditionNoSpace), "True", "Alarm" + etcdutil.AlarmNoSpace, "a NOSPACE alarm is active; the message names the members and what the operator does"},
		Condition{string(api.ClusterConditionCorrupt), "True", "Alarm" + etcdutil.AlarmCorrupt, "a CORRUPT alarm is active; the message names the member whose data differs"},
	)
}
