package manifests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// fakeKubectl is a kubectl that records its arguments and its stdin, and
// answers `get namespace` for the namespaces in its list.
const fakeKubectl = `#!/usr/bin/env bash
if [ "$1" = get ]; then
    [ "$3" = team-a ] || [ "$3" = default ]
    exit
fi
echo "$*" >> "$RECORD/args"
cat >> "$RECORD/stdin"
`

type createRoleRun struct {
	args    string
	objects map[string][]byte // "Kind/name"
}

func runCreateRole(t *testing.T, env []string, args ...string) (createRoleRun, error) {
	t.Helper()
	dir := t.TempDir()
	kubectl := filepath.Join(dir, "kubectl")
	if err := os.WriteFile(kubectl, []byte(fakeKubectl), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "bash", append([]string{filepath.Join(repoRoot(t), "example", "rbac", "create_role.sh")}, args...)...)
	cmd.Env = append(append(os.Environ(), "KUBECTL="+kubectl, "RECORD="+dir), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return createRoleRun{}, &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: out}
	}
	argsData, _ := os.ReadFile(filepath.Join(dir, "args"))
	stdin, _ := os.ReadFile(filepath.Join(dir, "stdin"))
	r := createRoleRun{args: strings.TrimSpace(string(argsData)), objects: map[string][]byte{}}
	for _, doc := range bytes.Split(stdin, []byte("\n---")) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("create_role.sh wrote invalid YAML: %v\n%s", err, doc)
		}
		if meta.Kind != "" {
			r.objects[meta.Kind+"/"+meta.Metadata.Name] = doc
		}
	}
	return r, nil
}

func subjects(t *testing.T, doc []byte) []rbacv1.Subject {
	var b rbacv1.RoleBinding
	if err := yaml.Unmarshal(doc, &b); err != nil {
		t.Fatal(err)
	}
	return b.Subjects
}

func TestCreateRoleBindsTheDefaultServiceAccountAsTheOriginalDid(t *testing.T) {
	r, err := runCreateRole(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.args != "apply -f -" {
		t.Errorf("kubectl %q, want apply (re-runnable)", r.args)
	}
	if _, ok := r.objects["ServiceAccount/default"]; ok {
		t.Error("the default service account is created; every namespace has one")
	}
	got := subjects(t, r.objects["ClusterRoleBinding/etcd-operator"])
	if len(got) != 1 || got[0].Name != "default" || got[0].Namespace != "default" {
		t.Errorf("subjects %+v", got)
	}
	if _, ok := r.objects["ClusterRole/etcd-operator"]; !ok {
		t.Errorf("objects %v", r.objects)
	}
}

func TestCreateRoleWithServiceAccountCreatesAndBindsIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		args    []string
		binding string
	}{
		{"flags", nil, []string{"--namespace=team-a", "--service-account=etcd-operator", "--namespaced"}, "RoleBinding/etcd-operator"},
		{"environment", []string{"NAMESPACE=team-a", "SERVICE_ACCOUNT=etcd-operator"}, nil, "ClusterRoleBinding/etcd-operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := runCreateRole(t, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := r.objects["ServiceAccount/etcd-operator"]; !ok {
				t.Errorf("no ServiceAccount; objects %v", r.objects)
			}
			got := subjects(t, r.objects[tc.binding])
			if len(got) != 1 || got[0].Kind != "ServiceAccount" || got[0].Name != "etcd-operator" || got[0].Namespace != "team-a" {
				t.Errorf("subjects %+v", got)
			}
		})
	}
}

func TestCreateRoleRefusesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"--service-account=Not_A_Name"},
		{"--namespace=missing"},
		{"--bogus"},
		{"--operator=etcd-everything"},
	} {
		if _, err := runCreateRole(t, nil, args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// With --operator, the role holds one operator's rules only: those of
// example/rbac/<operator>/, which the binary's tests hold to what it uses.
func TestCreateRoleForOneOperatorGrantsItsOwnRules(t *testing.T) {
	for _, op := range []string{"etcd-operator", "etcd-backup-operator", "etcd-restore-operator"} {
		for _, namespaced := range []bool{false, true} {
			args := []string{"--operator=" + op, "--service-account=" + op, "--role-name=" + op, "--role-binding-name=" + op}
			kind, file := "ClusterRole", "cluster-role-template.yaml"
			if namespaced {
				args = append(args, "--namespaced")
				kind, file = "Role", "role-template.yaml"
			}
			r, err := runCreateRole(t, nil, args...)
			if err != nil {
				t.Fatal(err)
			}
			var got, want rbacv1.ClusterRole
			if err := yaml.Unmarshal(r.objects[kind+"/"+op], &got); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(repoRoot(t), "example", "rbac", op, file))
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			if len(got.Rules) == 0 || !reflect.DeepEqual(got.Rules, want.Rules) {
				t.Errorf("%s (namespaced %v): rules %+v, want those of example/rbac/%s/%s", op, namespaced, got.Rules, op, file)
			}
			if s := subjects(t, r.objects[kind+"Binding/"+op]); len(s) != 1 || s[0].Name != op {
				t.Errorf("%s bound to %+v", op, s)
			}
		}
	}
}

// The role of all three (create_role.sh without --operator) grants exactly
// what the three own roles grant together: no more, no less.
func TestTheRoleOfAllThreeIsTheUnionOfTheirOwn(t *testing.T) {
	grants := func(t *testing.T, files ...string) map[string]bool {
		out := map[string]bool{}
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(repoRoot(t), "example", "rbac", f))
			if err != nil {
				t.Fatal(err)
			}
			var role rbacv1.ClusterRole
			if err := yaml.Unmarshal(data, &role); err != nil {
				t.Fatal(err)
			}
			for _, r := range role.Rules {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							out[g+"/"+res+":"+v] = true
						}
					}
				}
			}
		}
		return out
	}
	for _, file := range []string{"role-template.yaml", "cluster-role-template.yaml"} {
		all := grants(t, file)
		own := grants(t, "etcd-operator/"+file, "etcd-backup-operator/"+file, "etcd-restore-operator/"+file)
		if !reflect.DeepEqual(all, own) {
			t.Errorf("%s grants %v, the three own roles %v", file, all, own)
		}
	}
}
