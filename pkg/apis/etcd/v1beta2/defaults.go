package v1beta2

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/etcdversion"
)

// Labels the operator puts on everything it creates for a cluster.
const (
	LabelApp         = "app"
	LabelAppValue    = "etcd"
	LabelClusterName = "etcd_cluster"
	LabelNodeName    = "etcd_node"
	// AnnotationVersion on a member pod is the etcd version it runs: upgrades compare it
	// with spec.version.
	AnnotationVersion = "etcd.version"
)

// EtcdImage is the image of an etcd member: official etcd tags carry a leading "v".
func EtcdImage(repository, version string) string {
	return repository + ":v" + etcdversion.Normalize(version)
}

// WithDefaults returns a deep copy of the cluster whose spec has every default
// filled in. The stored object is never changed: the original wrote its defaults
// back into the user's spec, which made `kubectl apply` fight the operator.
func (c *EtcdCluster) WithDefaults() *EtcdCluster {
	out := c.DeepCopy()
	s := &out.Spec
	if s.Repository == "" {
		s.Repository = DefaultRepository
	}
	if s.Version == "" {
		// A cluster made under an older default keeps the version it runs:
		// a new operator's default is no upgrade nobody asked for.
		s.Version = DefaultEtcdVersion
		if c.Status.CurrentVersion != "" {
			s.Version = c.Status.CurrentVersion
		}
	}
	s.Version = etcdversion.Normalize(s.Version)
	if s.Pod == nil {
		s.Pod = &PodPolicy{}
	}
	if s.Pod.BusyboxImage == "" {
		s.Pod.BusyboxImage = DefaultBusyboxImage
	}
	if s.Pod.AntiAffinity && s.Pod.Affinity == nil {
		s.Pod.Affinity = OnePerNode(out.Name)
	}
	// The soft spreading of members over nodes and zones that a spec saying
	// nothing of placement gets is not filled in here but where member pods
	// are built (k8sutil.NewEtcdPod): spec.pod in force is what
	// k8sutil.PodPolicyHash identifies, so a default added to it would make
	// every pod of every running cluster look made from another spec.pod
	// once the operator is upgraded, and joining or seed pods would be made
	// again for nothing; kept out of it, the spec in force stays the user's,
	// and only pods made from now on get the new placement.
	return out
}

// OnePerNode is what the deprecated antiAffinity flag always meant: no two
// members of the cluster on one node, required, so a member that finds no
// free node stays Pending.
func OnePerNode(clusterName string) *corev1.Affinity {
	return &corev1.Affinity{
		PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{LabelClusterName: clusterName},
				},
				TopologyKey: corev1.LabelHostname,
			}},
		},
	}
}

// IsManagedBy tells whether an operator in the given mode manages this cluster: a
// cluster-wide operator takes only clusters annotated scope=clusterwide, a namespaced
// one only clusters without the annotation, so the two never fight over a cluster.
func IsManagedBy(obj metav1.Object, clusterWide bool) bool {
	scope, annotated := obj.GetAnnotations()[ScopeAnnotation]
	if clusterWide {
		return annotated && scope == ScopeClusterWide
	}
	return !annotated
}

// ScopeMismatch says why an operator in the given mode leaves obj to another
// (or, with a value that is not "clusterwide", to none): "" when it manages
// obj. invalid is set for such a value, which no operator takes.
func ScopeMismatch(obj metav1.Object, clusterWide bool) (msg string, invalid bool) {
	if IsManagedBy(obj, clusterWide) {
		return "", false
	}
	scope, annotated := obj.GetAnnotations()[ScopeAnnotation]
	switch {
	case annotated && scope != ScopeClusterWide:
		return fmt.Sprintf("annotation %s is %q, not %q: no etcd operator manages this resource; set it to %q for a cluster-wide operator, or remove it for the operator of namespace %s",
			ScopeAnnotation, scope, ScopeClusterWide, ScopeClusterWide, obj.GetNamespace()), true
	case clusterWide:
		return fmt.Sprintf("ignored by the cluster-wide operator: without the annotation %s: %s it is left to an operator running in namespace %s",
			ScopeAnnotation, ScopeClusterWide, obj.GetNamespace()), false
	}
	return fmt.Sprintf("ignored by the operator of namespace %s: the annotation %s: %s leaves it to an operator started with --cluster-wide",
		obj.GetNamespace(), ScopeAnnotation, ScopeClusterWide), false
}

// BackupTimeout is the bound of one backup, in seconds.
func (p *BackupPolicy) BackupTimeout() int64 {
	if p == nil || p.TimeoutInSecond <= 0 {
		return DefaultBackupTimeoutInSecond
	}
	return p.TimeoutInSecond
}

// IsPeriodic tells whether the backup repeats, every interval or on a schedule.
func (s *BackupSpec) IsPeriodic() bool {
	p := s.BackupPolicy
	return p != nil && (p.BackupIntervalInSecond > 0 || p.Schedule != "")
}
