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
// marks new (the status subresource, disruption budgets, the Lease lock and
// creating and updating secrets for issued TLS),
// and the operator works around each lack, as the tests named show.
func TestWhatTheOriginalsRolesLack(t *testing.T) {
	gaps, err := operatorrun.OriginalRoleGaps("../..", func(createCRD bool) []operatorrun.Need {
		return needs("ops", options{createCRD: createCRD})
	}, map[string][]string{
		// Status written with an update of the object, on a CRD installed
		// without the subresource.
		"etcdclusters/status": {
			"pkg/util/statusutil.TestARoleWithoutTheStatusRuleFallsBackAndNamesTheRule",
			"pkg/operatorrun.TestCRDForRole",
		},
		// No budgets, the clusters run all the same, and get their budget
		// once the rule is added.
		"poddisruptionbudgets": {
			"pkg/controller.TestClustersGetADisruptionBudgetWhenAllowed",
			"pkg/controller.TestARuleAddedLaterGivesClustersTheirBudget",
		},
		// The original's Endpoints lock.
		"leases": {"pkg/operatorrun.TestRunAsLeaderElectsOnTheOriginalsEndpointsLock"},
		// Only clusters asking for issued TLS need it: they wait, or their
		// renewals fail, and their status names the rule.
		"secrets": {"pkg/cluster.TestIssuedTLS", "pkg/cluster.TestRenewal"},
		// Only clusters whose certificates a cert-manager issuer issues
		// need them: they wait, and their status names the rule.
		"certificates":        {"pkg/cluster.TestCertManagerIssuesTheCertificates"},
		"certificates/status": {"pkg/cluster.TestCertManagerIssuesTheCertificates"},
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
