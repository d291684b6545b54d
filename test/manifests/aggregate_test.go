package manifests

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

// aggregatedResources are what users of the built-in roles work with: every
// kind of example/crd, and the scale subresource of those that have one.
func aggregatedResources(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "example", "crd", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("example/crd: %v %v", files, err)
	}
	var out []string
	for _, f := range files {
		var crd apiextensionsv1.CustomResourceDefinition
		readYAML(t, &crd, "example", "crd", filepath.Base(f))
		out = append(out, crd.Spec.Names.Plural)
		for _, v := range crd.Spec.Versions {
			if v.Subresources != nil && v.Subresources.Scale != nil {
				out = append(out, crd.Spec.Names.Plural+"/scale")
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The built-in roles cover the etcd resources: "view" reads them, "edit" and
// "admin" also write them; example/rbac and the chart grant the same.
func TestBuiltInRolesCoverTheEtcdResources(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "example", "rbac", "aggregate-to-view-edit.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	example := map[string]rbacv1.ClusterRole{} // by the built-in role it adds to first
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		var role rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict(doc, &role); err != nil {
			t.Fatal(err)
		}
		for _, to := range []string{"view", "edit"} {
			if role.Labels["rbac.authorization.k8s.io/aggregate-to-"+to] == "true" {
				example[to] = role
				break
			}
		}
	}
	want := aggregatedResources(t)
	writes := []string{"create", "update", "patch", "delete"}
	for to, wantLabels := range map[string][]string{"view": {"view"}, "edit": {"edit", "admin"}} {
		role, ok := example[to]
		if !ok {
			t.Fatalf("example/rbac/aggregate-to-view-edit.yaml has no role aggregated to %s", to)
		}
		for _, l := range wantLabels {
			if role.Labels["rbac.authorization.k8s.io/aggregate-to-"+l] != "true" {
				t.Errorf("%s is not aggregated to %s: labels %v", role.Name, l, role.Labels)
			}
		}
		if len(role.Rules) != 1 {
			t.Fatalf("%s: rules %+v", role.Name, role.Rules)
		}
		rule := role.Rules[0]
		got := slices.Sorted(slices.Values(rule.Resources))
		if !slices.Equal(rule.APIGroups, []string{"etcd.database.coreos.com"}) || !slices.Equal(got, want) {
			t.Errorf("%s grants %v %v, want every etcd resource %v", role.Name, rule.APIGroups, got, want)
		}
		for _, v := range []string{"get", "list", "watch"} {
			if !slices.Contains(rule.Verbs, v) {
				t.Errorf("%s cannot %s", role.Name, v)
			}
		}
		for _, v := range writes {
			if slices.Contains(rule.Verbs, v) != (to == "edit") {
				t.Errorf("%s: %s granted: %v", role.Name, v, slices.Contains(rule.Verbs, v))
			}
		}
	}

	r := render(t)
	for _, to := range []string{"view", "edit"} {
		var role rbacv1.ClusterRole
		r.decode(t, "ClusterRole", "rel-etcd-operator-etcd-system-"+to, &role)
		if !equality.Semantic.DeepEqual(role.Rules, example[to].Rules) {
			t.Errorf("the chart's %s role differs from example/rbac/aggregate-to-view-edit.yaml's: %+v", to, role.Rules)
		}
		for k, v := range example[to].Labels {
			if role.Labels[k] != v {
				t.Errorf("the chart's %s role: label %s=%q, want %q", to, k, role.Labels[k], v)
			}
		}
	}
	if got := render(t, "rbac.aggregateToDefaultRoles=false").names("ClusterRole"); len(got) > 0 {
		t.Errorf("ClusterRoles with rbac.aggregateToDefaultRoles=false and scope=namespace: %v", got)
	}
}
