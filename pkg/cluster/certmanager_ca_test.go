package cluster

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// TestIssuerCAIsCarriedInToItsEnd changes the CA of a running cluster's
// cert-manager issuer and asks for a rotation, then runs passes, each by an
// operator started anew, as cert-manager and the kubelet would answer them:
// after every pass, every member must still trust every certificate the
// copies serve, and the users of the client copies the members' server
// certificate; at the end every copy holds a certificate of the new CA and
// trusts it alone, and every member restarted twice.
func TestIssuerCAIsCarriedInToItsEnd(t *testing.T) {
	cl := newTestCluster(withCertManagerIssuer)
	cl.Annotations = map[string]string{api.RotateCertificatesAnnotation: "r0"}
	f := newFixture(t, cl)
	dyn := withCertManager(f)
	members := []string{memberA, memberB, memberC}
	f.withMembers(members...)
	startAt := func(when time.Time) podOpt {
		return func(p *corev1.Pod) { p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(when) }
	}
	for _, m := range members {
		f.pod(m)
		f.setReady(m, true, startAt(f.now.Add(-30*24*time.Hour)))
	}
	before, after := newIssuerCA(t, "the issuer's CA before"), newIssuerCA(t, "the issuer's CA after")
	f.mustPass()
	issueAsCertManager(t, f, dyn, before)
	f.passes(len(tlsissue.Kinds) + len(certManagerNames) + 1)
	issueWhereAsked(t, f, dyn, before)
	f.passes(len(tlsissue.Kinds) + 1)
	if done := f.mustStatus().CertificatesRotated; done != "r0" {
		t.Fatalf("status.certificatesRotated = %q before the CA changed, want r0", done)
	}

	// loaded is what each member's etcd read at its last start.
	loaded := map[string]memberTrust{}
	for _, m := range members {
		loaded[m] = f.trustNow()
	}
	restarts := map[string]int{}

	// The issuer's CA changes; the user asks for a rotation, as the docs
	// say, so that cert-manager issues from it now.
	asked := f.c.latest.DeepCopy()
	asked.Annotations[api.RotateCertificatesAnnotation] = "r1"
	f.c.latest = asked
	for pass := 0; ; pass++ {
		if pass == 400 {
			t.Fatalf("the issuer's CA was not carried in within 400 passes: status.reason %q", f.mustStatus().Reason)
		}
		f.c = newCluster(t.Context(), f.c.cfg, f.c.latest)
		f.c.now = func() time.Time { return f.now }
		f.syncEtcdWithPods()
		f.mustPass()
		issueWhereAsked(t, f, dyn, after)
		for _, m := range members {
			if _, err := f.kube.CoreV1().Pods(testNS).Get(t.Context(), m, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				// The next pass would make it again; its etcd reads the
				// files the kubelet gives it.
				f.podGone(m)
				f.pod(m)
				f.setReady(m, true, startAt(f.now))
				loaded[m] = f.trustNow()
				restarts[m]++
			}
		}
		f.everyCertificateTrusted(loaded, fmt.Sprintf("pass %d", pass))
		if f.mustStatus().CertificatesRotated == "r1" {
			break
		}
		f.now = f.now.Add(20 * time.Second)
	}
	for _, m := range members {
		if restarts[m] != 2 {
			t.Errorf("%s restarted %d times, want twice: to trust both CAs, then the new one alone", m, restarts[m])
		}
		if !bytes.Equal(loaded[m].peer, after.CertPEM) || !bytes.Equal(loaded[m].client, after.CertPEM) {
			t.Errorf("%s trusts more than the new CA at the end", m)
		}
	}
	for _, name := range issuedNames[1:] {
		certKey, _, caKey := kindOf(name).Keys()
		sec := f.secret(name)
		if !verifies(t, f.now, sec.Data[certKey], after.CertPEM) || !bytes.Equal(sec.Data[caKey], after.CertPEM) {
			t.Errorf("copy %s is not of the new CA, or trusts more than it, at the end", name)
		}
	}
	events := strings.Join(f.events(), "\n")
	for _, want := range []string{`CARotation issuer's CA: trusted CAs written into example-peer-tls (cert-manager issued from CA "the issuer's CA after"`, "CARotation issuer's CA: restarting member example-a"} {
		if !strings.Contains(events, want) {
			t.Errorf("no event %q in:\n%s", want, events)
		}
	}
	if r := f.mustStatus().Reason; r != "" {
		t.Errorf("status.reason = %q at the end", r)
	}
}
