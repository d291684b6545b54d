package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// TestNextCAChange is the specification of the CA rotation's steps: from
// what the secrets and pods say, the one change that comes next.
//
// Unless a case says otherwise the cluster is at rest, its CA (ten years)
// is a year old, nobody asked for a rotation, and its three members started
// long ago.
func TestNextCAChange(t *testing.T) {
	now := testStart
	day := 24 * time.Hour
	year := 365 * day
	since := now.Add(-10 * time.Minute)
	secrets := []string{"example-peer-tls", "example-server-tls", "example-operator-tls", "example-client-tls"}
	type mod func(*caRotationView)
	leaves := func(trusts caTrust, fromNext bool) mod {
		return func(v *caRotationView) {
			v.leaves = nil
			for _, s := range secrets {
				v.leaves = append(v.leaves, caRotationLeaf{secret: s, trusts: trusts, fromNext: fromNext})
			}
		}
	}
	leaf := func(i int, trusts caTrust, fromNext bool) mod {
		return func(v *caRotationView) { v.leaves[i].trusts, v.leaves[i].fromNext = trusts, fromNext }
	}
	at := func(step caStep, since time.Time) mod {
		return func(v *caRotationView) { v.rotation, v.step, v.since, v.hasNext = "r1", step, since, true }
	}
	started := func(name string, when time.Time) mod {
		return func(v *caRotationView) {
			for i := range v.members {
				if v.members[i].name == name {
					v.members[i].started = when
				}
			}
		}
	}
	notReady := func(v *caRotationView) { v.atRest = false }
	requested := func(value, done string) mod {
		return func(v *caRotationView) { v.requested, v.done = value, done }
	}
	caAge := func(age time.Duration) mod {
		return func(v *caRotationView) {
			v.caNotBefore = now.Add(-age)
			v.caNotAfter = v.caNotBefore.Add(10 * year)
		}
	}
	noNext := func(v *caRotationView) { v.hasNext = false }
	ours := func(v *caRotationView) { v.caMadeByOperator = true }
	settled := since.Add(caBundleSettle)
	tests := []struct {
		name string
		mods []mod
		want caChange
		// target is the secret or member changed; reason, a part of why.
		target, reason string
	}{
		// Beginning.
		{name: "a cluster whose CA is young and that nobody asked to rotate changes nothing", want: caNothing},
		{name: "a rotation asked for begins with a new CA", mods: []mod{requested("2026-11-29", "")}, want: caBegin, reason: `rotate-ca is "2026-11-29"`},
		{name: "a rotation the status records as done is not done again", mods: []mod{requested("2026-11-29", "2026-11-29")}, want: caNothing},
		{name: "a new value of the annotation is a new rotation", mods: []mod{requested("2026-11-30", "2026-11-29")}, want: caBegin},
		{name: "a CA the operator made, within the last fifth of its lifetime, is rotated unasked", mods: []mod{ours, caAge(8*year + day)}, want: caBegin, reason: "within the last fifth of its lifetime: it is rotated unasked"},
		{name: "a CA the operator made, short of the last fifth of its lifetime, is left alone", mods: []mod{ours, caAge(7 * year)}, want: caNothing},
		{name: "a CA the user brought is never rotated unasked, however near its expiry", mods: []mod{caAge(9*year + 300*day)}, want: caNothing},
		{name: "a CA the user brought is rotated when asked", mods: []mod{caAge(9 * year), requested("2026-11-29", "")}, want: caBegin, reason: `rotate-ca is "2026-11-29"`},
		{name: "an unasked rotation waits for every member to be ready before it begins", mods: []mod{ours, caAge(8*year + day), notReady}, want: caWait, reason: "it begins once every member is ready"},
		{name: "a request already carried out does not hold back an unasked rotation", mods: []mod{ours, caAge(8*year + day), requested("2026-11-29", "2026-11-29")}, want: caBegin, reason: "rotated unasked"},
		{name: "a rotation does not begin while a member is not ready", mods: []mod{requested("2026-11-29", ""), notReady}, want: caWait, reason: "begins once every member is ready"},

		// a. Trust both.
		{name: "the bundle old+new is written into one certificate secret per pass, the peer's first", mods: []mod{at(caStepTrustBoth, time.Time{})}, want: caWriteTrust, target: "example-peer-tls"},
		{name: "the bundle goes on with the secrets it has not reached", mods: []mod{at(caStepTrustBoth, time.Time{}), leaf(0, trustBoth, false), leaf(1, trustBoth, false)}, want: caWriteTrust, target: "example-operator-tls"},
		{name: "the bundle is written even while a member is not ready: it only adds trust", mods: []mod{at(caStepTrustBoth, time.Time{}), notReady}, want: caWriteTrust, target: "example-peer-tls"},
		{name: "a secret a user edited meanwhile is given the bundle again", mods: []mod{at(caStepTrustBoth, since), leaves(trustBoth, false), leaf(3, trustOther, false)}, want: caWriteTrust, target: "example-client-tls"},
		{name: "once every secret has the bundle, the time is recorded", mods: []mod{at(caStepTrustBoth, time.Time{}), leaves(trustBoth, false)}, want: caMarkSince},
		{name: "a step whose new CA is gone from the CA secret waits for the user", mods: []mod{at(caStepTrustBoth, since), noNext}, want: caWait, reason: "holds no usable next-ca.crt"},

		// b. Restarts to read the bundle.
		{name: "no member restarts before the kubelet has updated its files", mods: []mod{at(caStepTrustBoth, now.Add(-time.Minute)), leaves(trustBoth, false)}, want: caWait, reason: "once the kubelet has updated their files"},
		{name: "then members are restarted one at a time, in name order", mods: []mod{at(caStepTrustBoth, since), leaves(trustBoth, false)}, want: caRestartMember, target: memberA},
		{name: "a member started after the bundle settled has read it and is not restarted again", mods: []mod{at(caStepTrustBoth, since), leaves(trustBoth, false), started(memberA, settled.Add(time.Second))}, want: caRestartMember, target: memberB},
		{name: "a member started before the bundle settled is restarted again", mods: []mod{at(caStepTrustBoth, since), leaves(trustBoth, false), started(memberA, settled.Add(-time.Second))}, want: caRestartMember, target: memberA},
		{name: "no member is restarted while a member is not ready", mods: []mod{at(caStepTrustBoth, since), leaves(trustBoth, false), started(memberA, settled.Add(time.Second)), notReady}, want: caWait, reason: "example-b is restarted to read its trusted CA once every member is ready"},
		{name: "once every member has read the bundle, the leaves' step comes", mods: []mod{at(caStepTrustBoth, since), leaves(trustBoth, false), started(memberA, settled), started(memberB, settled), started(memberC, settled)}, want: caNextStep},

		// c. Leaves from the new CA.
		{name: "leaves are issued from the new CA one secret per pass, the peer's first", mods: []mod{at(caStepReissue, time.Time{}), leaves(trustBoth, false)}, want: caReissue, target: "example-peer-tls"},
		{name: "the leaves' step goes on with the secrets it has not reached", mods: []mod{at(caStepReissue, time.Time{}), leaves(trustBoth, true), leaf(2, trustBoth, false)}, want: caReissue, target: "example-operator-tls"},
		{name: "no leaf is issued again while a member is not ready", mods: []mod{at(caStepReissue, time.Time{}), leaves(trustBoth, false), notReady}, want: caWait, reason: "once every member is ready"},
		{name: "once every leaf is of the new CA, the new CA becomes the CA secret's own", mods: []mod{at(caStepReissue, time.Time{}), leaves(trustBoth, true)}, want: caAdopt},

		// d. Trust the new CA alone.
		{name: "the new CA alone is written into one certificate secret per pass", mods: []mod{at(caStepTrustNew, time.Time{}), leaves(trustBoth, true)}, want: caWriteTrust, target: "example-peer-tls"},
		{name: "once every secret trusts the new CA alone, the time is recorded", mods: []mod{at(caStepTrustNew, time.Time{}), leaves(trustNew, true)}, want: caMarkSince},
		{name: "then members are restarted again one at a time", mods: []mod{at(caStepTrustNew, since), leaves(trustNew, true)}, want: caRestartMember, target: memberA},
		{name: "members restarted for the bundle are restarted again to drop the old CA", mods: []mod{at(caStepTrustNew, since), leaves(trustNew, true), started(memberA, since.Add(-time.Minute))}, want: caRestartMember, target: memberA},
		{name: "once every member trusts the new CA alone, the rotation is done", mods: []mod{at(caStepTrustNew, since), leaves(trustNew, true), started(memberA, settled), started(memberB, settled), started(memberC, settled)}, want: caFinish},

		// Anything else.
		{name: "a step this operator does not know changes nothing", mods: []mod{at("trust-later", since)}, want: caWait, reason: "unknown CA rotation step"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := caRotationView{now: now, atRest: true, caNotBefore: now.Add(-year), caNotAfter: now.Add(9 * year)}
			leaves(trustOld, false)(&v)
			for _, name := range []string{memberA, memberB, memberC} {
				v.members = append(v.members, caRotationMember{name: name, started: now.Add(-30 * day)})
			}
			for _, m := range tt.mods {
				m(&v)
			}
			got := nextCAChange(v)
			if got.change != tt.want || got.target != tt.target || !strings.Contains(got.reason, tt.reason) {
				t.Errorf("nextCAChange = %+v, want change %d on %q for a reason with %q", got, tt.want, tt.target, tt.reason)
			}
		})
	}
}

// TestCARotationViewIsReadFromTheSecrets: the chooser's view comes from the
// CA secret's annotations and keys, each certificate secret's trusted CA
// and signature, and the members' container start times, so that an
// operator restarted mid-rotation sees where it is.
func TestCARotationViewIsReadFromTheSecrets(t *testing.T) {
	f, old := issuedRunning(t, 24*time.Hour, map[string]string{rotateCAAnnotation: "r2"})
	started := testStart.Add(-time.Hour)
	f.setReady(memberB, true, func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(started)
	})
	next, err := tlsissue.NewCA("the next CA", testStart)
	if err != nil {
		t.Fatal(err)
	}
	nextData, err := next.SecretData()
	if err != nil {
		t.Fatal(err)
	}
	update := func(s *corev1.Secret) {
		t.Helper()
		if err := f.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), s, testNS); err != nil {
			t.Fatal(err)
		}
	}
	since := testStart.Add(-10 * time.Minute).UTC()
	caSecret := f.secret("example-ca")
	caSecret.Annotations = map[string]string{caRotationAnnotation: "r2", caRotationStepAnnotation: string(caStepTrustBoth),
		caRotationSinceAnnotation: since.Format(time.RFC3339), caRotatedAnnotation: "r1"}
	caSecret.Data[nextCACertKey], caSecret.Data[nextCAKeyKey] = nextData[tlsissue.CACertKey], nextData[tlsissue.CAKeyKey]
	update(caSecret)
	both := tlsissue.Bundle(old.CertPEM, next.CertPEM)
	peer := f.secret("example-peer-tls")
	peer.Data = tlsissue.Peer.Trusting(peer.Data, both)
	update(peer)
	client := f.secret("example-client-tls")
	fresh, err := next.Issue(tlsissue.Client, tlsissue.Cluster{Name: testName, Namespace: testNS}, testStart, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client.Data = tlsissue.Client.Trusting(fresh, []byte("a user's edit"))
	update(client)

	s, _ := f.c.observe(t.Context(), false)
	v, ok := caRotationViewOf(s)
	if !ok {
		t.Fatalf("no view; issued = %+v", s.issued)
	}
	if v.requested != "r2" || v.done != "r1" || v.rotation != "r2" || v.step != caStepTrustBoth || !v.since.Equal(since) || !v.hasNext || !v.atRest {
		t.Errorf("view = %+v", v)
	}
	if !v.caNotAfter.Equal(old.Cert.NotAfter) {
		t.Errorf("CA expiry %s, want ca.crt's %s", v.caNotAfter, old.Cert.NotAfter)
	}
	wantLeaves := []caRotationLeaf{
		{secret: "example-peer-tls", trusts: trustBoth},
		{secret: "example-server-tls", trusts: trustOld},
		{secret: "example-operator-tls", trusts: trustOld},
		{secret: "example-client-tls", trusts: trustOther, fromNext: true},
	}
	if !slices.Equal(v.leaves, wantLeaves) {
		t.Errorf("leaves = %+v, want %+v", v.leaves, wantLeaves)
	}
	wantMembers := []caRotationMember{{name: memberA}, {name: memberB, started: started}, {name: memberC}}
	if len(v.members) != 3 || v.members[0] != wantMembers[0] || v.members[1].name != memberB || !v.members[1].started.Equal(started) || v.members[2] != wantMembers[2] {
		t.Errorf("members = %+v, want %+v", v.members, wantMembers)
	}
	if got := nextCAChange(v); got.change != caWriteTrust || got.target != "example-server-tls" {
		t.Errorf("next change = %+v, want the bundle written into example-server-tls", got)
	}
}

// TestCARotationRunsToItsEnd drives the chooser and its executors on the
// fake clients from a request to the end, restarting a member's pod where
// the rotation deletes it, and checks at every change what matters: every
// member accepts the peer certificate of every other (as each loaded its
// trusted CA at its last start), the operator's and users' certificates,
// and serves a certificate they trust. The operator restarts before every
// change. At the end the old CA is trusted
// nowhere and the request is not carried out again.
func TestCARotationRunsToItsEnd(t *testing.T) {
	f, old := issuedRunning(t, 24*time.Hour, map[string]string{rotateCAAnnotation: "r1"})
	members := []string{memberA, memberB, memberC}
	startAt := func(when time.Time) podOpt {
		return func(p *corev1.Pod) { p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(when) }
	}
	for _, m := range members {
		f.setReady(m, true, startAt(f.now.Add(-30*24*time.Hour)))
	}
	// loaded is what each member's etcd read at its last start.
	loaded := map[string]memberTrust{}
	load := func(m string) { loaded[m] = f.trustNow() }
	for _, m := range members {
		load(m)
	}
	check := func(after string) {
		t.Helper()
		f.everyCertificateTrusted(loaded, after)
	}
	var changes []string
	run := func() {
		t.Helper()
		for range 100 {
			// The operator restarts before every change: nothing of the
			// rotation may live in its memory.
			restarted := newCluster(t.Context(), f.c.cfg, f.c.latest)
			restarted.now = f.c.now
			f.c = restarted
			f.syncEtcdWithPods()
			s, _ := f.c.observe(t.Context(), true)
			v, ok := caRotationViewOf(s)
			if !ok {
				t.Fatalf("no view of the rotation; issued = %+v", s.issued)
			}
			d := nextCAChange(v)
			switch d.change {
			case caNothing:
				return
			case caWait:
				if !strings.Contains(d.reason, "once the kubelet has updated their files") {
					t.Fatalf("the rotation waits: %s", d.reason)
				}
				f.now = f.now.Add(caBundleSettle)
				continue
			}
			changes = append(changes, fmt.Sprintf("%d %s", d.change, d.target))
			if out := f.c.carryOutCAChange(t.Context(), s, d); out.err != nil {
				t.Fatalf("change %+v: %v", d, out.err)
			}
			if d.change == caBegin || d.change == caNextStep || d.change == caAdopt {
				if got := f.secret("example-ca").Annotations[caRotationStepStartedAnnotation]; got != f.now.UTC().Format(time.RFC3339) {
					t.Fatalf("after %+v the step started %q, want now", d, got)
				}
			}
			if d.change == caRestartMember {
				f.pod(d.target)
				f.setReady(d.target, true, startAt(f.now))
				load(d.target)
			}
			check(fmt.Sprintf("%+v", d))
		}
		t.Fatal("the rotation did not end in 100 changes")
	}
	run()
	restarts := 0
	for _, c := range changes {
		if strings.HasPrefix(c, fmt.Sprint(caRestartMember)+" ") {
			restarts++
		}
	}
	if restarts != 6 {
		t.Errorf("%d restarts, want each member twice: %q", restarts, changes)
	}
	ca := f.secret("example-ca")
	if string(ca.Data[tlsissue.CACertKey]) == string(old.CertPEM) || ca.Annotations[caRotatedAnnotation] != "r1" {
		t.Errorf("CA secret after the rotation: annotations %v, ca.crt the old one: %v", ca.Annotations, string(ca.Data[tlsissue.CACertKey]) == string(old.CertPEM))
	}
	for _, k := range []string{caRotationAnnotation, caRotationStepAnnotation, caRotationSinceAnnotation, caRotationStartedAnnotation, caRotationStepStartedAnnotation} {
		if _, ok := ca.Annotations[k]; ok {
			t.Errorf("the CA secret keeps %s after the rotation", k)
		}
	}
	if ca.Annotations[caLastRotationAnnotation] != "r1" || ca.Annotations[caLastRotatedAnnotation] != f.now.UTC().Format(time.RFC3339) {
		t.Errorf("the CA secret records the last rotation as %q ended %q, want r1 ended at the last change, %s",
			ca.Annotations[caLastRotationAnnotation], ca.Annotations[caLastRotatedAnnotation], f.now.UTC().Format(time.RFC3339))
	}
	for _, k := range []string{nextCACertKey, nextCAKeyKey, previousCACertKey} {
		if _, ok := ca.Data[k]; ok {
			t.Errorf("the CA secret keeps %s after the rotation", k)
		}
	}
	for _, name := range issuedNames[1:] {
		certKey, _, caKey := kindOf(name).Keys()
		sec := f.secret(name)
		if verifies(t, f.now, sec.Data[certKey], old.CertPEM) || string(sec.Data[caKey]) != string(ca.Data[tlsissue.CACertKey]) {
			t.Errorf("%s is of the old CA or trusts more than the new one after the rotation", name)
		}
	}
	for _, m := range members {
		if string(loaded[m].peer) != string(ca.Data[tlsissue.CACertKey]) {
			t.Errorf("%s still trusts the old CA at the end", m)
		}
	}
	changes = nil
	run()
	if len(changes) > 0 {
		t.Errorf("a rotation done is done again: %q", changes)
	}
}

// memberTrust is what a member's etcd read at its last start: the CAs its
// peer and server secrets trusted.
type memberTrust struct{ peer, client []byte }

// trustNow is what a member starting now reads.
func (f *fixture) trustNow() memberTrust {
	return memberTrust{peer: f.secret("example-peer-tls").Data["peer-ca.crt"], client: f.secret("example-server-tls").Data["server-ca.crt"]}
}

// everyCertificateTrusted fails the test unless every member, with the
// CAs it read at its last start (loaded), trusts the peer certificate and
// the client certificates the secrets hold now, and the users of the client
// secrets trust the members' server certificate.
func (f *fixture) everyCertificateTrusted(loaded map[string]memberTrust, after string) {
	t := f.t
	t.Helper()
	peer, server := f.secret("example-peer-tls"), f.secret("example-server-tls")
	for m, trust := range loaded {
		if !verifies(t, f.now, peer.Data["peer.crt"], trust.peer) {
			t.Fatalf("after %s: %s refuses the peer certificate", after, m)
		}
		for _, cl := range []string{"example-operator-tls", "example-client-tls"} {
			if !verifies(t, f.now, f.secret(cl).Data["etcd-client.crt"], trust.client) {
				t.Fatalf("after %s: %s refuses the certificate of %s", after, m, cl)
			}
		}
	}
	for _, cl := range []string{"example-operator-tls", "example-client-tls"} {
		if !verifies(t, f.now, server.Data["server.crt"], f.secret(cl).Data["etcd-client-ca.crt"]) {
			t.Fatalf("after %s: the users of %s do not trust the members' server certificate", after, cl)
		}
	}
}

// verifies tells whether certPEM verifies against the CAs of trusted at at.
func verifies(t testing.TB, at time.Time, certPEM, trusted []byte) bool {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("no certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(trusted)
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

// TestCARotationStatus: status.caRotation says what the CA secret says of
// its CA and of a rotation, read again at each pass.
func TestCARotationStatus(t *testing.T) {
	old, err := tlsissue.NewCA(operatorCASubject(testNS, testName), testStart.Add(-365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	next, err := tlsissue.NewCA(operatorCASubject(testNS, testName), testStart.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	started, stepStarted, lastAt := testStart.Add(-time.Hour), testStart.Add(-10*time.Minute), testStart.Add(-90*24*time.Hour)
	stamp := func(at time.Time) string { return at.UTC().Format(time.RFC3339) }
	named := func(ca *tlsissue.CA) *api.CACertificate {
		return &api.CACertificate{Subject: ca.Cert.Subject.String(), Serial: fmt.Sprintf("%x", ca.Cert.SerialNumber), NotAfter: metav1.NewTime(ca.Cert.NotAfter.UTC())}
	}
	at := func(tm time.Time) *metav1.Time { mt := metav1.NewTime(tm.UTC()); return &mt }
	prev := &api.CARotationStatus{Rotation: "as the server holds it"}
	// ours is st of a CA secret whose CA, ca, the operator made.
	ours := func(ca *tlsissue.CA, st *api.CARotationStatus) *api.CARotationStatus {
		st.MadeByOperator, st.AutoRotateAt = true, at(caAutoRotateAt(ca.Cert.NotBefore, ca.Cert.NotAfter))
		return st
	}
	// caSecret is the CA secret: ca.crt old, next-ca.crt next while a
	// step before trust-new is recorded, then ca.crt next and
	// previous-ca.crt old.
	caSecret := func(step caStep, annotations map[string]string) (*corev1.Secret, *tlsissue.CA, *tlsissue.CA) {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "example-ca", Annotations: annotations}, Data: map[string][]byte{}}
		if sec.Annotations == nil {
			sec.Annotations = map[string]string{}
		}
		if step != caStepNone {
			sec.Annotations[caRotationStepAnnotation] = string(step)
		}
		oldData, _ := old.SecretData()
		nextData, _ := next.SecretData()
		switch step {
		case caStepTrustNew:
			sec.Data[tlsissue.CACertKey], sec.Data[tlsissue.CAKeyKey], sec.Data[previousCACertKey] = nextData[tlsissue.CACertKey], nextData[tlsissue.CAKeyKey], old.CertPEM
			return sec, next, nil
		case caStepNone:
			sec.Data[tlsissue.CACertKey], sec.Data[tlsissue.CAKeyKey] = oldData[tlsissue.CACertKey], oldData[tlsissue.CAKeyKey]
			return sec, old, nil
		}
		sec.Data[tlsissue.CACertKey], sec.Data[tlsissue.CAKeyKey] = oldData[tlsissue.CACertKey], oldData[tlsissue.CAKeyKey]
		sec.Data[nextCACertKey], sec.Data[nextCAKeyKey] = nextData[tlsissue.CACertKey], nextData[tlsissue.CAKeyKey]
		return sec, old, next
	}
	tests := []struct {
		name string
		// issued: the cluster's TLS is issued; read: its secrets were read
		// in this pass; missing: the CA secret does not exist.
		issued, read, missing bool
		step                  caStep
		annotations           map[string]string
		want                  *api.CARotationStatus
	}{
		{name: "a cluster without issued TLS has no CA rotation in its status", read: true, want: nil},
		{name: "a cluster whose CA secret is not made yet has none either", issued: true, read: true, missing: true, want: nil},
		{name: "while the secrets cannot be read, the status keeps what it said", issued: true, want: prev},
		{name: "outside a rotation the status names the CA, and when the operator rotates the CA it made unasked", issued: true, read: true,
			annotations: map[string]string{caMadeByOperatorAnnotation: caFingerprint(old.Cert)},
			want:        ours(old, &api.CARotationStatus{CA: named(old)})},
		{name: "a CA the user brought is never rotated unasked: no date is told", issued: true, read: true,
			annotations: map[string]string{caMadeByOperatorAnnotation: "sha256:of a CA replaced since"},
			want:        &api.CARotationStatus{CA: named(old)}},
		{name: "the last rotation carried out and when it ended are told after it", issued: true, read: true,
			annotations: map[string]string{caLastRotationAnnotation: "r1", caLastRotatedAnnotation: stamp(lastAt), caRotatedAnnotation: "r1"},
			want:        ours(old, &api.CARotationStatus{CA: named(old), LastRotation: "r1", LastRotated: at(lastAt)})},
		{name: "a rotation that trusts both CAs names its step, its start, the old CA and the new one", issued: true, read: true, step: caStepTrustBoth,
			annotations: map[string]string{caRotationAnnotation: "r2", caRotationStartedAnnotation: stamp(started), caRotationStepStartedAnnotation: stamp(started), caLastRotationAnnotation: "r1"},
			want: ours(old, &api.CARotationStatus{CA: named(old), Rotation: "r2", Step: "trust-both", Started: at(started), StepStarted: at(started),
				OldCA: named(old), NewCA: named(next), LastRotation: "r1"})},
		{name: "a rotation the operator began by itself says so", issued: true, read: true, step: caStepTrustBoth,
			annotations: map[string]string{caRotationAnnotation: "auto-2034", caRotationUnaskedAnnotation: "true"},
			want:        ours(old, &api.CARotationStatus{CA: named(old), Rotation: "auto-2034", Unasked: true, Step: "trust-both", OldCA: named(old), NewCA: named(next)})},
		{name: "once the new CA is the CA secret's own, it is the CA and the new one, and the old one is still named", issued: true, read: true, step: caStepTrustNew,
			annotations: map[string]string{caRotationAnnotation: "r2", caRotationStartedAnnotation: stamp(started), caRotationStepStartedAnnotation: stamp(stepStarted)},
			want: ours(next, &api.CARotationStatus{CA: named(next), Rotation: "r2", Step: "trust-new", Started: at(started), StepStarted: at(stepStarted),
				OldCA: named(old), NewCA: named(next)})},
		{name: "a rotation an earlier operator began, without its start recorded, is told without it", issued: true, read: true, step: caStepReissue,
			annotations: map[string]string{caRotationAnnotation: "r2", caRotationStartedAnnotation: "yesterday"},
			want:        ours(old, &api.CARotationStatus{CA: named(old), Rotation: "r2", Step: "reissue", OldCA: named(old), NewCA: named(next)})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSnapshot()
			if tt.issued {
				withIssuedTLS(s.spec)
			}
			if tt.read {
				s.issued = &issuedView{caMissing: tt.missing}
				if !tt.missing {
					sec, ca, nx := caSecret(tt.step, tt.annotations)
					s.issued.caStep = tt.step
					s.issued.rotation = caRotationOf(sec, ca, nx, tt.step, testNS, testName)
				}
			}
			got := caRotationStatus(s, prev)
			if !equality.Semantic.DeepEqual(got, tt.want) {
				t.Errorf("status.caRotation = %s, want %s", describeStatus(got), describeStatus(tt.want))
			}
		})
	}
}

// describeStatus is st as its JSON, for a test's message.
func describeStatus(st *api.CARotationStatus) string {
	b, _ := json.Marshal(st)
	return string(b)
}

// TestCAMadeByOperator: only positive evidence tells a CA the operator
// made, which it rotates unasked, from one a user brought, which it never
// does.
func TestCAMadeByOperator(t *testing.T) {
	ours, err := tlsissue.NewCA(operatorCASubject(testNS, testName), testStart)
	if err != nil {
		t.Fatal(err)
	}
	users, err := tlsissue.NewCA("the user's CA", testStart)
	if err != nil {
		t.Fatal(err)
	}
	otherCluster, err := tlsissue.NewCA(operatorCASubject(testNS, "another"), testStart)
	if err != nil {
		t.Fatal(err)
	}
	// lookAlike has the operator's subject for this cluster, signed by the
	// user's CA: no CA the operator makes is signed by another.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(7), Subject: ours.Cert.Subject,
		NotBefore: testStart, NotAfter: testStart.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, users.Cert, key.Public(), users.Key)
	if err != nil {
		t.Fatal(err)
	}
	lookAlike, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mark string // the secret's caMadeByOperatorAnnotation; "-" for none
		cert *x509.Certificate
		want bool
	}{
		{name: "a CA secret the operator made carries the fingerprint of its CA", mark: caFingerprint(ours.Cert), cert: ours.Cert, want: true},
		{name: "a CA put in a marked secret by someone else does not match the mark", mark: caFingerprint(ours.Cert), cert: users.Cert},
		{name: "a CA of the operator's own subject put in a marked secret by someone else does not match it either", mark: caFingerprint(otherCluster.Cert), cert: ours.Cert},
		{name: "an unmarked CA secret of an earlier operator is told by the subject the operator gives this cluster's CA", mark: "-", cert: ours.Cert, want: true},
		{name: "an unmarked CA of another subject is the user's", mark: "-", cert: users.Cert},
		{name: "an unmarked CA the operator made for another cluster, brought here, is the user's", mark: "-", cert: otherCluster.Cert},
		{name: "an unmarked CA of the operator's subject that another CA signed is the user's", mark: "-", cert: lookAlike},
		{name: "a CA secret whose ca.crt does not parse is nobody's to rotate", mark: caFingerprint(ours.Cert)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "example-ca", Annotations: map[string]string{}}}
			if tt.mark != "-" {
				sec.Annotations[caMadeByOperatorAnnotation] = tt.mark
			}
			if got := caMadeByOperator(sec, tt.cert, testNS, testName); got != tt.want {
				t.Errorf("caMadeByOperator = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestUnaskedCARotationIsToldApart: a rotation the operator begins by
// itself says so in its event and status, marks its new CA as the
// operator's once adopted, and at its end leaves the last request carried
// out as it was, so that the request is not carried out again.
func TestUnaskedCARotationIsToldApart(t *testing.T) {
	// A cluster whose CA the operator made eight years and a day ago, and
	// whose certificates it issued a day ago.
	cl := newTestCluster(withIssuedTLS)
	cl.Annotations = map[string]string{rotateCAAnnotation: "r1"}
	f := newFixture(t, cl)
	old, err := tlsissue.NewCA(operatorCASubject(testNS, testName), testStart.Add(-(8*365+1)*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	data, err := old.SecretData()
	if err != nil {
		t.Fatal(err)
	}
	addSecret(t, f, "example-ca", data)
	for _, name := range issuedNames[1:] {
		leaf, err := old.Issue(kindOf(name), tlsissue.Cluster{Name: testName, Namespace: testNS}, testStart.Add(-24*time.Hour), api.DefaultCertificateValidity)
		if err != nil {
			t.Fatal(err)
		}
		addSecret(t, f, name, leaf)
	}
	f.withMembers(memberA, memberB, memberC)
	f.pod(memberA)
	f.pod(memberB)
	f.pod(memberC)
	annotate := func(change func(*corev1.Secret)) {
		t.Helper()
		sec := f.secret("example-ca")
		if sec.Annotations == nil {
			sec.Annotations = map[string]string{}
		}
		change(sec)
		if err := f.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), sec, testNS); err != nil {
			t.Fatal(err)
		}
	}
	// The user's request r1 was carried out. The CA secret has no mark: an
	// earlier operator made it, which the CA's subject tells.
	annotate(func(sec *corev1.Secret) { sec.Annotations[caRotatedAnnotation] = "r1" })
	change := func(d caDecision) {
		t.Helper()
		f.c.issued = issuedCache{}
		s, _ := f.c.observe(t.Context(), false)
		if out := f.c.carryOutCAChange(t.Context(), s, d); out.err != nil {
			t.Fatalf("change %+v: %v", d, out.err)
		}
		f.c.sendEvents()
	}

	f.c.issued = issuedCache{}
	s, _ := f.c.observe(t.Context(), false)
	v, ok := caRotationViewOf(s)
	if !ok {
		t.Fatalf("no view; issued = %+v", s.issued)
	}
	d := nextCAChange(v)
	if d.change != caBegin || !strings.Contains(d.reason, "rotated unasked") {
		t.Fatalf("next change = %+v, want an unasked rotation to begin", d)
	}
	change(d)
	sec := f.secret("example-ca")
	wantID := "auto-" + old.Cert.NotAfter.UTC().Format(time.RFC3339)
	if sec.Annotations[caRotationAnnotation] != wantID || sec.Annotations[caRotationUnaskedAnnotation] != "true" {
		t.Errorf("CA secret annotations after the beginning = %v, want rotation %s, unasked", sec.Annotations, wantID)
	}
	if events := strings.Join(f.events(), "\n"); !strings.Contains(events, "Normal CARotation CA rotation began unasked: a new CA is in example-ca (the CA the operator made expires on") {
		t.Errorf("events = %s, want a Normal CARotation event saying the rotation began unasked", events)
	}
	f.c.issued = issuedCache{}
	s, _ = f.c.observe(t.Context(), false)
	if st := caRotationStatus(s, nil); st == nil || !st.Unasked || st.Rotation != wantID {
		t.Errorf("status.caRotation = %s, want the unasked rotation %s", describeStatus(st), wantID)
	}
	next := firstCertificate(sec.Data[nextCACertKey])

	// The steps in between are TestCARotationRunsToItsEnd's; here the
	// secret is moved to the leaves' step, whose end adopts the new CA.
	annotate(func(sec *corev1.Secret) { sec.Annotations[caRotationStepAnnotation] = string(caStepReissue) })
	change(caDecision{change: caAdopt, reason: "every leaf is issued from the new CA"})
	if got := f.secret("example-ca").Annotations[caMadeByOperatorAnnotation]; next == nil || got != caFingerprint(next) {
		t.Errorf("after the new CA is adopted the mark is %q, want the new CA's fingerprint", got)
	}
	change(caDecision{change: caFinish, reason: "every member trusts the new CA alone"})
	sec = f.secret("example-ca")
	if sec.Annotations[caRotatedAnnotation] != "r1" || sec.Annotations[caLastRotationAnnotation] != wantID {
		t.Errorf("CA secret annotations at the end = %v, want the request r1 still carried out and %s the last rotation", sec.Annotations, wantID)
	}
	if _, ok := sec.Annotations[caRotationUnaskedAnnotation]; ok {
		t.Error("the CA secret keeps the unasked mark of a rotation that ended")
	}
	// The leaves skipped above are not of the new CA, so the whole view
	// is not there: what the CA secret says is enough.
	f.c.issued = issuedCache{}
	s, _ = f.c.observe(t.Context(), false)
	r := s.issued.rotation
	v = caRotationView{now: s.now, requested: s.rotateCARequest, done: r.done, caNotBefore: r.caNotBefore, caNotAfter: r.caNotAfter, caMadeByOperator: r.madeByOperator, atRest: true}
	if !r.madeByOperator || nextCAChange(v).change != caNothing {
		t.Errorf("after the rotation: the new CA made by the operator %v, next change %+v; want the operator's, and nothing more to do", r.madeByOperator, nextCAChange(v))
	}
}
