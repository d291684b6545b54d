package cluster

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

// waitArgs are the arguments the pod's wait-membership container passes to
// the subcommand, as k8sutil builds them for member name of cl.
func waitArgs(t *testing.T, mods []func(*fixture), name string) []string {
	t.Helper()
	f := newFixture(t, newTestCluster())
	for _, m := range mods {
		m(f)
	}
	cl := f.cl.WithDefaults()
	members := etcdutil.NewMemberSet(f.member(memberA), f.member(memberB), f.member(name))
	pairs := members.PeerURLPairs()
	pod := k8sutil.NewEtcdPod(cl, f.member(name), pairs, k8sutil.ClusterStateExisting, "",
		k8sutil.WithMembershipWait(f.member(name), pairs, k8sutil.MembershipWait{Image: "op:1", Timeout: 5 * time.Minute}))
	for _, c := range pod.Spec.InitContainers {
		if c.Name == k8sutil.MembershipWaitContainerName {
			if c.Command[0] != k8sutil.OperatorCommand || c.Command[1] != k8sutil.MembershipWaitSubcommand {
				t.Fatalf("command %q does not run the subcommand", c.Command)
			}
			return c.Command[2:]
		}
	}
	t.Fatalf("the pod has no %s container", k8sutil.MembershipWaitContainerName)
	return nil
}

func TestWaitFlagsAreWhatThePodPasses(t *testing.T) {
	args := waitArgs(t, nil, memberC)
	w, timeout, err := parseWaitFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, newTestCluster())
	if w.PeerURL != f.member(memberC).PeerURL() || timeout != 5*time.Minute {
		t.Errorf("peer URL %s, timeout %v", w.PeerURL, timeout)
	}
	if want := []string{f.member(memberA).PeerURL(), f.member(memberB).PeerURL()}; !slices.Equal(w.Peers, want) {
		t.Errorf("peers %q, want the other members' %q", w.Peers, want)
	}

	// With peer TLS the subcommand reads the peer certificate the pod mounts.
	tlsArgs := waitArgs(t, []func(*fixture){func(f *fixture) { withTLS(f.cl) }}, memberC)
	_, _, err = parseWaitFlags(tlsArgs, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "/etc/etcdtls/member/peer-tls/peer.crt") {
		t.Errorf("parse with TLS files absent = %v, want an error naming the mounted peer certificate", err)
	}
}

func TestWaitMembershipMainRejectsBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"--peer-urls=http://a:2380"},
		{"--member-peer-url=http://c:2380"},
		{"--member-peer-url=http://c:2380", "--peer-urls=http://a:2380", "extra"},
		{"--member-peer-url=http://c:2380", "--peer-urls=http://a:2380", "--timeout=-1s"},
		{"--no-such-flag"},
	} {
		if code := WaitMembershipMain(t.Context(), args, quietLog()); code != 2 {
			t.Errorf("WaitMembershipMain(%q) = %d, want 2", args, code)
		}
	}
}

// TestPodFirstJoinAgainstRealEtcd is the join of join.go against real etcd:
// the joining member waits, is added as a learner, starts with the
// --initial-cluster it was given before it was a member, and is promoted.
func TestPodFirstJoinAgainstRealEtcd(t *testing.T) {
	t.Parallel()
	urls := loopbackURLs(t, 2)
	seed := startEmbedded(t, "seed", urls[0], "seed="+urls[0], "new")
	joinerURL := urls[1]
	args := []string{"--member-peer-url=" + joinerURL, "--peer-urls=" + seed.peerURL}

	if code := WaitMembershipMain(t.Context(), append(args, "--timeout=300ms"), quietLog()); code != 1 {
		t.Fatalf("wait before the add = %d, want 1 (timed out)", code)
	}

	done := make(chan int, 1)
	go func() { done <- WaitMembershipMain(t.Context(), append(args, "--timeout=30s"), quietLog()) }()
	cc := etcdutil.ClientConfig{Endpoints: []string{seed.clientURL}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	api := NewEtcdAPI()
	learner, err := api.MemberAddAsLearner(ctx, cc, joinerURL)
	if err != nil || !learner.IsLearner {
		t.Fatalf("add learner = %+v, %v", learner, err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("wait after the add = %d, want 0", code)
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
