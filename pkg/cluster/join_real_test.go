package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// TestPodFirstJoinAgainstRealEtcd is the join of join.go against real etcd:
// the joining member waits, is added as a learner, starts with the
// --initial-cluster it was given before it was a member, and is promoted.
func TestPodFirstJoinAgainstRealEtcd(t *testing.T) {
	t.Parallel()
	urls := loopbackURLs(t, 2)
	seed := startEmbedded(t, "seed", urls[0], "seed="+urls[0], "new")
	joinerURL := urls[1]
	w := etcdutil.MembershipWait{PeerURL: joinerURL, Peers: []string{seed.peerURL}, Client: etcdutil.NewPeerHTTPClient(nil)}
	wait := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		return etcdutil.WaitForMembership(ctx, w, func(error) {})
	}

	if err := wait(300 * time.Millisecond); err == nil {
		t.Fatal("the wait ended before the member was added")
	}

	done := make(chan error, 1)
	go func() { done <- wait(30 * time.Second) }()
	cc := etcdutil.ClientConfig{Endpoints: []string{seed.clientURL}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	api := NewEtcdAPI()
	learner, err := api.MemberAddAsLearner(ctx, cc, joinerURL)
	if err != nil || !learner.IsLearner {
		t.Fatalf("add learner = %+v, %v", learner, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wait after the add: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not end after the add")
	}

	startEmbedded(t, "joiner", joinerURL, "seed="+seed.peerURL+",joiner="+joinerURL, "existing")
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := api.MemberPromote(ctx, cc, learner.ID)
		if err == nil {
			break
		}
		if !isNotReadyForChange(err) || time.Now().After(deadline) {
			t.Fatalf("promote the learner: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := etcdutil.ListMembers(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range resp.Members {
		names = append(names, m.Name)
		if m.IsLearner {
			t.Errorf("member %s is still a learner", m.Name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"joiner", "seed"}) {
		t.Fatalf("members %q, want joiner and seed started", names)
	}
}
