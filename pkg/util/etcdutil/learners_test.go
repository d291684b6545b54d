package etcdutil

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// etcd 3.6's --max-learners (ETCD_MAX_LEARNERS) lets more than one learner be
// in the membership at once (3.5 hard-codes one), so that the next joiner can
// be added before the previous one is promoted and etcd's 5 s health
// interval before a MemberAdd is paid once per pair of joins: the strict
// reconfiguration check wants the serving member connected to every voting
// member for 5 s, and learners do not vote. These tests pin that behaviour on
// real 3.6 processes.

// maxLearners2 is the environment of members that allow two learners.
const maxLearners2 = "ETCD_MAX_LEARNERS=2"

func etcd36(t *testing.T) string {
	t.Helper()
	dir := etcdtest.BinDir36(t, "etcd "+etcdtest.Version36+" is needed to test etcd 3.6's --max-learners", "etcd")
	return filepath.Join(dir, "etcd")
}

// initialCluster is --initial-cluster naming ms.
func initialCluster(ms ...*processMember) string {
	pairs := make([]string, 0, len(ms))
	for _, m := range ms {
		pairs = append(pairs, m.name+"="+m.peerURL)
	}
	return strings.Join(pairs, ",")
}

// seedAndTwoJoiners is a one-member 3.6 cluster whose members allow two
// learners, and two members to join it, not started.
func seedAndTwoJoiners(t *testing.T) (c *processCluster, seed, l1, l2 *processMember) {
	t.Helper()
	c = startProcessCluster(t, etcd36(t), 1, maxLearners2)
	return c, c.members[0], c.newMember("l1"), c.newMember("l2")
}

// promoteWhenReady promotes a learner, asking again while etcd says it has
// not caught up with the leader yet.
func promoteWhenReady(t *testing.T, cfg ClientConfig, name string, id uint64) {
	t.Helper()
	poll(t, 20*time.Second, "etcd promotes "+name, func() (bool, string) {
		err := PromoteMember(t.Context(), cfg, id)
		if err == nil {
			return true, ""
		}
		if errors.Is(err, rpctypes.ErrMemberLearnerNotReady) || errors.Is(err, rpctypes.ErrMemberNotEnoughStarted) || errors.Is(err, rpctypes.ErrUnhealthy) {
			return false, err.Error()
		}
		t.Fatalf("promote %s: %v", name, err)
		return false, ""
	})
}

// TestTwoLearnersInFlightOn36 is a scale from one member to three with both
// joiners in flight at once: the second learner is added while the first is
// still a learner, each starts with the membership of its start, and both
// are promoted.
func TestTwoLearnersInFlightOn36(t *testing.T) {
	t.Parallel()
	c, seed, l1, l2 := seedAndTwoJoiners(t)
	ctx := t.Context()
	cfg := ClientConfig{Endpoints: []string{seed.clientURL}}

	a1, err := AddLearner(ctx, cfg, l1.peerURL)
	if err != nil || !a1.IsLearner {
		t.Fatalf("add the first learner = %+v, %v", a1, err)
	}
	c.start(l1, initialCluster(seed, l1), "existing")
	c.waitServing(l1)

	// No promotion between the two adds, and no wait either: the only
	// voting member is the seed, which the check counts as connected.
	a2, err := AddLearner(ctx, cfg, l2.peerURL)
	if err != nil || !a2.IsLearner {
		t.Fatalf("add a second learner while %s is one = %+v, %v; want it added with ETCD_MAX_LEARNERS=2", l1.name, a2, err)
	}
	if _, err := AddLearner(ctx, cfg, deadEndpoint(t)); !errors.Is(err, rpctypes.ErrTooManyLearners) {
		t.Fatalf("add a third learner = %v; want %v, the limit being 2", err, rpctypes.ErrTooManyLearners)
	}
	c.start(l2, initialCluster(seed, l1, l2), "existing")
	c.waitServing(l2)

	promoteWhenReady(t, cfg, l1.name, a1.ID)
	promoteWhenReady(t, cfg, l2.name, a2.ID)
	resp, err := ListMembers(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Members {
		if m.IsLearner {
			t.Errorf("member %s (%x) is still a learner", m.Name, m.ID)
		}
	}
	if got, want := memberNames(resp.Members), []string{"l1", "l2", "p0"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("members %q, want %q", got, want)
	}
	waitHealthy(t, ClientConfig{Endpoints: c.endpoints()}, 3)
}

// TestLearnerStartsWithTheMembershipOfItsStart: a joining member's
// --initial-cluster must name every member of the membership it starts into,
// learners included. A joiner whose flags were fixed before the next learner
// was added (a pod made then) cannot start once that learner is in, so the
// next add has to wait until the previous joiner has started, or the previous
// joiner has to name the next one.
func TestLearnerStartsWithTheMembershipOfItsStart(t *testing.T) {
	t.Parallel()
	c, seed, l1, l2 := seedAndTwoJoiners(t)
	ctx := t.Context()
	cfg := ClientConfig{Endpoints: []string{seed.clientURL}}
	for _, l := range []*processMember{l1, l2} {
		if _, err := AddLearner(ctx, cfg, l.peerURL); err != nil {
			t.Fatalf("add learner %s: %v", l.name, err)
		}
	}

	c.start(l1, initialCluster(seed, l1), "existing")
	select {
	case <-l1.done:
	case <-time.After(startTimeout):
		t.Fatalf("%s started with an --initial-cluster that leaves out %s, which is in the membership: %s", l1.name, l2.name, l1.log.Tail(2000))
	}
	if out := l1.log.String(); !strings.Contains(out, "member count is unequal") {
		t.Fatalf("%s exited, but not for the member count: %s", l1.name, l1.log.Tail(2000))
	}

	// The same member, on the same (empty) data directory, starts once its
	// flags name the whole membership.
	c.start(l1, initialCluster(seed, l1, l2), "existing")
	c.waitServing(l1)
}

// TestSecondLearnerRefusedByDefaultOn36: without ETCD_MAX_LEARNERS, etcd 3.6
// keeps 3.5's limit of one learner, and says so in an error of its own
// (rpctypes.ErrTooManyLearners), not one of the strict reconfiguration
// check's refusals; the cluster package waits it out too, as the membership
// is unchanged.
func TestSecondLearnerRefusedByDefaultOn36(t *testing.T) {
	t.Parallel()
	c := startProcessCluster(t, etcd36(t), 1)
	ctx := t.Context()
	cfg := ClientConfig{Endpoints: c.endpoints()}
	if _, err := AddLearner(ctx, cfg, deadEndpoint(t)); err != nil {
		t.Fatalf("add the first learner: %v", err)
	}
	_, err := AddLearner(ctx, cfg, deadEndpoint(t))
	if !errors.Is(err, rpctypes.ErrTooManyLearners) {
		t.Fatalf("add a second learner = %v; want %v", err, rpctypes.ErrTooManyLearners)
	}
	t.Logf("the refusal: %v", err)
	for _, notNow := range []error{rpctypes.ErrUnhealthy, rpctypes.ErrMemberNotEnoughStarted, rpctypes.ErrMemberLearnerNotReady} {
		if errors.Is(err, notNow) || strings.Contains(err.Error(), notNow.Error()) {
			t.Errorf("the refusal %q reads as %q, a refusal that passes by itself", err, notNow)
		}
	}
}

// TestSecondLearnerSplitsAMemberWithoutTheVariable: the limit is checked
// again when each member applies the change, against that member's own
// setting. A member started without ETCD_MAX_LEARNERS drops the second
// learner that the others, and the MemberAdd's caller, take as added: its
// membership differs from theirs from then on. So two learners may be in
// flight only once every member, learners included, runs with the variable.
func TestSecondLearnerSplitsAMemberWithoutTheVariable(t *testing.T) {
	t.Parallel()
	c, seed, l1, l2 := seedAndTwoJoiners(t)
	ctx := t.Context()
	cfg := ClientConfig{Endpoints: []string{seed.clientURL}}
	if _, err := AddLearner(ctx, cfg, l1.peerURL); err != nil {
		t.Fatal(err)
	}
	c.env = nil
	c.start(l1, initialCluster(seed, l1), "existing")
	c.env = []string{maxLearners2}
	c.waitServing(l1)

	if _, err := AddLearner(ctx, cfg, l2.peerURL); err != nil {
		t.Fatalf("add a second learner through the seed, which allows two: %v", err)
	}
	peers := NewPeerHTTPClient(nil)
	count := func(m *processMember) (int, error) {
		ms, err := PeerMembership(ctx, peers, m.peerURL)
		return len(ms), err
	}
	if n, err := count(seed); n != 3 || err != nil {
		t.Fatalf("the seed's membership has %d members (%v), want 3", n, err)
	}
	waitFor(t, l1.name+" refuses the second learner", func() (bool, string) {
		return strings.Contains(l1.log.String(), "too many learner members"), l1.log.Tail(1000)
	})
	if n, err := count(l1); n != 2 || err != nil {
		t.Fatalf("%s's membership has %d members (%v); want 2, without the learner it refused", l1.name, n, err)
	}
}
