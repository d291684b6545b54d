package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// Events of the original, with its exact texts (§3.11).
const (
	eventNewMemberAdded      = "New Member Added"
	eventMemberRemoved       = "Member Removed"
	eventReplacingDeadMember = "Replacing Dead Member"
	eventMemberUpgraded      = "Member Upgraded"
	// eventMemberRestarted is new: a member restarted in place, on its own
	// data, with its own ID.
	eventMemberRestarted = "Member Restarted"
	// Day-2 care, new.
	eventLeaderMoved      = "LeaderMoved"
	eventCompacted        = "Compacted"
	eventDefragmented     = "Defragmented"
	eventNoSpaceDisarmed  = "NoSpaceDisarmed"
	eventDowngradeEnabled = "DowngradeEnabled"
	// eventDisasterRecovery is a Warning: data may be lost.
	eventDisasterRecovery = "DisasterRecovery"
	// eventVersionNoLongerFixed is a Warning: the cluster runs an etcd
	// minor version that etcd no longer fixes.
	eventVersionNoLongerFixed = "VersionNoLongerFixed"
	// eventPodForceDeleted is a Warning: a member pod stuck terminating on
	// a node counted as lost was deleted without its node's confirmation.
	eventPodForceDeleted = "PodForceDeleted"
)

// podDeleteGracePeriod is the original's: a member removed from etcd has
// nothing left to flush.
const podDeleteGracePeriod int64 = 5

// outcome is what an action did, for the status and the run loop.
type outcome struct {
	// requeue is when the next pass is wanted (0: next event or tick).
	requeue time.Duration
	// err ends the pass with a problem, retried with backoff.
	err error
	// phase, when set, is the cluster's new phase.
	phase api.ClusterPhase
	// Records of maintenance for the status: the revision compacted to,
	// the member defragmented, the NOSPACE alarm disarmed; and of a
	// disaster recovery.
	compacted       int64
	defragmented    string
	disarmedNoSpace bool
	recovery        *api.RecoveryStatus
	// downed is a member the action took down on purpose (a patch): the
	// status counts it as not ready already.
	downed string
}

// act carries out one action.
func (c *Cluster) act(ctx context.Context, s *snapshot, a action) outcome {
	switch a.kind {
	case actIdle:
		c.waitBackoff.Reset()
		return outcome{}
	case actWait, actReadEtcd:
		out := outcome{requeue: max(a.after, 0)}
		if a.backoff {
			out.requeue = c.waitBackoff.Next()
		}
		return out
	case actCreateServices:
		return c.createServices(ctx, s)
	case actSyncBudget:
		return c.syncBudget(ctx, s)
	case actIssueCertificates:
		return outcome{err: c.makeIssuedSecrets(ctx, s), requeue: c.cfg.MinPassInterval}
	case actRenewCertificate:
		return c.renewOneCertificate(ctx, s, a)
	case actMakeCertificates:
		return c.makeCertificates(ctx, s)
	case actCopyCertificate:
		return c.copyCertificate(ctx, s, a)
	case actReissueCertificate:
		return c.reissueCertificate(ctx, s, a)
	case actRotateCA:
		return c.carryOutCAChange(ctx, s, caDecision{change: a.caChange, target: a.member, reason: a.reason})
	case actCarryIssuerCA:
		return c.carryIssuerCAChange(ctx, s, a)
	case actSwitchTLS:
		return c.carryOutTLSSwitch(ctx, s, a)
	case actRecordCreating:
		return c.recordCreating(s)
	case actSeed:
		return c.seed(ctx, s, a)
	case actStartTogether:
		return c.startTogether(ctx, s, a)
	case actResumeTogether:
		return c.resumeTogether(ctx, s, a)
	case actRestartTogether:
		return c.restartTogether(ctx, s, a)
	case actAdopt:
		return c.adopt(a)
	case actAnnounceAdoption:
		return c.announceAdoption(s)
	case actReseed:
		return c.reseed(ctx, s, a)
	case actDeleteStrayPod:
		return c.deleteStrayPod(ctx, a)
	case actDeleteJoiner:
		return c.deleteJoiner(ctx, s, a)
	case actDeleteStrayClaim:
		return c.deleteStrayClaim(ctx, s, a)
	case actRemoveDeadMember:
		return c.removeDeadMember(ctx, s, a)
	case actDeleteFailedPod:
		return c.deleteFailedPod(ctx, s, a)
	case actForceDeletePod:
		return c.forceDeletePod(ctx, a)
	case actForceNewCluster:
		return c.forceNewCluster(ctx, s, a)
	case actRestoreFromBackup:
		return c.restoreFromBackup(ctx, s, a)
	case actRestartMembers:
		return c.restartMembers(ctx, s, a)
	case actConvertInPlace:
		return c.convertInPlace(ctx, s, a)
	case actRemoveMember:
		return c.removeOneMember(ctx, s, a)
	case actPromoteLearner:
		return c.promoteLearner(ctx, s, a)
	case actCreateJoiner:
		return c.createJoiner(ctx, s, a)
	case actAddJoiner:
		return c.addOneMember(ctx, s, a)
	case actUpgradeMember:
		return c.upgradeOneMember(ctx, s, a)
	case actEnableDowngrade:
		return c.enableDowngrade(ctx, s, a)
	case actMoveLeader:
		return c.moveLeader(ctx, s, a)
	case actCompact:
		return c.compact(ctx, s, a)
	case actDefragment:
		return c.defragment(ctx, s, a)
	case actDisarmNoSpace:
		return c.disarmNoSpace(ctx, s, a)
	}
	return outcome{err: fmt.Errorf("no way to act on %s", a)}
}

// newMember names a new member "<cluster>-<10 random characters>", as the
// original did; the name is also its pod's and its claim's.
func (c *Cluster) newMember(s *snapshot) *etcdutil.Member {
	m := *s.memberTemplate()
	m.Name = c.name + "-" + c.randomSuffix()
	return &m
}

// createClaim creates a member's claim when members use claims. An existing
// claim of that name is this member's from an earlier, interrupted try.
func (c *Cluster) createClaim(ctx context.Context, s *snapshot, name, version string) error {
	pvc := k8sutil.NewEtcdPVC(s.spec, name, version)
	if pvc == nil {
		return nil
	}
	_, err := c.cfg.KubeClient.CoreV1().PersistentVolumeClaims(c.namespace).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return kubeError("create claim "+name, err)
	}
	return nil
}

// createPod creates a member pod and expects it in the lister.
func (c *Cluster) createPod(ctx context.Context, pod *corev1.Pod) error {
	if _, err := c.cfg.KubeClient.CoreV1().Pods(c.namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return kubeError("create pod "+pod.Name, err)
	}
	e := c.podExpect
	if e == nil {
		e = &podExpectation{}
	}
	c.podExpect = &podExpectation{names: append(slices.Clone(e.names), pod.Name), deadline: c.now().Add(c.cfg.ExpectationTimeout)}
	return nil
}

func (c *Cluster) deletePod(ctx context.Context, name string) error {
	grace := podDeleteGracePeriod
	err := c.cfg.KubeClient.CoreV1().Pods(c.namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return kubeError("delete pod "+name, err)
	}
	return nil
}

// deleteClaim deletes a claim no member needs: a replacement is a new member
// with a new name and an empty data directory anyway.
func (c *Cluster) deleteClaim(ctx context.Context, s *snapshot, name string) error {
	if _, exists := s.claims[name]; !exists && !s.usesClaims() {
		return nil
	}
	err := c.cfg.KubeClient.CoreV1().PersistentVolumeClaims(c.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return kubeError("delete claim "+name, err)
	}
	return nil
}
