package manifests

import (
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/restore"
)

func readYAML(t *testing.T, obj any, path ...string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{repoRoot(t)}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatal(err)
	}
}

// The example NetworkPolicy selects the restore operator's pods, lets seed
// pods (member pods of any namespace) reach the backup server, and keeps the
// metrics and probe port open.
func TestRestoreNetworkPolicyLetsOnlySeedsReachTheBackupServer(t *testing.T) {
	var np networkingv1.NetworkPolicy
	readYAML(t, &np, "example", "etcd-restore-operator", "network-policy.yaml")
	var dep appsv1.Deployment
	readYAML(t, &dep, "example", "etcd-restore-operator", "deployment.yaml")

	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Fatalf("the policy's pod selector %v does not select the Deployment's pods %v", sel, dep.Spec.Template.Labels)
	}
	seed := restore.NewSeedPod(restore.SeedConfig{
		Cluster:     &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "team-a"}, Spec: api.ClusterSpec{Size: 1, Version: "3.5.21"}},
		MemberName:  "c-abc",
		TokenSecret: "t",
	})
	other := labels.Set{"app": "web"}
	allows := func(port int32, podLabels labels.Set) bool {
		for _, rule := range np.Spec.Ingress {
			portOK := len(rule.Ports) == 0
			for _, p := range rule.Ports {
				portOK = portOK || p.Port != nil && p.Port.IntVal == port && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP)
			}
			if !portOK {
				continue
			}
			if len(rule.From) == 0 {
				return true
			}
			for _, peer := range rule.From {
				if peer.PodSelector == nil || peer.NamespaceSelector == nil || len(peer.NamespaceSelector.MatchLabels)+len(peer.NamespaceSelector.MatchExpressions) > 0 {
					continue // only "pods so labelled, in any namespace" is read here
				}
				ps, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
				if err == nil && ps.Matches(podLabels) {
					return true
				}
			}
		}
		return false
	}
	if !allows(restore.BackupServerPort, labels.Set(seed.Labels)) {
		t.Errorf("seed pods (labels %v) cannot reach port %d", seed.Labels, restore.BackupServerPort)
	}
	if allows(restore.BackupServerPort, other) {
		t.Errorf("any pod reaches port %d", restore.BackupServerPort)
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.ContainerPort != restore.BackupServerPort && !allows(p.ContainerPort, other) {
				t.Errorf("port %d (%s) is closed to Prometheus and probes", p.ContainerPort, p.Name)
			}
		}
	}
}
