package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// A node that stops answering leaves its pods as they were: Running but not
// ready, and, once evicted, terminating for ever, since only the node's
// kubelet can confirm that their containers stopped. Kubernetes frees them
// when the Node object is deleted (its pod garbage collector), which is how
// a cloud's node controller declares a node gone. Where nobody ever deletes
// it (bare metal, a hung hypervisor), spec.pod.nodeLostAfterSeconds lets the
// user say how long a node may stay not Ready before it counts as lost:
//   - a member pod stuck terminating on it is force-deleted once etcd's
//     leader, asked in the same pass, confirms that its member does not
//     answer; its name is then free for the member's restart in place, or
//     for nothing at all when the member was replaced;
//   - a member whose claim's volume can be used on that node only is
//     replaced on a new claim, as for a deleted node (volumenode.go).
// Every piece of evidence is read in the pass that acts on it: the Node, its
// Ready condition and how long it has been so. A node that cannot be read,
// or has no Ready condition, counts as nothing.

// nodeLostWhy says why node counts as lost under a bound of after: its Ready
// condition has not been True for at least that long. "" when it may come
// back or nothing proves it cannot.
func nodeLostWhy(node *corev1.Node, after time.Duration, now time.Time) string {
	c := readyCondition(node)
	if after <= 0 || c == nil || c.Status == corev1.ConditionTrue || c.LastTransitionTime.IsZero() || now.Sub(c.LastTransitionTime.Time) < after {
		return ""
	}
	return fmt.Sprintf("node %s has not been Ready since %s, longer than spec.pod.nodeLostAfterSeconds (%ds)",
		node.Name, c.LastTransitionTime.UTC().Format(time.RFC3339), int64(after/time.Second))
}

// readyCondition is a node's Ready condition, nil when it has none yet.
func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// nodeLostAfter is the user's bound, 0 when only a deleted Node counts.
func (s *snapshot) nodeLostAfter() time.Duration {
	if s.spec == nil || s.spec.Spec.Pod == nil {
		return 0
	}
	return time.Duration(s.spec.Spec.Pod.NodeLostAfterSeconds) * time.Second
}

// nodeLost reads whether node counts as lost in this pass, once per pass and
// node; a failed read is said in s.nodesUnknown and counts as nothing.
func (c *Cluster) nodeLost(ctx context.Context, s *snapshot, name string) string {
	if why, read := s.nodesLost[name]; read {
		return why
	}
	if s.nodesLost == nil {
		s.nodesLost = map[string]string{}
	}
	if denied := c.zones.readNodesDenied(ctx, c.cfg.KubeClient, s.now); denied != "" {
		s.nodesLost[name] = ""
		s.nodesUnknown = append(s.nodesUnknown, fmt.Sprintf("read node %s: %s", name, denied))
		return ""
	}
	node, err := c.cfg.KubeClient.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// Deleted: the pod garbage collector frees its pods, and a volume
		// tied to it is gone (volumenode.go).
		s.nodesLost[name] = ""
		return ""
	case err != nil:
		s.nodesLost[name] = ""
		s.nodesUnknown = append(s.nodesUnknown, fmt.Sprintf("read node %s: %v", name, err))
		return ""
	}
	why := nodeLostWhy(node, s.nodeLostAfter(), s.now)
	s.nodesLost[name] = why
	return why
}

// observeLostNodes reads, under spec.pod.nodeLostAfterSeconds, whether the
// nodes of the cluster's pods stuck terminating count as lost. A cluster
// without the bound, or without a stuck pod, costs no request.
func (c *Cluster) observeLostNodes(ctx context.Context, s *snapshot) {
	if s.nodeLostAfter() <= 0 {
		return
	}
	for _, name := range sortedKeys(s.terminating) {
		if pod := s.terminating[name]; stuckTerminating(pod, s.now) && pod.Spec.NodeName != "" {
			c.nodeLost(ctx, s, pod.Spec.NodeName)
		}
	}
	if len(s.nodesUnknown) > 0 {
		slices.Sort(s.nodesUnknown)
		c.log.WithField("nodes", strings.Join(s.nodesUnknown, "; ")).Debug("whether the nodes of pods stuck terminating are lost is unknown")
	}
}

// readsPodNodes tells whether the pass reads the nodes of the members' pods
// for the disaster recovery: once this goroutine has seen the quorum lost,
// under spec.disasterRecovery. The status of a pod whose node does not
// answer is the last its kubelet reported: a member shown crash-looping or
// failed there may run by now, and only its node's readiness tells.
func (c *Cluster) readsPodNodes(s *snapshot) bool {
	return s.spec != nil && s.spec.Spec.RecoveryEnabled() && c.quorumLoss != nil
}

// observePodNodes reads, when the disaster recovery may need it, whether the
// node of each live pod that is not Ready is; a node that is not, or cannot
// be read (a role without get on nodes, too: nothing then proves what the
// pod shows), goes in s.podNodesNotReady with why. A Ready pod's member
// answers etcd or is held for not answering anyway.
func (c *Cluster) observePodNodes(ctx context.Context, s *snapshot) {
	if !c.readsPodNodes(s) {
		return
	}
	read := map[string]bool{}
	for _, name := range sortedKeys(s.pods) {
		node := s.pods[name].Spec.NodeName
		if node == "" || read[node] || k8sutil.IsPodReady(s.pods[name]) {
			continue
		}
		read[node] = true
		why := ""
		if denied := c.zones.readNodesDenied(ctx, c.cfg.KubeClient, s.now); denied != "" {
			why = fmt.Sprintf("whether its node %s is Ready could not be read: %s", node, denied)
			if s.podNodesNotReady == nil {
				s.podNodesNotReady = map[string]string{}
			}
			s.podNodesNotReady[node] = why
			continue
		}
		n, err := c.cfg.KubeClient.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			// Its pods are the pod garbage collector's, and gone soon.
		case err != nil:
			why = fmt.Sprintf("its node %s could not be read: %v", node, err)
		case !nodeReady(n):
			why = fmt.Sprintf("its node %s is not Ready: what its pod shows may be out of date", node)
		}
		if why != "" {
			if s.podNodesNotReady == nil {
				s.podNodesNotReady = map[string]string{}
			}
			s.podNodesNotReady[node] = why
		}
	}
}

// nodeReady tells whether a node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	c := readyCondition(n)
	return c != nil && c.Status == corev1.ConditionTrue
}

// lostNodeOf says why the node of a pod stuck terminating counts as lost,
// "" when it does not or the pod is not stuck.
func (s *snapshot) lostNodeOf(pod *corev1.Pod) string {
	if pod == nil || !stuckTerminating(pod, s.now) {
		return ""
	}
	return s.nodesLost[pod.Spec.NodeName]
}

// releaseStuckPods is step 8 of decide: a pod stuck terminating on a node
// lost under spec.pod.nodeLostAfterSeconds is force-deleted, once etcd's
// leader confirms in this pass that its member does not answer (or that it
// is no member). Its node will never confirm the deletion, and until the pod
// object is gone its name cannot be used again: the member's restart in
// place on its claim waits for it. A member that still answers is left
// alone, whatever its node says: its etcd runs. Without a leader to confirm
// that, nothing is forced and nothing else is held back.
func releaseStuckPods(s *snapshot) (action, bool) {
	for _, name := range sortedKeys(s.terminating) {
		pod := s.terminating[name]
		lost := s.lostNodeOf(pod)
		if lost == "" {
			continue
		}
		if s.etcd == nil {
			return readEtcd("force-delete pod " + name), true
		}
		if s.etcd.err != nil || !s.etcd.confirmed || s.membership == nil {
			continue
		}
		member := "it belongs to no member"
		if m := s.views[name]; m != nil && m.member != nil {
			if s.etcd.answers(m.member.ID) {
				continue
			}
			member = "etcd's leader confirms its member does not answer"
		}
		return action{kind: actForceDeletePod, member: name, uid: pod.UID,
			reason: fmt.Sprintf("it is stuck terminating and %s; %s", lost, member)}, true
	}
	return action{}, false
}

// forceDeletePod deletes a pod stuck terminating on a lost node at once,
// without waiting for its node: only the pod object seen in the pass, by its
// UID, so that a pod made again under the name is never the one deleted.
func (c *Cluster) forceDeletePod(ctx context.Context, a action) outcome {
	msg := fmt.Sprintf("force-deleted pod %s: %s", a.member, a.reason)
	c.log.WithField("pod", a.member).Warn(msg)
	zero := int64(0)
	uid := a.uid
	err := c.cfg.KubeClient.CoreV1().Pods(c.namespace).Delete(ctx, a.member,
		metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return outcome{requeue: c.cfg.MinPassInterval}
	case err != nil:
		return outcome{err: kubeError("force-delete pod "+a.member, err)}
	}
	c.tell(corev1.EventTypeWarning, eventPodForceDeleted, msg)
	return outcome{requeue: c.cfg.MinPassInterval}
}
