package cluster

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sirupsen/logrus"
)

// problemKind is the one vocabulary of what can be wrong with a cluster. Each
// kind has, in problemKinds, its code (the Reason label of
// etcd_operator_cluster_reconcile_failed; the set is fixed because the
// original put raw error text there and every new pod name made a new series),
// the reason of its Warning event (CamelCase, as Kubernetes' own), the reason
// of the condition it sets, and whether each new message is a new problem.
type problemKind int

const (
	problemInvalidSpec problemKind = iota
	problemTLSSecret
	problemTLSCertificate
	problemTLSCertificateExpiring
	problemKubeAPI
	problemEtcdUnreachable
	problemEtcdMembership
	problemServiceConflict
	problemLostQuorum
	problemNoMembersRunning
	problemUpgradeRefused
	problemUpgradeFailed
	problemMemberNotStarting
	problemNoSpace
	problemDataCorrupt
	problemWaiting
	problemInternal
	problemMembersNotSpread
	problemAdoptionRefused
	problemAdoptedMembersHeld
)

type problemKindInfo struct {
	// code is the metric's Reason label value.
	code string
	// event is the Warning event reason.
	event string
	// condition is the reason of the Available=False condition the problem
	// sets, "" when it leaves Available alone.
	condition string
	// byMessage makes a different message a different problem, announced
	// again. It is set for what the user made (a spec, a version, a pod
	// that cannot start for a reason of its spec): each new mistake deserves
	// its own event. Transient errors are keyed by kind alone, because their
	// text changes from one try to the next (member names, endpoints), and
	// one event per retry is the noise this vocabulary exists to avoid.
	byMessage bool
	// advisory problems are told (status.reason, an event, the log) and
	// hold nothing up: the cluster works while they last, so they are not
	// failed passes in reconcile_failed (whose alert would page for a
	// cluster at rest), and they do not explain a wait.
	advisory bool
}

var problemKinds = map[problemKind]problemKindInfo{
	problemInvalidSpec:    {code: "invalid_spec", event: "InvalidSpec", byMessage: true},
	problemTLSSecret:      {code: "tls_secret", event: "TLSSecretUnavailable"},
	problemTLSCertificate: {code: "tls_certificate", event: "TLSCertificateInvalid", byMessage: true},
	// problemTLSCertificateExpiring is told apart by its topic: the
	// certificate and its expiry.
	problemTLSCertificateExpiring: {code: "tls_certificate_expiring", event: "CertificateExpiresSoon", advisory: true},
	problemKubeAPI:                {code: "kube_api", event: "KubernetesAPIError"},
	problemEtcdUnreachable:        {code: "etcd_unreachable", event: "EtcdUnreachable"},
	problemEtcdMembership:         {code: "etcd_membership", event: "EtcdMembershipUnusable"},
	problemServiceConflict:        {code: "service_conflict", event: "ServiceConflict"},
	problemLostQuorum:             {code: "lost_quorum", event: "LostQuorum", condition: "LostQuorum"},
	problemNoMembersRunning:       {code: "no_members_running", event: "NoMembersRunning", condition: "NoMembersRunning"},
	problemUpgradeRefused:         {code: "upgrade_refused", event: "UpgradeRefused", byMessage: true},
	problemUpgradeFailed:          {code: "upgrade_failed", event: "UpgradeFailed", byMessage: true},
	problemMemberNotStarting:      {code: "member_not_starting", event: "MemberNotStarting", byMessage: true},
	problemNoSpace:                {code: "no_space", event: "NoSpace"},
	problemDataCorrupt:            {code: "data_corrupt", event: "DataCorrupt"},
	// problemWaiting is a wait of more than a minute that no other problem
	// explains: keyed by kind, so one event per stretch of waiting.
	problemWaiting:  {code: "waiting", event: "WaitingTooLong"},
	problemInternal: {code: "internal_error", event: "InternalError"},
	// problemMembersNotSpread is told apart by its topic, the arrangement
	// of the members: each new one is announced.
	problemMembersNotSpread: {code: "members_not_spread", event: "MembersNotSpread", advisory: true},
	// The adoption of a cluster the original made: each new cause (a pod,
	// a spec change held back) is told.
	problemAdoptionRefused:    {code: "adoption_refused", event: "AdoptionRefused", byMessage: true},
	problemAdoptedMembersHeld: {code: "adopted_members_held", event: "AdoptedMembersHeld", byMessage: true},
}

func (k problemKind) info() problemKindInfo { return problemKinds[k] }

// problem is something wrong with a cluster that a user should know about. It
// lands in status.reason, in one Warning event (not one per pass) and in the
// reconcile_failed counter.
type problem struct {
	kind problemKind
	// msg is the human text, for status.reason and the event.
	msg string
	// topic, when set, stands for msg in telling problems apart: a pod
	// that fails for the same cause under a new name is the same problem.
	topic string
	// fields are logged with msg when it is announced, for log searches.
	fields logrus.Fields
}

func newProblem(kind problemKind, format string, args ...any) problem {
	return problem{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// key identifies a problem for "announce once".
func (p problem) key() string {
	info := p.kind.info()
	switch {
	case p.topic != "":
		return info.code + "\x00" + p.topic
	case info.byMessage:
		return info.code + "\x00" + p.msg
	}
	return info.code
}

// passError is an error that ends an action and is retried with backoff: API
// errors, an unreachable etcd, a missing secret. It carries the problem to
// report.
type passError struct {
	problem
	err error
}

func (e *passError) Error() string { return e.msg }
func (e *passError) Unwrap() error { return e.err }

// newPassError wraps err as a problem; what says what was being done.
func newPassError(kind problemKind, what string, err error) error {
	return &passError{problem: problem{kind: kind, msg: fmt.Sprintf("%s: %v", what, err)}, err: err}
}

func kubeError(what string, err error) error { return newPassError(problemKubeAPI, what, err) }
func etcdError(what string, err error) error { return newPassError(problemEtcdUnreachable, what, err) }

// problemOf returns the problem an error stands for. Errors that are not
// passErrors are API or programming errors and are reported as such.
func problemOf(err error) problem {
	var pe *passError
	if errors.As(err, &pe) {
		return pe.problem
	}
	return problem{kind: problemKubeAPI, msg: err.Error()}
}

// joinMessages is status.reason: every active problem, in order.
func joinMessages(ps []problem) string {
	msgs := make([]string, 0, len(ps))
	for _, p := range ps {
		msgs = append(msgs, p.msg)
	}
	return strings.Join(msgs, "; ")
}
