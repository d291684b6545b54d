package cluster

import (
	"errors"
	"fmt"
	"strings"
)

// Reason codes are the values of the Reason label of
// etcd_operator_cluster_reconcile_failed. The set is fixed: the original put raw
// error text in that label, so every new pod name or timeout message made a new
// time series.
const (
	reasonInvalidSpec      = "invalid_spec"
	reasonTLSSecret        = "tls_secret"
	reasonKubeAPI          = "kube_api"
	reasonEtcdUnreachable  = "etcd_unreachable"
	reasonEtcdMembership   = "etcd_membership"
	reasonServiceConflict  = "service_conflict"
	reasonLostQuorum       = "lost_quorum"
	reasonNoMembersRunning = "no_members_running"
	reasonUpgradeRefused   = "upgrade_refused"
	reasonUpgradeFailed    = "upgrade_failed"
)

// Reasons of the Warning events, one per kind of problem. Users act on these, so
// they are CamelCase like the reasons Kubernetes itself emits.
const (
	warnInvalidSpec      = "InvalidSpec"
	warnTLSSecret        = "TLSSecretUnavailable"
	warnKubeAPI          = "KubernetesAPIError"
	warnEtcdUnreachable  = "EtcdUnreachable"
	warnEtcdMembership   = "EtcdMembershipUnusable"
	warnServiceConflict  = "ServiceConflict"
	warnLostQuorum       = "LostQuorum"
	warnNoMembersRunning = "NoMembersRunning"
	warnUpgradeRefused   = "UpgradeRefused"
	warnUpgradeFailed    = "UpgradeFailed"
)

// problem is something wrong with a cluster that a user should know about. It
// lands in status.reason, in one Warning event (not one per pass) and in the
// reconcile_failed counter.
type problem struct {
	// code is the metric's Reason label value.
	code string
	// event is the Warning event reason.
	event string
	// msg is the human text, for status.reason and the event.
	msg string
	// byMessage makes a different message a different problem, reported again.
	// It is set for problems the user made (a spec, a version): each new mistake
	// deserves its own event. Transient errors are keyed by code alone, because
	// their text changes from one try to the next (new member names, endpoints)
	// and one event per retry is the noise this type exists to avoid.
	byMessage bool
}

// key identifies a problem for "report once".
func (p problem) key() string {
	if p.byMessage {
		return p.code + "\x00" + p.msg
	}
	return p.code
}

// passError is an error that aborts a pass and is retried with backoff: API
// errors, an unreachable etcd, a missing secret. It carries the problem to report.
type passError struct {
	problem
	err error
}

func (e *passError) Error() string { return e.msg }
func (e *passError) Unwrap() error { return e.err }

// newPassError wraps err as a problem; what says what was being done.
func newPassError(code, event, what string, err error) error {
	return &passError{problem: problem{code: code, event: event, msg: fmt.Sprintf("%s: %v", what, err)}, err: err}
}

func kubeError(what string, err error) error {
	return newPassError(reasonKubeAPI, warnKubeAPI, what, err)
}

func etcdError(what string, err error) error {
	return newPassError(reasonEtcdUnreachable, warnEtcdUnreachable, what, err)
}

// problemOf returns the problem an error of a pass stands for. Errors that are
// not passErrors are programming or API errors and are reported as such.
func problemOf(err error) problem {
	var pe *passError
	if errors.As(err, &pe) {
		return pe.problem
	}
	return problem{code: reasonKubeAPI, event: warnKubeAPI, msg: err.Error()}
}

// joinMessages is status.reason: every active problem, most urgent first.
func joinMessages(ps []problem) string {
	msgs := make([]string, 0, len(ps))
	for _, p := range ps {
		msgs = append(msgs, p.msg)
	}
	return strings.Join(msgs, "; ")
}
