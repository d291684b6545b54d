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

// TestWhatTheOriginalsRolesLack: the original's roles, as published (kept in
// test/e2e/testdata/original), lack only what docs/user-guide/permissions.md
// marks new, and the operator works around each lack, as the tests named
// show.
func TestWhatTheOriginalsRolesLack(t *testing.T) {
	gaps, err := operatorrun.OriginalRoleGaps("../..", func(createCRD bool) []operatorrun.Need {
		return needs("ops", "ops", createCRD)
	}, map[string][]string{
		// The restore keeps its status, and with it its progress, in an
		// annotation, and completes all the same.
		"etcdrestores/status": {
			"pkg/restore.TestWithoutTheStatusSubresourceTheRestoreKeepsItsProgressOnItself",
			"pkg/restore.TestARestoreCompletesOrLeavesTheClusterWhateverTheRoleLacks",
		},
		// The restored cluster's first status is not stored; etcd-operator
		// adopts the seed all the same.
		"etcdclusters/status": {
			"pkg/restore.TestWithoutTheStatusSubresourceTheRestoreKeepsItsProgressOnItself",
			"pkg/restore.TestARestoreCompletesOrLeavesTheClusterWhateverTheRoleLacks",
		},
		// The restore's token is kept on the EtcdRestore, and the backup
		// server serves it only to the seed pod's address.
		"secrets": {
			"pkg/restore.TestWithoutTheRightToCreateSecretsTheSeedGetsTheTokenFromTheRestore",
			"pkg/restore.TestATokenKeptOnTheRestoreOpensTheBackupOnlyToTheSeedsAddress",
		},
		// The original's Endpoints lock.
		"leases": {"pkg/operatorrun.TestRunAsLeaderElectsOnTheOriginalsEndpointsLock"},
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
	gaps, err := operatorrun.OwnRoleGaps("../../example/rbac", "etcd-restore-operator", func(cw bool) []operatorrun.Need {
		return needs("ops", map[bool]string{true: "", false: "ops"}[cw], true)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, gap := range gaps {
		t.Error(gap)
	}
}
