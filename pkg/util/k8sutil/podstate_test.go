package k8sutil

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

func podIn(phase corev1.PodPhase, conditions ...corev1.PodCondition) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, Conditions: conditions}}
}

func TestIsPodReady(t *testing.T) {
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	unready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"a running pod with Ready true is ready", podIn(corev1.PodRunning, scheduled, ready), true},
		{"a running pod with Ready false is not ready", podIn(corev1.PodRunning, scheduled, unready), false},
		{"a pod without a Ready condition is not ready", podIn(corev1.PodPending, scheduled), false},
		{"a pod with Ready unknown is not ready", podIn(corev1.PodRunning, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionUnknown}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsPodReady(tt.pod); got != tt.want {
				t.Errorf("IsPodReady() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsPodDead(t *testing.T) {
	tests := []struct {
		phase corev1.PodPhase
		want  bool
	}{
		{corev1.PodPending, false},
		{corev1.PodRunning, false},
		{corev1.PodSucceeded, true},
		{corev1.PodFailed, true},
		{corev1.PodUnknown, true},
		{"", false},
	}
	for _, tt := range tests {
		t.Run("phase "+string(tt.phase), func(t *testing.T) {
			if got := IsPodDead(podIn(tt.phase)); got != tt.want {
				t.Errorf("IsPodDead(%q) = %v, want %v", tt.phase, got, tt.want)
			}
		})
	}
}

func TestIsPodPendingTooLong(t *testing.T) {
	created := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	pod := func(phase corev1.PodPhase, createdAt time.Time) *corev1.Pod {
		p := podIn(phase)
		p.CreationTimestamp = metav1.NewTime(createdAt)
		return p
	}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		now     time.Time
		timeout time.Duration
		want    bool
	}{
		{"a pod pending past the timeout is too long", pod(corev1.PodPending, created), created.Add(6 * time.Minute), 5 * time.Minute, true},
		{"a pod pending for exactly the timeout is not yet", pod(corev1.PodPending, created), created.Add(5 * time.Minute), 5 * time.Minute, false},
		{"a young pending pod is not", pod(corev1.PodPending, created), created.Add(time.Minute), 5 * time.Minute, false},
		{"an old running pod is not pending", pod(corev1.PodRunning, created), created.Add(time.Hour), 5 * time.Minute, false},
		{"an old failed pod is dead, not pending", pod(corev1.PodFailed, created), created.Add(time.Hour), 5 * time.Minute, false},
		{"a zero timeout disables the check", pod(corev1.PodPending, created), created.Add(time.Hour), 0, false},
		{"a pod without creation time is never too old", pod(corev1.PodPending, time.Time{}), created, 5 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsPodPendingTooLong(tt.pod, tt.now, tt.timeout); got != tt.want {
				t.Errorf("IsPodPendingTooLong() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPodEtcdVersion(t *testing.T) {
	if got := PodEtcdVersion(newSeedPod(newTestCluster(withVersion("v3.4.37")))); got != "3.4.37" {
		t.Errorf("PodEtcdVersion(member pod) = %q, want 3.4.37", got)
	}
	if got := PodEtcdVersion(&corev1.Pod{}); got != "" {
		t.Errorf("PodEtcdVersion(pod without annotation) = %q, want empty", got)
	}
}

func TestIsBeingDeleted(t *testing.T) {
	pod := &corev1.Pod{}
	if IsBeingDeleted(pod) {
		t.Error("a pod without deletion timestamp is being deleted")
	}
	now := metav1.Now()
	pod.DeletionTimestamp = &now
	if !IsBeingDeleted(pod) {
		t.Error("a pod with deletion timestamp is not being deleted")
	}
}

func TestHasExecProbes(t *testing.T) {
	tests := []struct {
		version string
		want    bool
	}{
		{"3.2.32", true},
		{"3.4.37", false},
		{"3.5.21", false},
	}
	for _, tt := range tests {
		t.Run("pod created for etcd "+tt.version, func(t *testing.T) {
			pod := newSeedPod(newTestCluster(func(c *v1beta2.EtcdCluster) { c.Spec.Version = tt.version }))
			if got := HasExecProbes(pod); got != tt.want {
				t.Errorf("HasExecProbes() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEtcdNeverRan(t *testing.T) {
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	stopped := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	tests := []struct {
		name string
		st   *corev1.ContainerStatus
		want bool
	}{
		{"a pod not scheduled yet has no container status", nil, true},
		{"a container waiting for an image that cannot be pulled never ran", &corev1.ContainerStatus{State: waiting("ImagePullBackOff")}, true},
		{"a running container ran", &corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}, false},
		{"a container patched to an image that cannot be pulled ran before", &corev1.ContainerStatus{State: waiting("ImagePullBackOff"), LastTerminationState: stopped}, false},
		{"a container that ended ran", &corev1.ContainerStatus{State: stopped}, false},
		{"a container the kubelet restarted ran", &corev1.ContainerStatus{State: waiting("CrashLoopBackOff"), RestartCount: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{}
			if tt.st != nil {
				tt.st.Name = EtcdContainerName
				pod.Status.ContainerStatuses = []corev1.ContainerStatus{*tt.st}
			}
			if got := EtcdNeverRan(pod); got != tt.want {
				t.Errorf("EtcdNeverRan = %v, want %v", got, tt.want)
			}
		})
	}
}
