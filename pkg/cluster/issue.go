package cluster

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// This file is issued TLS (spec.TLS.issued): the operator makes the CA and
// the certificates' secrets a cluster lacks, before any member pod (a pod
// waits for the secrets it mounts). Making a missing secret destroys
// nothing; replacing one with certificates of another CA could cut a running
// member off its peers, so an existing secret is only judged here; renew.go
// renews its certificate from the same CA, which every member trusts.

// issuedView is what observe found of the secrets of issued TLS.
type issuedView struct {
	// caMissing: the CA secret does not exist; missing are the kinds of
	// certificate whose secrets do not exist.
	caMissing bool
	missing   []tlsissue.Kind
	// problems say why the secrets that exist cannot be issued from or
	// will not work together; nothing is issued while there are any.
	problems []string
	// conflict says why a secret of the cluster's names cannot be used yet:
	// it belongs to another object (a deleted cluster of the same name
	// whose secrets garbage collection is about to delete).
	conflict string
	// leaves are the certificate secrets that exist, in tlsissue.Kinds
	// order, for their renewal.
	leaves []issuedLeaf
	// caStep is the CA rotation step the CA secret records
	// (caRotationStepAnnotation), caStepNone outside a rotation.
	caStep caStep
	// rotation is what the CA secret records of a CA rotation, and what
	// the CA secret's CAs are, for caRotationViewOf.
	rotation caRotationRecord
}

// caRotationRecord is what the CA secret says of its CAs and of a CA
// rotation under way.
type caRotationRecord struct {
	// id and since are its caRotationAnnotation and
	// caRotationSinceAnnotation (zero when absent or not RFC 3339).
	id    string
	since time.Time
	// done is its caRotatedAnnotation.
	done string
	// started and stepStarted are its caRotationStartedAnnotation and
	// caRotationStepStartedAnnotation; last and lastAt its
	// caLastRotationAnnotation and caLastRotatedAnnotation (times zero
	// when absent or not RFC 3339).
	started, stepStarted time.Time
	last                 string
	lastAt               time.Time
	// caCert is ca.crt's certificate, whether or not the CA is usable;
	// nil when it does not parse. madeByOperator: the operator made it
	// (caMadeByOperator). unasked: the rotation under way was begun by
	// the operator by itself (caRotationUnaskedAnnotation).
	caCert                  *x509.Certificate
	madeByOperator, unasked bool
	// caNotBefore and caNotAfter are ca.crt's; hasNext tells that
	// next-ca.crt and next-ca.key are a usable CA.
	caNotBefore, caNotAfter time.Time
	hasNext                 bool
	// oldPEM and newPEM are the CAs a certificate secret may trust during
	// the step: ca.crt and next-ca.crt until the new CA is adopted, then
	// previous-ca.crt and ca.crt.
	oldPEM, newPEM []byte
}

// issuedLeaf is a certificate secret of issued TLS as observed.
type issuedLeaf struct {
	kind   tlsissue.Kind
	secret string
	// resourceVersion is the secret's when read: a renewal updates the
	// secret as it was seen, and one written since is read again.
	resourceVersion string
	// notBefore and notAfter are its certificate's; zero when it does not
	// parse (a problem of the view then says so).
	notBefore, notAfter time.Time
	// rotatedFor is its RotatedForAnnotation: the rotation it was last
	// renewed (or made) for.
	rotatedFor string
	// During a CA rotation: fromNext, its certificate is of the new CA;
	// trusts, what its trusted CA key holds.
	fromNext bool
	trusts   caTrust
}

// issuedCache keeps the last view while every secret exists and is fine:
// they are then read again every certRereadInterval, not at every pass.
type issuedCache struct {
	complete bool
	readAt   time.Time
	view     *issuedView
}

// secretOf names the secret of a kind of certificate.
func secretOf(n api.TLSSecrets, k tlsissue.Kind) string {
	switch k {
	case tlsissue.Peer:
		return n.Peer
	case tlsissue.Server:
		return n.Server
	case tlsissue.Operator:
		return n.Operator
	}
	return n.Client
}

// observeIssued reads the CA and certificate secrets of an issued-TLS
// cluster, and judges those that exist.
func (c *Cluster) observeIssued(ctx context.Context, s *snapshot) error {
	tlsp := s.spec.Spec.TLS
	if !tlsp.IsIssued() || tlsp.FromCertManager() {
		c.issued = issuedCache{}
		return nil
	}
	if c.issued.complete && s.now.Sub(c.issued.readAt) < certRereadInterval {
		// The view is shared, never changed: a snapshot is read only.
		s.issued = c.issued.view
		return nil
	}
	names := tlsp.Secrets(c.name)
	v := &issuedView{}
	read := func(name string) (*corev1.Secret, bool, error) {
		secret, err := c.readOptionalSecret(ctx, name)
		if secret == nil || err != nil {
			return nil, false, err
		}
		// A secret nobody controls is the user's, used as it is (a CA of
		// their own); one another object controls is not ours to use.
		if ref := metav1.GetControllerOfNoCopy(secret); ref != nil && !k8sutil.IsOwnedBy(secret, c.latest) && v.conflict == "" {
			v.conflict = fmt.Sprintf("secret %s belongs to %s %s (uid %s), not to this cluster; waiting for it to be deleted", name, ref.Kind, ref.Name, ref.UID)
		}
		return secret, true, nil
	}
	caSecret, found, err := read(names.CA)
	if err != nil {
		return err
	}
	var ca, next *tlsissue.CA
	if found {
		if ca, err = tlsissue.CAFromSecret(caSecret.Data, s.now); err != nil {
			v.problems = append(v.problems, fmt.Sprintf("CA secret %s (%s.caSecret) %v; it is never replaced: fix it, or delete it and the certificates' secrets to have all made again", names.CA, names.Field, err))
		}
		v.caStep = caStep(caSecret.Annotations[caRotationStepAnnotation])
		if v.caStep != caStepNone {
			// Between steps a and c of a CA rotation a leaf is of the old
			// CA or of the new one, and members trust both.
			next, _ = tlsissue.CAFromSecret(map[string][]byte{tlsissue.CACertKey: caSecret.Data[nextCACertKey], tlsissue.CAKeyKey: caSecret.Data[nextCAKeyKey]}, s.now)
		}
		v.rotation = caRotationOf(caSecret, ca, next, v.caStep, c.namespace, c.name)
	} else {
		v.caMissing = true
	}
	var issued []string
	for _, k := range tlsissue.Kinds {
		name := secretOf(names, k)
		secret, found, err := read(name)
		if err != nil {
			return err
		}
		if !found {
			v.missing = append(v.missing, k)
			continue
		}
		issued = append(issued, name)
		l := leafOf(k, secret)
		if certKey, _, caKey := k.Keys(); v.caStep != caStepNone {
			l.fromNext = next != nil && next.Signed(secret.Data[certKey]) || v.caStep == caStepTrustNew && ca != nil && ca.Signed(secret.Data[certKey])
			l.trusts = trustOf(secret.Data[caKey], v.rotation.oldPEM, v.rotation.newPEM)
		}
		v.leaves = append(v.leaves, l)
		if certKey, _, _ := k.Keys(); ca != nil && !ca.Signed(secret.Data[certKey]) && (next == nil || !next.Signed(secret.Data[certKey])) {
			v.problems = append(v.problems, fmt.Sprintf("%s of secret %s was not issued by the CA in secret %s, so members and clients given the two would not trust each other; it is never replaced: delete it to have it issued again", certKey, name, names.CA))
		}
	}
	if v.caMissing && len(issued) > 0 {
		v.problems = append(v.problems, fmt.Sprintf("CA secret %s is gone while certificates it issued remain in %s, which certificates of a new CA would not be trusted by: restore the CA secret, or delete those to have all made again", names.CA, strings.Join(issued, ", ")))
	}
	c.issued = issuedCache{complete: !v.caMissing && len(v.missing) == 0 && len(v.problems) == 0 && v.conflict == "", readAt: s.now, view: v}
	s.issued = v
	return nil
}

// leafOf is the certificate secret of kind k as observed.
func leafOf(k tlsissue.Kind, secret *corev1.Secret) issuedLeaf {
	l := issuedLeaf{kind: k, secret: secret.Name, resourceVersion: secret.ResourceVersion, rotatedFor: secret.Annotations[api.RotatedForAnnotation]}
	certKey, _, _ := k.Keys()
	if block, _ := pem.Decode(secret.Data[certKey]); block != nil {
		if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
			l.notBefore, l.notAfter = cert.NotBefore, cert.NotAfter
		}
	}
	return l
}

// issueCertificates ends step 2: the secrets of issued TLS that are missing
// are made before anything else of the cluster but its services, even while
// it is paused (a restore seed waits for the peer service, and would for
// these secrets too).
func issueCertificates(s *snapshot) (action, bool) {
	v := s.issued
	switch {
	case v == nil:
		return action{}, false
	case v.conflict != "":
		return waiting(v.conflict), true
	case !v.caMissing && len(v.missing) == 0:
		return action{}, false
	case len(v.problems) > 0:
		return waiting("no certificate is issued while the TLS secrets that exist are not usable"), true
	}
	names := s.spec.Spec.TLS.Secrets(s.spec.Name)
	var made []string
	if v.caMissing {
		made = append(made, names.CA)
	}
	for _, k := range v.missing {
		made = append(made, secretOf(names, k))
	}
	return action{kind: actIssueCertificates, reason: strings.Join(made, ", ")}, true
}

// makeIssuedSecrets creates the missing secrets of issued TLS: the CA's
// first when it is missing, then the certificates it signs. A secret another
// writer made in between is left as it is.
func (c *Cluster) makeIssuedSecrets(ctx context.Context, s *snapshot) error {
	// Whatever happens, the next pass reads the secrets again.
	c.issued = issuedCache{}
	tlsp := s.spec.Spec.TLS
	names := tlsp.Secrets(c.name)
	secrets := c.cfg.KubeClient.CoreV1().Secrets(c.namespace)
	var ca *tlsissue.CA
	if s.issued.caMissing {
		made, err := tlsissue.NewCA(operatorCASubject(c.namespace, c.name), s.now)
		if err != nil {
			return newPassError(problemInternal, "make a CA", err)
		}
		data, err := made.SecretData()
		if err != nil {
			return newPassError(problemInternal, "make a CA", err)
		}
		// The CA secret belongs to no object, so it outlives the cluster:
		// a cluster deleted and made again under its name (a restore does
		// that) gets its certificates issued from the same CA, and clients
		// that trust it, or hold a client certificate it signed, keep
		// working. Garbage collection would take it with the cluster.
		// The mark tells this CA from one a user brings, which is never
		// rotated unasked.
		secret := c.newIssuedSecret(names.CA, data, nil, "")
		secret.Annotations = map[string]string{caMadeByOperatorAnnotation: caFingerprint(made.Cert)}
		switch _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); {
		case err == nil:
			ca = made
			c.log.WithFields(map[string]any{"secret": names.CA, "notAfter": made.Cert.NotAfter.UTC().Format(time.RFC3339)}).Info("created the CA secret of issued TLS")
		case !apierrors.IsAlreadyExists(err):
			return createSecretError(names.CA, err)
		}
	}
	if ca == nil {
		var err error
		if ca, err = c.readCA(ctx, s, names.CA); err != nil {
			return err
		}
	}
	for _, k := range s.issued.missing {
		name := secretOf(names, k)
		data, err := ca.Issue(k, c.issuedCluster(s), s.now, tlsp.Issued.Validity())
		if err != nil {
			return newPassError(problemInternal, "issue the "+k.String()+" certificate", err)
		}
		// A certificate made now is as new as a rotation asked for
		// before it would make it: it counts as renewed for that.
		switch _, err := secrets.Create(ctx, c.newIssuedSecret(name, data, []metav1.OwnerReference{k8sutil.AsOwner(s.spec)}, s.rotateRequest), metav1.CreateOptions{}); {
		case err == nil:
			c.log.WithFields(map[string]any{"secret": name, "ca": names.CA, "validity": tlsp.Issued.Validity().String()}).Info("issued a certificate")
		case !apierrors.IsAlreadyExists(err):
			return createSecretError(name, err)
		}
	}
	return nil
}

func (c *Cluster) newIssuedSecret(name string, data map[string][]byte, owners []metav1.OwnerReference, rotatedFor string) *corev1.Secret {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       c.namespace,
			Labels:          k8sutil.ClusterLabels(c.name),
			OwnerReferences: owners,
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	if rotatedFor != "" {
		secret.Annotations = map[string]string{api.RotatedForAnnotation: rotatedFor}
	}
	return secret
}

// createSecretError names the rule to add when the operator's role does
// not let it create secrets: the original's role only read them.
func createSecretError(name string, err error) error {
	if apierrors.IsForbidden(err) {
		err = fmt.Errorf("%w; issued TLS needs the operator's role to allow creating secrets: add the rule {apiGroups: [\"\"], resources: [secrets], verbs: [create]}", err)
	}
	return kubeError("create secret "+name, err)
}
