package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// Condition reasons. The first four are the original's texts; the False
// reasons of Available are new (the original never set Available False).
const (
	reasonScalingUp            = "Scaling up"
	reasonScalingDown          = "Scaling down"
	reasonUpgrading            = "Cluster upgrading"
	reasonClusterAvailable     = "Cluster available"
	reasonLostQuorumCond       = "LostQuorum"
	reasonNoMembersRunningCond = "NoMembersRunning"
)

// statusWriteAttempts bounds the conflict retries of one status write; the
// next pass tries again anyway.
const statusWriteAttempts = 3

// setCondition sets a condition. Times are RFC 3339 strings as in the
// original; lastUpdateTime moves when anything changes, lastTransitionTime
// only when the status does, and nothing moves when nothing changed, so an
// unchanged condition never causes a status write.
func (c *Cluster) setCondition(t api.ClusterConditionType, status corev1.ConditionStatus, reason, msg string) {
	now := c.now().UTC().Format(time.RFC3339)
	conds := c.status.Conditions
	for i := range conds {
		cond := &conds[i]
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
	c.status.Conditions = append(conds, api.ClusterCondition{
		Type:               t,
		Status:             status,
		Reason:             reason,
		Message:            msg,
		LastUpdateTime:     now,
		LastTransitionTime: now,
	})
}

func (c *Cluster) removeCondition(t api.ClusterConditionType) {
	var kept []api.ClusterCondition
	for _, cond := range c.status.Conditions {
		if cond.Type != t {
			kept = append(kept, cond)
		}
	}
	c.status.Conditions = kept
}

// setScaling reports a membership that differs from spec.size, with the
// original's texts; the condition goes away once they agree.
func (c *Cluster) setScaling(current, desired int) {
	switch {
	case current < desired:
		c.setCondition(api.ClusterConditionScaling, corev1.ConditionTrue, reasonScalingUp, scalingMessage(current, desired))
	case current > desired:
		c.setCondition(api.ClusterConditionScaling, corev1.ConditionTrue, reasonScalingDown, scalingMessage(current, desired))
	default:
		c.removeCondition(api.ClusterConditionScaling)
	}
}

func scalingMessage(current, desired int) string {
	return fmt.Sprintf("Current cluster size: %d, desired cluster size: %d", current, desired)
}

// refreshStatus fills in the parts of the status that follow from the spec,
// the membership and the pods. pods may be nil when the lister failed.
func (c *Cluster) refreshStatus(pods *podSet) {
	s := &c.status
	s.ObservedGeneration = c.observedGeneration
	if c.spec != nil {
		s.ControlPaused = c.spec.Spec.Paused
	}
	if c.servicesReady {
		s.ServiceName = k8sutil.ClientServiceName(c.name)
		s.ClientPort = k8sutil.EtcdClientPort
	}
	if c.spec != nil && !c.spec.Spec.Paused && s.Phase == api.ClusterPhaseCreating {
		c.setScaling(0, c.spec.Spec.Size)
	}
	if pods == nil {
		return
	}
	var ready, unready []string
	if c.members != nil {
		// Every member is listed: ready when its pod is Running and Ready,
		// unready otherwise (starting, dead, or without a pod), so that a lost
		// member never stays listed as ready as it did in the original.
		for _, name := range c.members.Names() {
			if pod, ok := pods.owned[name]; ok && pod.Status.Phase == corev1.PodRunning && k8sutil.IsPodReady(pod) {
				ready = append(ready, name)
			} else {
				unready = append(unready, name)
			}
		}
		s.Size = c.members.Size()
		if c.spec != nil && !c.spec.Spec.Paused && s.Phase == api.ClusterPhaseRunning {
			c.setScaling(s.Size, c.spec.Spec.Size)
		}
	} else {
		// Membership unknown (restart, hand-over, paused): report the pods.
		for _, name := range sortedKeys(pods.owned) {
			pod := pods.owned[name]
			switch {
			case pod.Status.Phase == corev1.PodRunning && k8sutil.IsPodReady(pod):
				ready = append(ready, name)
			case pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodPending:
				unready = append(unready, name)
			}
		}
	}
	s.Members = api.MembersStatus{Ready: ready, Unready: unready}
}

// writeStatus writes the status through the status subresource when it
// differs from what the server holds. On a conflict it re-reads the object:
// if the server already has this status nothing is written, and a phase set
// there by the restore operator is adopted rather than overwritten.
func (c *Cluster) writeStatus(ctx context.Context) error {
	if !c.statusDirty && equality.Semantic.DeepEqual(c.status, c.written) {
		return nil
	}
	client := c.cfg.EtcdClient.EtcdV1beta2().EtcdClusters(c.namespace)
	obj := c.latest.DeepCopy()
	for attempt := 1; ; attempt++ {
		obj.Status = *c.status.DeepCopy()
		out, err := client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		if err == nil {
			c.latest = out
			c.written = *obj.Status.DeepCopy()
			c.statusDirty = false
			return nil
		}
		if apierrors.IsNotFound(err) {
			return nil // deleted: the controller stops this goroutine
		}
		if !apierrors.IsConflict(err) || attempt == statusWriteAttempts {
			return kubeError("write status", err)
		}
		fresh, err := client.Get(ctx, c.name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return kubeError("read the cluster after a status conflict", err)
		}
		if c.latest.UID != "" && fresh.UID != c.latest.UID {
			return nil // a new cluster of the same name; its own goroutine writes
		}
		c.latest = fresh
		c.adoptPhase(fresh.Status.Phase)
		if equality.Semantic.DeepEqual(fresh.Status, c.status) {
			c.written = *fresh.Status.DeepCopy()
			c.statusDirty = false
			return nil
		}
		obj = fresh.DeepCopy()
	}
}
