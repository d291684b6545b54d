//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

const (
	// newest36 and newest37 are the newest 3.6 and 3.7 patches the local cluster
	// builds (hack/local-cluster/lib.sh).
	newest36 = "3.6.16"
	newest37 = "3.7.3"
)

// TestScaleUpFromThreeToFive is the original's TestResizeCluster3to5, plus a check
// that etcd itself lists the five members and the data is still there; on
// etcd 3.5, where etcd takes one learner at a time, and on 3.6 and 3.7, where
// the operator adds the two new members' learners side by side.
func TestScaleUpFromThreeToFive(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"3.5.21", "3.6.6", newest37} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			scaleUpFromThreeToFive(t, version)
		})
	}
}

func scaleUpFromThreeToFive(t *testing.T, version string) {
	ctx := t.Context()
	name := framework.UniqueName("grow")
	createCluster(t, framework.NewCluster(name, 3, version))
	_, before := waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/resize", "grown", dataTimeout); err != nil {
		t.Fatal(err)
	}

	if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"size": 5}); err != nil {
		t.Fatal(err)
	}
	_, after := waitReady(t, opNS, name, 5, changeTimeout)
	for _, p := range before {
		if !slices.Contains(after, p) {
			t.Errorf("member %s was replaced while scaling up (before %v, after %v)", p, before, after)
		}
	}
	members, err := f.MemberList(ctx, opNS, name, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 5 {
		t.Errorf("etcd lists %d members, want 5: %+v", len(members), members)
	}
	for _, m := range members {
		if m.IsLearner {
			t.Errorf("member %s is still a learner", m.Name)
		}
	}
	if err := f.ExpectValue(ctx, opNS, name, false, "/e2e/resize", "grown", dataTimeout); err != nil {
		t.Error(err)
	}
}

// TestScaleDownFromFiveToThreeKeepsTheLeader is the original's
// TestResizeCluster5to3, with the fix of a defect of the original: scaling down must not
// remove the leader, which would cost an election for nothing.
func TestScaleDownFromFiveToThreeKeepsTheLeader(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("shrink")
	createCluster(t, framework.NewCluster(name, 5, "3.5.21"))
	waitReady(t, opNS, name, 5, bootstrapTimeout(5))
	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/resize", "shrunk", dataTimeout); err != nil {
		t.Fatal(err)
	}
	leader, err := f.Leader(ctx, opNS, name, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader before scaling down: %s", leader.Name)

	if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"size": 3}); err != nil {
		t.Fatal(err)
	}
	_, after := waitReady(t, opNS, name, 3, changeTimeout)
	if !slices.Contains(after, leader.Name) {
		t.Errorf("the leader %s was removed while scaling down; members left: %v", leader.Name, after)
	}
	// Right after a removal the client Service may still send a connection to
	// the removed member until kube-proxy catches up; clients retry, so does
	// the test.
	var names []string
	err = framework.WaitFor(ctx, dataTimeout, framework.Poll, "etcd's member list through the client service",
		func(ctx context.Context) (bool, string, error) {
			members, err := f.MemberList(ctx, opNS, name, false)
			if err != nil {
				return false, err.Error(), nil
			}
			names = nil
			for _, m := range members {
				names = append(names, m.Name)
			}
			slices.Sort(names)
			return true, "", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, after) {
		t.Errorf("etcd members %v differ from the pods %v", names, after)
	}
	if err := f.ExpectValue(ctx, opNS, name, false, "/e2e/resize", "shrunk", dataTimeout); err != nil {
		t.Error(err)
	}
}
