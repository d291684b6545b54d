package cluster

import (
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// embeddedMember is an in-process etcd server on loopback ports.
type embeddedMember struct {
	name, peerURL, clientURL string
	etcd                     *embed.Etcd
}

// loopbackURLs returns n http URLs on loopback ports that were free a moment
// ago (all listeners are held until every port is picked, so they differ).
func loopbackURLs(t testing.TB, n int) []string {
	t.Helper()
	var urls []string
	for _, port := range etcdtest.FreePorts(t, n) {
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d", port))
	}
	return urls
}

// startEmbedded starts member name with the given peer URL, joining
// initialCluster in the given state, and waits until it serves.
func startEmbedded(t testing.TB, name, peerURL, initialCluster, state string) *embeddedMember {
	t.Helper()
	m := &embeddedMember{name: name, peerURL: peerURL, clientURL: loopbackURLs(t, 1)[0]}
	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = filepath.Join(t.TempDir(), name)
	peer, _ := url.Parse(peerURL)
	client, _ := url.Parse(m.clientURL)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.InitialCluster = initialCluster
	cfg.ClusterState = state
	cfg.InitialClusterToken = "pkg-cluster-test"
	// Errors go to a file next to the data: the removed member logs its own
	// removal as an error, which is expected here.
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(t.TempDir(), name+".log")}
	cfg.UnsafeNoFsync = true // a throwaway data dir; fsync only slows the test
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd %s: %v", name, err)
	}
	m.etcd = e
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd %s failed: %v", name, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("etcd %s not ready after 30s", name)
	}
	return m
}

// TestEtcdAPIAgainstRealEtcd drives the real EtcdAPI implementation against
// embedded etcd: the sequence of calls a scale-up and a scale-down make,
// including etcd's refusal that the loop must recognise as "not now".
func TestEtcdAPIAgainstRealEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd servers")
	}
	t.Parallel()
	ctx := t.Context()
	etcd := NewEtcdAPI()
	peers := loopbackURLs(t, 3)
	first := startEmbedded(t, "m0", peers[0], "m0="+peers[0], embed.ClusterStateFlagNew)
	cc := etcdutil.ClientConfig{Endpoints: []string{first.clientURL}, RequestTimeout: 2 * time.Second, DialTimeout: 2 * time.Second}
	firstID := uint64(first.etcd.Server.ID())

	list, err := etcd.MemberList(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "m0" || list[0].ID != firstID || !slices.Equal(list[0].PeerURLs, []string{peers[0]}) {
		t.Fatalf("member list = %v", list)
	}
	waitFor(t, "a leader", func() bool {
		h, err := etcd.ClusterHealth(ctx, cc)
		return err == nil && h.LeaderID == firstID
	})
	h, err := etcd.ClusterHealth(ctx, cc)
	if err != nil || !h.Healthy() || len(h.Answered()) != 1 {
		t.Fatalf("health = %+v, %v", h, err)
	}

	// MemberAdd registers the second member before it starts.
	added, err := etcd.MemberAdd(ctx, cc, peers[1])
	if err != nil {
		t.Fatal(err)
	}

	// With one of two voters not started, etcd refuses a third member; the
	// loop must read that as "wait", not as a failure.
	_, err = etcd.MemberAdd(ctx, cc, peers[2])
	if err == nil {
		t.Fatal("etcd accepted a member while half of the voters had not started")
	}
	if !isNotReadyForChange(err) {
		t.Errorf("etcd's refusal %q is not recognised as a wait", err)
	}

	second := startEmbedded(t, "m1", peers[1], fmt.Sprintf("m0=%s,m1=%s", peers[0], peers[1]), embed.ClusterStateFlagExisting)
	if uint64(second.etcd.Server.ID()) != added.ID {
		t.Fatalf("started member has ID %x, MemberAdd returned %x", second.etcd.Server.ID(), added.ID)
	}
	cc.Endpoints = []string{first.clientURL, second.clientURL}
	waitFor(t, "both members healthy", func() bool {
		h, err := etcd.ClusterHealth(ctx, cc)
		return err == nil && h.Healthy() && len(h.Answered()) == 2
	})
	list, err = etcd.MemberList(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	if !slices.Equal(names, []string{"m0", "m1"}) {
		t.Fatalf("members = %v", names)
	}

	// Remove the member again (etcd may need a moment to count it as
	// connected, which it reports as a "not now" refusal).
	waitFor(t, "the member is removed", func() bool {
		err := etcd.MemberRemove(ctx, cc, added.ID)
		if err != nil && !isNotReadyForChange(err) {
			t.Fatalf("remove: %v", err)
		}
		return err == nil
	})
	cc.Endpoints = []string{first.clientURL}
	list, err = etcd.MemberList(ctx, cc)
	if err != nil || len(list) != 1 || list[0].ID != firstID {
		t.Fatalf("after remove: %v, %v", list, err)
	}
	if err := etcd.MemberRemove(ctx, cc, added.ID); err != nil {
		t.Errorf("removing a member that is gone: %v", err)
	}
}

// TestEtcdIsReachedAtThePodsAddresses: a pass connects to each member at its
// pod's address in the cache, without looking its name up (which walks the
// pod's DNS search list on every dial); a pod without an address yet is left
// to DNS.
func TestEtcdIsReachedAtThePodsAddresses(t *testing.T) {
	f := newFixture(t, newTestCluster())
	f.withMembers(memberA, memberB, memberC)
	ips := map[string]string{memberA: "10.244.0.11", memberB: "10.244.0.12", memberC: ""}
	for name, ip := range ips {
		f.pod(name, func(p *corev1.Pod) { p.Status.PodIP = ip })
	}
	f.now = f.now.Add(2 * time.Minute) // time for the day-2 look at etcd
	f.mustPass()
	want := map[string]string{}
	for name, ip := range ips {
		if ip != "" {
			want[f.member(name).Addr()] = ip
		}
	}
	if got := f.etcd.healthAddresses; !maps.Equal(got, want) {
		t.Errorf("etcd was asked with addresses %v, want %v", got, want)
	}
}
