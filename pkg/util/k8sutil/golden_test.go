package k8sutil

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with the current output")

// Fixed inputs, so that golden files only change when the builders do.
const (
	testUID       = types.UID("3f0c8a52-6b1d-4e7a-9c2f-5d8e1b4a7c60")
	testToken     = "0d6b2c1e-9a47-4f3b-8e15-72c4a9d0f3e8"
	testNamespace = "default"
	testCluster   = "example"
	testSeed      = "example-2mkrq6cz9x"
)

// newTestCluster returns a defaulted cluster "example" of etcd 3.5.21 after
// applying mutate to the spec as a user would have written it.
func newTestCluster(mutate ...func(*v1beta2.EtcdCluster)) *v1beta2.EtcdCluster {
	c := &v1beta2.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: testCluster, Namespace: testNamespace, UID: testUID},
		Spec:       v1beta2.ClusterSpec{Size: 3, Version: "3.5.21"},
	}
	for _, f := range mutate {
		f(c)
	}
	return c.WithDefaults()
}

// newTestMember builds member name of c the way the operator does: TLS and DNS
// settings are the cluster's.
func newTestMember(c *v1beta2.EtcdCluster, name string) *etcdutil.Member {
	return &etcdutil.Member{
		Name:          name,
		Namespace:     c.Namespace,
		SecurePeer:    c.Spec.TLS.IsSecurePeer(),
		SecureClient:  c.Spec.TLS.IsSecureClient(),
		ClusterName:   c.Name,
		ClusterDomain: c.Spec.Pod.ClusterDomain,
	}
}

// newSeedPod is the pod of a cluster's first member.
func newSeedPod(c *v1beta2.EtcdCluster, opts ...PodOption) *corev1.Pod {
	m := newTestMember(c, testSeed)
	return NewEtcdPod(c, m, c.Spec.Version, etcdutil.NewMemberSet(m).PeerURLPairs(), ClusterStateNew, testToken, opts...)
}

// assertGolden compares obj, as YAML, with testdata/<name>.yaml.
func assertGolden(t *testing.T, name string, obj any) {
	t.Helper()
	got, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatalf("marshal %s: %v", name, err)
	}
	path := filepath.Join("testdata", name+".yaml")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("update golden file: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (create it with go test ./pkg/util/k8sutil -update): %v", err)
	}
	// Diffing lines rather than one string makes cmp print whole YAML lines.
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")); diff != "" {
		t.Errorf("%s is out of date (-want +got); if the change is intended, run go test ./pkg/util/k8sutil -update\n%s", path, diff)
	}
}
