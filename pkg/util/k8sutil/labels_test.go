package k8sutil

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

func TestMemberLabels(t *testing.T) {
	tests := []struct {
		name       string
		userLabels map[string]string
		want       map[string]string
	}{
		{
			name: "without user labels a member has the operator's three",
			want: map[string]string{"app": "etcd", "etcd_cluster": "example", "etcd_node": "example-1"},
		},
		{
			name:       "user labels are added",
			userLabels: map[string]string{"team": "storage"},
			want:       map[string]string{"app": "etcd", "etcd_cluster": "example", "etcd_node": "example-1", "team": "storage"},
		},
		{
			name:       "user labels cannot override operator labels",
			userLabels: map[string]string{"app": "mine", "etcd_cluster": "other", "etcd_node": "other-1", "team": "storage"},
			want:       map[string]string{"app": "etcd", "etcd_cluster": "example", "etcd_node": "example-1", "team": "storage"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCluster(func(c *v1beta2.EtcdCluster) {
				c.Spec.Pod = &v1beta2.PodPolicy{Labels: tt.userLabels}
			})
			if got := MemberLabels(c, "example-1"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("MemberLabels() = %v, want %v", got, tt.want)
			}
			if tt.userLabels != nil && tt.userLabels["team"] != "storage" {
				t.Error("MemberLabels changed the user's labels")
			}
		})
	}
}

func TestClusterSelector(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{"selects a member of the cluster", map[string]string{"app": "etcd", "etcd_cluster": "example", "etcd_node": "example-1"}, true},
		{"ignores another cluster", map[string]string{"app": "etcd", "etcd_cluster": "example2"}, false},
		{"ignores a non-etcd pod with the cluster label", map[string]string{"app": "web", "etcd_cluster": "example"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClusterSelector("example").Matches(labels.Set(tt.labels)); got != tt.want {
				t.Errorf("Matches(%v) = %v, want %v", tt.labels, got, tt.want)
			}
		})
	}
}

func TestAsOwner(t *testing.T) {
	got := AsOwner(newTestCluster())
	want := metav1.OwnerReference{
		APIVersion: "etcd.database.coreos.com/v1beta2",
		Kind:       "EtcdCluster",
		Name:       testCluster,
		UID:        testUID,
		Controller: new(true),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("AsOwner() = %+v, want %+v", got, want)
	}
}

func TestIsOwnedBy(t *testing.T) {
	c := newTestCluster()
	ours := AsOwner(c)
	other := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "other-uid", Controller: new(true)}
	notController := ours
	notController.Controller = new(false)
	sameNameOldCluster := ours
	sameNameOldCluster.UID = "uid-of-a-deleted-cluster"
	ownerlessCluster := c.DeepCopy()
	ownerlessCluster.UID = ""

	tests := []struct {
		name    string
		refs    []metav1.OwnerReference
		cluster *v1beta2.EtcdCluster
		want    bool
	}{
		{"a pod the cluster controls is owned", []metav1.OwnerReference{ours}, c, true},
		{"a pod without owners is not owned", nil, c, false},
		{"a pod of a deleted cluster with the same name is not owned", []metav1.OwnerReference{sameNameOldCluster}, c, false},
		{"a pod controlled by something else is not owned", []metav1.OwnerReference{other}, c, false},
		{"a reference that is not the controller does not count", []metav1.OwnerReference{notController}, c, false},
		{"our controller reference counts even when not first", []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "cm-uid"}, ours}, c, true},
		{"a cluster without UID owns nothing", []metav1.OwnerReference{{Controller: new(true)}}, ownerlessCluster, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Name: "p", OwnerReferences: tt.refs}
			if got := IsOwnedBy(obj, tt.cluster); got != tt.want {
				t.Errorf("IsOwnedBy() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestClusterObjectsAreTheClustersOwn: the cluster index finds a cluster's
// pods and nothing else: not a cluster of the same name in another
// namespace, not one whose name starts the same, not a pod without the
// app=etcd label.
func TestClusterObjectsAreTheClustersOwn(t *testing.T) {
	pod := func(ns, name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}
	cl := &v1beta2.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "example"}}
	other := &v1beta2.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "example-2"}}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{ClusterIndex: IndexByCluster})
	for _, p := range []*corev1.Pod{
		pod("a", "example-m1", MemberLabels(cl, "example-m1")),
		pod("a", "example-m2", MemberLabels(cl, "example-m2")),
		pod("b", "example-m1", ClusterLabels("example")),
		pod("a", "example-2-m1", MemberLabels(other, "example-2-m1")),
		pod("a", "stray", map[string]string{v1beta2.LabelClusterName: "example"}),
	} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ClusterObjects[*corev1.Pod](idx, "a", "example")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	slices.Sort(names)
	if want := []string{"a/example-m1", "a/example-m2"}; !slices.Equal(names, want) {
		t.Errorf("the pods of a/example are %v, want %v", names, want)
	}
}
