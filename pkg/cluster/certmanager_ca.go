package cluster

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// This file carries a CA changed at the cert-manager issuer into a running
// cluster, in the ordered steps of the operator's own CA rotation
// (carotation.go), read from the copies rather than recorded on a CA
// secret: the operator has none under cert-manager, and the copies say
// everything the steps need.
//
// The issuer's CA is the CA of the certificate cert-manager issued last:
// cert-manager does not issue again when its issuer's CA changes, so a new
// CA shows at the next renewal, or at once when a rotation is asked for
// (kubectl etcd rotate-certs). From then on, one change per pass:
//
//	a. every copy comes to trust the new CA beside the CAs it trusted, one
//	   copy per pass (trustWrittenAnnotation records when);
//	b. cert-manager is asked to issue again, from the new CA, every
//	   certificate it issued from another;
//	c. every member whose etcd started before the copies' trust settled
//	   (caBundleSettle after the last write) is restarted, one at a time and
//	   only while every member is ready, so that its etcd reads the bundle;
//	d. the certificates of the new CA are copied (certificatesFromCertManager
//	   holds them until then);
//	e. once the kubelet has given every member its new certificate, every
//	   copy comes to trust the new CA alone, and step c restarts every member
//	   again, so that the old CA is trusted nowhere.
//
// Each step is found undone from the secrets and pods alone, so an operator
// stopped anywhere goes on where it stopped. A CA changed back halfway is
// carried the same way: whichever CA issued last is the one carried in.

// issuerCA is the CA of the certificate cert-manager issued last, and its
// PEM as cert-manager's secret holds it; nil when no usable certificate
// was issued.
func (v *certManagerView) issuerCA() (*x509.Certificate, []byte) {
	var newest *certManagerLeaf
	for i := range v.leaves {
		l := &v.leaves[i]
		if l.issuingCA == nil || l.unusable != "" || l.foreign != "" {
			continue
		}
		if newest == nil || l.issuedNotBefore.After(newest.issuedNotBefore) {
			newest = l
		}
	}
	if newest == nil {
		return nil, nil
	}
	return newest.issuingCA, newest.issuedCA
}

// issuedBy tells whether cert-manager's secret holds a certificate of ca.
func (l *certManagerLeaf) issuedBy(ca *x509.Certificate) bool {
	return ca != nil && l.issuingCA != nil && bytes.Equal(l.issuingCA.Raw, ca.Raw)
}

// copyIssuedBy tells whether the copy holds a certificate ca signed.
func (l *certManagerLeaf) copyIssuedBy(ca *x509.Certificate) bool {
	return ca != nil && l.copyLeaf != nil && l.copyLeaf.CheckSignatureFrom(ca) == nil
}

// trustChangedAt is when a copy's trusted CAs last changed; zero when
// none ever did.
func (v *certManagerView) trustChangedAt() time.Time {
	return v.latest(func(l certManagerLeaf) time.Time { return l.trustWritten })
}

// copiedAt is when a copy was last written.
func (v *certManagerView) copiedAt() time.Time {
	return v.latest(func(l certManagerLeaf) time.Time { return l.copiedAt })
}

// latest is the latest of a time of each copy.
func (v *certManagerView) latest(of func(certManagerLeaf) time.Time) time.Time {
	var at time.Time
	for _, l := range v.leaves {
		if t := of(l); t.After(at) {
			at = t
		}
	}
	return at
}

// membersReadingTrust are the pods of the cluster whose etcd has not
// started since the copies' trusted CAs last changed and the kubelet
// updated their files, by name; settling is true while there is one, or
// while the kubelet may still be updating them. Every pod the cache holds
// counts, whatever the membership known: a pod is what proves that its
// etcd read the files, and a pass that does not know the membership yet
// must not take the lack of members for that proof.
func membersReadingTrust(s *snapshot) (stale []string, settling bool) {
	v := s.certManager
	if v == nil {
		return nil, false
	}
	since := v.trustChangedAt()
	if since.IsZero() {
		return nil, false
	}
	settled := since.Add(caBundleSettle)
	for _, name := range sortedKeys(s.pods) {
		// A pod whose etcd does not run reads the files when it starts,
		// and settled has passed by the time anything waits on it.
		if started := etcdStartedAt(s.pods[name]); !started.IsZero() && started.Before(settled) {
			stale = append(stale, name)
		}
	}
	return stale, len(stale) > 0 || s.now.Before(settled)
}

// trustsExactly tells whether a bundle of CA certificates (PEM) holds the
// certificates of want and no other.
func trustsExactly(bundle, want []byte) bool {
	have, wanted := certificateDERs(bundle), certificateDERs(want)
	if len(have) != len(wanted) {
		return false
	}
	for i := range have {
		if !bytes.Equal(have[i], wanted[i]) {
			return false
		}
	}
	return true
}

// certificateDERs are the certificates of a PEM bundle, in order.
func certificateDERs(bundle []byte) [][]byte {
	var out [][]byte
	for rest := bundle; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return out
		}
		if block.Type == "CERTIFICATE" {
			out = append(out, block.Bytes)
		}
	}
}

// carriedTrust is what a copy trusting bundle comes to trust as the
// issuer's CA ca (caPEM) is carried in: the bundle and ca while the bundle
// lacks it (step a), ca alone after (step e).
func carriedTrust(bundle []byte, ca *x509.Certificate, caPEM []byte) []byte {
	if !bundleHolds(bundle, ca) {
		return tlsissue.Bundle(bundle, caPEM)
	}
	return caPEM
}

// carryIssuerCA is step 18c under issued TLS from cert-manager: one change
// that carries the issuer's CA into the cluster (the steps at the top of
// this file), after the repairs, scaling, upgrades and renewals that come
// first. Nothing is decided while a copy is missing or cert-manager cannot
// be read: certificatesFromCertManager says why.
func carryIssuerCA(s *snapshot) (action, bool) {
	v := s.certManager
	if v == nil || v.unserved != "" {
		return action{}, false
	}
	for _, l := range v.leaves {
		if !l.hasCopy {
			return action{}, false
		}
	}
	ca, caPEM := v.issuerCA()
	if ca == nil {
		return action{}, false
	}
	name := fmt.Sprintf("%q", ca.Subject.CommonName)
	for _, l := range v.leaves {
		if !bundleHolds(l.copyTrust, ca) {
			return action{kind: actCarryIssuerCA, caChange: caWriteTrust, member: l.kind.String(),
				reason: fmt.Sprintf("cert-manager issued from CA %s, which secret %s does not trust yet: it trusts it beside its CAs", name, l.secret)}, true
		}
	}
	fingerprint := caFingerprint(ca)
	for _, l := range v.leaves {
		if l.foreign == "" && !l.issuedBy(ca) && !l.issuing && l.reissuedForCA != fingerprint {
			return action{kind: actReissueCertificate, member: l.kind.String(), issuerCA: fingerprint,
				reason: fmt.Sprintf("the issuer's CA is now %s: every certificate is issued from it", name)}, true
		}
	}
	for _, l := range v.leaves {
		if l.copyIssuedBy(ca) {
			continue
		}
		// Members read the widened trust before any copy holds a
		// certificate of the new CA.
		if a, ok := restartForIssuerTrust(s, name); ok {
			return a, true
		}
		if l.issuedBy(ca) {
			return waiting(fmt.Sprintf("carrying the issuer's CA %s in: the certificate cert-manager issued from it into %s is copied into %s next", name, l.issuedSecret, l.secret)), true
		}
		return waiting(fmt.Sprintf("carrying the issuer's CA %s in: waiting for cert-manager to issue Certificate %s from it (%s)", name, l.certificate, l.notReady)), true
	}
	for _, l := range v.leaves {
		if trustsExactly(l.copyTrust, caPEM) {
			continue
		}
		if settled := v.copiedAt().Add(caBundleSettle); s.now.Before(settled) {
			return waiting(fmt.Sprintf("carrying the issuer's CA %s in: the CAs before it are no longer trusted from %s, once the kubelet has given every member its certificate", name, settled.UTC().Format(time.RFC3339))), true
		}
		return action{kind: actCarryIssuerCA, caChange: caWriteTrust, member: l.kind.String(),
			reason: fmt.Sprintf("every certificate is of the issuer's CA %s: secret %s trusts it alone", name, l.secret)}, true
	}
	// Members read the narrowed trust, so that the CAs before are
	// trusted nowhere.
	return restartForIssuerTrust(s, name)
}

// restartForIssuerTrust restarts, one at a time and only in a cluster at
// rest, the members whose etcd has not read the copies' trusted CAs since
// they last changed (step c): etcd reads them only when it starts.
func restartForIssuerTrust(s *snapshot, name string) (action, bool) {
	stale, settling := membersReadingTrust(s)
	if !settling {
		return action{}, false
	}
	if settled := s.certManager.trustChangedAt().Add(caBundleSettle); s.now.Before(settled) {
		return waiting(fmt.Sprintf("carrying the issuer's CA %s in: members are restarted from %s, once the kubelet has updated their files", name, settled.UTC().Format(time.RFC3339))), true
	}
	member := ""
	for _, pod := range stale {
		if _, ok := s.views[pod]; ok && member == "" {
			member = pod
		}
	}
	if member == "" {
		return waiting(fmt.Sprintf("carrying the issuer's CA %s in: pods %s have not read the trusted CAs since they changed, and are no members to restart", name, strings.Join(stale, ", "))), true
	}
	if !atRestForRenewal(s) {
		return waiting(fmt.Sprintf("carrying the issuer's CA %s in: %s is restarted to read its trusted CAs once every member is ready", name, member)), true
	}
	// Taking a member down needs of the others what an upgrade's patch
	// does: every member ready and answering, a leader, followers caught up.
	if a, ok := readyForUpgrade(s); ok {
		return a, true
	}
	return action{kind: actCarryIssuerCA, caChange: caRestartMember, member: member,
		reason: fmt.Sprintf("carrying the issuer's CA %s in: etcd reads its trusted CAs only when it starts", name)}, true
}

// carryIssuerCAChange makes the change a of carryIssuerCA: the trusted CAs
// of one copy written, or a member restarted.
func (c *Cluster) carryIssuerCAChange(ctx context.Context, s *snapshot, a action) outcome {
	c.certManager = certManagerCache{}
	c.certs.readAt = time.Time{}
	var err error
	target := a.member
	switch a.caChange {
	case caWriteTrust:
		l := s.certManager.leafOfKind(a.member)
		if l == nil {
			return outcome{}
		}
		target = l.secret
		err = c.writeIssuerTrust(ctx, s, l)
	case caRestartMember:
		err = c.restartForCA(ctx, s, a.member)
	default:
		return outcome{}
	}
	switch {
	case apierrors.IsConflict(err):
		c.log.WithField("secret", target).Info("a copy changed since it was read; it is read again")
		return outcome{requeue: c.cfg.MinPassInterval}
	case err != nil:
		return outcome{err: err}
	}
	what := map[caChange]string{caWriteTrust: "trusted CAs written into", caRestartMember: "restarting member"}[a.caChange]
	c.log.WithFields(map[string]any{"change": what, "target": target, "why": a.reason}).Info("carrying the issuer's CA in")
	c.tell(corev1.EventTypeNormal, eventCARotation, fmt.Sprintf("issuer's CA: %s %s (%s)", what, target, a.reason))
	return outcome{requeue: c.cfg.MinPassInterval}
}

// writeIssuerTrust gives copy l the trusted CAs carriedTrust says, as the
// pass saw the copy (its resourceVersion as precondition), and records when.
func (c *Cluster) writeIssuerTrust(ctx context.Context, s *snapshot, l *certManagerLeaf) error {
	ca, caPEM := s.certManager.issuerCA()
	if ca == nil {
		return nil
	}
	secrets := c.cfg.KubeClient.CoreV1().Secrets(c.namespace)
	sec, err := secrets.Get(ctx, l.secret, metav1.GetOptions{})
	if err != nil {
		return kubeError("read secret "+l.secret, err)
	}
	if sec.ResourceVersion != l.copyResVersion {
		return apierrors.NewConflict(corev1.Resource("secrets"), l.secret, fmt.Errorf("changed since the pass read it"))
	}
	sec = sec.DeepCopy()
	_, _, caKey := l.kind.Keys()
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	sec.Data[caKey] = carriedTrust(l.copyTrust, ca, caPEM)
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	sec.Annotations[trustWrittenAnnotation] = s.now.UTC().Format(time.RFC3339)
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return kubeError("update secret "+l.secret, err)
	}
	return nil
}
