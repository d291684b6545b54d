package operatorrun

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/yaml"
)

// EventMissingPermissions is the reason of the Warning event, on the
// operator's pod, that lists the rules its role lacks.
const EventMissingPermissions = "MissingPermissions"

// Need is a permission a binary uses, and what happens without it.
type Need struct {
	Rule
	// Without says what the binary does, or cannot do, without the rule.
	Without string
}

// Lacking is a need and the verbs of it the role does not grant.
type Lacking struct {
	Need
	Verbs []string
}

func (l Lacking) String() string {
	r := l.Rule
	r.Verbs = l.Verbs
	return fmt.Sprintf("%s (%s)", r, l.Without)
}

// LackingPermissions asks the apiserver which of needs the operator's role
// does not grant. Needs it could not ask about are left out: this is advice
// given once at start, and each call that is refused says so again.
func LackingPermissions(ctx context.Context, kube kubernetes.Interface, needs []Need) []Lacking {
	var out []Lacking
	for _, n := range needs {
		verbs, err := Missing(ctx, kube, n.Rule)
		if err == nil && len(verbs) > 0 {
			out = append(out, Lacking{Need: n, Verbs: verbs})
		}
	}
	return out
}

// ReportLackingPermissions says in one log line and one Warning event on the
// operator's pod which rules the role lacks and what each costs, so that an
// install made for the original learns at once what to add, rather than from
// one failure at a time. It returns what it found.
func ReportLackingPermissions(ctx context.Context, kube kubernetes.Interface, rec record.EventRecorder, self Identity, needs []Need, log *logrus.Entry) []Lacking {
	lacking := LackingPermissions(ctx, kube, needs)
	if len(lacking) == 0 {
		return nil
	}
	msgs := make([]string, len(lacking))
	for i, l := range lacking {
		msgs[i] = l.String()
	}
	msg := fmt.Sprintf("the role lacks %d rule(s) the operator uses; add them (example/rbac has them all): %s", len(lacking), strings.Join(msgs, "; "))
	log.Warn(msg)
	podEvent(ctx, kube, rec, self, corev1.EventTypeWarning, EventMissingPermissions, msg)
	return lacking
}

// podEvent records an event on the operator's own pod. The pod's UID is
// looked up so that `kubectl describe pod` lists the event; without it (no
// pod, or no right to read it) the event is still recorded under the pod's
// name.
func podEvent(ctx context.Context, kube kubernetes.Interface, rec record.EventRecorder, self Identity, typ, reason, msg string) {
	if rec == nil || self.PodName == "" {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: self.Namespace, Name: self.PodName}
	if p, err := kube.CoreV1().Pods(self.Namespace).Get(ctx, self.PodName, metav1.GetOptions{}); err == nil {
		ref.UID, ref.ResourceVersion = p.UID, p.ResourceVersion
	}
	rec.Event(ref, typ, reason, msg)
}

// ReportLackingPermissions is the package's ReportLackingPermissions for this
// process.
func (b *Base) ReportLackingPermissions(ctx context.Context, needs []Need) []Lacking {
	return ReportLackingPermissions(ctx, b.Clients.Kube, b.Recorder, b.id, needs, b.log)
}

// Common needs of the three binaries.

// CRDNeed is what -create-crd=true needs.
func CRDNeed() Need {
	return Need{Rule: Rule{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Verbs: []string{"get", "create", "update"}},
		Without: "-create-crd=true cannot install the CRD: apply example/crd/ and run with -create-crd=false"}
}

// EventsNeed is what the event recorder needs in ns.
func EventsNeed(ns string) Need {
	return Need{Rule: Rule{Resource: "events", Verbs: []string{"create", "patch"}, Namespace: ns},
		Without: "events are dropped; the log still says everything"}
}

// LeaderLabelNeed is what labelling the leader's pod (Leadership) needs in ns;
// without says what else is lost, "" if nothing.
func LeaderLabelNeed(ns, without string) Need {
	w := "the leader's pod is not labelled " + LeaderLabel + "=true (the gauge still tells the leader)"
	if without != "" {
		w += "; " + without
	}
	return Need{Rule: LeaderLabelRule(ns), Without: w}
}

// SecretsNeed is what reading TLS and storage credentials needs in ns.
func SecretsNeed(ns, what string) Need {
	return Need{Rule: Rule{Resource: "secrets", Verbs: []string{"get"}, Namespace: ns}, Without: what}
}

// NotGrantedBy returns the verbs of r that none of rules grants, reading
// rules as RBAC does ("*" matches anything). It lets a test hold the
// binaries' needs and the roles in example/rbac to each other.
func NotGrantedBy(rules []rbacv1.PolicyRule, r Rule) []string {
	var out []string
	for _, verb := range r.Verbs {
		if !slices.ContainsFunc(rules, func(p rbacv1.PolicyRule) bool {
			return matches(p.APIGroups, r.Group) && matches(p.Resources, r.Resource) && matches(p.Verbs, verb)
		}) {
			out = append(out, verb)
		}
	}
	return out
}

func matches(list []string, s string) bool {
	return slices.Contains(list, s) || slices.Contains(list, "*")
}

// RoleRules reads the rules of a Role or ClusterRole manifest, such as the
// templates in example/rbac.
func RoleRules(manifest []byte) ([]rbacv1.PolicyRule, error) {
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(manifest, &role); err != nil {
		return nil, err
	}
	return role.Rules, nil
}

// readRole reads the rules of the Role or ClusterRole manifest at path.
func readRole(path string) ([]rbacv1.PolicyRule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rules, err := RoleRules(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rules, nil
}

// clusterScoped tells the resources of needs that a namespaced Role cannot
// grant: they are not asked of the Role templates (CRDs: the Role is for
// -create-crd=false; nodes and volumes: read only when the role allows).
func clusterScoped(resource string) bool {
	return resource == "customresourcedefinitions" || resource == "nodes" || resource == "persistentvolumes"
}

// ExampleRoleGaps holds a binary's needs, namespaced and cluster-wide, to the
// ClusterRole and Role templates in dir (example/rbac) and names every rule
// a template does not grant. Cluster-scoped resources (clusterScoped) are not
// asked of the namespaced Role.
func ExampleRoleGaps(dir string, needs func(clusterWide bool) []Need) ([]string, error) {
	var gaps []string
	for _, file := range []string{"cluster-role-template.yaml", "role-template.yaml"} {
		rules, err := readRole(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		for _, cw := range []bool{false, true} {
			for _, n := range needs(cw) {
				if file == "role-template.yaml" && clusterScoped(n.Resource) {
					continue
				}
				if missing := NotGrantedBy(rules, n.Rule); len(missing) > 0 {
					gaps = append(gaps, fmt.Sprintf("%s does not grant %s on %s", file, strings.Join(missing, ", "), n.Resource))
				}
			}
		}
	}
	return gaps, nil
}

// OwnRoleGaps holds a binary's needs, namespaced and cluster-wide, to its own
// role in dir/<binary>/ (role-template.yaml for -create-crd=false,
// cluster-role-template.yaml) in both directions: every rule it uses is
// granted, and every verb granted is one it uses (its needs, the Lease of
// leader election and the read of the Endpoints record it yields to), so that
// the role is the least that lets it work.
func OwnRoleGaps(dir, binary string, needs func(clusterWide bool) []Need) ([]string, error) {
	var gaps []string
	for _, file := range []string{"cluster-role-template.yaml", "role-template.yaml"} {
		path := filepath.Join(dir, binary, file)
		rules, err := readRole(path)
		if err != nil {
			return nil, err
		}
		used := map[string]bool{}
		key := func(group, resource, verb string) string { return group + "/" + resource + ":" + verb }
		for _, cw := range []bool{false, true} {
			ns := append(needs(cw), Need{Rule: LeaseRule("")}, Need{Rule: EndpointsReadRule("")})
			for _, n := range ns {
				if file == "role-template.yaml" && clusterScoped(n.Resource) {
					continue
				}
				for _, v := range n.Verbs {
					used[key(n.Group, n.Resource, v)] = true
				}
				if missing := NotGrantedBy(rules, n.Rule); len(missing) > 0 {
					gaps = append(gaps, fmt.Sprintf("%s does not grant %s on %s, which %s uses", path, strings.Join(missing, ", "), n.Resource, binary))
				}
			}
		}
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if !used[key(g, res, v)] {
							gaps = append(gaps, fmt.Sprintf("%s grants %s on %s, which %s does not use", path, v, res, binary))
						}
					}
				}
			}
		}
	}
	return gaps, nil
}

// originalRoleLacks reads the original etcd-operator's ClusterRole and Role
// (cluster-role-template.yaml and role-template.yaml in dir, as published) and
// returns, per file, the resources of a binary's needs, and of the Lease lock,
// that the role does not grant in full, in the needs' order. The ClusterRole
// is read for -create-crd=true, as the original's Deployment runs it; the Role
// for -create-crd=false.
func originalRoleLacks(dir string, needs func(createCRD bool) []Need) (map[string][]string, error) {
	out := map[string][]string{}
	for _, file := range []string{"cluster-role-template.yaml", "role-template.yaml"} {
		rules, err := readRole(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		lacking := []string{}
		for _, n := range append(needs(file == "cluster-role-template.yaml"), Need{Rule: LeaseRule("")}, Need{Rule: EndpointsRule("")}) {
			if len(NotGrantedBy(rules, n.Rule)) > 0 {
				lacking = append(lacking, n.Resource)
			}
		}
		out[file] = lacking
	}
	return out, nil
}

// undefinedTests returns those of tests, each "<directory under root>.<TestName>",
// that no _test.go file of its directory defines: a table naming the test
// that shows a behaviour fails when the test is renamed or removed.
func undefinedTests(root string, tests ...string) ([]string, error) {
	var out []string
	for _, ref := range tests {
		dir, name, ok := strings.Cut(ref, ".")
		if !ok {
			return nil, fmt.Errorf("%q is not <directory>.<TestName>", ref)
		}
		files, err := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
		if err != nil {
			return nil, err
		}
		found := false
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			if strings.Contains(string(data), "\nfunc "+name+"(t *testing.T)") {
				found = true
				break
			}
		}
		if !found {
			out = append(out, ref)
		}
	}
	return out, nil
}

// OriginalRoleGaps holds a binary's needs to the original etcd-operator's
// roles (test/e2e/testdata/original under root, the repository): each
// resource they lack must be a key of wayAround, and each key one they lack,
// so that the table lists exactly what a user of the original's roles goes
// without. Its values name the tests ("<directory>.<TestName>") that show the
// binary working around the lack, which must exist.
func OriginalRoleGaps(root string, needs func(createCRD bool) []Need, wayAround map[string][]string) ([]string, error) {
	lacks, err := originalRoleLacks(filepath.Join(root, "test/e2e/testdata/original"), needs)
	if err != nil {
		return nil, err
	}
	var gaps []string
	for _, file := range slices.Sorted(maps.Keys(lacks)) {
		for _, res := range lacks[file] {
			if len(wayAround[res]) == 0 {
				gaps = append(gaps, fmt.Sprintf("the original's %s lacks %s, and no test shows the way around it", file, res))
			}
		}
		for _, res := range slices.Sorted(maps.Keys(wayAround)) {
			if !slices.Contains(lacks[file], res) {
				gaps = append(gaps, fmt.Sprintf("the original's %s grants %s, which the table says it lacks", file, res))
			}
		}
	}
	for _, res := range slices.Sorted(maps.Keys(wayAround)) {
		missing, err := undefinedTests(root, wayAround[res]...)
		if err != nil {
			return nil, err
		}
		for _, m := range missing {
			gaps = append(gaps, fmt.Sprintf("the way around a lack of %s is shown by %s, which is not defined", res, m))
		}
	}
	return gaps, nil
}
