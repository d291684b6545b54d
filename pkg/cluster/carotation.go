package cluster

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// This file is the chooser of the CA rotation of issued TLS: which one
// change comes next, from what the CA secret, the certificate secrets and
// the member pods say, never from the operator's memory, so that an
// operator restarted anywhere goes on from where the secrets are. Its
// executors are in carotation_act.go; rotateCA is its step of decide. A
// rotation begins when the user asks (rotateCAAnnotation), or by itself
// once a CA the operator made nears its expiry (caAutoRotateAt); see
// docs/design/ca-rotation.md.
//
// etcd reads its trusted CA files only when it starts (etcdutil's
// TestRenewedServerCertificateIsServedWithoutRestart) and its certificate
// and key for each new connection, so the rotation goes in ordered steps,
// each safe to stop after (tlsissue's TestCARotationKeepsAClusterServing
// carries them out on real etcd):
//
//	a. a new CA is made beside the old one (the CA secret's next-ca.crt and
//	   next-ca.key), and every certificate secret's trusted CA becomes the
//	   bundle old+new, one secret per pass;
//	b. every member is restarted, one at a time and only while every member
//	   is ready, so that its etcd reads the bundle;
//	c. every leaf is issued again from the new CA, one secret per pass;
//	   the new CA then becomes the CA secret's ca.crt and ca.key;
//	d. every certificate secret trusts the new CA alone, one per pass, and
//	   every member is restarted again, one at a time.

// rotateCAAnnotation on the cluster asks for a CA rotation; each new value
// is one.
const rotateCAAnnotation = api.RotateCAAnnotation

// Annotations of the CA secret that record where a rotation is.
const (
	// caRotatedAnnotation is the last rotation carried out to its end: a
	// request of the same value is not carried out again.
	caRotatedAnnotation = "etcd.database.coreos.com/ca-rotated"
	// caRotationAnnotation names the rotation being carried out: the
	// value of the cluster's rotate-ca annotation, or "auto-" and the old
	// CA's expiry for one started because the CA nears it.
	caRotationAnnotation = "etcd.database.coreos.com/ca-rotation"
	// caRotationStepAnnotation is the step the rotation is at.
	caRotationStepAnnotation = "etcd.database.coreos.com/ca-rotation-step"
	// caRotationSinceAnnotation is when the secrets were last changed for
	// the step (RFC 3339): a member whose etcd started at least
	// caBundleSettle after it has read the step's bundle.
	caRotationSinceAnnotation = "etcd.database.coreos.com/ca-rotation-since"
	// caRotationStartedAnnotation is when the rotation under way began,
	// caRotationStepStartedAnnotation when it reached its step (RFC 3339),
	// for status.caRotation.
	caRotationStartedAnnotation     = "etcd.database.coreos.com/ca-rotation-started"
	caRotationStepStartedAnnotation = "etcd.database.coreos.com/ca-rotation-step-started"
	// caLastRotationAnnotation names the last rotation carried out to its
	// end, whoever began it, and caLastRotatedAnnotation says when it
	// ended (RFC 3339), for status.caRotation.
	caLastRotationAnnotation = "etcd.database.coreos.com/ca-last-rotation"
	caLastRotatedAnnotation  = "etcd.database.coreos.com/ca-last-rotated"
	// caRotationUnaskedAnnotation is "true" on a rotation the operator
	// began by itself: its end leaves caRotatedAnnotation, the last
	// request carried out, as it was.
	caRotationUnaskedAnnotation = "etcd.database.coreos.com/ca-rotation-unasked"
	// caMadeByOperatorAnnotation is the fingerprint (caFingerprint) of the
	// CA the operator made for the secret, written with it: when the
	// operator made the CA secret, and when a rotation makes its new CA
	// the secret's own. A CA put in the secret by anyone else does not
	// match it.
	caMadeByOperatorAnnotation = "etcd.database.coreos.com/ca-made-by-operator"
)

// operatorCASubject is the common name of the CAs the operator makes for
// a cluster; with the organization etcd-operator, it is how a CA secret
// an earlier operator made, without caMadeByOperatorAnnotation, is told
// from a user's.
func operatorCASubject(namespace, name string) string {
	return fmt.Sprintf("etcd CA of %s/%s", namespace, name)
}

// caFingerprint is the SHA-256 of the certificate (DER), as
// caMadeByOperatorAnnotation holds it.
func caFingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// caMadeByOperator tells whether ca.crt of the CA secret (cert) is a CA
// the operator made, and so one it may rotate unasked. A CA the user
// brought is rotated only when asked: rotating it would replace it with
// one of the operator's. Only positive evidence counts:
//   - the secret's caMadeByOperatorAnnotation is cert's fingerprint;
//   - without that annotation (a CA secret an earlier operator made, or
//     whose CA an earlier operator's rotation made), cert names itself
//     exactly as the operator names its CAs for this cluster, and is
//     self-signed; a user's CA of another subject, or an operator's CA of
//     another cluster brought here, is the user's.
//
// An annotation of another fingerprint means the CA was replaced by
// someone else since: it is the user's.
func caMadeByOperator(secret *corev1.Secret, cert *x509.Certificate, namespace, name string) bool {
	if cert == nil {
		return false
	}
	if mark, ok := secret.Annotations[caMadeByOperatorAnnotation]; ok {
		return mark == caFingerprint(cert)
	}
	return cert.Subject.String() == (pkix.Name{CommonName: operatorCASubject(namespace, name), Organization: []string{"etcd-operator"}}).String() &&
		bytes.Equal(cert.RawIssuer, cert.RawSubject) && cert.CheckSignatureFrom(cert) == nil
}

// Keys of the CA secret that hold the new CA from step a to step c.
const (
	nextCACertKey = "next-ca.crt"
	nextCAKeyKey  = "next-ca.key"
)

// previousCACertKey holds the old CA once the new one is the CA secret's
// own (step d): certificate secrets that still trust it are found so.
const previousCACertKey = "previous-ca.crt"

// caStep is a step of a CA rotation as the CA secret records it.
type caStep string

const (
	caStepNone caStep = ""
	// caStepTrustBoth: the new CA is in the CA secret; certificate
	// secrets are given the bundle old+new, then members restarted (a, b).
	caStepTrustBoth caStep = "trust-both"
	// caStepReissue: every member has read the bundle; leaves are issued
	// from the new CA (c).
	caStepReissue caStep = "reissue"
	// caStepTrustNew: the new CA is the CA secret's own; certificate
	// secrets are given it alone, then members restarted (d).
	caStepTrustNew caStep = "trust-new"
)

// caBundleSettle is how long after a secret is updated a member started
// since is sure to have been given the new files: the kubelet updates a
// mounted secret at its periodic sync, from its cache of the secret, each
// of which takes up to about a minute by default. A pod made after the
// update mounts it whole, but a container restarted in its pod may not.
const caBundleSettle = 3 * time.Minute

// caAutoRotateAt is when a CA the operator made is rotated without being
// asked: once four fifths of its lifetime have passed, which leaves the
// last fifth (two years of the ten a CA the operator makes is valid for)
// for the rotation and for a long trouble holding it up.
func caAutoRotateAt(notBefore, notAfter time.Time) time.Time {
	return notBefore.Add(notAfter.Sub(notBefore) * 4 / 5)
}

// caTrust is the CA a certificate secret's trusted CA key holds.
type caTrust int

const (
	// trustOther: neither of the forms below (a user's edit); the step
	// writing its trusted CA puts it right.
	trustOther caTrust = iota
	trustOld
	trustBoth
	trustNew
)

// caRotationLeaf is a certificate secret as the rotation sees it.
type caRotationLeaf struct {
	secret string
	// fromNext: its certificate was issued by the new CA.
	fromNext bool
	trusts   caTrust
}

// caRotationMember is a member as the rotation sees it.
type caRotationMember struct {
	name string
	// started is when its etcd container last started; zero when it is
	// not running.
	started time.Time
}

// caRotationView is what the chooser reads.
type caRotationView struct {
	now time.Time
	// requested is the cluster's rotate-ca annotation, done the rotation
	// the status last recorded as done.
	requested, done string
	// caNotBefore and caNotAfter are the CA secret's own CA's;
	// caMadeByOperator, that the operator made it (caMadeByOperator).
	caNotBefore, caNotAfter time.Time
	caMadeByOperator        bool
	// rotation, step and since are the CA secret's annotations.
	rotation string
	step     caStep
	since    time.Time
	// hasNext: the CA secret holds a usable new CA.
	hasNext bool
	// leaves are the certificate secrets, in tlsissue.Kinds order.
	leaves []caRotationLeaf
	// members, by name order; atRest: every member ready, no problem that
	// holds the cluster up.
	members []caRotationMember
	atRest  bool
}

// caChange is one change of a CA rotation.
type caChange int

const (
	caNothing caChange = iota
	// caWait: the rotation is under way and waits (reason says for what).
	caWait
	// caBegin makes the new CA and records caStepTrustBoth.
	caBegin
	// caWriteTrust writes the step's trusted CA into secret target.
	caWriteTrust
	// caMarkSince records since: every secret has the step's trust.
	caMarkSince
	// caRestartMember restarts member target.
	caRestartMember
	// caNextStep records the step after the current one.
	caNextStep
	// caReissue issues secret target again from the new CA.
	caReissue
	// caAdopt makes the new CA the CA secret's own (ca.crt, ca.key) and
	// records caStepTrustNew, in one update of the CA secret.
	caAdopt
	// caFinish removes the rotation's annotations and the old CA from the
	// CA secret and records the rotation in status.
	caFinish
)

// caDecision is the change chosen, its target (a secret or a member) and
// why, for the event and status.reason.
type caDecision struct {
	change caChange
	target string
	reason string
}

// nextCAChange chooses the one change a CA rotation makes next. Every step
// is idempotent on what the secrets say: a change half done (an operator
// restart between two secrets) is found undone and done again.
func nextCAChange(v caRotationView) caDecision {
	switch v.step {
	case caStepNone:
		return beginCARotation(v)
	case caStepTrustBoth:
		if !v.hasNext {
			// The new CA the step needs is gone: the secrets were edited.
			return caDecision{change: caWait, reason: "the CA secret records a rotation at step trust-both but holds no usable next-ca.crt and next-ca.key; restore them, or remove its " + caRotationStepAnnotation + " annotation once every certificate secret trusts ca.crt alone"}
		}
		return trustAndRestart(v, trustBoth, caNextStep, "every member trusts the old and the new CA")
	case caStepReissue:
		if !v.hasNext {
			return caDecision{change: caWait, reason: "the CA secret records a rotation at step reissue but holds no usable next-ca.crt and next-ca.key"}
		}
		for _, l := range v.leaves {
			if !l.fromNext {
				if !v.atRest {
					return caDecision{change: caWait, reason: "CA rotation: " + l.secret + " is issued from the new CA once every member is ready"}
				}
				return caDecision{change: caReissue, target: l.secret, reason: "CA rotation: leaves are issued from the new CA"}
			}
		}
		return caDecision{change: caAdopt, reason: "every leaf is issued from the new CA"}
	case caStepTrustNew:
		return trustAndRestart(v, trustNew, caFinish, "every member trusts the new CA alone")
	}
	return caDecision{change: caWait, reason: fmt.Sprintf("the CA secret records an unknown CA rotation step %q; nothing is changed", v.step)}
}

// beginCARotation starts a rotation the user asked for, or that the age of
// a CA the operator made calls for, once the cluster is at rest. A CA the
// user brought is never rotated unasked: the expiry warning of every CA
// (expiringCertificates) tells them ahead.
func beginCARotation(v caRotationView) caDecision {
	why := ""
	switch {
	case v.requested != "" && v.requested != v.done:
		why = fmt.Sprintf("etcd.database.coreos.com/rotate-ca is %q", v.requested)
	case v.caMadeByOperator && !v.caNotAfter.IsZero() && !v.now.Before(caAutoRotateAt(v.caNotBefore, v.caNotAfter)):
		why = "the CA the operator made expires on " + v.caNotAfter.UTC().Format(time.RFC3339) + ", within the last fifth of its lifetime: it is rotated unasked"
	default:
		return caDecision{}
	}
	if !v.atRest {
		return caDecision{change: caWait, reason: "a CA rotation is due (" + why + "); it begins once every member is ready"}
	}
	return caDecision{change: caBegin, reason: why}
}

// trustAndRestart is the half of a step that widens or narrows trust:
// each secret is given the trusted CA want, one per pass (members are not
// affected until they restart; clients and the operator read it at their
// next connection, and every serving certificate is of a CA in want);
// then since is recorded; then each member that started before since, and
// the kubelet's update of its files, is restarted, one at a time while
// every member is ready; then the rotation moves on (then).
func trustAndRestart(v caRotationView, want caTrust, then caChange, done string) caDecision {
	for _, l := range v.leaves {
		if l.trusts != want {
			return caDecision{change: caWriteTrust, target: l.secret, reason: "CA rotation: certificate secrets are given the trusted CA of step " + string(v.step)}
		}
	}
	if v.since.IsZero() {
		return caDecision{change: caMarkSince, reason: "every certificate secret has the trusted CA of step " + string(v.step)}
	}
	if settled := v.since.Add(caBundleSettle); v.now.Before(settled) {
		return caDecision{change: caWait, reason: "CA rotation: members are restarted from " + settled.UTC().Format(time.RFC3339) + ", once the kubelet has updated their files"}
	}
	for _, m := range v.members {
		if !m.started.IsZero() && !m.started.Before(v.since.Add(caBundleSettle)) {
			continue
		}
		if !v.atRest {
			return caDecision{change: caWait, reason: "CA rotation: " + m.name + " is restarted to read its trusted CA once every member is ready"}
		}
		return caDecision{change: caRestartMember, target: m.name, reason: "CA rotation: etcd reads its trusted CA only when it starts (step " + string(v.step) + ")"}
	}
	return caDecision{change: then, reason: done}
}

// caRotationOf reads what the CA secret of cluster namespace/name says of
// its CA and of a rotation; ca is its own CA, next its new one (nil when
// absent or unusable).
func caRotationOf(secret *corev1.Secret, ca, next *tlsissue.CA, step caStep, namespace, name string) caRotationRecord {
	r := caRotationRecord{id: secret.Annotations[caRotationAnnotation], done: secret.Annotations[caRotatedAnnotation], hasNext: next != nil,
		last: secret.Annotations[caLastRotationAnnotation], unasked: secret.Annotations[caRotationUnaskedAnnotation] == "true"}
	r.since = annotatedTime(secret, caRotationSinceAnnotation)
	r.started = annotatedTime(secret, caRotationStartedAnnotation)
	r.stepStarted = annotatedTime(secret, caRotationStepStartedAnnotation)
	r.lastAt = annotatedTime(secret, caLastRotatedAnnotation)
	r.caCert = firstCertificate(secret.Data[tlsissue.CACertKey])
	r.madeByOperator = caMadeByOperator(secret, r.caCert, namespace, name)
	if ca != nil {
		r.caNotBefore, r.caNotAfter = ca.Cert.NotBefore, ca.Cert.NotAfter
	}
	switch {
	case step == caStepTrustNew:
		r.oldPEM, r.newPEM = secret.Data[previousCACertKey], secret.Data[tlsissue.CACertKey]
	case next != nil:
		r.oldPEM, r.newPEM = secret.Data[tlsissue.CACertKey], next.CertPEM
	}
	return r
}

// annotatedTime is the time annotation key of secret holds; zero when
// absent or not RFC 3339.
func annotatedTime(secret *corev1.Secret, key string) time.Time {
	at, err := time.Parse(time.RFC3339, secret.Annotations[key])
	if err != nil {
		return time.Time{}
	}
	return at
}

// firstCertificate is the first certificate of a PEM bundle; nil when it
// holds none that parses.
func firstCertificate(pemData []byte) *x509.Certificate {
	for {
		var block *pem.Block
		block, pemData = pem.Decode(pemData)
		if block == nil {
			return nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			return cert
		}
	}
}

// trustOf tells what a certificate secret's trusted CA key holds, as
// written by the rotation (tlsissue.Bundle); anything else is trustOther.
func trustOf(trusted, oldPEM, newPEM []byte) caTrust {
	switch {
	case len(oldPEM) > 0 && bytes.Equal(trusted, oldPEM):
		return trustOld
	case len(newPEM) > 0 && bytes.Equal(trusted, newPEM):
		return trustNew
	case len(oldPEM) > 0 && len(newPEM) > 0 && bytes.Equal(trusted, tlsissue.Bundle(oldPEM, newPEM)):
		return trustBoth
	}
	return trustOther
}

// rotateCA is step 18b: one change of a CA rotation of issued TLS, after
// the repairs, scaling, upgrades and renewals that come first. A rotation
// begins when the user asks, or by itself once a CA the operator made is
// in the last fifth of its lifetime. A rotation under way goes on whoever
// began it; a wait of it is said, and holds nothing after it up but
// stuckPods, which only reports.
func rotateCA(s *snapshot) (action, bool) {
	v, ok := caRotationViewOf(s)
	if !ok {
		return action{}, false
	}
	d := nextCAChange(v)
	switch d.change {
	case caNothing:
		return action{}, false
	case caWait:
		return waiting(d.reason), true
	case caRestartMember:
		// Taking a member down to restart it needs of the others what an
		// upgrade's patch does: every member ready and answering etcd in
		// this pass, a leader, and every follower caught up with it.
		if a, ok := readyForUpgrade(s); ok {
			return a, true
		}
	}
	return action{kind: actRotateCA, caChange: d.change, member: d.target, reason: d.reason}, true
}

// caRotationViewOf is the chooser's view of a snapshot: the CA secret's
// record, the certificate secrets, the members' etcd start times, and
// whether the cluster is at rest as a renewal needs it. ok is false
// outside issued TLS or while its secrets are not all there and usable.
func caRotationViewOf(s *snapshot) (caRotationView, bool) {
	leaves := renewableLeaves(s)
	if leaves == nil {
		return caRotationView{}, false
	}
	r := s.issued.rotation
	v := caRotationView{
		now: s.now, requested: s.rotateCARequest, done: r.done,
		caNotBefore: r.caNotBefore, caNotAfter: r.caNotAfter, caMadeByOperator: r.madeByOperator,
		rotation: r.id, step: s.issued.caStep, since: r.since, hasNext: r.hasNext,
		atRest: atRestForRenewal(s),
	}
	for _, l := range leaves {
		v.leaves = append(v.leaves, caRotationLeaf{secret: l.secret, fromNext: l.fromNext, trusts: l.trusts})
	}
	for _, name := range sortedKeys(s.views) {
		m := caRotationMember{name: name}
		if p := s.views[name].pod; p != nil {
			m.started = etcdStartedAt(p)
		}
		v.members = append(v.members, m)
	}
	return v, true
}

// caRotationStatus is status.caRotation: the CA secret's CA and what its
// annotations say of a rotation, read again at each pass. prev is kept
// while the secrets of issued TLS could not be read in this pass.
func caRotationStatus(s *snapshot, prev *api.CARotationStatus) *api.CARotationStatus {
	switch {
	case !s.spec.Spec.TLS.IsIssued():
		return nil
	case s.issued == nil:
		return prev
	case s.issued.caMissing:
		return nil
	}
	r := s.issued.rotation
	st := &api.CARotationStatus{
		CA:           caCertificateOf(r.caCert),
		Rotation:     r.id,
		Unasked:      r.unasked && s.issued.caStep != caStepNone,
		Step:         string(s.issued.caStep),
		Started:      statusTime(r.started),
		StepStarted:  statusTime(r.stepStarted),
		LastRotation: r.last,
		LastRotated:  statusTime(r.lastAt),
	}
	if r.madeByOperator && r.caCert != nil {
		st.MadeByOperator = true
		st.AutoRotateAt = statusTime(caAutoRotateAt(r.caCert.NotBefore, r.caCert.NotAfter))
	}
	if s.issued.caStep != caStepNone {
		st.OldCA, st.NewCA = caCertificateOf(firstCertificate(r.oldPEM)), caCertificateOf(firstCertificate(r.newPEM))
	}
	return st
}

// caCertificateOf names cert for the status; nil for nil.
func caCertificateOf(cert *x509.Certificate) *api.CACertificate {
	if cert == nil {
		return nil
	}
	return &api.CACertificate{Subject: cert.Subject.String(), Serial: fmt.Sprintf("%x", cert.SerialNumber), NotAfter: metav1.NewTime(cert.NotAfter.UTC())}
}

// statusTime is t for the status; nil for the zero time.
func statusTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t.UTC())
	return &mt
}
