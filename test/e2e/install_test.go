//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// ignoreHold is how long a cluster that no operator may manage is watched for
// being touched anyway.
const ignoreHold = 15 * time.Second

// TestNamespacedOperatorRunsWithoutClusterPermissions installs the operator the
// way README describes for users without cluster-admin rights: create_role.sh
// --namespaced (a Role, no ClusterRole), the CRDs applied from example/crd/ by an
// admin, and --create-crd=false. It must run a cluster with nothing more.
func TestNamespacedOperatorRunsWithoutClusterPermissions(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "namespaced")
	installOperator(t, ns, framework.Install{Namespaced: true})
	name := framework.UniqueName("ns")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 1, "3.5.21"))
	waitReady(t, ns, name, 1, bootstrapTimeout(1))
	if err := f.PutAndGet(t.Context(), ns, name, false, "/e2e/namespaced", "ok", dataTimeout); err != nil {
		t.Fatal(err)
	}
}

// TestClusterWideOperatorManagesAnnotatedClustersOfOtherNamespaces: a cluster
// annotated etcd.database.coreos.com/scope=clusterwide in namespace B is left alone
// by the namespaced operator of B, and run by the --cluster-wide operator of A.
func TestClusterWideOperatorManagesAnnotatedClustersOfOtherNamespaces(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	nsA := newNamespace(t, "cw-operator")
	nsB := newNamespace(t, "cw-clusters")
	installOperator(t, nsB, framework.Install{Namespaced: true})

	name := framework.UniqueName("cw")
	cl := framework.NewCluster(name, 1, "3.5.21")
	cl.Annotations = map[string]string{api.ScopeAnnotation: api.ScopeClusterWide}
	createClusterIn(t, nsB, nsA, cl)

	err := framework.Holds(ctx, ignoreHold, framework.Poll, "the namespaced operator of "+nsB+" to ignore the annotated cluster",
		func(ctx context.Context) (bool, string, error) {
			got, err := f.GetCluster(ctx, nsB, name)
			if err != nil {
				return true, "", nil
			}
			pods, err := f.ClusterPods(ctx, nsB, name)
			if err != nil {
				return true, "", nil
			}
			return got.Status.Phase == "" && len(pods) == 0,
				fmt.Sprintf("status %s, pods %s", framework.DescribeStatus(got), framework.DescribePods(pods)), nil
		})
	if err != nil {
		t.Fatal(err)
	}

	installOperator(t, nsA, framework.Install{ClusterWide: true})
	waitReady(t, nsB, name, 1, bootstrapTimeout(1))
	if err := f.PutAndGet(ctx, nsB, name, false, "/e2e/clusterwide", "ok", dataTimeout); err != nil {
		t.Fatal(err)
	}
	if logs := f.DeploymentLogs(ctx, nsB, framework.OperatorDeployment); strings.Contains(logs, name) {
		t.Errorf("the namespaced operator of %s mentions the cluster-wide cluster %s in its log:\n%s",
			nsB, name, lastLines(framework.FilterLines(logs, name), 20))
	}
	if logs := f.DeploymentLogs(ctx, nsA, framework.OperatorDeployment); !strings.Contains(logs, name) {
		t.Errorf("the cluster-wide operator of %s never mentions %s in its log", nsA, name)
	}
}
