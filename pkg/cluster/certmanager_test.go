package cluster

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// certManagerNames are the Certificates the operator makes, in
// tlsissue.Kinds order.
var certManagerNames = []string{"example-peer", "example-server", "example-operator", "example-client"}

func withCertManagerIssuer(cl *api.EtcdCluster) {
	cl.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{IssuerRef: &api.IssuerReference{Name: "etcd-ca", Kind: api.ClusterIssuerKind}}}
}

// withCertManager gives the fixture a dynamic client that serves
// cert-manager's Certificates.
func withCertManager(f *fixture) *dynamicfake.FakeDynamicClient {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{certificatesGVR: "CertificateList"})
	f.c.cfg.Dynamic = dyn
	return dyn
}

// certificate reads a Certificate the passes made.
func certificate(t *testing.T, dyn *dynamicfake.FakeDynamicClient, name string) *unstructured.Unstructured {
	t.Helper()
	got, err := dyn.Resource(certificatesGVR).Namespace(testNS).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Certificate %s: %v", name, err)
	}
	return got
}

// issueAsCertManager does what cert-manager's CA issuer does for each
// Certificate: issues its certificate from ca into the secret it names,
// and marks it Ready, a revision later.
func issueAsCertManager(t *testing.T, f *fixture, dyn *dynamicfake.FakeDynamicClient, ca *tlsissue.CA) {
	t.Helper()
	issueLikeCertManager(t, f, dyn, ca, func(*unstructured.Unstructured) bool { return true })
}

// issueWhereAsked is issueAsCertManager for the Certificates whose Issuing
// condition is True alone, as cert-manager issues after a renewal was asked.
func issueWhereAsked(t *testing.T, f *fixture, dyn *dynamicfake.FakeDynamicClient, ca *tlsissue.CA) {
	t.Helper()
	issueLikeCertManager(t, f, dyn, ca, func(cert *unstructured.Unstructured) bool {
		conditions, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
		return slices.ContainsFunc(conditions, func(raw any) bool {
			c, _ := raw.(map[string]any)
			return c["type"] == "Issuing" && c["status"] == "True"
		})
	})
}

// issueLikeCertManager issues, at f.now, the certificate of each Certificate
// issue says to from ca, into the secret it names, and marks it Ready a
// revision later (the Issuing condition gone).
func issueLikeCertManager(t *testing.T, f *fixture, dyn *dynamicfake.FakeDynamicClient, ca *tlsissue.CA, issue func(*unstructured.Unstructured) bool) {
	t.Helper()
	for i, k := range tlsissue.Kinds {
		cert := certificate(t, dyn, certManagerNames[i])
		if !issue(cert) {
			continue
		}
		secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		leaf, err := ca.Issue(k, tlsissue.Cluster{Name: testName, Namespace: testNS}, f.now, api.DefaultCertificateValidity)
		if err != nil {
			t.Fatal(err)
		}
		certKey, keyKey, caKey := k.Keys()
		data := map[string][]byte{issuedCertKey: leaf[certKey], issuedKeyKey: leaf[keyKey], issuedCAKey: leaf[caKey]}
		secrets := f.kube.CoreV1().Secrets(testNS)
		if old, err := secrets.Get(t.Context(), secretName, metav1.GetOptions{}); err == nil {
			old.Data = data
			if _, err := secrets.Update(t.Context(), old, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		} else if _, err := secrets.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: testNS}, Data: data}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		conditions := []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "Certificate is up to date and has not expired"}}
		if err := unstructured.SetNestedSlice(cert.Object, conditions, "status", "conditions"); err != nil {
			t.Fatal(err)
		}
		revision, _, _ := unstructured.NestedInt64(cert.Object, "status", "revision")
		if err := unstructured.SetNestedField(cert.Object, revision+1, "status", "revision"); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(certificatesGVR).Namespace(testNS).UpdateStatus(t.Context(), cert, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func newIssuerCA(t *testing.T, name string) *tlsissue.CA {
	t.Helper()
	ca, err := tlsissue.NewCA(name, testStart)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// copiesOf are the copies' certificates, by secret name.
func copiesOf(t *testing.T, f *fixture) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range issuedNames[1:] {
		certKey, _, _ := kindOf(name).Keys()
		out[name] = f.secret(name).Data[certKey]
	}
	return out
}

// certManagerCluster is a fixture whose cluster cert-manager issues the
// certificates of, taken through the passes to four copies of what a CA
// issuer issued.
func certManagerCluster(t *testing.T, annotations map[string]string) (*fixture, *dynamicfake.FakeDynamicClient, *tlsissue.CA) {
	t.Helper()
	cl := newTestCluster(withPhase(""), withCertManagerIssuer)
	cl.Annotations = annotations
	f := newFixture(t, cl)
	dyn := withCertManager(f)
	ca := newIssuerCA(t, "the issuer's CA")
	f.mustPass()
	issueAsCertManager(t, f, dyn, ca)
	for range tlsissue.Kinds {
		f.mustPass()
	}
	return f, dyn, ca
}

func TestCertManagerIssuesTheCertificates(t *testing.T) {
	t.Run("a new cluster gets four Certificates, then copies of what cert-manager issued, then its seed", func(t *testing.T) {
		f := newFixture(t, newTestCluster(withPhase(""), withCertManagerIssuer, withSeedAndJoin))
		dyn := withCertManager(f)
		f.mustPass()
		for i, name := range certManagerNames {
			cert := certificate(t, dyn, name)
			if ref := metav1.GetControllerOf(cert); ref == nil || ref.UID != testUID {
				t.Errorf("Certificate %s owner = %+v, want the cluster", name, ref)
			}
			spec, _, _ := unstructured.NestedMap(cert.Object, "spec")
			if spec["secretName"] != name+"-cert-manager" {
				t.Errorf("Certificate %s writes secret %v", name, spec["secretName"])
			}
			issuer, _ := spec["issuerRef"].(map[string]any)
			if issuer["name"] != "etcd-ca" || issuer["kind"] != api.ClusterIssuerKind || issuer["group"] != api.CertManagerGroup {
				t.Errorf("Certificate %s issuerRef = %v", name, issuer)
			}
			if spec["duration"] != "2160h0m0s" || spec["renewBefore"] != "720h0m0s" {
				t.Errorf("Certificate %s duration %v renewBefore %v, want 90 days renewed 30 days before", name, spec["duration"], spec["renewBefore"])
			}
			dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
			usages, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "usages")
			switch k := tlsissue.Kinds[i]; k {
			case tlsissue.Peer, tlsissue.Server:
				if !slices.Contains(dnsNames, "*.example."+testNS+".svc") || !slices.Contains(usages, "server auth") {
					t.Errorf("%s Certificate dnsNames %v usages %v", k, dnsNames, usages)
				}
			default:
				if len(dnsNames) > 0 || slices.Contains(usages, "server auth") || !slices.Contains(usages, "client auth") {
					t.Errorf("%s Certificate dnsNames %v usages %v, want a client certificate", k, dnsNames, usages)
				}
			}
		}
		expect(t, "secrets created", f.secretCreates(), nil)
		expect(t, "pod actions", f.podActions(), nil)
		f.mustPass()
		f.now = f.now.Add(stallAfter)
		f.mustPass()
		if r := f.mustStatus().Reason; !strings.Contains(r, "waiting for cert-manager to issue Certificate example-peer") {
			t.Errorf("status.reason = %q, want it to wait for cert-manager", r)
		}

		ca := newIssuerCA(t, "the issuer's CA")
		issueAsCertManager(t, f, dyn, ca)
		for range tlsissue.Kinds {
			f.mustPass()
		}
		issuedSecrets := []string{"example-peer-cert-manager", "example-server-cert-manager", "example-operator-cert-manager", "example-client-cert-manager"}
		expect(t, "secrets created", f.secretCreates(), append(issuedSecrets, issuedNames[1:]...))
		for _, name := range issuedNames[1:] {
			certKey, keyKey, caKey := kindOf(name).Keys()
			copied, issued := f.secret(name), f.secret(strings.TrimSuffix(name, "-tls")+"-cert-manager")
			if !bytes.Equal(copied.Data[certKey], issued.Data[issuedCertKey]) || !bytes.Equal(copied.Data[keyKey], issued.Data[issuedKeyKey]) || !bytes.Equal(copied.Data[caKey], ca.CertPEM) {
				t.Errorf("secret %s is not a copy of %s in the operator's layout: keys %v", name, issued.Name, keysOf(copied.Data))
			}
			if ref := metav1.GetControllerOf(copied); ref == nil || ref.UID != testUID {
				t.Errorf("copy %s owner = %+v, want the cluster", name, ref)
			}
		}
		f.mustSeed()
		expect(t, "pod actions", f.podActions(), []string{"create pods example-new0000001"})
		if s := f.mustStatus(); s.Reason != "" {
			t.Errorf("status.reason = %q once every copy exists", s.Reason)
		}
		if f.c.tlsConfig == nil {
			t.Error("the operator did not take its client certificate from the copy")
		}
	})

	t.Run("a certificate cert-manager renews is copied in place; one of a CA the members do not trust is not (TestIssuerCAIsCarriedInToItsEnd carries that CA in)", func(t *testing.T) {
		f, dyn, ca := certManagerCluster(t, nil)
		before := copiesOf(t, f)
		f.now = f.now.Add(certRereadInterval)
		issueAsCertManager(t, f, dyn, ca)
		updatesBefore := len(f.secretUpdates())
		for range tlsissue.Kinds {
			f.mustPass()
		}
		after := copiesOf(t, f)
		for name, cert := range before {
			if bytes.Equal(cert, after[name]) {
				t.Errorf("copy %s kept the certificate cert-manager renewed", name)
			}
		}
		if got := len(f.secretUpdates()) - updatesBefore; got != 4 {
			t.Errorf("%d copies updated, want 4 (in place)", got)
		}
		if events := strings.Join(f.events(), "\n"); !strings.Contains(events, "CertificateRenewed Secret example-peer-tls now holds the certificate cert-manager issued in secret example-peer-cert-manager") {
			t.Errorf("events = %s", events)
		}

		f.now = f.now.Add(certRereadInterval)
		issueAsCertManager(t, f, dyn, newIssuerCA(t, "another CA"))
		f.passes(len(tlsissue.Kinds))
		for name, cert := range copiesOf(t, f) {
			if !bytes.Equal(cert, after[name]) {
				t.Errorf("copy %s took a certificate of a CA the members do not trust", name)
			}
		}
	})

	t.Run("a rotation asked for has cert-manager issue each certificate again, and is told done once the copies hold them", func(t *testing.T) {
		f, dyn, ca := certManagerCluster(t, map[string]string{api.RotateCertificatesAnnotation: "r1"})
		for range certManagerNames {
			f.mustPass()
		}
		for _, name := range certManagerNames {
			cert := certificate(t, dyn, name)
			if cert.GetAnnotations()[reissuedForAnnotation] != "r1" {
				t.Errorf("Certificate %s annotations = %v", name, cert.GetAnnotations())
			}
			conditions, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
			if !slices.ContainsFunc(conditions, func(raw any) bool {
				c, _ := raw.(map[string]any)
				return c["type"] == "Issuing" && c["status"] == "True" && c["reason"] == "ManuallyTriggered"
			}) {
				t.Errorf("Certificate %s conditions = %v, want Issuing asked for by hand", name, conditions)
			}
		}
		if done := f.mustStatus().CertificatesRotated; done != "" {
			t.Fatalf("status.certificatesRotated = %q before cert-manager issued again", done)
		}
		// An issue that failed ends the Issuing condition without a new
		// revision: the rotation is not done.
		for _, name := range certManagerNames {
			cert := certificate(t, dyn, name)
			failed := []any{map[string]any{"type": "Issuing", "status": "False", "reason": "Failed", "message": "The certificate request has failed to complete"}}
			if err := unstructured.SetNestedSlice(cert.Object, failed, "status", "conditions"); err != nil {
				t.Fatal(err)
			}
			if _, err := dyn.Resource(certificatesGVR).Namespace(testNS).UpdateStatus(t.Context(), cert, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		f.mustPass()
		if done := f.mustStatus().CertificatesRotated; done != "" {
			t.Fatalf("status.certificatesRotated = %q after cert-manager failed to issue", done)
		}
		before := copiesOf(t, f)
		// cert-manager issues again, and its Issuing condition goes.
		issueAsCertManager(t, f, dyn, ca)
		for range tlsissue.Kinds {
			f.mustPass()
		}
		f.mustPass()
		for name, cert := range copiesOf(t, f) {
			if bytes.Equal(cert, before[name]) {
				t.Errorf("copy %s was not renewed for the rotation", name)
			}
		}
		if done := f.mustStatus().CertificatesRotated; done != "r1" {
			t.Errorf("status.certificatesRotated = %q, want r1", done)
		}
	})

	t.Run("without cert-manager's API, or a role that lets the operator read it, the cluster waits and says what to do", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			err  error
			want string
		}{
			{"not installed", apierrors.NewNotFound(schema.GroupResource{Resource: "certificates"}, ""), "install cert-manager, or leave issuerRef out"},
			{"forbidden", apierrors.NewForbidden(schema.GroupResource{Group: api.CertManagerGroup, Resource: "certificates"}, "example-peer", nil), "the operator's role needs {apiGroups: [cert-manager.io], resources: [certificates, certificates/status]"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f := newFixture(t, newTestCluster(withPhase(""), withCertManagerIssuer))
				dyn := withCertManager(f)
				dyn.PrependReactor("get", "certificates", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
				f.mustPass()
				f.mustPass()
				if r := f.mustStatus().Reason; !strings.Contains(r, tc.want) {
					t.Errorf("status.reason = %q, want %q", r, tc.want)
				}
				expect(t, "secrets created", f.secretCreates(), nil)
				expect(t, "pod actions", f.podActions(), nil)
			})
		}
	})
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestCertificatesFromCertManagerDecidesOneStep(t *testing.T) {
	copied := func(k tlsissue.Kind) certManagerLeaf {
		return certManagerLeaf{kind: k, certificate: certManagerNames[k], exists: true, current: true, hasCopy: true, reissuedFor: "r0", copyTrust: issuerCABefore.CertPEM}
	}
	leaves := func(change func([]certManagerLeaf)) *certManagerView {
		v := &certManagerView{}
		for _, k := range tlsissue.Kinds {
			v.leaves = append(v.leaves, copied(k))
		}
		change(v.leaves)
		return v
	}
	unserved := func(v *certManagerView) *certManagerView {
		v.unserved = "not served"
		return v
	}
	for _, tc := range []struct {
		name    string
		view    *certManagerView
		rotate  string
		want    actionKind
		member  string
		waitFor string
	}{
		{name: "not under cert-manager", view: nil, want: actIdle},
		{name: "every copy up to date", view: leaves(func([]certManagerLeaf) {}), want: actIdle},
		{name: "a missing Certificate is made first", view: leaves(func(l []certManagerLeaf) { l[2].exists, l[0].fresh = false, true }), want: actMakeCertificates},
		{name: "a changed Certificate is set back", view: leaves(func(l []certManagerLeaf) { l[1].current = false }), want: actMakeCertificates},
		{name: "a Certificate of another owner is never changed, and waited for while it has no copy",
			view: leaves(func(l []certManagerLeaf) {
				l[0].foreign, l[0].hasCopy, l[0].current = "Certificate example-peer belongs to someone else", false, false
			}),
			want: actWait, waitFor: "belongs to someone else"},
		{name: "nothing is copied from the secret of a Certificate of another owner", view: leaves(func(l []certManagerLeaf) { l[0].foreign, l[0].fresh = "belongs to someone else", true }), want: actIdle},
		{name: "a certificate cert-manager issued is copied", view: leaves(func(l []certManagerLeaf) { l[1].fresh = true }), want: actCopyCertificate, member: "server"},
		{name: "one of a CA the members do not trust is not, and the copy serves", view: leaves(func(l []certManagerLeaf) { l[1].fresh, l[1].issuingCA = true, issuerCAAfter.Cert }), want: actIdle},
		{name: "one of a CA not trusted, with no copy, is waited for",
			view: leaves(func(l []certManagerLeaf) { l[3].fresh, l[3].issuingCA, l[3].hasCopy = true, issuerCAAfter.Cert, false }), want: actWait, waitFor: `from CA "the issuer's CA after", which the members do not trust yet`},
		{name: "nothing issued yet is waited for", view: leaves(func(l []certManagerLeaf) {
			l[0].hasCopy, l[0].notReady = false, "Issuing certificate as Secret does not exist"
		}),
			want: actWait, waitFor: "waiting for cert-manager to issue Certificate example-peer (Issuing certificate as Secret does not exist)"},
		{name: "without cert-manager and without copies, the cluster waits", view: &certManagerView{unserved: "not served", leaves: []certManagerLeaf{{kind: tlsissue.Peer}}}, want: actWait, waitFor: "not served"},
		{name: "without cert-manager, copies serve", view: unserved(leaves(func([]certManagerLeaf) {})), want: actIdle},
		{name: "a rotation asked for has each Certificate issued again", view: leaves(func([]certManagerLeaf) {}), rotate: "r1", want: actReissueCertificate, member: "peer"},
		{name: "the next one once the first was asked", view: leaves(func(l []certManagerLeaf) { l[0].reissuedFor = "r1" }), rotate: "r1", want: actReissueCertificate, member: "server"},
		{name: "copies first, then the rotation", view: leaves(func(l []certManagerLeaf) { l[3].fresh = true }), rotate: "r1", want: actCopyCertificate, member: "client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &snapshot{certManager: tc.view, rotateRequest: tc.rotate}
			a, decided := certificatesFromCertManager(s)
			if !decided {
				a = action{kind: actIdle}
			}
			if a.kind != tc.want || tc.member != "" && a.member != tc.member || !strings.Contains(a.reason, tc.waitFor) {
				t.Errorf("got %v %q (%s), want %v %q (%s)", a.kind, a.member, a.reason, tc.want, tc.member, tc.waitFor)
			}
		})
	}
}
