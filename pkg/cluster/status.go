package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/maintenance"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
)

// Condition reasons, in CamelCase as Kubernetes' API conventions ask. The
// original wrote the first four as texts ("Scaling up", "Cluster
// available"); its event texts stay as they were. The False reasons of
// Available are new (the original never set Available False).
const (
	reasonScalingUp        = "ScalingUp"
	reasonScalingDown      = "ScalingDown"
	reasonUpgrading        = "ClusterUpgrading"
	reasonClusterAvailable = "ClusterAvailable"
	// reasonNotYetAvailable is Available=False before the cluster ever had a
	// ready quorum; every later False has the reason of its problem. A
	// cluster that never was available holds no data anyone was told is
	// stored, which is what allows a seed that never ran to be made again.
	reasonNotYetAvailable = "NotYetAvailable"
	// reasonQuorumRecovering is Available=False while fewer than a quorum
	// of members run and the others are starting or being restarted in
	// place, with their data: nothing is lost, clients wait.
	reasonQuorumRecovering = "QuorumRecovering"
	// reasonQuorumNotReady is Available=False while a quorum of members
	// runs but fewer than a quorum are ready.
	reasonQuorumNotReady = "QuorumNotReady"
)

// statusOf derives the status from the snapshot of a pass, the phase after
// its action and the problems found, starting from the status the server
// holds (for the phase and the conditions' times). Nothing is derived from
// memory of earlier passes.
func statusOf(s *snapshot, prev api.ClusterStatus, phase api.ClusterPhase, generation int64, problems []problem, out outcome) api.ClusterStatus {
	st := *prev.DeepCopy()
	st.Phase = phase
	st.ObservedGeneration = generation
	st.Reason = joinMessages(problems)
	if s.spec == nil {
		return st
	}
	now := s.now.UTC().Format(time.RFC3339)
	st.ControlPaused = s.spec.Spec.Paused
	if done := rotationDone(s); done != "" {
		st.CertificatesRotated = done
	}
	if done := certManagerRotationDone(s); done != "" {
		st.CertificatesRotated = done
	}
	st.CARotation = caRotationStatus(s, st.CARotation)
	st.Selector = k8sutil.ClusterSelector(s.spec.Name).String()
	if len(s.missingServices) == 0 && s.serviceConflict == "" {
		st.ServiceName = k8sutil.ClientServiceName(s.spec.Name)
		st.ClientPort = k8sutil.EtcdClientPort
	}

	var ready, unready []string
	if s.membership != nil {
		// Every member is listed: ready when its pod is Running and Ready,
		// unready otherwise (starting, dead, or without a pod), so that a
		// lost member never stays listed as ready as it did in the original.
		for _, name := range sortedKeys(s.views) {
			if m := s.views[name]; m.state == memberRunning && m.ready {
				ready = append(ready, name)
			} else {
				unready = append(unready, name)
			}
		}
		st.Size = len(s.views)
	} else {
		// Membership unknown (restart, hand-over): the members last listed
		// stay listed, as nothing says they left (their claims are how
		// they come back); without such a list, the pods are reported.
		names := s.lastMembers
		if len(names) == 0 {
			for _, name := range sortedKeys(s.pods) {
				if p := s.pods[name].Status.Phase; p == corev1.PodRunning || p == corev1.PodPending {
					names = append(names, name)
				}
			}
			names = append(names, sortedKeys(s.claims)...)
		}
		for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
			if pod := s.pods[name]; pod != nil && pod.Status.Phase == corev1.PodRunning && k8sutil.IsPodReady(pod) {
				ready = append(ready, name)
			} else {
				unready = append(unready, name)
			}
		}
	}
	st.Members = api.MembersStatus{Ready: ready, Unready: unready}
	st.ReadyMembers = fmt.Sprintf("%d/%d", len(ready), s.spec.Spec.Size)

	active := !s.spec.Spec.Paused
	switch {
	case active && phase == api.ClusterPhaseCreating:
		setScaling(&st, now, 0, s.spec.Spec.Size)
	case active && phase == api.ClusterPhaseRunning && s.membership != nil:
		setScaling(&st, now, len(s.views), s.spec.Spec.Size)
	}

	available := false
	for _, p := range problems {
		if reason := p.kind.info().condition; reason != "" {
			if !s.everAvailable {
				reason = reasonNotYetAvailable
			}
			setCondition(&st, now, api.ClusterConditionAvailable, corev1.ConditionFalse, reason, p.msg)
			available = true
			break
		}
	}
	if !available && s.membership == nil && s.everAvailable && phase == api.ClusterPhaseRunning {
		// The membership is read again (an operator restart, a hand-over):
		// the pods tell whether a quorum can serve meanwhile.
		n := max(len(s.lastMembers), len(s.pods))
		if ready := len(st.Members.Ready); n > 0 && ready < n/2+1 {
			setCondition(&st, now, api.ClusterConditionAvailable, corev1.ConditionFalse, reasonQuorumRecovering,
				fmt.Sprintf("the membership is being read again; %d of %d member pods are ready", ready, n))
		}
	}
	if !available && s.membership != nil {
		q := s.quorum
		if m := s.views[out.downed]; m != nil && m.ready && m.state == memberRunning && !m.member.IsLearner {
			q.ready--
		}
		switch {
		case q.held() && q.ready >= q.needed:
			setCondition(&st, now, api.ClusterConditionAvailable, corev1.ConditionTrue, reasonClusterAvailable, "")
		case !s.everAvailable && phase != api.ClusterPhaseNone:
			setCondition(&st, now, api.ClusterConditionAvailable, corev1.ConditionFalse, reasonNotYetAvailable,
				fmt.Sprintf("%d of %d members are ready", q.ready, q.voters))
		case q.up < q.needed && phase == api.ClusterPhaseRunning:
			setCondition(&st, now, api.ClusterConditionAvailable, corev1.ConditionFalse, reasonQuorumRecovering,
				fmt.Sprintf("%d of %d voting members run and %d are starting or restarting with their data; %d are needed", q.up, q.voters, q.starting, q.needed))
		case q.ready < q.needed && phase == api.ClusterPhaseRunning:
			// Running is not serving: etcd's /health, the readiness probe,
			// fails without a leader (a partition, a stalled disk).
			setCondition(&st, now, api.ClusterConditionAvailable, corev1.ConditionFalse, reasonQuorumNotReady,
				fmt.Sprintf("%d of %d voting members run but only %d are ready; %d are needed", q.up, q.voters, q.ready, q.needed))
		}
	}

	setMemberDetails(&st, s, out, now)
	setMaintenanceStatus(&st, s, out, now)
	if out.recovery != nil {
		st.Recovery = out.recovery
	}

	p := s.plan
	if p.current != "" {
		st.CurrentVersion = p.current
	}
	if p.refused != nil || len(p.unfinished) == 0 {
		removeCondition(&st, api.ClusterConditionUpgrading)
		st.TargetVersion = ""
	} else {
		st.TargetVersion = p.target
		setCondition(&st, now, api.ClusterConditionUpgrading, corev1.ConditionTrue, reasonUpgrading, "upgrading to "+p.target)
	}
	return st
}

// setMemberDetails reports each member as etcd last told it (role, version,
// database size, alarms) and as the repair ladder sees it. Without an answer
// of etcd in this pass, etcd's part is what the last one said.
func setMemberDetails(st *api.ClusterStatus, s *snapshot, out outcome, now string) {
	if s.membership == nil {
		return
	}
	prev := map[string]api.MemberDetail{}
	for _, d := range st.MemberDetails {
		prev[d.Name] = d
	}
	read := s.etcd != nil && s.etcd.err == nil
	if read {
		st.Leader = ""
	}
	var details []api.MemberDetail
	for _, name := range sortedKeys(s.views) {
		m := s.views[name]
		d := prev[name]
		d.Name = name
		d.ID = fmt.Sprintf("%x", m.member.ID)
		if d.Role == "" {
			d.Role = api.MemberRoleUnknown
		}
		if h, ok := s.etcd.healthOf(m.member.ID); ok {
			d.Role, d.Version, d.Error = api.MemberRoleFollower, h.Version, ""
			d.DBSize, d.DBSizeInUse = h.DBSize, h.DBSizeInUse
			d.Alarms = nil
			for _, a := range s.etcd.health.Alarms {
				if a.MemberID == m.member.ID {
					d.Alarms = append(d.Alarms, a.Type)
				}
			}
			switch {
			case h.Err != nil:
				d.Role, d.Error = api.MemberRoleUnknown, h.Err.Error()
			case m.member.IsLearner:
				d.Role = api.MemberRoleLearner
			case m.member.ID == s.etcd.health.LeaderID:
				d.Role = api.MemberRoleLeader
				st.Leader = name
			}
		}
		if name == out.defragmented {
			t, _ := time.Parse(time.RFC3339, now)
			d.LastDefragmentation = &metav1.Time{Time: t}
		}
		d.Restarts = int32(m.restarts)
		d.Repair = m.repair.String()
		details = append(details, d)
	}
	st.MemberDetails = details
}

// setMaintenanceStatus records the maintenance done and the facts a move to
// etcd 3.6 is judged by, and the NoSpace and DataCorrupt conditions.
func setMaintenanceStatus(st *api.ClusterStatus, s *snapshot, out outcome, now string) {
	var m api.MaintenanceStatus
	if st.Maintenance != nil {
		m = *st.Maintenance.DeepCopy()
	}
	if out.compacted > 0 {
		t, _ := time.Parse(time.RFC3339, now)
		m.LastCompaction = &metav1.Time{Time: t}
		m.LastCompactedRevision = out.compacted
	}
	if s.etcd != nil && s.etcd.err == nil {
		m.V2EntriesUntilIndex, m.V2EntriesPending = maintenance.TrackV2Entries(m, s.etcd.health)
		for _, a := range []struct {
			typ  string
			cond api.ClusterConditionType
		}{{etcdutil.AlarmNoSpace, api.ClusterConditionNoSpace}, {etcdutil.AlarmCorrupt, api.ClusterConditionCorrupt}} {
			if s.etcd.hasAlarm(a.typ) {
				setCondition(st, now, a.cond, corev1.ConditionTrue, "Alarm"+a.typ, alarmMessage(s, a.typ))
			} else {
				removeCondition(st, a.cond)
			}
		}
	}
	if out.disarmedNoSpace {
		// etcd's view read before the disarm still shows the alarm, and the
		// next look may be a minute away: the disarm etcd accepted is the
		// evidence that writes are taken again.
		removeCondition(st, api.ClusterConditionNoSpace)
	}
	if m != (api.MaintenanceStatus{}) {
		st.Maintenance = &m
	}
}

func alarmMessage(s *snapshot, typ string) string {
	var names []string
	for _, a := range s.etcd.health.Alarms {
		if a.Type != typ {
			continue
		}
		name := fmt.Sprintf("%x", a.MemberID)
		if m := s.membership.ByID(a.MemberID); m != nil {
			name = m.Name
		}
		names = append(names, name)
	}
	if typ == etcdutil.AlarmNoSpace {
		return "etcd's database is full (NOSPACE on " + strings.Join(names, ", ") + "): the cluster takes no write until the operator has compacted, defragmented and disarmed it"
	}
	return "etcd found data that differs between members (CORRUPT on " + strings.Join(names, ", ") + "): the member is replaced on a fresh claim while quorum allows"
}

// setCondition sets a condition. Times are RFC 3339 strings as in the
// original; lastUpdateTime moves when anything changes, lastTransitionTime
// only when the status does, and nothing moves when nothing changed, so an
// unchanged condition never causes a status write.
func setCondition(st *api.ClusterStatus, now string, t api.ClusterConditionType, status corev1.ConditionStatus, reason, msg string) {
	for i := range st.Conditions {
		cond := &st.Conditions[i]
		if cond.Type != t {
			continue
		}
		if cond.Status == status && cond.Reason == reason && cond.Message == msg {
			return
		}
		if cond.Status != status {
			cond.LastTransitionTime = now
		}
		cond.Status, cond.Reason, cond.Message = status, reason, msg
		cond.LastUpdateTime = now
		return
	}
	st.Conditions = append(st.Conditions, api.ClusterCondition{
		Type: t, Status: status, Reason: reason, Message: msg, LastUpdateTime: now, LastTransitionTime: now,
	})
}

func removeCondition(st *api.ClusterStatus, t api.ClusterConditionType) {
	var kept []api.ClusterCondition
	for _, cond := range st.Conditions {
		if cond.Type != t {
			kept = append(kept, cond)
		}
	}
	st.Conditions = kept
}

// setScaling reports a membership that differs from spec.size, with the
// original's texts; the condition goes away once they agree.
func setScaling(st *api.ClusterStatus, now string, current, desired int) {
	switch {
	case current < desired:
		setCondition(st, now, api.ClusterConditionScaling, corev1.ConditionTrue, reasonScalingUp, scalingMessage(current, desired))
	case current > desired:
		setCondition(st, now, api.ClusterConditionScaling, corev1.ConditionTrue, reasonScalingDown, scalingMessage(current, desired))
	default:
		removeCondition(st, api.ClusterConditionScaling)
	}
}

func scalingMessage(current, desired int) string {
	return fmt.Sprintf("Current cluster size: %d, desired cluster size: %d", current, desired)
}

// writeStatus writes st when it differs from what the server holds, and
// tells whether it did. A conflict means the object changed since this pass
// read it: the fresh object is taken (a spec edit, the restore operator's
// hand-over; take tells a new spec by its generation) and nothing is
// written; the next pass derives the status again from it.
//
// A status the server answers without storing it (see Cluster.unstored) is
// kept for the next passes, and written again by each of them: the write is
// what finds the role or the CRD fixed.
func (c *Cluster) writeStatus(ctx context.Context, st api.ClusterStatus) (bool, error) {
	if equality.Semantic.DeepEqual(st, c.latest.Status) {
		c.unstored = nil
		return true, nil
	}
	before := c.latest.Status
	obj := c.latest.DeepCopy()
	obj.Status = st
	out, err := c.cfg.Status.Write(ctx, obj)
	switch {
	case err == nil || errors.Is(err, statusutil.ErrStatusNotStored): // not stored: kept below
		c.take(out)
		c.unstored = nil
		// A server that stores the status may normalize it (times to the
		// second), so the answer is compared with what it held before, not
		// with what was written: unchanged means not stored.
		if equality.Semantic.DeepEqual(out.Status, before) {
			c.unstored = st.DeepCopy()
		}
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil // deleted: the controller stops this goroutine
	case !apierrors.IsConflict(err):
		return false, kubeError("write status", err)
	}
	fresh, err := c.cfg.EtcdClient.EtcdV1beta2().EtcdClusters(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, kubeError("read the cluster after a status conflict", err)
	}
	c.take(fresh)
	return false, nil
}

// status is the status the passes go on from: the server's, or the one kept
// in memory while the server does not store it.
func (c *Cluster) status() *api.ClusterStatus {
	if c.unstored != nil {
		return c.unstored
	}
	return &c.latest.Status
}

// announce emits one Warning event per problem the first time it is seen,
// counts every problem but the advisory ones in the reconcile_failed metric,
// and forgets problems
// that went away, so that a recurrence is announced again. A problem told
// apart by its cause (a pod that fails the same way) is forgotten only after
// causeMemory without it: the member made to replace one that failed is
// likely to fail the same way a minute later, and that is the same problem.
func (c *Cluster) announce(active []problem) {
	now := c.now()
	seen := map[string]bool{}
	for _, p := range active {
		k := p.key()
		if seen[k] {
			continue
		}
		seen[k] = true
		info := p.kind.info()
		if !info.advisory {
			c.cfg.Metrics.failed(c.namespace, c.name, info.code)
		}
		if _, done := c.announced[k]; !done {
			c.log.WithFields(p.fields).Warn(p.msg)
			c.event(corev1.EventTypeWarning, info.event, p.msg)
		}
		c.announced[k] = announcement{seen: now, byCause: p.topic != ""}
	}
	for k, a := range c.announced {
		if !seen[k] && (!a.byCause || now.Sub(a.seen) > causeMemory) {
			delete(c.announced, k)
		}
	}
}

// announcement is a problem announced with a Warning event.
type announcement struct {
	seen    time.Time
	byCause bool
}

// causeMemory is how long a problem told apart by its cause stays announced
// after it was last seen.
const causeMemory = 10 * time.Minute
