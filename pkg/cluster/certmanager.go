package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// This file is issued TLS from cert-manager (spec.TLS.issued.issuerRef):
// the operator makes one cert-manager Certificate per kind of certificate,
// owned by the cluster, and copies what cert-manager issues into the
// secrets of the operator's layout that members, the operator and clients
// use. The copy, rather than members mounting cert-manager's secrets, is
// what keeps a running cluster safe from its issuer: etcd reads its trusted
// CA only when it starts, so a leaf from a CA the members do not trust yet
// (the issuer's CA changed) would cut them off each other the moment
// kubelet updated the files. A leaf is copied only when every copy already
// trusts the CA that issued it, and every member has started since; a CA
// changed at the issuer is carried into the cluster in ordered steps
// (certmanager_ca.go). cert-manager renews the leaves (at two thirds of their
// lifetime); a copy follows within certRereadInterval, and etcd serves a
// renewed leaf from its next connection on.

// certificatesGVR is cert-manager's Certificate resource.
var certificatesGVR = schema.GroupVersionResource{Group: api.CertManagerGroup, Version: "v1", Resource: "certificates"}

// Annotations the operator keeps on cert-manager objects and on its copies.
const (
	// reissuedForAnnotation on a Certificate is the rotation request
	// (api.RotateCertificatesAnnotation) cert-manager was last asked to
	// issue it again for, and reissuedAfterAnnotation the Certificate's
	// status.revision then: the request is done once a later revision
	// was issued (a failed issue leaves the revision as it was).
	reissuedForAnnotation   = "etcd.database.coreos.com/reissued-for"
	reissuedAfterAnnotation = "etcd.database.coreos.com/reissued-after-revision"
	// reissuedForCAAnnotation on a Certificate is the issuer's CA
	// (caFingerprint) cert-manager was last asked to issue it again from,
	// when that CA changed.
	reissuedForCAAnnotation = "etcd.database.coreos.com/reissued-for-ca"
	// copiedFromAnnotation on a copy names the secret cert-manager wrote
	// its certificate into; copiedAtAnnotation says when (RFC 3339).
	copiedFromAnnotation = "etcd.database.coreos.com/copied-from"
	copiedAtAnnotation   = "etcd.database.coreos.com/copied-at"
	// trustWrittenAnnotation on a copy is when the CAs it trusts were last
	// changed (RFC 3339): a member whose etcd started at least
	// caBundleSettle after every copy's has read them.
	trustWrittenAnnotation = "etcd.database.coreos.com/trust-written"
)

// eventCertificateRequested tells that a cert-manager Certificate was made.
const eventCertificateRequested = "CertificateRequested"

// Keys of the secrets cert-manager writes.
const (
	issuedCertKey = "tls.crt"
	issuedKeyKey  = "tls.key"
	issuedCAKey   = "ca.crt"
)

// certManagerView is what observe found of the certificates cert-manager
// issues for the cluster.
type certManagerView struct {
	// unserved says why cert-manager's Certificates cannot be read (its
	// API is not installed, the operator's role does not allow it); the
	// leaves are then those of the copies alone.
	unserved string
	// leaves are one per kind of certificate, in tlsissue.Kinds order.
	leaves []certManagerLeaf
}

// certManagerLeaf is one kind of certificate: its Certificate, the secret
// cert-manager writes, and the operator's copy.
type certManagerLeaf struct {
	kind                              tlsissue.Kind
	certificate, issuedSecret, secret string
	// exists and current: the Certificate exists, and asks for what the
	// operator would (wantedCertificateSpec). foreign says why it is not
	// the operator's to change: another object controls it.
	exists, current bool
	foreign         string
	// notReady is the Certificate's Ready condition's message while it is
	// not ready, "" once it is. issuing: its Issuing condition is True.
	// reissuedFor is its reissuedForAnnotation; revision its
	// status.revision, reissuedAfter its reissuedAfterAnnotation.
	notReady                string
	issuing                 bool
	reissuedFor             string
	revision, reissuedAfter int64
	// reissuedForCA is its reissuedForCAAnnotation.
	reissuedForCA string
	// fresh: cert-manager's secret holds a usable certificate other than
	// the copy's; unusable says why cert-manager's secret cannot be copied
	// at all.
	fresh    bool
	unusable string
	// issuedNotBefore, issuedNotAfter and issuedCert, issuedKey and
	// issuedCA (PEM) are what cert-manager's secret held when judged: what
	// a copy writes; issuingCA is the CA that signed it.
	issuedNotBefore, issuedNotAfter time.Time
	issuedCert, issuedKey, issuedCA []byte
	issuingCA                       *x509.Certificate
	// hasCopy: the operator's secret exists; copyResVersion is its
	// resourceVersion, copyCert its certificate (copyLeaf parsed) and
	// copyTrust the CAs (PEM) it trusts; trustWritten and copiedAt are
	// its trustWrittenAnnotation and copiedAtAnnotation.
	hasCopy                bool
	copyResVersion         string
	copyCert, copyTrust    []byte
	copyLeaf               *x509.Certificate
	trustWritten, copiedAt time.Time
}

// certManagerCache keeps the last view while every copy is up to date:
// it is then read again every certRereadInterval, not at every pass.
type certManagerCache struct {
	readAt time.Time
	view   *certManagerView
}

// settled tells whether the view needs no action: nothing to make, copy
// or reissue, and no rotation request pending.
func (v *certManagerView) settled(rotateRequest string) bool {
	if v.unserved != "" {
		return false
	}
	for _, l := range v.leaves {
		if !l.exists || !l.current || !l.hasCopy || l.fresh || l.issuing || rotateRequest != "" && (l.reissuedFor != rotateRequest || l.revision <= l.reissuedAfter) {
			return false
		}
	}
	return true
}

// observeCertManager reads the Certificates, cert-manager's secrets and
// the copies of a cluster whose certificates cert-manager issues.
func (c *Cluster) observeCertManager(ctx context.Context, s *snapshot) error {
	tlsp := s.spec.Spec.TLS
	if !tlsp.FromCertManager() {
		c.certManager = certManagerCache{}
		return nil
	}
	if cached := c.certManager.view; cached != nil && s.now.Sub(c.certManager.readAt) < certRereadInterval && cached.settled(s.rotateRequest) {
		s.certManager = cached
		return nil
	}
	names := tlsp.Secrets(c.name)
	want := c.certificateWants(s)
	v := &certManagerView{}
	for _, k := range tlsissue.Kinds {
		secret := secretOf(names, k)
		certificate, issuedSecret := api.CertManagerCertificate(secret)
		l := certManagerLeaf{kind: k, certificate: certificate, issuedSecret: issuedSecret, secret: secret}
		copied, err := c.readOptionalSecret(ctx, secret)
		if err != nil {
			return err
		}
		if copied != nil {
			certKey, _, caKey := k.Keys()
			l.hasCopy, l.copyResVersion = true, copied.ResourceVersion
			l.copyCert, l.copyTrust = copied.Data[certKey], copied.Data[caKey]
			l.copyLeaf = firstCertificate(l.copyCert)
			l.trustWritten, l.copiedAt = annotatedTime(copied, trustWrittenAnnotation), annotatedTime(copied, copiedAtAnnotation)
		}
		v.leaves = append(v.leaves, l)
	}
	if c.cfg.Dynamic == nil {
		v.unserved = "cert-manager's Certificates cannot be read: the operator was started without a client for them"
	}
	for i := range v.leaves {
		if v.unserved != "" {
			break
		}
		l := &v.leaves[i]
		got, err := c.cfg.Dynamic.Resource(certificatesGVR).Namespace(c.namespace).Get(ctx, l.certificate, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && !certificateAPIMissing(err):
		case err != nil && (certificateAPIMissing(err) || apierrors.IsForbidden(err)):
			v.unserved = certManagerUnservedReason(err)
			continue
		case err != nil:
			return kubeError("read Certificate "+l.certificate, err)
		default:
			judgeCertificate(l, got, want(l.kind), c.latest)
		}
		issued, err := c.readOptionalSecret(ctx, l.issuedSecret)
		if err != nil {
			return err
		}
		if issued != nil {
			judgeIssued(l, issued, s.now)
		}
	}
	c.certManager = certManagerCache{readAt: s.now, view: v}
	s.certManager = v
	return nil
}

// readOptionalSecret reads a secret, nil when there is none.
func (c *Cluster) readOptionalSecret(ctx context.Context, name string) (*corev1.Secret, error) {
	secret, err := c.cfg.KubeClient.CoreV1().Secrets(c.namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, kubeError("read secret "+name, err)
	}
	return secret, nil
}

// certificateAPIMissing tells a Certificate the server does not serve (no
// cert-manager) from one that does not exist.
func certificateAPIMissing(err error) bool {
	if meta.IsNoMatchError(err) {
		return true
	}
	// The API server answers a resource it does not serve with a 404
	// that names no object; a missing object is named.
	var status apierrors.APIStatus
	return apierrors.IsNotFound(err) && errors.As(err, &status) &&
		(status.Status().Details == nil || status.Status().Details.Name == "")
}

func certManagerUnservedReason(err error) string {
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf("cert-manager's Certificates cannot be read: %v; the operator's role needs {apiGroups: [%s], resources: [certificates, certificates/status], verbs: [get, create, update]}", err, api.CertManagerGroup)
	}
	return fmt.Sprintf("cert-manager's Certificate API (%s) is not served: install cert-manager, or leave issuerRef out to have the operator issue the certificates from a CA of its own", certificatesGVR.GroupVersion())
}

// judgeCertificate fills in what the Certificate says.
func judgeCertificate(l *certManagerLeaf, got *unstructured.Unstructured, want map[string]any, cluster *api.EtcdCluster) {
	l.exists = true
	if ref := metav1.GetControllerOfNoCopy(got); ref != nil && !k8sutil.IsOwnedBy(got, cluster) {
		l.foreign = fmt.Sprintf("Certificate %s belongs to %s %s (uid %s), not to this cluster; waiting for it to be deleted", l.certificate, ref.Kind, ref.Name, ref.UID)
	}
	spec, _, _ := unstructured.NestedMap(got.Object, "spec")
	l.current = true
	for k, w := range want {
		if !equality.Semantic.DeepEqual(spec[k], w) {
			l.current = false
		}
	}
	l.reissuedFor = got.GetAnnotations()[reissuedForAnnotation]
	l.reissuedForCA = got.GetAnnotations()[reissuedForCAAnnotation]
	l.reissuedAfter, _ = strconv.ParseInt(got.GetAnnotations()[reissuedAfterAnnotation], 10, 64)
	l.revision, _, _ = unstructured.NestedInt64(got.Object, "status", "revision")
	l.notReady = "cert-manager has not said it is ready yet"
	conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	for _, raw := range conditions {
		cond, _ := raw.(map[string]any)
		typ, _ := cond["type"].(string)
		status, _ := cond["status"].(string)
		message, _ := cond["message"].(string)
		switch typ {
		case "Ready":
			if status == "True" {
				l.notReady = ""
			} else if message != "" {
				l.notReady = message
			}
		case "Issuing":
			l.issuing = status == "True"
		}
	}
}

// judgeIssued reads the secret cert-manager wrote: its certificate is
// fresh when it differs from the copy's and is usable.
func judgeIssued(l *certManagerLeaf, issued *corev1.Secret, now time.Time) {
	certPEM, keyPEM, caPEM := issued.Data[issuedCertKey], issued.Data[issuedKeyKey], issued.Data[issuedCAKey]
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return
	}
	l.issuedCert, l.issuedKey, l.issuedCA = certPEM, keyPEM, caPEM
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		l.unusable = fmt.Sprintf("secret %s holds no usable certificate and key: %v", l.issuedSecret, err)
		return
	}
	leaf := firstCertificate(certPEM)
	if leaf == nil {
		l.unusable = fmt.Sprintf("secret %s holds no certificate that parses", l.issuedSecret)
		return
	}
	l.issuedNotBefore, l.issuedNotAfter = leaf.NotBefore, leaf.NotAfter
	if now.After(leaf.NotAfter) {
		l.unusable = fmt.Sprintf("the certificate in secret %s expired on %s", l.issuedSecret, leaf.NotAfter.UTC().Format(time.RFC3339))
		return
	}
	ca := firstCertificate(caPEM)
	if ca == nil || leaf.CheckSignatureFrom(ca) != nil {
		l.unusable = fmt.Sprintf("secret %s has no %s that signed its certificate: members need the issuer's CA to trust each other, so the issuer must be one that gives it (a CA or Vault issuer, not ACME)", l.issuedSecret, issuedCAKey)
		return
	}
	l.issuingCA = ca
	l.fresh = !l.hasCopy || !bytes.Equal(certPEM, l.copyCert)
}

// held says why the certificate cert-manager issued for l is not copied
// yet: a copy does not trust the CA that issued it; "" when every copy
// does.
func (v *certManagerView) held(l *certManagerLeaf) string {
	if !l.fresh || l.issuingCA == nil {
		return ""
	}
	for _, other := range v.leaves {
		if other.hasCopy && !bundleHolds(other.copyTrust, l.issuingCA) {
			return fmt.Sprintf("cert-manager issued %s from CA %q, which the members do not trust yet; it is used once they do", l.issuedSecret, l.issuingCA.Subject.CommonName)
		}
	}
	return ""
}

// bundleHolds tells whether a bundle of CA certificates (PEM) holds ca.
func bundleHolds(bundle []byte, ca *x509.Certificate) bool {
	for rest := bundle; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return false
		}
		if bytes.Equal(block.Bytes, ca.Raw) {
			return true
		}
	}
}

// certificateWants is, for each kind, the fields of a Certificate's spec
// the operator sets: the names and lifetime of the certificates its own CA
// would issue (tlsissue.CA.Issue), renewed at two thirds of it.
func (c *Cluster) certificateWants(s *snapshot) func(tlsissue.Kind) map[string]any {
	tlsp := s.spec.Spec.TLS
	ref := tlsp.Issued.IssuerRef.WithDefaults()
	validity := tlsp.Issued.Validity()
	hosts := c.issuedCluster(s).Hosts()
	names := tlsp.Secrets(c.name)
	return func(k tlsissue.Kind) map[string]any {
		_, issuedSecret := api.CertManagerCertificate(secretOf(names, k))
		spec := map[string]any{
			"secretName":     issuedSecret,
			"issuerRef":      map[string]any{"name": ref.Name, "kind": ref.Kind, "group": ref.Group},
			"commonName":     fmt.Sprintf("%s-%s", c.name, k),
			"duration":       validity.String(),
			"renewBefore":    (validity / 3).String(),
			"privateKey":     map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"},
			"secretTemplate": map[string]any{"labels": toAny(k8sutil.ClusterLabels(c.name))},
		}
		switch k {
		case tlsissue.Peer, tlsissue.Server:
			// Peers serve and dial; so does a server certificate, with
			// which etcd's gRPC gateway dials its own member.
			spec["dnsNames"] = toAnySlice(hosts)
			spec["ipAddresses"] = []any{"127.0.0.1", "::1"}
			spec["usages"] = []any{"digital signature", "key encipherment", "server auth", "client auth"}
		default:
			spec["usages"] = []any{"digital signature", "key encipherment", "client auth"}
		}
		return spec
	}
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func toAnySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, v := range ss {
		out[i] = v
	}
	return out
}

// certificatesFromCertManager ends step 2 under issued TLS from
// cert-manager, as issueCertificates does for the operator's own CA: the
// Certificates are made (or set back to what the operator asks for), each
// certificate cert-manager issued is copied into the operator's layout once
// the members trust its CA, and a rotation the user asked for has
// cert-manager issue each certificate again. Until every copy exists
// nothing else happens: member pods would wait for the secrets they mount.
func certificatesFromCertManager(s *snapshot) (action, bool) {
	v := s.certManager
	if v == nil {
		return action{}, false
	}
	allCopied := !slices.ContainsFunc(v.leaves, func(l certManagerLeaf) bool { return !l.hasCopy })
	if v.unserved != "" {
		if allCopied {
			// The copies keep serving; nothing is renewed meanwhile,
			// which the expiry warnings tell in time.
			return action{}, false
		}
		return waiting(v.unserved), true
	}
	var toMake []string
	for _, l := range v.leaves {
		switch {
		case l.foreign != "" && !l.hasCopy:
			return waiting(l.foreign), true
		case l.foreign == "" && (!l.exists || !l.current):
			toMake = append(toMake, l.certificate)
		}
	}
	if len(toMake) > 0 {
		return action{kind: actMakeCertificates, reason: strings.Join(toMake, ", ")}, true
	}
	var waits []string
	_, settling := membersReadingTrust(s)
	for i := range v.leaves {
		l := &v.leaves[i]
		held := v.held(l)
		// A leaf of another CA than its copy's is copied only once every
		// member has started since the copies came to trust that CA.
		newCA := l.hasCopy && l.issuingCA != nil && !l.copyIssuedBy(l.issuingCA)
		switch {
		case l.fresh && held == "" && l.unusable == "" && l.foreign == "" && !(newCA && settling):
			why := "issued by cert-manager"
			switch {
			case newCA:
				why = "issued by cert-manager from the issuer's CA, which every member trusts now"
			case l.hasCopy:
				why = "renewed by cert-manager"
			}
			return action{kind: actCopyCertificate, member: l.kind.String(), reason: why}, true
		case l.hasCopy:
		case l.unusable != "":
			waits = append(waits, l.unusable)
		case held != "":
			waits = append(waits, held)
		default:
			waits = append(waits, fmt.Sprintf("waiting for cert-manager to issue Certificate %s (%s)", l.certificate, l.notReady))
		}
	}
	if len(waits) > 0 {
		return waiting(strings.Join(waits, "; ")), true
	}
	if r := s.rotateRequest; r != "" {
		for _, l := range v.leaves {
			if l.foreign == "" && l.reissuedFor != r {
				return action{kind: actReissueCertificate, member: l.kind.String(), request: r, reason: "asked for by annotation " + api.RotateCertificatesAnnotation + "=" + r}, true
			}
		}
	}
	return action{}, false
}

// certManagerProblems are what keeps cert-manager's certificates from the
// cluster: told at once in status.reason and as a Warning event, whether
// the cluster waits for them (no copy yet) or the copies serve meanwhile.
func certManagerProblems(s *snapshot) []string {
	v := s.certManager
	if v == nil {
		return nil
	}
	var ps []string
	if v.unserved != "" {
		ps = append(ps, v.unserved)
	}
	if s.rotateCARequest != "" {
		ps = append(ps, fmt.Sprintf("annotation %s is not carried out: the CA is cert-manager issuer %s's, rotated there", rotateCAAnnotation, s.spec.Spec.TLS.Issued.IssuerRef.Name))
	}
	issuerCA, _ := v.issuerCA()
	for i := range v.leaves {
		l := &v.leaves[i]
		switch held := v.held(l); {
		case !l.hasCopy:
		case held != "" && !l.issuedBy(issuerCA):
			// A leaf of the issuer's CA is carried in (carryIssuerCA);
			// one of an older CA never is.
			ps = append(ps, held+"; it is not the CA cert-manager issued the newest certificate from, so it never will be")
		case l.unusable != "":
			ps = append(ps, l.unusable)
		case l.foreign != "":
			ps = append(ps, l.foreign)
		}
	}
	return ps
}

// certManagerRotationDone is the rotation asked for that cert-manager
// issued every certificate again for, and whose certificates the copies
// hold, "" while one has not.
func certManagerRotationDone(s *snapshot) string {
	v := s.certManager
	if s.rotateRequest == "" || v == nil || !v.settled(s.rotateRequest) {
		return ""
	}
	if _, carrying := carryIssuerCA(s); carrying {
		return ""
	}
	return s.rotateRequest
}

// leafOfKind is the view's leaf of the kind named name.
func (v *certManagerView) leafOfKind(name string) *certManagerLeaf {
	for i := range v.leaves {
		if v.leaves[i].kind.String() == name {
			return &v.leaves[i]
		}
	}
	return nil
}

// makeCertificates creates the Certificates that are missing and sets the
// fields the operator asks for on those that differ; other fields (set by
// the user or by cert-manager's defaults) are kept.
func (c *Cluster) makeCertificates(ctx context.Context, s *snapshot) outcome {
	c.certManager = certManagerCache{}
	want := c.certificateWants(s)
	client := c.cfg.Dynamic.Resource(certificatesGVR).Namespace(c.namespace)
	for _, l := range s.certManager.leaves {
		if l.foreign != "" || l.exists && l.current {
			continue
		}
		spec := want(l.kind)
		if !l.exists {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": certificatesGVR.GroupVersion().String(),
				"kind":       "Certificate",
				"spec":       spec,
			}}
			obj.SetName(l.certificate)
			obj.SetNamespace(c.namespace)
			obj.SetLabels(k8sutil.ClusterLabels(c.name))
			obj.SetOwnerReferences([]metav1.OwnerReference{k8sutil.AsOwner(s.spec)})
			if _, err := client.Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return outcome{err: kubeError("create Certificate "+l.certificate, err)}
			}
			c.log.WithFields(map[string]any{"certificate": l.certificate, "secret": spec["secretName"]}).Info("created a cert-manager Certificate")
			c.tell(corev1.EventTypeNormal, eventCertificateRequested, fmt.Sprintf("Certificate %s created for secret %s: cert-manager issues it, the operator copies it into secret %s", l.certificate, spec["secretName"], l.secret))
			continue
		}
		got, err := client.Get(ctx, l.certificate, metav1.GetOptions{})
		if err != nil {
			return outcome{err: kubeError("read Certificate "+l.certificate, err)}
		}
		have, _, _ := unstructured.NestedMap(got.Object, "spec")
		if have == nil {
			have = map[string]any{}
		}
		maps.Copy(have, spec)
		if err := unstructured.SetNestedMap(got.Object, have, "spec"); err != nil {
			return outcome{err: newPassError(problemInternal, "set the spec of Certificate "+l.certificate, err)}
		}
		if _, err := client.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			return outcome{err: kubeError("update Certificate "+l.certificate, err)}
		}
		c.log.WithField("certificate", l.certificate).Info("set a cert-manager Certificate back to what the cluster asks for")
	}
	return outcome{requeue: c.cfg.MinPassInterval}
}

// copyCertificate copies the certificate cert-manager issued for one kind,
// as the pass judged it, into the operator's secret, and writes the copy as
// it was observed.
func (c *Cluster) copyCertificate(ctx context.Context, s *snapshot, a action) outcome {
	c.certManager = certManagerCache{}
	// The operator dials with its client certificate read again.
	c.certs.readAt = time.Time{}
	l := s.certManager.leafOfKind(a.member)
	if l == nil {
		return outcome{}
	}
	// A copy keeps the CAs it trusts: they hold the issuer's, or the
	// certificate would have been held. A new copy trusts the issuer's.
	trust := l.copyTrust
	if !l.hasCopy {
		trust = l.issuedCA
	}
	certKey, keyKey, caKey := l.kind.Keys()
	data := map[string][]byte{certKey: l.issuedCert, keyKey: l.issuedKey, caKey: trust}
	secrets := c.cfg.KubeClient.CoreV1().Secrets(c.namespace)
	var err error
	copied := c.newIssuedSecret(l.secret, data, []metav1.OwnerReference{k8sutil.AsOwner(s.spec)}, "")
	copied.Annotations = map[string]string{copiedFromAnnotation: l.issuedSecret, copiedAtAnnotation: s.now.UTC().Format(time.RFC3339)}
	if !l.trustWritten.IsZero() {
		copied.Annotations[trustWrittenAnnotation] = l.trustWritten.UTC().Format(time.RFC3339)
	}
	if l.hasCopy {
		copied.ResourceVersion = l.copyResVersion
		_, err = secrets.Update(ctx, copied, metav1.UpdateOptions{})
	} else {
		_, err = secrets.Create(ctx, copied, metav1.CreateOptions{})
	}
	switch {
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return outcome{requeue: c.cfg.MinPassInterval}
	case err != nil:
		return outcome{err: createSecretError(l.secret, err)}
	}
	notAfter := l.issuedNotAfter.UTC().Format(time.RFC3339)
	c.log.WithFields(map[string]any{"secret": l.secret, "from": l.issuedSecret, "notAfter": notAfter, "why": a.reason}).Info("copied a certificate cert-manager issued")
	c.tell(corev1.EventTypeNormal, eventCertificateRenewed, fmt.Sprintf("Secret %s now holds the certificate cert-manager issued in secret %s, valid until %s (%s)", l.secret, l.issuedSecret, notAfter, a.reason))
	return outcome{requeue: c.cfg.MinPassInterval}
}

// reissueCertificate asks cert-manager to issue one Certificate again, as
// its command line tool does (the Issuing condition set by hand), then
// records the request it did so for. Stopped in between, the next pass
// asks again: issuing twice does no harm.
func (c *Cluster) reissueCertificate(ctx context.Context, s *snapshot, a action) outcome {
	c.certManager = certManagerCache{}
	l := s.certManager.leafOfKind(a.member)
	if l == nil {
		return outcome{}
	}
	client := c.cfg.Dynamic.Resource(certificatesGVR).Namespace(c.namespace)
	got, err := client.Get(ctx, l.certificate, metav1.GetOptions{})
	if err != nil {
		return outcome{err: kubeError("read Certificate "+l.certificate, err)}
	}
	if !l.issuing {
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		conditions = slices.DeleteFunc(conditions, func(raw any) bool {
			cond, _ := raw.(map[string]any)
			return cond["type"] == "Issuing"
		})
		conditions = append(conditions, map[string]any{
			"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
			"message":            "Certificate re-issuance asked for by the etcd operator: " + a.reason,
			"lastTransitionTime": s.now.UTC().Format(time.RFC3339),
		})
		if err := unstructured.SetNestedSlice(got.Object, conditions, "status", "conditions"); err != nil {
			return outcome{err: newPassError(problemInternal, "set the conditions of Certificate "+l.certificate, err)}
		}
		if got, err = client.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			return outcome{err: kubeError("ask cert-manager to issue Certificate "+l.certificate+" again", err)}
		}
	}
	annotations := got.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	if a.issuerCA != "" {
		annotations[reissuedForCAAnnotation] = a.issuerCA
	} else {
		annotations[reissuedForAnnotation] = a.request
		annotations[reissuedAfterAnnotation] = strconv.FormatInt(l.revision, 10)
	}
	got.SetAnnotations(annotations)
	if _, err := client.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		return outcome{err: kubeError("update Certificate "+l.certificate, err)}
	}
	c.log.WithFields(map[string]any{"certificate": l.certificate, "why": a.reason}).Info("asked cert-manager to issue a certificate again")
	return outcome{requeue: c.cfg.MinPassInterval}
}
