package k8sutil

import (
	"maps"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// ClusterLabels are the labels of everything the operator creates for a
// cluster. The services select pods with exactly these labels, so they must
// never change: a different set would orphan the pods of running clusters.
func ClusterLabels(clusterName string) map[string]string {
	return map[string]string{
		v1beta2.LabelApp:         v1beta2.LabelAppValue,
		v1beta2.LabelClusterName: clusterName,
	}
}

// ClusterIndex names the index of a cache of pods or claims by cluster
// (IndexByCluster): a cluster's pass reads its own objects from it, not
// those of every cluster of the namespace.
const ClusterIndex = "etcd-cluster"

// IndexByCluster indexes an object with the operator's labels (app=etcd and
// etcd_cluster) by "namespace/cluster"; others are not indexed.
func IndexByCluster(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	l := m.GetLabels()
	if l[v1beta2.LabelApp] != v1beta2.LabelAppValue || l[v1beta2.LabelClusterName] == "" {
		return nil, nil
	}
	return []string{clusterIndexKey(m.GetNamespace(), l[v1beta2.LabelClusterName])}, nil
}

func clusterIndexKey(namespace, cluster string) string { return namespace + "/" + cluster }

// ClusterObjects are the objects of cache indexed by IndexByCluster that
// carry the labels of cluster in namespace.
func ClusterObjects[T any](cache interface {
	ByIndex(index, key string) ([]any, error)
}, namespace, cluster string) ([]T, error) {
	objs, err := cache.ByIndex(ClusterIndex, clusterIndexKey(namespace, cluster))
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// ClusterSelector selects the pods (and PVCs) of one cluster, for listers and
// list calls.
func ClusterSelector(clusterName string) labels.Selector {
	return labels.SelectorFromSet(ClusterLabels(clusterName))
}

// MemberLabels are the labels of a member pod. User labels come first and the
// operator's are written over them, so that a user label can never move a pod
// out of its cluster's selector or rename its member (validation also rejects
// such labels, but the builder does not rely on it).
func MemberLabels(cluster *v1beta2.EtcdCluster, memberName string) map[string]string {
	l := map[string]string{}
	if cluster.Spec.Pod != nil {
		maps.Copy(l, cluster.Spec.Pod.Labels)
	}
	maps.Copy(l, ClusterLabels(cluster.Name))
	l[v1beta2.LabelNodeName] = memberName
	return l
}

// AsOwner is the owner reference that lets the garbage collector delete a
// cluster's pods, PVCs and services when the EtcdCluster goes. It marks the
// cluster as controller so that IsOwnedBy can tell our pods from look-alikes.
// blockOwnerDeletion is left unset, as in the original: setting it needs
// update permission on etcdclusters/finalizers where the
// OwnerReferencesPermissionEnforcement admission plugin is on.
func AsOwner(cluster *v1beta2.EtcdCluster) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: v1beta2.SchemeGroupVersion.String(),
		Kind:       v1beta2.EtcdClusterResourceKind,
		Name:       cluster.Name,
		UID:        cluster.UID,
		Controller: new(true),
	}
}

// IsOwnedBy tells whether obj's controller is this very cluster. The UID, not
// the name, decides: a pod left over from a deleted cluster of the same name
// (garbage collection is asynchronous) must not be adopted as a member. The
// original looked at the first owner reference only; any other owner a user
// or tool adds in front of ours would have made it ignore its own pods. A
// cluster without a UID (never stored) owns nothing.
func IsOwnedBy(obj metav1.Object, cluster *v1beta2.EtcdCluster) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && cluster.UID != "" && ref.UID == cluster.UID
}
