package v1beta2_test

import (
	"reflect"
	"testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDefaultVersionIsForNewClustersOnly: a cluster without spec.version
// that runs already keeps the version it runs when the operator's default
// moves on.
func TestDefaultVersionIsForNewClustersOnly(t *testing.T) {
	running := &api.EtcdCluster{Spec: api.ClusterSpec{Size: 3}, Status: api.ClusterStatus{CurrentVersion: "3.5.21"}}
	if v := running.WithDefaults().Spec.Version; v != "3.5.21" {
		t.Errorf("a running cluster without spec.version goes to %s, want the 3.5.21 it runs", v)
	}
	if v := (&api.EtcdCluster{Spec: api.ClusterSpec{Size: 3}}).WithDefaults().Spec.Version; v != api.DefaultEtcdVersion {
		t.Errorf("a new cluster without spec.version gets %s, want %s", v, api.DefaultEtcdVersion)
	}
	asked := &api.EtcdCluster{Spec: api.ClusterSpec{Size: 3, Version: "3.6.16"}, Status: api.ClusterStatus{CurrentVersion: "3.5.21"}}
	if v := asked.WithDefaults().Spec.Version; v != "3.6.16" {
		t.Errorf("spec.version 3.6.16 reads as %s", v)
	}
}

func TestWithDefaults(t *testing.T) {
	custom := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
	tests := []struct {
		name  string
		spec  api.ClusterSpec
		check func(t *testing.T, s api.ClusterSpec)
	}{
		{"an empty spec gets repository, version and busybox image", api.ClusterSpec{Size: 3}, func(t *testing.T, s api.ClusterSpec) {
			if s.Repository != "quay.io/coreos/etcd" || s.Version != api.DefaultEtcdVersion || s.Pod.BusyboxImage != "busybox:1.28.0-glibc" {
				t.Errorf("defaults = %q %q %q", s.Repository, s.Version, s.Pod.BusyboxImage)
			}
		}},
		{"leading v characters are stripped", api.ClusterSpec{Size: 3, Version: "vv3.4.23"}, func(t *testing.T, s api.ClusterSpec) {
			if s.Version != "3.4.23" {
				t.Errorf("version = %q", s.Version)
			}
		}},
		{"a given repository and busybox image are kept", api.ClusterSpec{Size: 1, Repository: "registry.local/etcd", Pod: &api.PodPolicy{BusyboxImage: "my/busybox:1"}},
			func(t *testing.T, s api.ClusterSpec) {
				if s.Repository != "registry.local/etcd" || s.Pod.BusyboxImage != "my/busybox:1" {
					t.Errorf("overridden: %q %q", s.Repository, s.Pod.BusyboxImage)
				}
			}},
		{"antiAffinity becomes one member per node", api.ClusterSpec{Size: 3, Pod: &api.PodPolicy{AntiAffinity: true}}, func(t *testing.T, s api.ClusterSpec) {
			terms := s.Pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			if len(terms) != 1 || terms[0].TopologyKey != "kubernetes.io/hostname" ||
				!reflect.DeepEqual(terms[0].LabelSelector.MatchLabels, map[string]string{"etcd_cluster": "example"}) {
				t.Errorf("affinity = %+v", s.Pod.Affinity)
			}
		}},
		{"a spec saying nothing of placement gets none in spec.pod: the pod builder spreads members", api.ClusterSpec{Size: 3}, func(t *testing.T, s api.ClusterSpec) {
			if s.Pod.Affinity != nil || s.Pod.TopologySpreadConstraints != nil {
				t.Errorf("placement defaulted into the spec: %+v %+v", s.Pod.Affinity, s.Pod.TopologySpreadConstraints)
			}
		}},
		{"antiAffinity does not replace a given affinity", api.ClusterSpec{Size: 3, Pod: &api.PodPolicy{AntiAffinity: true, Affinity: custom}}, func(t *testing.T, s api.ClusterSpec) {
			if !reflect.DeepEqual(s.Pod.Affinity, custom) {
				t.Errorf("affinity = %+v", s.Pod.Affinity)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "example"}, Spec: tc.spec}
			before := in.DeepCopy()
			out := in.WithDefaults()
			tc.check(t, out.Spec)
			if !reflect.DeepEqual(in, before) {
				t.Fatal("WithDefaults changed the object it was given: defaults must never reach the stored spec")
			}
		})
	}
}

func TestEtcdImage(t *testing.T) {
	for _, tc := range []struct{ repo, version, want string }{
		{"quay.io/coreos/etcd", "3.5.21", "quay.io/coreos/etcd:v3.5.21"},
		{"quay.io/coreos/etcd", "v3.4.23", "quay.io/coreos/etcd:v3.4.23"},
		{"registry.local:5000/etcd", "3.6.6", "registry.local:5000/etcd:v3.6.6"},
	} {
		if got := api.EtcdImage(tc.repo, tc.version); got != tc.want {
			t.Errorf("EtcdImage(%q, %q) = %q, want %q", tc.repo, tc.version, got, tc.want)
		}
	}
}

func TestBackupPolicyDefaults(t *testing.T) {
	var none *api.BackupPolicy
	if none.BackupTimeout() != 60 || (&api.BackupPolicy{TimeoutInSecond: -5}).BackupTimeout() != 60 ||
		(&api.BackupPolicy{TimeoutInSecond: 7}).BackupTimeout() != 7 {
		t.Fatal("backup timeout defaults to 60 s when unset or not positive")
	}
	if (&api.BackupSpec{}).IsPeriodic() || !(&api.BackupSpec{BackupPolicy: &api.BackupPolicy{BackupIntervalInSecond: 5}}).IsPeriodic() {
		t.Fatal("only a positive interval makes a backup periodic")
	}
}
