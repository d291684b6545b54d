package manifests

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// everything switches on every optional object of the chart, so that the
// naming tests see all of them.
var everything = append(slices.Clone(allMonitoring), "networkPolicy.enabled=true")

// clusterScoped are the kinds the chart renders without a namespace.
var clusterScoped = map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true, "CustomResourceDefinition": true}

// objects lists what a release renders as "kind namespace/name", the CRDs
// left out: every release shares them by design.
func (r rendered) objects(t *testing.T) []string {
	t.Helper()
	var out []string
	for kind, docs := range r {
		if kind == "CustomResourceDefinition" {
			continue
		}
		for name, doc := range docs {
			var meta struct {
				Metadata struct {
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatal(err)
			}
			if clusterScoped[kind] != (meta.Metadata.Namespace == "") {
				t.Errorf("%s %s has namespace %q", kind, name, meta.Metadata.Namespace)
			}
			out = append(out, fmt.Sprintf("%s %s/%s", kind, meta.Metadata.Namespace, name))
		}
	}
	slices.Sort(out)
	return out
}

func TestTwoReleasesNameNothingAlike(t *testing.T) {
	type release struct{ name, namespace string }
	for _, tc := range []struct {
		name string
		a, b release
		set  []string
	}{
		{"two releases in one namespace", release{"etcd-operator", "etcd-system"}, release{"team-b", "etcd-system"}, nil},
		{"two releases in one namespace, cluster-wide", release{"etcd-operator", "etcd-system"}, release{"team-b", "etcd-system"}, []string{"scope=cluster"}},
		{"releases of one name in two namespaces, cluster-wide", release{"etcd-operator", "team-a"}, release{"etcd-operator", "team-b"}, []string{"scope=cluster"}},
		{"long release names that begin alike", release{strings.Repeat("x", 50) + "-a", "ns"}, release{strings.Repeat("x", 50) + "-b", "ns"}, []string{"scope=cluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := append(slices.Clone(everything), tc.set...)
			a := renderRelease(t, tc.a.name, tc.a.namespace, set...)
			b := renderRelease(t, tc.b.name, tc.b.namespace, set...)
			objsA, objsB := a.objects(t), b.objects(t)
			if len(objsA) == 0 {
				t.Fatal("nothing rendered")
			}
			for _, o := range objsA {
				if slices.Contains(objsB, o) {
					t.Errorf("both releases render %s", o)
				}
			}
			// Every name fits where Kubernetes puts it: the metrics
			// Services' names are DNS labels.
			for name := range a["Service"] {
				if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
					t.Errorf("Service %s: %v", name, errs)
				}
			}
		})
	}
}

func TestFullnameOverrideNamesEveryObject(t *testing.T) {
	r := render(t, append(slices.Clone(everything), "fullnameOverride=etcd")...)
	for _, kind := range []string{"Deployment", "ServiceAccount", "Role", "RoleBinding", "Service"} {
		for _, name := range r.names(kind) {
			if !strings.HasPrefix(name, "etcd-") || strings.Contains(name, "rel") {
				t.Errorf("%s %s is not named after fullnameOverride", kind, name)
			}
		}
	}
	r = render(t, "nameOverride=db")
	if got := r.names("Deployment"); !slices.Equal(got, []string{"rel-db-backup", "rel-db-cluster", "rel-db-restore"}) {
		t.Errorf("with nameOverride=db the Deployments are %v", got)
	}
}

func TestPodAndServiceAccountMetadataReachEachOperator(t *testing.T) {
	r := render(t,
		"podLabels.team=a", "podAnnotations.global=g", "podAnnotations.both=global",
		"operators.backup.podAnnotations.both=backup", "operators.backup.podLabels.workload=backup",
		"operators.backup.serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/backup",
		// The selector labels stay what the Deployment selects on.
		"operators.restore.podLabels.app\\.kubernetes\\.io/name=other",
	)
	for _, name := range operatorNames {
		var d appsv1.Deployment
		r.decode(t, "Deployment", relName(name), &d)
		l, a := d.Spec.Template.Labels, d.Spec.Template.Annotations
		for k, v := range d.Spec.Selector.MatchLabels {
			if l[k] != v {
				t.Errorf("%s: pod label %s=%q, the Deployment selects %q", name, k, l[k], v)
			}
		}
		if l["team"] != "a" || a["global"] != "g" {
			t.Errorf("%s: the global pod labels and annotations are missing: %v %v", name, l, a)
		}
		wantBoth, wantWorkload := "global", ""
		if name == "etcd-backup-operator" {
			wantBoth, wantWorkload = "backup", "backup"
		}
		if a["both"] != wantBoth || l["workload"] != wantWorkload {
			t.Errorf("%s: annotation both=%q, label workload=%q; want %q, %q", name, a["both"], l["workload"], wantBoth, wantWorkload)
		}
		var sa corev1.ServiceAccount
		r.decode(t, "ServiceAccount", relName(name), &sa)
		wantARN := ""
		if name == "etcd-backup-operator" {
			wantARN = "arn:aws:iam::1:role/backup"
		}
		if got := sa.Annotations["eks.amazonaws.com/role-arn"]; got != wantARN {
			t.Errorf("%s: ServiceAccount role-arn %q, want %q", name, got, wantARN)
		}
	}
}
