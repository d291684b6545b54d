package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// withoutQuorum is step 10 of decide.
func withoutQuorum(s *snapshot) (action, bool) {
	q := s.quorum
	switch {
	case q.held():
		return action{}, false
	case q.up+q.starting >= q.needed && q.voters > 0:
		if q.voters == 1 && !s.everAvailable {
			// A new cluster's seed starts: the first joiner's pod is made
			// meanwhile, from the membership the seed was made with.
			if a, ok := joinerAheadOfTurn(s, "while the seed starts"); ok {
				return a, true
			}
		}
		return waiting(fmt.Sprintf("%d of %d voting members run and %d are starting; %d are needed", q.up, q.voters, q.starting, q.needed)), true
	}
	if a, ok := recoverQuorum(s); ok {
		return a, true
	}
	// Without quorum etcd cannot change its membership, and a member removed
	// now could hold the data needed to recover.
	return waiting(fmt.Sprintf("quorum lost: %d of %d voting members run, %d are needed", q.up, q.voters, q.needed)), true
}

// recoverQuorum is the opt-in disaster recovery (spec.disasterRecovery) of a
// cluster whose quorum has been lost for its grace period, with the missing
// members unable to come back (their claims are gone, or the repair ladder
// gave up on them): the survivor with the newest data becomes a one-member
// cluster (etcd's --force-new-cluster, on its claim) and the cluster regrows
// from it one member at a time; with no member's data left, the cluster is
// restored from its newest successful EtcdBackup by the restore operator.
// Whatever only the lost members held is lost; status.recovery says how
// much may be.
//
// Both are taken on proof only. A survivor is forced when etcd, read in this
// pass, answers from every member that may still run, none reports a leader,
// and this goroutine has seen the quorum lost for the grace period on
// several such reads (the status's Available condition is no proof: it may
// date from before an operator restart, or from another cause). A backup is
// restored only when no member has data left: no claim, no pod that has not
// ended.
func recoverQuorum(s *snapshot) (action, bool) {
	if !s.spec.Spec.RecoveryEnabled() {
		return action{}, false
	}
	loss := quorumLoss{since: s.now}
	if s.quorumLoss != nil {
		loss = *s.quorumLoss
	}
	var survivors []string
	for _, name := range sortedKeys(s.views) {
		// A learner was never a voter: it may hold nothing of the log.
		if m := s.views[name]; m.state == memberRunning && m.claim != nil && !m.member.IsLearner {
			survivors = append(survivors, name)
		}
	}
	if len(survivors) == 0 {
		return recoverFromBackup(s, loss)
	}
	if s.etcd == nil {
		return readEtcd("disaster recovery: ask every member for its leader and raft index"), true
	}
	if why := noLeaderUnproven(s); why != "" {
		a := waiting("disaster recovery waits: " + why)
		a.backoff = true
		return a, true
	}
	if a, ok := graceNotOver(s, loss); ok {
		return a, true
	}
	// The reads without a leader span the grace period too.
	if read := loss.firstLeaderlessRead; !read.IsZero() && read.After(loss.since) {
		if a, ok := graceNotOver(s, quorumLoss{since: read}); ok {
			return a, true
		}
	}
	if loss.leaderlessReads < leaderlessReadsNeeded {
		a := waiting(fmt.Sprintf("disaster recovery waits for more reads of etcd without a leader (%d of %d)", loss.leaderlessReads, leaderlessReadsNeeded))
		a.backoff = true
		return a, true
	}
	best, index := survivors[0], uint64(0)
	for _, name := range survivors {
		if h, _ := s.etcd.healthOf(s.views[name].member.ID); h.RaftIndex > index {
			best, index = name, h.RaftIndex
		}
	}
	return action{kind: actForceNewCluster, member: best, reason: fmt.Sprintf("the survivor with the newest data (raft index %d)", index)}, true
}

// noLeaderUnproven says why etcd, as read in this pass, does not prove that
// the quorum is gone and that the survivor to force holds the newest data
// left; "" when it does. Every member must be accounted for: it answered
// without a leader, or its etcd cannot be running (no pod, or a pod whose
// etcd has stopped). A member that may still run (its node does not answer,
// its pod is being deleted, its pod runs but did not answer) could hold a
// quorum with others, or newer data.
func noLeaderUnproven(s *snapshot) string {
	if s.etcd.err != nil {
		return fmt.Sprintf("etcd could not be asked: %v", s.etcd.err)
	}
	if m, ok := s.etcd.leaderReported(); ok {
		name := m.Name
		if name == "" {
			name = fmt.Sprintf("%x", m.ID)
		}
		return fmt.Sprintf("member %s follows leader %x: the quorum may be held where the operator does not see its pods", name, m.Leader)
	}
	var newest uint64
	for _, name := range sortedKeys(s.views) {
		m := s.views[name]
		h, answered := s.etcd.healthOf(m.member.ID)
		answered = answered && h.Err == nil
		switch {
		case answered && m.claim == nil && m.pod != nil:
			newest = max(newest, h.RaftIndex)
		case answered:
		case m.pod != nil && k8sutil.IsBeingDeleted(m.pod):
			return fmt.Sprintf("member %s may still run: its pod is being deleted and its node has not confirmed it", name)
		case m.pod != nil && m.pod.Status.Phase == corev1.PodUnknown:
			return fmt.Sprintf("member %s may still run: the node of its pod does not answer", name)
		case m.pod != nil && s.podNodesNotReady[m.pod.Spec.NodeName] != "":
			return fmt.Sprintf("member %s may still run: %s", name, s.podNodesNotReady[m.pod.Spec.NodeName])
		case m.state == memberRunning:
			return fmt.Sprintf("member %s does not answer etcd although its pod runs", name)
		case m.state == memberStarting:
			return fmt.Sprintf("member %s is starting", name)
		}
	}
	for _, name := range sortedKeys(s.views) {
		m := s.views[name]
		if h, ok := s.etcd.healthOf(m.member.ID); ok && h.Err == nil && m.claim != nil && m.state == memberRunning && h.RaftIndex >= newest {
			return ""
		}
	}
	return fmt.Sprintf("a member on an emptyDir volume holds newer data (raft index %d) than every survivor on a claim", newest)
}

// graceNotOver waits out the grace period of a disaster recovery, counted
// from when this goroutine first saw the quorum lost.
func graceNotOver(s *snapshot, loss quorumLoss) (action, bool) {
	at := loss.since.Add(s.spec.Spec.DisasterRecovery.GracePeriod())
	if !s.now.Before(at) {
		return action{}, false
	}
	a := waiting(fmt.Sprintf("quorum lost since %s; disaster recovery starts at %s unless the members come back",
		loss.since.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339)))
	a.after = at.Sub(s.now)
	return a, true
}

// recoverFromBackup restores a cluster from its newest backup, the last
// resort: only when no member has any data left, since the restore replaces
// every member and whatever was written after the backup is lost.
func recoverFromBackup(s *snapshot, loss quorumLoss) (action, bool) {
	if !s.spec.Spec.DisasterRecovery.FromBackup {
		return waiting("disaster recovery cannot start: no member with its data on a claim runs to become a one-member cluster; restore the cluster from a backup with an EtcdRestore"), true
	}
	if why := dataLeft(s); why != "" {
		return waiting("disaster recovery cannot start: " + why + ", which a restore from a backup would delete: fix what keeps them from starting and they come back with it"), true
	}
	if a, ok := graceNotOver(s, loss); ok {
		return a, true
	}
	return action{kind: actRestoreFromBackup, reason: "no member's data is left"}, true
}

// dataLeft says which members still hold data, "" when none does: a claim
// holds its member's data; a pod holds it on its emptyDir volume as long as
// it has not ended (the kubelet restarts a crashing etcd in it). When the
// claims cannot be seen at all, nothing proves they are gone.
func dataLeft(s *snapshot) string {
	if s.claimsUnseen && s.usesClaims() {
		return "the operator cannot see the cluster's claims"
	}
	var onClaims, inPods []string
	for _, name := range sortedKeys(s.views) {
		m := s.views[name]
		switch {
		case m.claim != nil:
			onClaims = append(onClaims, name)
		case m.pod != nil && !k8sutil.IsPodDead(m.pod) || m.pod != nil && m.pod.Status.Phase == corev1.PodUnknown:
			inPods = append(inPods, name)
		}
	}
	switch {
	case len(onClaims) > 0:
		return "members " + strings.Join(onClaims, ", ") + " hold data on their claims"
	case len(inPods) > 0:
		return "members " + strings.Join(inPods, ", ") + " hold data in their pods"
	}
	return ""
}

// forceNewCluster starts a disaster recovery from a surviving member: its
// pod is deleted, and restartInPlace restarts it on its claim with
// --force-new-cluster. What only the lost members held is lost; the status
// records how much may be.
func (c *Cluster) forceNewCluster(ctx context.Context, s *snapshot, a action) outcome {
	m := s.views[a.member]
	var revision int64
	if h, ok := s.etcd.healthOf(m.member.ID); ok {
		revision = h.Revision
	}
	msg := fmt.Sprintf("Disaster recovery: the quorum was lost for good; member %s (%s) becomes a one-member cluster with its data, at revision %d, and the cluster regrows from it",
		a.member, a.reason, revision)
	if c.lastRevision > revision {
		msg += fmt.Sprintf("; writes up to revision %d were seen before and the last %d revisions may be lost", c.lastRevision, c.lastRevision-revision)
	}
	c.log.Warn(msg)
	c.tell(corev1.EventTypeWarning, eventDisasterRecovery, msg)
	if err := c.deletePod(ctx, a.member); err != nil {
		return outcome{err: err}
	}
	c.recovering = &recovering{member: a.member, started: c.now(), revision: revision}
	return outcome{requeue: c.cfg.MinPassInterval, recovery: &api.RecoveryStatus{
		Time: metav1.NewTime(c.now()), FromMember: a.member, RecoveredRevision: revision, LastSeenRevision: c.lastRevision, Message: msg,
	}}
}

// restoreFromBackup asks the restore operator to restore the cluster from
// the newest successful EtcdBackup of it, when no member's data is left.
func (c *Cluster) restoreFromBackup(ctx context.Context, s *snapshot, a action) outcome {
	restores, err := c.cfg.EtcdClient.EtcdV1beta2().EtcdRestores(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return outcome{err: kubeError("list EtcdRestores", err)}
	}
	for _, r := range restores.Items {
		finished := r.Status.Phase == api.RestorePhaseCompleted || r.Status.Phase == api.RestorePhaseFailed
		switch {
		case r.Spec.EtcdCluster.Name == c.name && !finished:
			c.log.Infof("waiting for EtcdRestore %s to restore the cluster", r.Name)
			return outcome{requeue: c.cfg.ReconcileInterval}
		case r.Name == c.name:
			// The restore takes the cluster's name, so the record of an
			// earlier, finished restore must make way; it holds no data.
			err := c.cfg.EtcdClient.EtcdV1beta2().EtcdRestores(c.namespace).Delete(ctx, r.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &r.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				return outcome{err: kubeError("delete the finished EtcdRestore "+r.Name, err)}
			}
			c.log.Infof("deleted EtcdRestore %s (%s) of an earlier restore, to restore the cluster again", r.Name, r.Status.Phase)
			return outcome{requeue: c.cfg.MinPassInterval}
		}
	}
	backups, err := c.cfg.EtcdClient.EtcdV1beta2().EtcdBackups(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return outcome{err: kubeError("list EtcdBackups", err)}
	}
	var newest *api.EtcdBackup
	for i := range backups.Items {
		b := &backups.Items[i]
		if _, _, ok := api.RestoreSourceOf(b); ok && b.TargetsCluster(c.name) &&
			(newest == nil || b.Status.LastSuccessDate.After(newest.Status.LastSuccessDate.Time)) {
			newest = b
		}
	}
	if newest == nil {
		return outcome{err: newPassError(problemNoMembersRunning, "disaster recovery from a backup",
			fmt.Errorf("no EtcdBackup of this cluster in %s has succeeded; restore it with an EtcdRestore", c.namespace))}
	}
	storage, src, _ := api.RestoreSourceOf(newest)
	// With an archive, the restore goes to the newest change in it, which
	// the restore operator finds in the chunks when it plans: what the
	// backup's status says may be behind them already.
	var point *api.RestorePointInTime
	if st, archived, ok := api.ArchiveSourceOf(newest); ok {
		storage, src, point = st, archived, &api.RestorePointInTime{Latest: true}
	}
	// Named like the cluster: the restore operator recreates the cluster
	// under the restore's name, and admission refuses any other. The mark
	// lets it record the recovery on the re-created cluster.
	restore := &api.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.namespace,
			Annotations: map[string]string{api.DisasterRecoveryAnnotation: strconv.FormatInt(c.lastRevision, 10)}},
		Spec: api.RestoreSpec{BackupStorageType: storage, RestoreSource: src, EtcdCluster: api.EtcdClusterRef{Name: c.name}, PointInTime: point},
	}
	if err := restore.Validate(); err != nil {
		return outcome{err: newPassError(problemNoMembersRunning, "disaster recovery from EtcdBackup "+newest.Name, err)}
	}
	if _, err := c.cfg.EtcdClient.EtcdV1beta2().EtcdRestores(c.namespace).Create(ctx, restore, metav1.CreateOptions{}); err != nil {
		return outcome{err: kubeError("create EtcdRestore "+restore.Name, err)}
	}
	rec := restoredFromBackup(restore.Name, newest)
	rec.Time, rec.LastSeenRevision = metav1.NewTime(c.now()), c.lastRevision
	c.log.WithFields(logrus.Fields{"backup": newest.Name, "restore": restore.Name, "archive": point != nil}).Warn(rec.Message)
	c.tell(corev1.EventTypeWarning, eventDisasterRecovery, rec.Message)
	return outcome{requeue: c.cfg.ReconcileInterval, recovery: rec}
}

// restoredFromBackup is what a disaster recovery from the backup restores,
// as status.recovery says it when the EtcdRestore is created. With an
// archive, the restore operator finds the newest change in it when it plans
// and the re-created cluster records the revision it reached; until then the
// backup's status says how far the archive was when it last looked.
func restoredFromBackup(restore string, b *api.EtcdBackup) *api.RecoveryStatus {
	taken := fmt.Sprintf("taken %s at revision %d", b.Status.LastSuccessDate.UTC().Format(time.RFC3339), b.Status.EtcdRevision)
	if !b.KeepsArchive() {
		return &api.RecoveryStatus{FromBackup: b.Status.BackupPath, RecoveredRevision: b.Status.EtcdRevision,
			Message: fmt.Sprintf("Disaster recovery: no member's data is left; EtcdRestore %s restores the cluster from EtcdBackup %s (%s, %s); writes after it are lost",
				restore, b.Name, b.Status.BackupPath, taken)}
	}
	path := b.Spec.Path()
	rec := &api.RecoveryStatus{FromBackup: path, RecoveredRevision: b.Status.EtcdRevision}
	archived := "the backup has not reported an archived change yet"
	if a := b.Status.Archive; a != nil && a.LastRevision > 0 {
		rec.RecoveredRevision = max(rec.RecoveredRevision, a.LastRevision)
		archived = fmt.Sprintf("the backup last reported revision %d", a.LastRevision)
		if a.LastTime != nil {
			archived += " received at " + a.LastTime.UTC().Format(time.RFC3339)
		}
	}
	rec.Message = fmt.Sprintf("Disaster recovery: no member's data is left; EtcdRestore %s restores the cluster from EtcdBackup %s (%s) up to the newest change in its archive (%s; the restore finds the newest in the chunks), onto its newest snapshot (%s); only the writes the archive had not stored yet, those of about the last %s, are lost; where the archive cannot be replayed to its end, the EtcdRestore says so in a Warning and in status.pointInTime.shortfall",
		restore, b.Name, path, archived, taken, b.Spec.BackupPolicy.Archive.Interval())
	return rec
}
