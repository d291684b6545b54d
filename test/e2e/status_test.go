//go:build e2e

package e2e

import (
	"testing"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestSingleMemberClusterReportsItsReadyMember is the original's
// TestReadyMembersStatus: the smallest cluster lists its one member as ready.
func TestSingleMemberClusterReportsItsReadyMember(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("single")
	createCluster(t, framework.NewCluster(name, 1, "3.5.21"))
	cl, pods := waitReady(t, opNS, name, 1, bootstrapTimeout(1))
	if got := cl.Status.Members.Ready; len(got) != 1 || got[0] != pods[0] {
		t.Errorf("status.members.ready = %v, want the one pod %v", got, pods)
	}
	if cl.Status.Size != 1 {
		t.Errorf("status.size = %d, want 1", cl.Status.Size)
	}
}
