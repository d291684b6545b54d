package manifests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

func chartDir(t *testing.T) string { return filepath.Join(repoRoot(t), "example", "chart") }

var operatorNames = []string{"etcd-operator", "etcd-backup-operator", "etcd-restore-operator"}

// chartKeys are the operators' keys under operators: in values.yaml, in the
// order of operatorNames; release "rel" names an operator's objects
// "rel-etcd-operator-<key>".
var chartKeys = []string{"cluster", "backup", "restore"}

// relName is what release "rel" of the chart names an operator's Deployment,
// ServiceAccount and Role.
func relName(binary string) string {
	return "rel-etcd-operator-" + chartKeys[slices.Index(operatorNames, binary)]
}

// allMonitoring switches on every optional part of the chart.
var allMonitoring = []string{
	"monitoring.serviceMonitor.enabled=true", "monitoring.podMonitor.enabled=true",
	"monitoring.prometheusRule.enabled=true", "monitoring.dashboard.enabled=true",
}

func TestChartLints(t *testing.T) {
	helm := tool(t, "HELM", "helm")
	run(t, repoRoot(t), helm, "lint", "--strict", chartDir(t))
	run(t, repoRoot(t), helm, "lint", "--strict", chartDir(t), "--set", strings.Join(append(allMonitoring, "scope=cluster"), ","))
}

// rendered is the output of helm template, by kind and name.
type rendered map[string]map[string][]byte

// render renders release "rel" in namespace etcd-system.
func render(t *testing.T, set ...string) rendered {
	t.Helper()
	return renderRelease(t, "rel", "etcd-system", set...)
}

func renderRelease(t *testing.T, release, namespace string, set ...string) rendered {
	t.Helper()
	helm := tool(t, "HELM", "helm")
	args := []string{"template", release, chartDir(t), "--namespace", namespace, "--include-crds"}
	if len(set) > 0 {
		args = append(args, "--set", strings.Join(set, ","))
	}
	out := run(t, repoRoot(t), helm, args...)
	r := rendered{}
	for _, doc := range bytes.Split(out, []byte("\n---")) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("helm template printed invalid YAML: %v\n%s", err, doc)
		}
		if meta.Kind == "" {
			continue
		}
		if r[meta.Kind] == nil {
			r[meta.Kind] = map[string][]byte{}
		}
		if _, dup := r[meta.Kind][meta.Metadata.Name]; dup {
			t.Fatalf("two %s named %s", meta.Kind, meta.Metadata.Name)
		}
		r[meta.Kind][meta.Metadata.Name] = doc
	}
	return r
}

func (r rendered) decode(t *testing.T, kind, name string, into any) {
	t.Helper()
	doc, ok := r[kind][name]
	if !ok {
		t.Fatalf("no %s %s rendered; have %v", kind, name, r.names(kind))
	}
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
}

func (r rendered) names(kind string) []string {
	var out []string
	for n := range r[kind] {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// rbacTemplateRules are the rules of example/rbac/<operator>/role-template.yaml,
// the set create_role.sh --operator grants an operator run with
// --create-crd=false.
func rbacTemplateRules(t *testing.T, operator string) []rbacv1.PolicyRule {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "example", "rbac", operator, "role-template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	return role.Rules
}

func TestChartInstallsEachOperatorWithItsOwnServiceAccount(t *testing.T) {
	for _, tc := range []struct {
		name        string
		set         []string
		roleKind    string
		clusterWide bool
	}{
		{"namespace scope grants a Role in the release namespace", nil, "Role", false},
		{"cluster scope grants a ClusterRole and runs the operators cluster-wide", []string{"scope=cluster"}, "ClusterRole", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.set...)
			if got := r.names("CustomResourceDefinition"); len(got) != 3 {
				t.Errorf("CRDs %v, want the three", got)
			}
			for _, name := range operatorNames {
				// Each operator has a role of its own, with only what it uses,
				// bound to its own ServiceAccount only. A ClusterRole's name
				// carries the release namespace.
				rbacName := relName(name)
				if tc.clusterWide {
					rbacName = strings.Replace(rbacName, "-etcd-operator-", "-etcd-operator-etcd-system-", 1)
				}
				var role rbacv1.ClusterRole // Role and ClusterRole decode alike
				r.decode(t, tc.roleKind, rbacName, &role)
				want := rbacTemplateRules(t, name)
				if tc.clusterWide && name == "etcd-operator" {
					// Cluster-scoped, which a Role cannot grant: a ClusterRole
					// adds it (example/rbac/etcd-operator/cluster-role-template.yaml).
					want = append(want, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes", "persistentvolumes"}, Verbs: []string{"get"}})
				}
				if !equality.Semantic.DeepEqual(role.Rules, want) {
					t.Errorf("the chart's rules for %s differ from example/rbac/%s/role-template.yaml (and, in a ClusterRole, get on nodes for etcd-operator):\n%+v", name, name, role.Rules)
				}
				var binding rbacv1.RoleBinding
				r.decode(t, tc.roleKind+"Binding", rbacName, &binding)
				if binding.RoleRef.Kind != tc.roleKind || binding.RoleRef.Name != rbacName {
					t.Errorf("binding refers to %s %s", binding.RoleRef.Kind, binding.RoleRef.Name)
				}
				var subjects []string
				for _, s := range binding.Subjects {
					subjects = append(subjects, s.Namespace+"/"+s.Name)
				}
				if !slices.Equal(subjects, []string{"etcd-system/" + relName(name)}) {
					t.Errorf("%s's role is bound to %v, want its ServiceAccount only", name, subjects)
				}
				var d appsv1.Deployment
				r.decode(t, "Deployment", relName(name), &d)
				pod := d.Spec.Template.Spec
				if pod.ServiceAccountName != relName(name) {
					t.Errorf("%s runs as service account %q", name, pod.ServiceAccountName)
				}
				if _, ok := r["ServiceAccount"][relName(name)]; !ok {
					t.Errorf("no ServiceAccount %s", relName(name))
				}
				cmd := pod.Containers[0].Command
				if cmd[0] != name || !slices.Contains(cmd, "--create-crd=false") || slices.Contains(cmd, "--cluster-wide") != tc.clusterWide {
					t.Errorf("%s command %v", name, cmd)
				}
				checkRestricted(t, name, pod)
				var svc corev1.Service
				r.decode(t, "Service", relName(name)+"-metrics", &svc)
				if !equality.Semantic.DeepEqual(svc.Spec.Selector, d.Spec.Selector.MatchLabels) {
					t.Errorf("Service %s-metrics selects %v, the pods carry %v", name, svc.Spec.Selector, d.Spec.Selector.MatchLabels)
				}
			}
		})
	}
}

// checkRestricted checks what Pod Security "restricted" asks of a pod.
func checkRestricted(t *testing.T, name string, pod corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod security context %+v is not restricted", name, psc)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: container %s security context %+v is not restricted", name, c.Name, sc)
		}
	}
}

func TestChartMonitoringIsOptIn(t *testing.T) {
	monitoringKinds := []string{"ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"}
	r := render(t)
	for _, kind := range monitoringKinds {
		if len(r[kind]) > 0 {
			t.Errorf("a %s by default; it needs the prometheus-operator", kind)
		}
	}
	r = render(t, allMonitoring...)
	for _, kind := range monitoringKinds {
		if len(r[kind]) != 1 {
			t.Errorf("%d %s with monitoring on, want 1", len(r[kind]), kind)
		}
	}
	var rule struct {
		APIVersion, Kind string
		Metadata         map[string]any `json:"metadata"`
		Spec             map[string]any `json:"spec"`
	}
	r.decode(t, "PrometheusRule", "rel-etcd-operator", &rule)
	data, err := os.ReadFile(filepath.Join(monitoringDir(t), "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(rule.Spec, want) {
		t.Error("the chart's PrometheusRule is not example/monitoring/rules.yaml")
	}
	var cm corev1.ConfigMap
	r.decode(t, "ConfigMap", "rel-etcd-operator-dashboard", &cm)
	dashboard, err := os.ReadFile(filepath.Join(monitoringDir(t), "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["etcd-operator.json"]; got != strings.TrimRight(string(dashboard), "\n") {
		t.Errorf("the dashboard ConfigMap is not example/monitoring/grafana-dashboard.json")
	}
}

func TestChartLeavesOutDisabledOperators(t *testing.T) {
	r := render(t, "operators.backup.enabled=false", "operators.restore.enabled=false")
	if got := r.names("Deployment"); !slices.Equal(got, []string{"rel-etcd-operator-cluster"}) {
		t.Errorf("Deployments %v", got)
	}
	if got := r.names("ServiceAccount"); !slices.Equal(got, []string{"rel-etcd-operator-cluster"}) {
		t.Errorf("ServiceAccounts %v", got)
	}
}

// The chart's copies of the monitoring kit and the CRDs are the files under
// example/ (Helm reads only files inside the chart).
func TestChartCopiesAreCurrent(t *testing.T) {
	root := repoRoot(t)
	for _, f := range []struct{ src, dst string }{
		{"example/monitoring/rules.yaml", "example/chart/files/rules.yaml"},
		{"example/monitoring/grafana-dashboard.json", "example/chart/files/grafana-dashboard.json"},
	} {
		want, err := os.ReadFile(filepath.Join(root, f.src))
		if err != nil {
			t.Fatal(err)
		}
		derived(t, filepath.Join(root, f.dst), want, "a copy of "+f.src)
	}
	crds, err := filepath.Glob(filepath.Join(root, "example", "crd", "*.yaml"))
	if err != nil || len(crds) != 3 {
		t.Fatalf("example/crd: %v %v", crds, err)
	}
	for _, src := range crds {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, "example", "chart", "files", "crds", filepath.Base(src)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("example/chart/files/crds/%s is not example/crd's (%v): run hack/update-codegen.sh", filepath.Base(src), err)
		}
	}
}

// The binaries accept the command lines the chart gives them (-version parses
// every flag first, then exits before needing a cluster).
func TestBinariesAcceptTheChartsFlags(t *testing.T) {
	bin := t.TempDir()
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/operator", "./cmd/backup-operator", "./cmd/restore-operator")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// cmd/<dir> builds a binary named after the directory.
	dirs := map[string]string{"etcd-operator": "operator", "etcd-backup-operator": "backup-operator", "etcd-restore-operator": "restore-operator"}
	r := render(t, "scope=cluster", "logFormat=json", "logLevel=debug", "cloudIdentity.namespaces={team-a,team-b}")
	for _, name := range operatorNames {
		var d appsv1.Deployment
		r.decode(t, "Deployment", relName(name), &d)
		cmd := d.Spec.Template.Spec.Containers[0].Command
		out, err := execOutput(t, filepath.Join(bin, dirs[name]), append(cmd[1:], "-version")...)
		if err != nil {
			t.Errorf("%s refuses the chart's flags %v: %v\n%s", name, cmd[1:], err, out)
		}
	}
}

// The backup and restore operators lend their cloud identity only when
// cloudIdentity.namespaces names where; etcd-operator has no such flag.
func TestChartLendsTheCloudIdentityOnlyWhereAsked(t *testing.T) {
	flags := func(r rendered, name string) []string {
		var d appsv1.Deployment
		r.decode(t, "Deployment", relName(name), &d)
		var out []string
		for _, arg := range d.Spec.Template.Spec.Containers[0].Command {
			if strings.HasPrefix(arg, "--cloud-identity-namespaces") {
				out = append(out, arg)
			}
		}
		return out
	}
	byDefault, lent := render(t), render(t, "cloudIdentity.namespaces={team-a,team-b}")
	for _, name := range operatorNames {
		if got := flags(byDefault, name); len(got) > 0 {
			t.Errorf("%s lends its identity by default: %v", name, got)
		}
		want := []string{"--cloud-identity-namespaces=team-a,team-b"}
		if name == "etcd-operator" {
			want = nil
		}
		if got := flags(lent, name); !slices.Equal(got, want) {
			t.Errorf("%s with cloudIdentity.namespaces: %v, want %v", name, got, want)
		}
	}
}

// The plain manifests run the operators as the chart does: Pod Security
// "restricted".
func TestExampleDeploymentsAreRestricted(t *testing.T) {
	for _, file := range []string{"deployment.yaml", "etcd-backup-operator/deployment.yaml", "etcd-restore-operator/deployment.yaml"} {
		data, err := os.ReadFile(filepath.Join(repoRoot(t), "example", file))
		if err != nil {
			t.Fatal(err)
		}
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(data, &d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		checkRestricted(t, file, d.Spec.Template.Spec)
	}
}
