package cluster

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// Where a member's pod is, read from the pod alone: ended, stuck
// terminating, running and ready, or pending for nothing.

// podEnded tells whether a pod has ended on its own: its phase is Failed
// (its node shut down, the kubelet evicted it under node pressure) or
// Succeeded. A pod deleted through the API (kubectl delete, a drain's
// eviction) is gone instead, and a crashing etcd is restarted in its pod.
func podEnded(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// stuckTerminating tells whether a pod being deleted is terminatingGrace
// past its deletion deadline: its node has not confirmed the deletion.
func stuckTerminating(pod *corev1.Pod, now time.Time) bool {
	d := pod.DeletionTimestamp
	return d != nil && now.After(d.Add(terminatingGrace))
}

// podState says where a member's pod is, and whether it is ready.
func (s *snapshot) podState(pod *corev1.Pod) (memberState, bool) {
	st := k8sutil.EtcdContainerStatus(pod)
	switch pod.Status.Phase {
	case corev1.PodRunning:
		switch {
		case st == nil || st.State.Running != nil:
			return memberRunning, k8sutil.IsPodReady(pod)
		case st.RestartCount > 0 || st.LastTerminationState.Terminated != nil:
			return memberCrashing, false
		}
		return memberStarting, false
	case corev1.PodPending, "":
		// A pod that waited for its member to be added may be older than
		// the timeout, but starts etcd a moment after the add; its own
		// timeout fails it otherwise.
		if s.pendingInVain(pod) == "" || k8sutil.IsWaitingForMembership(pod) {
			return memberStarting, false
		}
	}
	return memberFailed, false
}

// pendingInVain says why a pod that has not started will not start as it
// is ("has not started within 5m0s"), "" when it may still: it has been pending longer than the pending
// timeout, or it shows why it cannot start (it cannot be scheduled, its
// image cannot be pulled) and the spec it was made from has been changed
// since, most likely to fix that: the fix is acted on at once, not when the
// timeout counted from the pod's creation runs out.
func (s *snapshot) pendingInVain(pod *corev1.Pod) string {
	if pod.Status.Phase != corev1.PodPending {
		return ""
	}
	if k8sutil.IsPodPendingTooLong(pod, s.now, s.pendingTimeout) {
		return fmt.Sprintf("has not started within %v", s.pendingTimeout)
	}
	if changed := specChangedSince(s, pod); changed != "" && podTrouble(pod, s.claims[pod.Name], s.now) != "" {
		return "has not started and " + changed + " since it was made"
	}
	return ""
}
