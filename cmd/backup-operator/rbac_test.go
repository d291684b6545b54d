package main

import (
	"testing"

	"github.com/openetcd/etcd-operator/pkg/operatorrun"
)

// TestExampleRolesGrantWhatTheBinaryUses holds the rules the binary checks
// for at start to the roles users install: a rule missing from either is a
// bug.
func TestExampleRolesGrantWhatTheBinaryUses(t *testing.T) {
	gaps, err := operatorrun.ExampleRoleGaps("../../example/rbac", func(cw bool) []operatorrun.Need {
		return needs("ops", map[bool]string{true: "", false: "ops"}[cw], true)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, gap := range gaps {
		t.Error(gap)
	}
}

// TestOwnRoleGrantsExactlyWhatTheBinaryUses: the role of this operator alone
// (create_role.sh --operator, the chart) grants every rule it uses and no verb
// it does not.
func TestOwnRoleGrantsExactlyWhatTheBinaryUses(t *testing.T) {
	gaps, err := operatorrun.OwnRoleGaps("../../example/rbac", "etcd-backup-operator", func(cw bool) []operatorrun.Need {
		return needs("ops", map[bool]string{true: "", false: "ops"}[cw], true)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, gap := range gaps {
		t.Error(gap)
	}
}
