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

// client is a pod that opens a connection, and where it runs.
type client struct {
	labels          labels.Set
	namespace       string
	namespaceLabels labels.Set
}

// admits reads an ingress policy in namespace policyNS the way the
// NetworkPolicy API defines it (ipBlock peers aside): may c reach port
// (TCP) of the pods the policy selects?
func admits(t *testing.T, np networkingv1.NetworkPolicy, policyNS string, port int32, c client) bool {
	t.Helper()
	matches := func(sel *metav1.LabelSelector, set labels.Set) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		return s.Matches(set)
	}
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
			switch {
			case peer.IPBlock != nil:
			case peer.NamespaceSelector == nil:
				// A pod selector alone selects pods of the policy's namespace.
				if c.namespace == policyNS && matches(peer.PodSelector, c.labels) {
					return true
				}
			case peer.PodSelector == nil:
				if matches(peer.NamespaceSelector, c.namespaceLabels) {
					return true
				}
			default:
				if matches(peer.NamespaceSelector, c.namespaceLabels) && matches(peer.PodSelector, c.labels) {
					return true
				}
			}
		}
	}
	return false
}

// seedIn is a restore's seed pod in namespace ns, labelled as the restore
// operator labels it.
func seedIn(ns string, nsLabels labels.Set) client {
	seed := restore.NewSeedPod(restore.SeedConfig{
		Cluster:     &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Spec: api.ClusterSpec{Size: 1, Version: "3.5.21"}},
		MemberName:  "c-abc",
		TokenSecret: "t",
	})
	return client{labels.Set(seed.Labels), ns, labels.Merge(nsLabels, labels.Set{"kubernetes.io/metadata.name": ns})}
}

func checkSelects(t *testing.T, what string, np networkingv1.NetworkPolicy, dep appsv1.Deployment) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Fatalf("%s: the policy's pod selector %v does not select the Deployment's pods %v", what, sel, dep.Spec.Template.Labels)
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
	checkSelects(t, "example/etcd-restore-operator", np, dep)

	const opNS = "etcd-system"
	other := client{labels.Set{"app": "web"}, "team-a", labels.Set{"kubernetes.io/metadata.name": "team-a"}}
	if seed := seedIn("team-a", nil); !admits(t, np, opNS, restore.BackupServerPort, seed) {
		t.Errorf("seed pods (labels %v) cannot reach port %d", seed.labels, restore.BackupServerPort)
	}
	if admits(t, np, opNS, restore.BackupServerPort, other) {
		t.Errorf("any pod reaches port %d", restore.BackupServerPort)
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.ContainerPort != restore.BackupServerPort && !admits(t, np, opNS, p.ContainerPort, other) {
				t.Errorf("port %d (%s) is closed to Prometheus and probes", p.ContainerPort, p.Name)
			}
		}
	}
}

// The chart's policy selects the chart's own restore operator pods (whatever
// podLabels adds), lets in the seeds of the namespaces the operator restores
// in and no other pod, and opens the metrics port to whoever the user says.
func TestChartNetworkPolicyLetsOnlyTheWatchedNamespacesSeedsIn(t *testing.T) {
	const opNS = "etcd-system"
	prom := client{labels.Set{"app.kubernetes.io/name": "prometheus"}, "monitoring", labels.Set{"kubernetes.io/metadata.name": "monitoring"}}
	web := client{labels.Set{"app": "web"}, opNS, labels.Set{"kubernetes.io/metadata.name": opNS}}
	type reach struct {
		who  string
		c    client
		port int32
		want bool
	}
	const metrics = 8082
	for _, tc := range []struct {
		name   string
		set    []string
		checks []reach
	}{
		{"namespace scope: seeds of the release namespace only, metrics from anyone", nil, []reach{
			{"a seed in the release namespace", seedIn(opNS, nil), restore.BackupServerPort, true},
			{"a seed in another namespace", seedIn("team-a", nil), restore.BackupServerPort, false},
			{"another pod of the release namespace", web, restore.BackupServerPort, false},
			{"Prometheus", prom, metrics, true},
		}},
		{"cluster scope: seeds of every namespace", []string{"scope=cluster"}, []reach{
			{"a seed in another namespace", seedIn("team-a", nil), restore.BackupServerPort, true},
			{"a seed in the release namespace", seedIn(opNS, nil), restore.BackupServerPort, true},
			{"another pod", web, restore.BackupServerPort, false},
		}},
		{"cluster scope narrowed to labelled namespaces", []string{"scope=cluster", "networkPolicy.seedNamespaceSelector.matchLabels.etcd=restores"}, []reach{
			{"a seed in a labelled namespace", seedIn("team-a", labels.Set{"etcd": "restores"}), restore.BackupServerPort, true},
			{"a seed in an unlabelled namespace", seedIn("team-b", nil), restore.BackupServerPort, false},
		}},
		{"metrics from the monitoring namespace only", []string{"networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring"}, []reach{
			{"Prometheus in monitoring", prom, metrics, true},
			{"another pod", web, metrics, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, append([]string{"networkPolicy.enabled=true", "podLabels.team=a"}, tc.set...)...)
			name := relName("etcd-restore-operator")
			var np networkingv1.NetworkPolicy
			r.decode(t, "NetworkPolicy", name, &np)
			var dep appsv1.Deployment
			r.decode(t, "Deployment", name, &dep)
			checkSelects(t, "the chart", np, dep)
			if got := r.names("NetworkPolicy"); len(got) != 1 {
				t.Errorf("NetworkPolicies %v, want the restore operator's", got)
			}
			// The ports the policy opens are the ports the pods listen on.
			ports := map[int32]bool{}
			for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
				ports[p.ContainerPort] = true
			}
			if !ports[restore.BackupServerPort] || !ports[metrics] {
				t.Fatalf("the restore operator's pods listen on %v", ports)
			}
			for _, c := range tc.checks {
				if got := admits(t, np, opNS, c.port, c.c); got != c.want {
					t.Errorf("%s reaches port %d: %v, want %v", c.who, c.port, got, c.want)
				}
			}
		})
	}
	if r := render(t); len(r["NetworkPolicy"]) > 0 {
		t.Errorf("a NetworkPolicy by default: %v", r.names("NetworkPolicy"))
	}
}
