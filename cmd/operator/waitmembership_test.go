package main

import (
	"io"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

func TestWaitMembershipArgumentsRoundTrip(t *testing.T) {
	for _, a := range []k8sutil.MembershipWaitArgs{
		{PeerURL: "http://c.x.ns.svc:2380", Peers: []string{"http://a.x.ns.svc:2380", "http://b.x.ns.svc:2380"}, Timeout: 5 * time.Minute},
		{PeerURL: "https://c:2380", Peers: []string{"https://a:2380"}, Cert: "/p/peer.crt", Key: "/p/peer.key", CA: "/p/peer-ca.crt", Timeout: time.Second},
		{PeerURL: "http://c:2380", Peers: []string{"http://a:2380"}},
	} {
		got, err := parseWaitMembership(a.Args(), io.Discard)
		if err != nil {
			t.Fatalf("parse(%q): %v", a.Args(), err)
		}
		if !reflect.DeepEqual(got, a) {
			t.Errorf("parse(encode(%+v)) = %+v", a, got)
		}
	}
}

// TestWaitMembershipParsesWhatThePodRuns parses the command line of a real
// joining pod's init container, with and without peer TLS.
func TestWaitMembershipParsesWhatThePodRuns(t *testing.T) {
	for _, secure := range []bool{false, true} {
		cl := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}, Spec: api.ClusterSpec{Size: 3, Version: "3.5.21"}}
		if secure {
			cl.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{Member: &api.MemberSecret{PeerSecret: "p", ServerSecret: "s"}, OperatorSecret: "o"}}
		}
		member := func(name string) *etcdutil.Member {
			return &etcdutil.Member{Name: name, Namespace: "ns", ClusterName: "x", SecurePeer: secure, SecureClient: secure}
		}
		members := etcdutil.NewMemberSet(member("x-a"), member("x-b"), member("x-c"))
		pairs := members.PeerURLPairs()
		pod := k8sutil.NewEtcdPod(cl.WithDefaults(), member("x-c"), "3.5.21", pairs, k8sutil.ClusterStateExisting, "",
			k8sutil.WithMembershipWait(member("x-c"), pairs, k8sutil.MembershipWait{Image: "op:1", Timeout: time.Minute}))
		i := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == k8sutil.MembershipWaitContainerName })
		if i < 0 {
			t.Fatal("no wait-membership container")
		}
		cmd := pod.Spec.InitContainers[i].Command
		if cmd[0] != k8sutil.OperatorCommand || cmd[1] != k8sutil.MembershipWaitSubcommand {
			t.Fatalf("command %q does not run the subcommand", cmd)
		}
		a, err := parseWaitMembership(cmd[2:], io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{member("x-a").PeerURL(), member("x-b").PeerURL()}
		if a.PeerURL != member("x-c").PeerURL() || !slices.Equal(a.Peers, want) || a.Timeout != time.Minute {
			t.Errorf("secure=%v: parsed %+v, want peers %q", secure, a, want)
		}
		if secure != (a.Cert == "/etc/etcdtls/member/peer-tls/peer.crt") {
			t.Errorf("secure=%v: certificate %q", secure, a.Cert)
		}
	}
}

func TestWaitMembershipRejectsBadArguments(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	for _, args := range [][]string{
		{"--peer-urls=http://a:2380"},
		{"--member-peer-url=http://c:2380"},
		{"--member-peer-url=http://c:2380", "--peer-urls=http://a:2380", "extra"},
		{"--member-peer-url=http://c:2380", "--peer-urls=http://a:2380", "--timeout=-1s"},
		{"--member-peer-url=http://c:2380", "--peer-urls=http://a:2380", "--cert=/no/such/file", "--key=/no/such", "--cacert=/no/such"},
		{"--no-such-flag"},
	} {
		if code := waitMembership(t.Context(), args, logrus.NewEntry(log)); code != 2 {
			t.Errorf("waitMembership(%q) = %d, want 2", args, code)
		}
	}
}
