package cluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clienttesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// stageOfPodFor is the stage of the pod NewEtcdPod makes for m.
func stageOfPodFor(t *testing.T, s *snapshot, m *etcdutil.Member) k8sutil.TLSStage {
	t.Helper()
	p := k8sutil.NewEtcdPod(s.spec, m, s.spec.Spec.Version, etcdutil.NewMemberSet(m).PeerURLPairs(), k8sutil.ClusterStateExisting, "")
	form, ok := k8sutil.MemberTLSOf(p)
	if !ok {
		t.Fatalf("the flags of pod %s say nothing of its TLS", m.Name)
	}
	// A member serving both schemes advertises http, which it serves
	// whichever way the switch goes.
	if st := form.Stage(); st == k8sutil.TLSCertificates || st == k8sutil.TLSPeersSecure {
		if !slices.Contains(p.Spec.Containers[0].Command, "--advertise-client-urls=http://"+m.Addr()+":2379") {
			t.Errorf("pod %s in stage %s advertises no http client URL: %v", m.Name, st, p.Spec.Containers[0].Command)
		}
	}
	return form.Stage()
}

func TestPodsMadeDuringATLSSwitchAreInTheStageMembersMoveTo(t *testing.T) {
	on, off := issuedSecrets, spec(func(*api.EtcdCluster) {})
	tests := []struct {
		name string
		mods []snapMod
		// newMember and restarted are the stages of the pod of a new
		// member and of memberC restarted on its claim; dialsHTTPS, the
		// operator's scheme.
		newMember, restarted k8sutil.TLSStage
		dialsHTTPS           bool
	}{
		{"plain, not switching", mods(inTLSStage(k8sutil.TLSPlain, memberA, memberB, memberC)), k8sutil.TLSPlain, k8sutil.TLSPlain, false},
		{"on: every member plain", mods(on, inTLSStage(k8sutil.TLSPlain, memberA, memberB, memberC)), k8sutil.TLSCertificates, k8sutil.TLSCertificates, false},
		{"on: plain and certificates", mods(on, inTLSStage(k8sutil.TLSPlain, memberA, memberB, memberC), inTLSStage(k8sutil.TLSCertificates, memberA)), k8sutil.TLSCertificates, k8sutil.TLSCertificates, false},
		{"on: every member holds certificates", mods(on, inTLSStage(k8sutil.TLSCertificates, memberA, memberB, memberC)), k8sutil.TLSPeersSecure, k8sutil.TLSCertificates, true},
		{"on: certificates and peers secure, a member etcd records on http restarted", mods(on, inTLSStage(k8sutil.TLSCertificates, memberA, memberB, memberC), inTLSStage(k8sutil.TLSPeersSecure, memberA)), k8sutil.TLSPeersSecure, k8sutil.TLSCertificates, true},
		{"on: every peer secure", mods(on, inTLSStage(k8sutil.TLSPeersSecure, memberA, memberB, memberC)), k8sutil.TLSSecure, k8sutil.TLSSecure, true},
		{"on: a member etcd still records on http restarted once the others reached peers secure", mods(on, inTLSStage(k8sutil.TLSPeersSecure, memberA, memberB, memberC), peerURLOf(memberC, false)), k8sutil.TLSSecure, k8sutil.TLSCertificates, true},
		{"on: every peer secure, clients held", mods(on, inTLSStage(k8sutil.TLSPeersSecure, memberA, memberB, memberC), holdingClients), k8sutil.TLSPeersSecure, k8sutil.TLSPeersSecure, true},
		{"on: done", mods(on, inTLSStage(k8sutil.TLSSecure, memberA, memberB, memberC)), k8sutil.TLSSecure, k8sutil.TLSSecure, true},
		{"off: every member secure", mods(off, inTLSStage(k8sutil.TLSSecure, memberA, memberB, memberC)), k8sutil.TLSPeersSecure, k8sutil.TLSPeersSecure, true},
		{"off: secure and peers secure", mods(off, inTLSStage(k8sutil.TLSSecure, memberA, memberB, memberC), inTLSStage(k8sutil.TLSPeersSecure, memberA)), k8sutil.TLSPeersSecure, k8sutil.TLSPeersSecure, true},
		{"off: every peer secure, a member etcd records on https restarted", mods(off, inTLSStage(k8sutil.TLSPeersSecure, memberA, memberB, memberC)), k8sutil.TLSCertificates, k8sutil.TLSPeersSecure, true},
		{"off: every member holds certificates", mods(off, inTLSStage(k8sutil.TLSCertificates, memberA, memberB, memberC)), k8sutil.TLSPlain, k8sutil.TLSPlain, false},
		{"off: every member holds certificates, clients held", mods(off, inTLSStage(k8sutil.TLSCertificates, memberA, memberB, memberC), holdingClients), k8sutil.TLSCertificates, k8sutil.TLSCertificates, true},
		{"off: certificates and plain", mods(off, inTLSStage(k8sutil.TLSCertificates, memberA, memberB, memberC), inTLSStage(k8sutil.TLSPlain, memberA)), k8sutil.TLSPlain, k8sutil.TLSPlain, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := testSnapshot(tc.mods...)
			tmpl := s.memberTemplate()
			m := *tmpl
			m.Name = "example-new"
			if got := stageOfPodFor(t, s, &m); got != tc.newMember {
				t.Errorf("a new member's pod is in stage %s, want %s", got, tc.newMember)
			}
			giveClientsOf(s.membership, *tmpl)
			restarted := restartMembership(s, []string{memberC})[memberC]
			if got := stageOfPodFor(t, s, restarted); got != tc.restarted {
				t.Errorf("%s restarted on its claim is in stage %s, want %s", memberC, got, tc.restarted)
			}
			if tmpl.SecureClient != tc.dialsHTTPS {
				t.Errorf("the operator dials https: %v, want %v", tmpl.SecureClient, tc.dialsHTTPS)
			}
		})
	}
}

func TestTheOriginalsShellCommandTellsItsTLS(t *testing.T) {
	cl := newTestCluster()
	withTLS(cl)
	m := k8sutil.MemberOf(cl, "example-0000")
	p := memberPod(cl, &m, testStart)
	// The original ran etcd through a shell, its flags in one string.
	c := &p.Spec.Containers[0]
	c.Command = []string{"/bin/sh", "-ec", strings.Join(c.Command, " ")}
	form, ok := k8sutil.MemberTLSOf(p)
	if !ok || form.Stage() != k8sutil.TLSSecure {
		t.Fatalf("stage %v (read: %v), want %s", form.Stage(), ok, k8sutil.TLSSecure)
	}
}

// TestTLSSwitchedOnAndOffOnClaimsRunsToItsEnd drives passes on the fake
// clients: issued TLS set on a running plaintext cluster on claims moves
// every member to TLS and removing it moves them back, each member
// restarted on its claim (the same member: etcd adds and removes none),
// its peer URL updated in etcd just before the restart that changes its
// peer scheme, one member at a time and the leader last.
func TestTLSSwitchedOnAndOffOnClaimsRunsToItsEnd(t *testing.T) {
	f := claimsFixture(t)
	members := []string{memberA, memberB, memberC}
	run := func(gen int64, tls *api.TLSPolicy, want k8sutil.TLSStage) (deleted, writes []string) {
		t.Helper()
		cl := f.cl.DeepCopy()
		cl.Generation, cl.Spec.TLS = gen, tls
		f.cl = cl
		f.c.take(cl)
		f.etcd.mu.Lock()
		f.etcd.calls = nil
		f.etcd.mu.Unlock()
		for range 200 {
			seen := len(f.kube.Actions())
			_ = f.pass()
			for _, a := range f.kube.Actions()[seen:] {
				if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
					deleted = append(deleted, a.(clienttesting.DeleteAction).GetName())
				}
			}
			f.showCreatedPods()
			f.now = f.now.Add(10 * time.Second)
		}
		for _, n := range members {
			obj, exists, _ := f.indexer.GetByKey(testNS + "/" + n)
			if !exists {
				t.Fatalf("member %s has no pod", n)
			}
			form, _ := k8sutil.MemberTLSOf(obj.(*corev1.Pod))
			if form.Stage() != want {
				t.Errorf("member %s is in stage %s, want %s (status reason %q)", n, form.Stage(), want, f.mustStatus().Reason)
			}
			if podClaim(obj.(*corev1.Pod)) != n {
				t.Errorf("member %s runs on claim %q, want its own", n, podClaim(obj.(*corev1.Pod)))
			}
		}
		for _, c := range f.etcd.Calls(true) {
			writes = append(writes, strings.Fields(c)[0])
		}
		return deleted, writes
	}
	// Three rounds each way, the leader last; the leader, restarted last in
	// the second round, comes back in the third stage at once.
	round := []string{memberB, memberC, memberA}
	for _, sw := range []struct {
		way        string
		generation int64
		tls        *api.TLSPolicy
		stage      k8sutil.TLSStage
		peerScheme string
	}{
		{"on", 2, &api.TLSPolicy{Issued: &api.IssuedTLS{}}, k8sutil.TLSSecure, "https://"},
		{"off", 3, nil, k8sutil.TLSPlain, "http://"},
	} {
		deleted, writes := run(sw.generation, sw.tls, sw.stage)
		if want := slices.Concat(round, round, round[:2]); !slices.Equal(deleted, want) {
			t.Errorf("switching %s deleted pods %v, want %v", sw.way, deleted, want)
		}
		if got := strings.Join(writes, " "); got != "update update update" {
			t.Errorf("switching %s wrote to etcd %q, want the three peer URL updates alone", sw.way, got)
		}
		for _, m := range f.etcd.members {
			if !strings.HasPrefix(m.PeerURLs[0], sw.peerScheme) {
				t.Errorf("etcd records peer URL %s once TLS is %s", m.PeerURLs[0], sw.way)
			}
		}
	}
	if st := f.mustStatus(); st.Reason != "" || st.Size != 3 {
		t.Errorf("status size %d reason %q; want 3, no reason", st.Size, st.Reason)
	}
}
