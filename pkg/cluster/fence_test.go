package cluster

import (
	"errors"
	"testing"
)

// A leader frozen while a standby took its Lease over wakes with caches as old
// as the freeze; until the elector gives up it must change nothing.
func TestPassChangesNothingWhenTheProcessMayNotAct(t *testing.T) {
	f := newFixture(t, newTestCluster(withSize(5)))
	f.withMembers(memberA, memberB, memberC)
	f.pod(memberA)
	f.pod(memberB)
	f.pod(memberC)
	notLeading := errors.New("not leading: the lock was last renewed 21s ago")
	f.c.cfg.MayAct = func() error { return notLeading }

	if err := f.pass(); !errors.Is(err, notLeading) {
		t.Fatalf("pass = %v, want the fence's error", err)
	}
	expect(t, "pod actions", f.podActions(), nil)
	expect(t, "etcd writes", f.etcdWrites(), nil)
	if n := f.statusWrites(); n != 0 {
		t.Errorf("%d status writes, want none", n)
	}

	// Leading again: the same pass scales up.
	f.c.cfg.MayAct = func() error { return nil }
	f.mustPass()
	expect(t, "pod actions when leading", f.podActions(), []string{"create pods example-new0000001"})
}
