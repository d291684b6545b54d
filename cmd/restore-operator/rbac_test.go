package main

import (
	"os"
	"strings"
	"testing"

	"github.com/openetcd/etcd-operator/pkg/util/operatorrun"
)

// TestExampleRolesGrantWhatTheBinaryUses holds the rules the binary checks
// for at start to the roles users install: a rule missing from either is a
// bug.
func TestExampleRolesGrantWhatTheBinaryUses(t *testing.T) {
	for _, file := range []string{"cluster-role-template.yaml", "role-template.yaml"} {
		data, err := os.ReadFile("../../example/rbac/" + file)
		if err != nil {
			t.Fatal(err)
		}
		rules, err := operatorrun.RoleRules(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, cw := range []bool{false, true} {
			for _, n := range needs("ops", map[bool]string{true: "", false: "ops"}[cw], true) {
				// The namespaced Role is for -create-crd=false.
				if file == "role-template.yaml" && n.Resource == "customresourcedefinitions" {
					continue
				}
				if missing := operatorrun.NotGrantedBy(rules, n.Rule); len(missing) > 0 {
					t.Errorf("%s does not grant %s on %s", file, strings.Join(missing, ", "), n.Resource)
				}
			}
		}
	}
}
