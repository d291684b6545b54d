package cluster

import (
	"strings"
	"testing"

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
		{"on: done", mods(on, inTLSStage(k8sutil.TLSSecure, memberA, memberB, memberC)), k8sutil.TLSSecure, k8sutil.TLSSecure, true},
		{"off: every member secure", mods(off, inTLSStage(k8sutil.TLSSecure, memberA, memberB, memberC)), k8sutil.TLSPeersSecure, k8sutil.TLSPeersSecure, true},
		{"off: secure and peers secure", mods(off, inTLSStage(k8sutil.TLSSecure, memberA, memberB, memberC), inTLSStage(k8sutil.TLSPeersSecure, memberA)), k8sutil.TLSPeersSecure, k8sutil.TLSPeersSecure, true},
		{"off: every peer secure, a member etcd records on https restarted", mods(off, inTLSStage(k8sutil.TLSPeersSecure, memberA, memberB, memberC)), k8sutil.TLSCertificates, k8sutil.TLSPeersSecure, true},
		{"off: every member holds certificates", mods(off, inTLSStage(k8sutil.TLSCertificates, memberA, memberB, memberC)), k8sutil.TLSPlain, k8sutil.TLSPlain, false},
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
			s.membership = withClientsOf(s.membership, *tmpl)
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
