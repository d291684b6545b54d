//go:build e2e

package e2e

import (
	"slices"
	"testing"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestKilledMemberIsReplaced is the original's TestOneMemberRecovery: a member
// whose pod is killed (as by a node failure) is removed from etcd and replaced by a
// new member, and the data survives on the others.
func TestKilledMemberIsReplaced(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("recover")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/recovery", "survives", dataTimeout); err != nil {
		t.Fatal(err)
	}

	victim := pods[1]
	if err := f.KillPod(ctx, opNS, victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s", victim)
	_, after := waitReady(t, opNS, name, 3, changeTimeout, victim)

	members, err := f.MemberList(ctx, opNS, name, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range members {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, after) {
		t.Errorf("etcd members %v differ from the pods %v (the dead member must be removed from etcd)", names, after)
	}
	if err := f.ExpectValue(ctx, opNS, name, false, "/e2e/recovery", "survives", dataTimeout); err != nil {
		t.Error(err)
	}
}
