package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// Poll is how often the waits look. A second is well below the operator's reaction
// times and keeps a dozen parallel tests from flooding the apiserver of a 2-core
// node (at 0.5 s they exceeded 100 requests/s together).
const Poll = time.Second

// UniqueName is base plus a random suffix, so that tests sharing a namespace never
// collide and a re-run never meets the leftovers of the last one.
func UniqueName(base string) string {
	return base + "-" + utilrand.String(5)
}

// NewCluster is an EtcdCluster as a user would write it: size and version, nothing else.
func NewCluster(name string, size int, version string) *api.EtcdCluster {
	return &api.EtcdCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.SchemeGroupVersion.String(), Kind: api.EtcdClusterResourceKind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       api.ClusterSpec{Size: size, Version: version},
	}
}

// EtcdImage is the image a member of the given version runs.
func EtcdImage(version string) string {
	return api.EtcdImage(api.DefaultRepository, version)
}

// CreateCluster creates cl in ns through the typed client.
func (f *Framework) CreateCluster(ctx context.Context, ns string, cl *api.EtcdCluster) (*api.EtcdCluster, error) {
	cl = cl.DeepCopy()
	cl.Namespace = ns
	out, err := f.Etcd.EtcdV1beta2().EtcdClusters(ns).Create(ctx, cl, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create EtcdCluster %s/%s: %w", ns, cl.Name, err)
	}
	return out, nil
}

// GetCluster reads an EtcdCluster.
func (f *Framework) GetCluster(ctx context.Context, ns, name string) (*api.EtcdCluster, error) {
	return f.Etcd.EtcdV1beta2().EtcdClusters(ns).Get(ctx, name, metav1.GetOptions{})
}

// PatchClusterSpec merges fields into the spec, like `kubectl patch --type=merge`.
func (f *Framework) PatchClusterSpec(ctx context.Context, ns, name string, spec map[string]any) (*api.EtcdCluster, error) {
	body, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return nil, err
	}
	out, err := f.Etcd.EtcdV1beta2().EtcdClusters(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("patch EtcdCluster %s/%s with %s: %w", ns, name, body, err)
	}
	return out, nil
}

// DeleteCluster deletes an EtcdCluster; a cluster already gone is fine. Propagation
// is left to the default (background), which is what `kubectl delete` does too.
func (f *Framework) DeleteCluster(ctx context.Context, ns, name string) error {
	err := f.Etcd.EtcdV1beta2().EtcdClusters(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete EtcdCluster %s/%s: %w", ns, name, err)
	}
	return nil
}

// ClusterSelector selects what the operator creates for a cluster (pods, services,
// PVCs): it labels all of them app=etcd,etcd_cluster=<name>.
func ClusterSelector(name string) string {
	return labels.SelectorFromSet(labels.Set{api.LabelApp: api.LabelAppValue, api.LabelClusterName: name}).String()
}

// ClusterPods lists every pod of a cluster, including those being deleted.
func (f *Framework) ClusterPods(ctx context.Context, ns, name string) ([]corev1.Pod, error) {
	list, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: ClusterSelector(name)})
	if err != nil {
		return nil, fmt.Errorf("list pods of %s/%s: %w", ns, name, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// KillPod deletes a pod with grace period 0, as `kubectl delete pod --grace-period=0
// --force` does: the member dies at once, the way a node failure looks to the operator.
func (f *Framework) KillPod(ctx context.Context, ns, name string) error {
	err := f.Kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	if err != nil {
		return fmt.Errorf("kill pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// IsPodReady tells whether the pod's Ready condition is True.
func IsPodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// LivePods drops pods being deleted: the API still shows them for a while, and
// measurements of the original counted only pods without a deletionTimestamp.
func LivePods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// ReadyPods are the live pods that are Ready.
func ReadyPods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range LivePods(pods) {
		if IsPodReady(&p) {
			out = append(out, p)
		}
	}
	return out
}

// PodNames lists the names of pods.
func PodNames(pods []corev1.Pod) []string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// EtcdContainerImage is the image of a member pod's etcd container.
func EtcdContainerImage(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if c.Name == "etcd" {
			return c.Image
		}
	}
	return ""
}

// DescribePods is a one-line view of pods for wait messages.
func DescribePods(pods []corev1.Pod) string {
	if len(pods) == 0 {
		return "no pods"
	}
	parts := make([]string, 0, len(pods))
	for _, p := range pods {
		state := string(p.Status.Phase)
		if IsPodReady(&p) {
			state += ",Ready"
		}
		if p.DeletionTimestamp != nil {
			state += ",Terminating"
		}
		if img := EtcdContainerImage(&p); img != "" {
			state += "," + img[strings.LastIndex(img, ":")+1:]
		}
		parts = append(parts, fmt.Sprintf("%s(%s)", p.Name, state))
	}
	return strings.Join(parts, " ")
}

// DescribeStatus is a one-line view of a cluster's status for wait messages.
func DescribeStatus(cl *api.EtcdCluster) string {
	s := cl.Status
	var conds []string
	for _, c := range s.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	out := fmt.Sprintf("phase=%q ready=%v unready=%v size=%d current=%q target=%q paused=%v observedGen=%d/%d conditions=%v",
		s.Phase, s.Members.Ready, s.Members.Unready, s.Size, s.CurrentVersion, s.TargetVersion, s.ControlPaused,
		s.ObservedGeneration, cl.Generation, conds)
	if s.Reason != "" {
		out += fmt.Sprintf(" reason=%q", s.Reason)
	}
	return out
}

// StatusCondition returns the status condition of the given type, or nil.
func StatusCondition(cl *api.EtcdCluster, t api.ClusterConditionType) *api.ClusterCondition {
	for i := range cl.Status.Conditions {
		if cl.Status.Conditions[i].Type == t {
			return &cl.Status.Conditions[i]
		}
	}
	return nil
}

// ReadyMembers is done when status.members.ready lists exactly n members, none
// unready and none of exclude (a killed member must not be counted as recovered).
func (f *Framework) ReadyMembers(ns, name string, n int, exclude ...string) Condition {
	return func(ctx context.Context) (bool, string, error) {
		cl, err := f.GetCluster(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		seen := DescribeStatus(cl)
		m := cl.Status.Members
		if len(m.Ready) != n || len(m.Unready) != 0 {
			return false, seen, nil
		}
		for _, x := range exclude {
			if slices.Contains(m.Ready, x) {
				return false, seen, nil
			}
		}
		return true, seen, nil
	}
}

// ReadyPodsCond is done when the cluster has exactly n live pods, all Ready, none
// of them named in exclude.
func (f *Framework) ReadyPodsCond(ns, name string, n int, exclude ...string) Condition {
	return func(ctx context.Context) (bool, string, error) {
		pods, err := f.ClusterPods(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		seen := DescribePods(pods)
		live := LivePods(pods)
		if len(live) != n || len(ReadyPods(pods)) != n {
			return false, seen, nil
		}
		for _, p := range live {
			if slices.Contains(exclude, p.Name) {
				return false, seen, nil
			}
		}
		return true, seen, nil
	}
}

// PodsOnImage is done when the cluster has exactly n live pods, all Ready and all
// running image in their etcd container.
func (f *Framework) PodsOnImage(ns, name, image string, n int) Condition {
	return func(ctx context.Context) (bool, string, error) {
		pods, err := f.ClusterPods(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		seen := DescribePods(pods)
		live := LivePods(pods)
		if len(live) != n || len(ReadyPods(pods)) != n {
			return false, seen, nil
		}
		for _, p := range live {
			if EtcdContainerImage(&p) != image {
				return false, seen, nil
			}
			// The image in the spec changes before the kubelet restarts the container;
			// the running container's image is what counts.
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == "etcd" && (!cs.Ready || !strings.HasSuffix(cs.Image, image[strings.LastIndex(image, "/")+1:])) {
					return false, seen, nil
				}
			}
		}
		return true, seen, nil
	}
}

// Both is done when every condition is done; it evaluates all of them every time so
// the timeout message shows each one's last observation.
func Both(conds ...Condition) Condition {
	return func(ctx context.Context) (bool, string, error) {
		all := true
		var seen []string
		for _, c := range conds {
			done, s, err := c(ctx)
			if err != nil {
				return false, s, err
			}
			all = all && done
			seen = append(seen, s)
		}
		return all, strings.Join(seen, " | "), nil
	}
}

// WaitClusterReady waits for status to list n ready members and for n Ready pods,
// none of them in exclude, and returns the cluster and its pods.
func (f *Framework) WaitClusterReady(ctx context.Context, ns, name string, n int, timeout time.Duration, exclude ...string) (*api.EtcdCluster, []corev1.Pod, error) {
	what := fmt.Sprintf("%d ready members and %d Ready pods of %s/%s", n, n, ns, name)
	if len(exclude) > 0 {
		what += fmt.Sprintf(" (none of them %v)", exclude)
	}
	err := WaitFor(ctx, timeout, Poll, what, Both(f.ReadyMembers(ns, name, n, exclude...), f.ReadyPodsCond(ns, name, n, exclude...)))
	if err != nil {
		return nil, nil, err
	}
	cl, err := f.GetCluster(ctx, ns, name)
	if err != nil {
		return nil, nil, err
	}
	pods, err := f.ClusterPods(ctx, ns, name)
	if err != nil {
		return nil, nil, err
	}
	return cl, LivePods(pods), nil
}

// ClusterGone is done when the EtcdCluster no longer exists.
func (f *Framework) ClusterGone(ns, name string) Condition {
	return func(ctx context.Context) (bool, string, error) {
		cl, err := f.GetCluster(ctx, ns, name)
		if apierrors.IsNotFound(err) {
			return true, "gone", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, fmt.Sprintf("still there (deletionTimestamp %v, finalizers %v)", cl.DeletionTimestamp, cl.Finalizers), nil
	}
}

// DependentsGone is done when no pod, service or PVC of the cluster is left.
func (f *Framework) DependentsGone(ns, name string) Condition {
	return func(ctx context.Context) (bool, string, error) {
		sel := metav1.ListOptions{LabelSelector: ClusterSelector(name)}
		pods, err := f.Kube.CoreV1().Pods(ns).List(ctx, sel)
		if err != nil {
			return false, err.Error(), nil
		}
		svcs, err := f.Kube.CoreV1().Services(ns).List(ctx, sel)
		if err != nil {
			return false, err.Error(), nil
		}
		pvcs, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel)
		if err != nil {
			return false, err.Error(), nil
		}
		var left []string
		for _, p := range pods.Items {
			left = append(left, "pod/"+p.Name)
		}
		for _, s := range svcs.Items {
			left = append(left, "service/"+s.Name)
		}
		for _, c := range pvcs.Items {
			left = append(left, "pvc/"+c.Name)
		}
		if len(left) > 0 {
			return false, "left: " + strings.Join(left, " "), nil
		}
		return true, "nothing left", nil
	}
}
