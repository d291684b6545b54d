package manifests

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

// The chart renders the CRDs as templates, so that helm upgrade upgrades
// them (Helm never upgrades the files of a chart's crds/ directory); users
// choose whether the release installs them and whether it leaves them behind.
func TestChartCRDsAreTheUsersChoice(t *testing.T) {
	if _, err := os.Stat(filepath.Join(chartDir(t), "crds")); err == nil {
		t.Error("the chart has a crds/ directory: Helm would install it whatever crds.install says, and never upgrade it")
	}
	example, err := filepath.Glob(filepath.Join(repoRoot(t), "example", "crd", "*.yaml"))
	if err != nil || len(example) != 3 {
		t.Fatalf("example/crd: %v %v", example, err)
	}
	for _, tc := range []struct {
		name        string
		set         []string
		installed   bool
		keepOnPurge bool
	}{
		{"by default the release installs and upgrades them, and leaves them on uninstall", nil, true, true},
		{"crds.keep=false lets helm uninstall delete them", []string{"crds.keep=false"}, true, false},
		{"crds.install=false leaves them to someone else", []string{"crds.install=false"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.set...)
			if !tc.installed {
				if got := r.names("CustomResourceDefinition"); len(got) > 0 {
					t.Errorf("CRDs rendered: %v", got)
				}
				return
			}
			for _, file := range example {
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				var want apiextensionsv1.CustomResourceDefinition
				if err := yaml.UnmarshalStrict(data, &want); err != nil {
					t.Fatal(err)
				}
				var got apiextensionsv1.CustomResourceDefinition
				r.decode(t, "CustomResourceDefinition", want.Name, &got)
				if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
					t.Errorf("the chart's %s differs from example/crd's", want.Name)
				}
				if got.Labels["app.kubernetes.io/managed-by"] != "Helm" {
					t.Errorf("%s labels %v", want.Name, got.Labels)
				}
				if kept := got.Annotations["helm.sh/resource-policy"] == "keep"; kept != tc.keepOnPurge {
					t.Errorf("%s annotations %v; want kept on uninstall: %v", want.Name, got.Annotations, tc.keepOnPurge)
				}
			}
		})
	}
}
