package cluster

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// issuedNames are the secrets of issued TLS of the test cluster, in the
// order they are made.
var issuedNames = []string{"example-ca", "example-peer-tls", "example-server-tls", "example-operator-tls", "example-client-tls"}

// secretCreates are the secrets the passes created, by name.
func (f *fixture) secretCreates() []string { return f.secretWrites("create") }

// secretUpdates are the secrets the passes updated, by name.
func (f *fixture) secretUpdates() []string { return f.secretWrites("update") }

// secretWrites are the secrets the passes wrote with verb (create or
// update), by name.
func (f *fixture) secretWrites(verb string) []string {
	var out []string
	for _, a := range f.kube.Actions() {
		// An update is also a CreateAction: both carry an object.
		if c, ok := a.(clienttesting.CreateAction); ok && a.GetVerb() == verb && a.GetResource().Resource == "secrets" {
			out = append(out, c.GetObject().(*corev1.Secret).Name)
		}
	}
	return out
}

func (f *fixture) secret(name string) *corev1.Secret {
	f.t.Helper()
	s, err := f.kube.CoreV1().Secrets(testNS).Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("secret %s: %v", name, err)
	}
	return s
}

// TestIssuedTLS: under spec.TLS.issued the operator makes the CA and the
// certificates before the seed, which mounts them; it never writes a secret
// that exists.
func TestIssuedTLS(t *testing.T) {
	seed := "example-new0000001"
	runPassCases(t, []passCase{
		{
			name:    "a new cluster gets its CA and certificates, then a seed that mounts them",
			cluster: newTestCluster(withPhase(""), withIssuedTLS, withSeedAndJoin),
			run: func(t *testing.T, f *fixture) {
				f.mustPass()
				expect(t, "secrets created", f.secretCreates(), issuedNames)
				expect(t, "pod actions", f.podActions(), nil)
				for _, name := range issuedNames {
					s := f.secret(name)
					ref := metav1.GetControllerOf(s)
					switch {
					case name == testName+"-ca" && len(s.OwnerReferences) > 0:
						// It must outlive the cluster: one made again
						// under its name (a restore) issues from it.
						t.Errorf("CA secret %s owners = %+v, want none", name, s.OwnerReferences)
					case name != testName+"-ca" && (ref == nil || ref.UID != testUID):
						t.Errorf("secret %s owner = %+v, want the cluster", name, ref)
					}
					if s.Labels[api.LabelClusterName] != testName {
						t.Errorf("secret %s labels = %v", name, s.Labels)
					}
				}
				f.mustSeed()
				expect(t, "secrets created", f.secretCreates(), issuedNames)
				expect(t, "pod actions", f.podActions(), []string{"create pods " + seed})
				if s := f.mustStatus(); s.Reason != "" || s.Phase != api.ClusterPhaseRunning {
					t.Errorf("status = %+v", s)
				}
				// The CA secret is marked as the operator's, so that its CA
				// is rotated unasked as it nears its expiry.
				caSecret := f.secret(testName + "-ca")
				if cert := firstCertificate(caSecret.Data[tlsissue.CACertKey]); cert == nil || caSecret.Annotations[caMadeByOperatorAnnotation] != caFingerprint(cert) {
					t.Errorf("CA secret annotations = %v, want %s the fingerprint of its CA", caSecret.Annotations, caMadeByOperatorAnnotation)
				}
				if r := f.mustStatus().CARotation; r == nil || !r.MadeByOperator || r.AutoRotateAt == nil {
					t.Errorf("status.caRotation = %+v, want a CA the operator made, rotated unasked at four fifths of its lifetime", r)
				}
				pod := f.createdPod(seed)
				var mounted []string
				for _, v := range pod.Spec.Volumes {
					if v.Secret != nil {
						mounted = append(mounted, v.Secret.SecretName)
					}
				}
				for _, want := range []string{"example-peer-tls", "example-server-tls"} {
					if !slices.Contains(mounted, want) {
						t.Errorf("seed mounts secrets %v, not %s", mounted, want)
					}
				}
				if cmd := strings.Join(pod.Spec.Containers[0].Command, " "); !strings.Contains(cmd, "--listen-peer-urls=https://") || !strings.Contains(cmd, "--advertise-client-urls=https://") {
					t.Errorf("seed of an issued-TLS cluster does not talk https: %q", cmd)
				}
				if f.c.tlsConfig == nil {
					t.Error("the operator did not take its client certificate")
				}
			},
		},
		{
			name:    "a CA the user made is used, and a secret that exists is never written",
			cluster: newTestCluster(withPhase(""), withIssuedTLS),
			run: func(t *testing.T, f *fixture) {
				ca := addCA(t, f)
				client, _ := ca.Issue(tlsissue.Client, tlsissue.Cluster{Name: testName, Namespace: testNS}, testStart, api.DefaultCertificateValidity)
				addSecret(t, f, "example-client-tls", client)
				f.mustPass()
				expect(t, "secrets created", f.secretCreates(), issuedNames[1:4])
				for _, name := range issuedNames[1:] {
					cert, _, _ := kindOf(name).Keys()
					if !ca.Signed(f.secret(name).Data[cert]) {
						t.Errorf("%s was not issued by the user's CA", name)
					}
				}
				if got := f.secret("example-client-tls").Data; !slices.Equal(got["etcd-client.crt"], client["etcd-client.crt"]) {
					t.Error("the client secret that existed was written")
				}
				if _, marked := f.secret("example-ca").Annotations[caMadeByOperatorAnnotation]; marked {
					t.Error("the user's CA secret was marked as the operator's")
				}
				f.mustPass()
				if r := f.mustStatus().CARotation; r == nil || r.MadeByOperator || r.AutoRotateAt != nil || r.CA == nil || r.CA.Subject != "CN=the user's CA,O=etcd-operator" {
					t.Errorf("status.caRotation = %+v, want the user's CA, never rotated unasked", r)
				}
			},
		},
		{
			name:    "a CA secret that cannot issue is reported and never replaced; nothing is made until it is fixed",
			cluster: newTestCluster(withPhase(""), withIssuedTLS),
			run: func(t *testing.T, f *fixture) {
				addSecret(t, f, "example-ca", map[string][]byte{tlsissue.CACertKey: []byte("not a certificate")})
				expectNothingIssued(t, f, "CA secret example-ca (spec.TLS.issued.caSecret) lacks key(s) ca.key; it is never replaced")
			},
		},
		{
			name:    "a certificate of another CA is reported, not replaced",
			cluster: newTestCluster(withPhase(""), withIssuedTLS),
			run: func(t *testing.T, f *fixture) {
				other, _ := tlsissue.NewCA("another CA", testStart)
				peer, _ := other.Issue(tlsissue.Peer, tlsissue.Cluster{Name: testName, Namespace: testNS}, testStart, api.DefaultCertificateValidity)
				addCA(t, f)
				addSecret(t, f, "example-peer-tls", peer)
				expectNothingIssued(t, f, "peer.crt of secret example-peer-tls was not issued by the CA in secret example-ca")
			},
		},
		{
			name:    "without the right to create secrets the cluster waits, and its status names the rule to add",
			cluster: newTestCluster(withPhase(""), withIssuedTLS),
			run: func(t *testing.T, f *fixture) {
				f.kube.PrependReactor("create", "secrets", func(a clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "example-ca", nil)
				})
				if err := f.pass(); err == nil {
					t.Fatal("the pass succeeded without creating the secrets")
				}
				expect(t, "pod actions", f.podActions(), nil)
				if s := f.mustStatus(); !strings.Contains(s.Reason, `add the rule {apiGroups: [""], resources: [secrets], verbs: [create]}`) {
					t.Errorf("reason = %q", s.Reason)
				}
			},
		},
	})
}

// expectNothingIssued runs two passes that must create no secret and no
// pod, and say why in status.reason.
func expectNothingIssued(t *testing.T, f *fixture, reason string) {
	t.Helper()
	f.mustPass()
	f.mustPass()
	expect(t, "secrets created", f.secretCreates(), nil)
	expect(t, "pod actions", f.podActions(), nil)
	if s := f.mustStatus(); !strings.Contains(s.Reason, reason) {
		t.Errorf("reason = %q, want it to say %q", s.Reason, reason)
	}
}

// addCA puts a CA of the user's in the cluster's CA secret.
func addCA(t *testing.T, f *fixture) *tlsissue.CA {
	t.Helper()
	ca, err := tlsissue.NewCA("the user's CA", testStart)
	if err != nil {
		t.Fatal(err)
	}
	data, err := ca.SecretData()
	if err != nil {
		t.Fatal(err)
	}
	addSecret(t, f, "example-ca", data)
	return ca
}

func addSecret(t *testing.T, f *fixture, name string, data map[string][]byte) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS}, Data: data}
	if err := f.kube.Tracker().Add(s); err != nil {
		t.Fatal(err)
	}
}

func kindOf(secret string) tlsissue.Kind {
	for _, k := range tlsissue.Kinds {
		if secretOf(api.TLSSecrets{Peer: "example-peer-tls", Server: "example-server-tls", Operator: "example-operator-tls", Client: "example-client-tls"}, k) == secret {
			return k
		}
	}
	panic(secret)
}
