package main

import (
	"os"
	"strings"
	"testing"

	"github.com/openetcd/etcd-operator/pkg/operatorrun"
)

// TestExampleRolesGrantWhatTheBinaryUses holds the rules the binary checks
// for at start to the roles users install: a rule missing from either is a
// bug.
func TestExampleRolesGrantWhatTheBinaryUses(t *testing.T) {
	gaps, err := operatorrun.ExampleRoleGaps("../../example/rbac", func(cw bool) []operatorrun.Need {
		return needs("ops", options{createCRD: true, clusterWide: cw})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, gap := range gaps {
		t.Error(gap)
	}
}

// TestWhatTheOriginalsRolesLack: the original's roles, as published (kept in
// test/e2e/testdata/original), lack only what docs/user-guide/permissions.md
// marks new: the lock aside, the status subresource, disruption budgets and
// creating secrets (issued TLS).
func TestWhatTheOriginalsRolesLack(t *testing.T) {
	for _, file := range []string{"cluster-role-template.yaml", "role-template.yaml"} {
		data, err := os.ReadFile("../../test/e2e/testdata/original/" + file)
		if err != nil {
			t.Fatal(err)
		}
		rules, err := operatorrun.RoleRules(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var lacking []string
		for _, n := range needs("ops", options{createCRD: file == "cluster-role-template.yaml"}) {
			if len(operatorrun.NotGrantedBy(rules, n.Rule)) > 0 {
				lacking = append(lacking, n.Resource)
			}
		}
		if got := strings.Join(lacking, ","); got != "etcdclusters/status,poddisruptionbudgets,secrets" {
			t.Errorf("the original's %s lacks %s", file, got)
		}
		if len(operatorrun.NotGrantedBy(rules, operatorrun.LeaseRule("ops"))) == 0 || len(operatorrun.NotGrantedBy(rules, operatorrun.EndpointsRule("ops"))) > 0 {
			t.Errorf("the original's %s should grant endpoints and not leases", file)
		}
	}
}

// TestOwnRoleGrantsExactlyWhatTheBinaryUses: the role of this operator alone
// (create_role.sh --operator, the chart) grants every rule it uses and no verb
// it does not.
func TestOwnRoleGrantsExactlyWhatTheBinaryUses(t *testing.T) {
	gaps, err := operatorrun.OwnRoleGaps("../../example/rbac", "etcd-operator", func(cw bool) []operatorrun.Need {
		return needs("ops", options{createCRD: true, clusterWide: cw})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, gap := range gaps {
		t.Error(gap)
	}
}
