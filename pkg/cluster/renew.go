package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// This file is the renewal of issued TLS's certificates: each certificate
// secret is given a new certificate and key from the same CA, in place.
// Members read their certificate and key again for each new connection
// (etcdutil's TestRenewedServerCertificateIsServedWithoutRestart shows it on
// every supported version), and a new certificate from the CA they already
// trust is accepted by every peer and client: nothing restarts, and a
// connection made with the old certificate goes on until it closes. The CA
// is never renewed here: members read their CA files only when they start.

// eventCertificateRenewed tells that a certificate secret was renewed.
const eventCertificateRenewed = "CertificateRenewed"

// renewAt is when an issued certificate is renewed: once two thirds of its
// lifetime have passed. A third of it is left to retry through a long
// trouble (90 days' certificates have a month), and expiringCertificates
// does not warn about an issued certificate before its renewal is overdue.
func renewAt(notBefore, notAfter time.Time) time.Time {
	return notBefore.Add(notAfter.Sub(notBefore) * 2 / 3)
}

// renewalOverdue is when an issued certificate that was not renewed is
// warned about: half way from renewAt to its expiry (the last sixth of its
// lifetime), so that a renewal held up by an unhealthy cluster or an
// unusable CA secret is seen while there is time to act.
func renewalOverdue(notBefore, notAfter time.Time) time.Time {
	at := renewAt(notBefore, notAfter)
	return at.Add(notAfter.Sub(at) / 2)
}

// renewCertificates is step 18: one certificate secret of issued TLS whose
// certificate is due, or that a rotation the user asked for has not
// reached, is renewed, one per pass, and only in a cluster at rest (every
// member ready, no problem that holds it up) with usable TLS secrets: a
// renewal is never what a troubled cluster needs first, and etcd's ladder
// of repairs comes before it. Otherwise nothing is decided here, so that
// the steps after it still run; a renewal held up long enough is warned
// about (renewalOverdue).
//
// Nor while the CA secret records a CA rotation: the rotation issues every
// leaf from the new CA itself (carotation.go), and a renewal from the CA
// secret's ca.crt in between would be undone by it. An expired certificate
// is still renewed then (renewExpiredCertificates): ca.crt is trusted by
// every member through each step.
func renewCertificates(s *snapshot) (action, bool) {
	leaf, why := leafToRenew(s)
	if leaf == nil || s.issued.caStep != caStepNone || !atRestForRenewal(s) {
		return action{}, false
	}
	return action{kind: actRenewCertificate, member: leaf.secret, reason: why}, true
}

// renewExpiredCertificates is step 3b: a certificate secret of issued TLS
// whose certificate has expired is renewed from the same CA, one secret per
// pass, whatever the members' readiness. An expired peer or server
// certificate is exactly why members are not ready (every handshake with it
// fails), so waiting for them to be ready would wait forever, and the
// repairs of the steps after this one (a member replaced, a quorum
// recovered) would act on failures that only the renewal cures. The renewal
// is safe while members are down: the certificate it replaces is unusable
// already, and the new one is signed by the CA every member trusts, read
// again by members for each new connection.
//
// What still holds it up: a paused or deleted cluster (steps 1 and 3), the
// secrets of issued TLS not all there and usable (leafToRenew's rule: a
// missing one is issued first, by step 2), and one secret per pass.
func renewExpiredCertificates(s *snapshot) (action, bool) {
	leaves := renewableLeaves(s)
	for i := range leaves {
		if l := &leaves[i]; !s.now.Before(l.notAfter) {
			return action{kind: actRenewCertificate, member: l.secret, reason: "expired on " + l.notAfter.UTC().Format(time.RFC3339) + ": every handshake with it fails"}, true
		}
	}
	return action{}, false
}

// renewableLeaves are the certificate secrets of issued TLS, in
// tlsissue.Kinds order, when every one is there and may be renewed from the
// CA secret; nil when a secret is missing or one is not usable (a CA secret
// that cannot issue, a certificate of another CA or that does not parse).
func renewableLeaves(s *snapshot) []issuedLeaf {
	v := s.issued
	if v == nil || v.caMissing || len(v.missing) > 0 || len(v.problems) > 0 || v.conflict != "" {
		return nil
	}
	for _, l := range v.leaves {
		if l.notAfter.IsZero() {
			return nil
		}
	}
	return v.leaves
}

// leafToRenew chooses the first certificate secret, in tlsissue.Kinds order,
// that a rotation asked for has not reached or whose certificate is due;
// nil when none is, or the secrets of issued TLS are not all there and
// usable (renewableLeaves).
func leafToRenew(s *snapshot) (*issuedLeaf, string) {
	leaves := renewableLeaves(s)
	for i := range leaves {
		l := &leaves[i]
		if s.rotateRequest != "" && l.rotatedFor != s.rotateRequest {
			return l, fmt.Sprintf("%s is %q", api.RotateCertificatesAnnotation, s.rotateRequest)
		}
		if at := renewAt(l.notBefore, l.notAfter); !s.now.Before(at) {
			return l, fmt.Sprintf("two thirds of its lifetime passed on %s; it expires on %s", at.UTC().Format(time.RFC3339), l.notAfter.UTC().Format(time.RFC3339))
		}
	}
	return nil, ""
}

// atRestForRenewal tells whether every member is ready and no problem
// holds the cluster up.
func atRestForRenewal(s *snapshot) bool {
	return len(s.views) > 0 && s.allReady() && !slices.ContainsFunc(assess(s), blocking)
}

// rotationDone is the rotation asked for that every certificate secret of
// issued TLS has been renewed (or made) for, "" while one has not.
func rotationDone(s *snapshot) string {
	v := s.issued
	if s.rotateRequest == "" || v == nil || len(v.missing) > 0 || len(v.leaves) == 0 {
		return ""
	}
	for _, l := range v.leaves {
		if l.rotatedFor != s.rotateRequest {
			return ""
		}
	}
	return s.rotateRequest
}

// renewOneCertificate renews the certificate secret a.member from the CA
// secret, with the names and lifetime a new one would get, and updates it
// as it was observed: one written since (a conflict) was written by someone
// else, and is read again by the next pass rather than overwritten.
func (c *Cluster) renewOneCertificate(ctx context.Context, s *snapshot, a action) outcome {
	// Whatever happens, the next pass reads the secrets again, and the
	// operator its own client certificate: loadTLS dials with the new one
	// from then on. The old one, from the same CA, works until then.
	c.issued = issuedCache{}
	c.certs.readAt = time.Time{}
	idx := slices.IndexFunc(s.issued.leaves, func(l issuedLeaf) bool { return l.secret == a.member })
	if idx < 0 {
		return outcome{err: newPassError(problemInternal, "renew secret "+a.member, fmt.Errorf("not observed"))}
	}
	leaf := s.issued.leaves[idx]
	tlsp := s.spec.Spec.TLS
	names := tlsp.Secrets(c.name)
	secrets := c.cfg.KubeClient.CoreV1().Secrets(c.namespace)
	ca, err := c.readCA(ctx, s, names.CA)
	if err != nil {
		return outcome{err: err}
	}
	secret, err := secrets.Get(ctx, leaf.secret, metav1.GetOptions{})
	if err != nil {
		return outcome{err: kubeError("read secret "+leaf.secret, err)}
	}
	data, err := ca.Issue(leaf.kind, c.issuedCluster(s), s.now, tlsp.Issued.Validity())
	if err != nil {
		return outcome{err: newPassError(problemInternal, "issue the "+leaf.kind.String()+" certificate", err)}
	}
	renewed := secret.DeepCopy()
	// The update is of the secret as observed: its resourceVersion then.
	renewed.ResourceVersion = leaf.resourceVersion
	if renewed.Data == nil {
		renewed.Data = map[string][]byte{}
	}
	if s.issued.caStep != caStepNone {
		// During a CA rotation the secret trusts what the rotation's step
		// gave it (the bundle old+new, or the new CA alone), not only the
		// CA that issues the renewal: that is kept.
		_, _, caKey := leaf.kind.Keys()
		if trusted, ok := secret.Data[caKey]; ok {
			data[caKey] = trusted
		}
	}
	// Keys a user added to the secret are kept.
	maps.Copy(renewed.Data, data)
	if s.rotateRequest != "" {
		if renewed.Annotations == nil {
			renewed.Annotations = map[string]string{}
		}
		renewed.Annotations[api.RotatedForAnnotation] = s.rotateRequest
	}
	fields := map[string]any{"secret": leaf.secret, "ca": names.CA, "why": a.reason}
	switch _, err := secrets.Update(ctx, renewed, metav1.UpdateOptions{}); {
	case apierrors.IsConflict(err):
		c.log.WithFields(fields).WithError(err).Info("the secret changed since it was read; it is read again before its renewal")
		return outcome{requeue: c.cfg.MinPassInterval}
	case apierrors.IsForbidden(err):
		return outcome{err: kubeError("update secret "+leaf.secret, fmt.Errorf("%w; renewing issued certificates needs the operator's role to allow updating secrets: add the verb update to its rule on secrets", err))}
	case err != nil:
		return outcome{err: kubeError("update secret "+leaf.secret, err)}
	}
	certKey, _, _ := leaf.kind.Keys()
	next := leafOf(leaf.kind, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: leaf.secret}, Data: data})
	oldExpiry, newExpiry := leaf.notAfter.UTC().Format(time.RFC3339), next.notAfter.UTC().Format(time.RFC3339)
	fields["key"], fields["oldNotAfter"], fields["notAfter"] = certKey, oldExpiry, newExpiry
	c.log.WithFields(fields).Info("renewed a certificate")
	c.tell(corev1.EventTypeNormal, eventCertificateRenewed, fmt.Sprintf("Secret %s renewed from CA secret %s: it expired on %s, now on %s (%s)", leaf.secret, names.CA, oldExpiry, newExpiry, a.reason))
	c.cfg.Metrics.certificateRenewed(c.namespace, c.name, leaf.secret)
	return outcome{requeue: c.cfg.MinPassInterval}
}

// readCA reads the CA secret of issued TLS for a certificate to be issued
// from it.
func (c *Cluster) readCA(ctx context.Context, s *snapshot, name string) (*tlsissue.CA, error) {
	secret, err := c.cfg.KubeClient.CoreV1().Secrets(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, kubeError("read the CA secret "+name, err)
	}
	ca, err := tlsissue.CAFromSecret(secret.Data, s.now)
	if err != nil {
		return nil, newPassError(problemTLSCertificate, "use CA secret "+name, err)
	}
	return ca, nil
}

// issuedCluster names the cluster for the names its certificates carry.
func (c *Cluster) issuedCluster(s *snapshot) tlsissue.Cluster {
	cluster := tlsissue.Cluster{Name: c.name, Namespace: c.namespace}
	if p := s.spec.Spec.Pod; p != nil {
		cluster.Domain = p.ClusterDomain
	}
	return cluster
}
