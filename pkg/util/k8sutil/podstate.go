package k8sutil

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/etcdversion"
)

// IsPodReady tells whether the kubelet reports the pod Ready, that is whether
// its member passes the readiness probe (from etcd 3.3 on: it has a leader and
// serves reads). Status splits members into ready and unready with it.
func IsPodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// IsPodDead tells whether the pod can never run its member again: it has
// Succeeded or Failed (for good: the kubelet restarts failing containers of
// pods with restartPolicy Always without ending the pod), or its phase is
// Unknown, its node gone or unreachable. The member needs a new pod.
func IsPodDead(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown:
		return true
	}
	return false
}

// IsPodPendingTooLong tells whether the pod has been Pending, counted from its
// creation, for longer than timeout. Pending covers every way a member can
// fail to start: unschedulable, image pull errors, an init container (such as
// check-dns waiting forever) that never finishes. The original skipped every
// tick while any pod was Pending, so one such pod froze healing, scaling and
// upgrades for good; the reconcile loop replaces it instead. A timeout <= 0
// disables the check, and a pod without a creation time (never stored) is
// never too old. Callers skip pods being deleted first: the API shows some of
// them as Pending.
func IsPodPendingTooLong(pod *corev1.Pod, now time.Time, timeout time.Duration) bool {
	if pod.Status.Phase != corev1.PodPending || timeout <= 0 || pod.CreationTimestamp.IsZero() {
		return false
	}
	return now.Sub(pod.CreationTimestamp.Time) > timeout
}

// PodEtcdVersion is the etcd version the pod runs, as recorded by the
// operator when it created or upgraded it; "" when the annotation is missing.
// Upgrades compare it with spec.version.
func PodEtcdVersion(pod *corev1.Pod) string {
	return pod.Annotations[v1beta2.AnnotationVersion]
}

// IsBeingDeleted tells whether obj has a deletion timestamp. Such pods still
// show up in listers, some of them as Pending, and must count neither as
// members nor as pods to wait for.
func IsBeingDeleted(obj metav1.Object) bool {
	return obj.GetDeletionTimestamp() != nil
}

// HasExecProbes tells whether the pod's etcd container has a probe that runs a
// command, as pods created for etcd 3.2 do. Probes cannot be changed on an
// existing pod, so such a pod cannot be upgraded in place to an etcd image
// without a shell (3.5 and later): its probes would fail and the member would
// be killed. It has to be replaced by a new member instead.
func HasExecProbes(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name != EtcdContainerName {
			continue
		}
		for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
			if p != nil && p.Exec != nil {
				return true
			}
		}
	}
	return false
}

// IsMadeByOperator tells whether the pod is a member pod as the cluster
// operator makes them, with no init container of anyone else's (the restore
// operator's seed restores a backup in init containers of its own).
func IsMadeByOperator(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name != DNSCheckContainerName && c.Name != MembershipWaitContainerName {
			return false
		}
	}
	return true
}

// Annotations of a member's claim that count its restarts in place, so that
// the count survives the pods (and the operator): the restarts since a time,
// the start of the window they are counted in.
const (
	AnnotationRestarts      = "etcd.database.coreos.com/restarts"
	AnnotationRestartsSince = "etcd.database.coreos.com/restarts-since"
)

// ClaimRestarts reads the restarts in place counted on a claim.
func ClaimRestarts(pvc *corev1.PersistentVolumeClaim) (int, time.Time) {
	n, err := strconv.Atoi(pvc.Annotations[AnnotationRestarts])
	if err != nil || n < 0 {
		return 0, time.Time{}
	}
	since, err := time.Parse(time.RFC3339, pvc.Annotations[AnnotationRestartsSince])
	if err != nil {
		return 0, time.Time{}
	}
	return n, since
}

// ClaimVersion is the etcd version that last wrote a member's claim, "" when
// the claim does not say.
func ClaimVersion(pvc *corev1.PersistentVolumeClaim) string {
	return etcdversion.Normalize(pvc.Annotations[v1beta2.AnnotationVersion])
}

// EtcdContainerStatus is the status of a member pod's etcd container, nil
// before the kubelet reports one.
func EtcdContainerStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == EtcdContainerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// EtcdNeverRan tells whether no etcd container has run in the pod yet: none
// runs, none ended, and the kubelet has not restarted one. A pod whose image
// cannot be pulled stays so; a pod patched to such an image does not (its
// old container's end is its last termination state).
func EtcdNeverRan(pod *corev1.Pod) bool {
	st := EtcdContainerStatus(pod)
	return st == nil || st.RestartCount == 0 && st.State.Running == nil && st.State.Terminated == nil && st.LastTerminationState.Terminated == nil
}

// AnnotationForceNewCluster marks the pod of a disaster recovery's survivor,
// started with --force-new-cluster.
const AnnotationForceNewCluster = "etcd.database.coreos.com/force-new-cluster"

// WithForceNewCluster starts the member with --force-new-cluster: etcd makes
// it a one-member cluster with its data, forgetting the other members.
func WithForceNewCluster() PodOption {
	return func(p *corev1.Pod) {
		for i := range p.Spec.Containers {
			if p.Spec.Containers[i].Name == EtcdContainerName {
				p.Spec.Containers[i].Command = append(p.Spec.Containers[i].Command, "--force-new-cluster")
			}
		}
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[AnnotationForceNewCluster] = "true"
	}
}

// IsForcedNewCluster tells whether the pod was started with
// --force-new-cluster.
func IsForcedNewCluster(pod *corev1.Pod) bool {
	return pod.Annotations[AnnotationForceNewCluster] == "true"
}
