//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestCertManagerIssuesTheCertificatesAndRenewsThemUnderLoad runs a cluster
// like example/tls/cert-manager-tls-cluster.yaml on cert-manager itself
// (hack/cert-manager, built from its Go module), from the CA Issuer of
// example/tls/cert-manager-ca-issuer.yaml: the operator makes the four
// Certificates, owned by the cluster, and the cluster serves only clients
// with the client certificate it copied. Then, while the checker writes and
// reads over https with the client certificate it mounted before, a
// rotation is asked for: cert-manager issues every certificate again, the
// copies follow in place, the status records the request, and no
// acknowledged write is lost; a tenant kube-apiserver on the cluster
// through the rotation sees every change it acknowledged, in order.
func TestCertManagerIssuesTheCertificatesAndRenewsThemUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns, name := certManagerClusterRunning(t, "cm")
	cl, err := f.GetCluster(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{"peer", "server", "operator", "client"}
	for _, kind := range kinds {
		out, err := f.Kubectl(ctx, "-n", ns, "get", "certificates.cert-manager.io", name+"-"+kind,
			"-o", `jsonpath={.metadata.ownerReferences[0].uid} {.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil {
			t.Fatalf("Certificate %s-%s: %v", name, kind, err)
		}
		if want := string(cl.UID) + " True"; out != want {
			t.Errorf("Certificate %s-%s: owner and Ready %q, want %q", name, kind, out, want)
		}
		s, err := f.Kube.CoreV1().Secrets(ns).Get(ctx, name+"-"+kind+"-tls", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("copy %s-%s-tls: %v", name, kind, err)
		}
		if ref := metav1.GetControllerOf(s); ref == nil || ref.UID != cl.UID {
			t.Errorf("copy %s is not owned by the cluster: %+v", s.Name, ref)
		}
	}
	servesOnlyCertifiedClients(t, name, name+"-client-tls")

	// A tenant control plane on the cluster, with the client certificate
	// and CA of the copy it was started with, through the rotation: its
	// connections go on, and once every member serves its renewed
	// certificate they are ended, so that it dials again and must accept
	// the renewed serving certificates with its old client certificate.
	client, err := f.Kube.CoreV1().Secrets(ns).Get(ctx, name+"-client-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tenant, fwd := startTenantForwarded(t, ns, name, tenantWithClientSecret(client))
	const d = 150 * time.Second
	load := startTenantLoad(t, tenant, framework.TenantLoad{Scenario: "cert-manager-renewal", Duration: d})
	pause(t, loadLead)
	certificatesRotatedUnderLoad(t, ns, name, "cert-manager-rotation")
	waitEveryMemberServes(t, ns, name, clientTLSConfig(t, client), secretCertSerial(t, ns, name+"-server-tls", etcdutil.SecretServerCert))
	t.Logf("ended the tenant's %d connections to etcd once every member served the renewed certificate", fwd.DropConnections())
	judgeTenantLoad(t, load, d+3*time.Minute)
	judgeTenantLoad(t, startTenantLoad(t, tenant, framework.TenantLoad{Scenario: "after-the-cert-manager-renewal", Namespace: "after-the-renewal", Duration: 30 * time.Second}), 3*time.Minute)
	servesOnlyCertifiedClients(t, name, name+"-client-tls")
}

// certManagerClusterRunning makes, from the examples and under names of the
// test's own (prefix), the CA Issuer of cert-manager-ca-issuer.yaml and the
// cluster of cert-manager-tls-cluster.yaml, and waits for its three members.
func certManagerClusterRunning(t *testing.T, prefix string) (ns, name string) {
	t.Helper()
	ctx := t.Context()
	ns = opNS
	if _, err := f.Kubectl(ctx, "get", "crd", "certificates.cert-manager.io"); err != nil {
		t.Fatalf("cert-manager is not installed on the local cluster (%v): run `make e2e-cert-manager`, or bash hack/cert-manager/build.sh && bash hack/cert-manager/deploy.sh", err)
	}
	name = framework.UniqueName(prefix)
	rename := "s/etcd-ca/" + name + "-ca/g; s/etcd-selfsigned/" + name + "-selfsigned/g"
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_, _ = f.Kubectl(ctx, "-n", ns, "delete", "--ignore-not-found", "issuers.cert-manager.io/"+name+"-ca", "issuers.cert-manager.io/"+name+"-selfsigned", "certificates.cert-manager.io/"+name+"-ca", "secret/"+name+"-ca")
	})
	if err := f.CreateFromExample(ctx, ns, f.Env.Path("example", "tls", "cert-manager-ca-issuer.yaml"), rename); err != nil {
		t.Fatal(err)
	}
	watchCluster(t, framework.DumpTarget{Namespace: ns, Cluster: name, Secure: true, OperatorNamespace: opNS})
	err := f.CreateFromExample(ctx, ns, f.Env.Path("example", "tls", "cert-manager-tls-cluster.yaml"), "s/^  name: example$/  name: "+name+"/", rename)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, name, 3, bootstrapTimeout(3))
	return ns, name
}

// TestCertManagerCarriesAChangedIssuerCAIntoTheClusterUnderLoad changes
// the CA of a running cluster's CA Issuer (a second CA made by the
// self-signed issuer, named in the Issuer's secretName) and asks for a
// rotation, as docs/user-guide/tls.md says to: the operator carries the
// new CA in, while the checker writes and reads over https. The checker
// loads its client certificate and trusted CAs once, so it runs in two
// halves, as in the operator's own CA rotation: the first from the moment
// every copy trusts both CAs to the moment every copy holds a certificate
// of the new CA (the cluster is then paused, so that no member drops the
// old CA under the first checker), the second from the moment every copy
// trusts the new CA alone to the end. No acknowledged write may be lost,
// each member is restarted, a client of the client Secret is served at the
// end, and a client certificate of the old CA is refused by every member.
func TestCertManagerCarriesAChangedIssuerCAIntoTheClusterUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns, name := certManagerClusterRunning(t, "cmca")
	secret := func(ctx context.Context, n string) (*corev1.Secret, error) {
		return f.Kube.CoreV1().Secrets(ns).Get(ctx, n, metav1.GetOptions{})
	}
	mustSecret := func(n string) *corev1.Secret {
		t.Helper()
		s, err := secret(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	oldClient := mustSecret(name + "-client-tls")
	oldCA := mustSecret(name + "-ca").Data["tls.crt"]

	// The second CA, from the self-signed issuer of the first.
	secondCA := name + "-ca-2"
	t.Cleanup(func() {
		_, _ = f.Kubectl(context.WithoutCancel(ctx), "-n", ns, "delete", "--ignore-not-found", "certificates.cert-manager.io/"+secondCA, "secret/"+secondCA)
	})
	manifest := fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: %[1]s
spec:
  isCA: true
  commonName: %[1]s
  secretName: %[1]s
  duration: 87600h
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {name: %[2]s-selfsigned, kind: Issuer}
`, secondCA, name)
	if _, err := f.KubectlStdin(ctx, manifest, "-n", ns, "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	var newCA []byte
	err := framework.WaitFor(ctx, changeTimeout, framework.Poll, "the second CA issued", func(ctx context.Context) (bool, string, error) {
		s, err := secret(ctx, secondCA)
		if err != nil {
			return false, err.Error(), nil
		}
		newCA = s.Data["tls.crt"]
		return len(newCA) > 0, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Kubectl(ctx, "-n", ns, "patch", "issuers.cert-manager.io", name+"-ca", "--type=merge", "-p", `{"spec":{"ca":{"secretName":"`+secondCA+`"}}}`); err != nil {
		t.Fatal(err)
	}
	err = framework.WaitFor(ctx, changeTimeout, framework.Poll, "the CA Issuer ready on the second CA", func(ctx context.Context) (bool, string, error) {
		out, err := f.Kubectl(ctx, "-n", ns, "get", "issuers.cert-manager.io", name+"-ca", "-o", `jsonpath={.spec.ca.secretName} {.status.conditions[?(@.type=="Ready")].status}`)
		return err == nil && out == secondCA+" True", out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Kubectl(ctx, "-n", ns, "patch", "etcd", name, "--type=merge", "-p", `{"metadata":{"annotations":{"`+api.RotateCertificatesAnnotation+`":"e2e-ca-1"}}}`); err != nil {
		t.Fatal(err)
	}

	leaves := map[string][2]string{
		name + "-peer-tls": {etcdutil.SecretPeerCert, etcdutil.SecretPeerCA}, name + "-server-tls": {etcdutil.SecretServerCert, etcdutil.SecretServerCA},
		name + "-operator-tls": {etcdutil.SecretClientCert, etcdutil.SecretClientCA}, name + "-client-tls": {etcdutil.SecretClientCert, etcdutil.SecretClientCA},
	}
	// waitCopies waits until every copy says what done wants of the CAs
	// it trusts and of the CA that signed its certificate.
	waitCopies := func(ctx context.Context, what string, done func(trusted []*x509.Certificate, signedByNew bool) bool) {
		t.Helper()
		newCert, oldCert := parsePEMCertificates(t, newCA)[0], parsePEMCertificates(t, oldCA)[0]
		err := framework.WaitFor(ctx, caRotationTimeout, framework.Poll, what, func(ctx context.Context) (bool, string, error) {
			var said []string
			ok := true
			for l, keys := range leaves {
				s, err := secret(ctx, l)
				if err != nil {
					return false, err.Error(), nil
				}
				trusted := parsePEMCertificates(t, s.Data[keys[1]])
				leaf := parsePEMCertificates(t, s.Data[keys[0]])[0]
				signedByNew := leaf.CheckSignatureFrom(newCert) == nil
				ok = ok && done(trusted, signedByNew)
				var names []string
				for _, c := range trusted {
					switch {
					case c.Equal(newCert):
						names = append(names, "new")
					case c.Equal(oldCert):
						names = append(names, "old")
					default:
						names = append(names, c.Subject.CommonName)
					}
				}
				said = append(said, fmt.Sprintf("%s trusts %v, signed by the new CA %v", l, names, signedByNew))
			}
			slices.Sort(said)
			return ok, strings.Join(said, "; "), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	holds := func(trusted []*x509.Certificate, pemCA []byte) bool {
		ca := parsePEMCertificates(t, pemCA)[0]
		return slices.ContainsFunc(trusted, ca.Equal)
	}
	patch := func(ctx context.Context, p string) {
		t.Helper()
		if _, err := f.Kubectl(ctx, "-n", ns, "patch", "etcd", name, "--type=merge", "-p", p); err != nil {
			t.Fatal(err)
		}
	}

	waitCopies(ctx, "every copy trusts both CAs", func(trusted []*x509.Certificate, _ bool) bool {
		return holds(trusted, oldCA) && holds(trusted, newCA)
	})
	underLoadPod(t, framework.CheckerPod{Namespace: ns, Cluster: name, Scenario: "cert-manager-ca-trust-both", Duration: 12 * time.Minute, TLSSecret: name + "-client-tls"},
		func(ctx context.Context) {
			waitCopies(ctx, "every copy holds a certificate of the new CA", func(_ []*x509.Certificate, signedByNew bool) bool { return signedByNew })
			// No member drops the old CA while this checker's client
			// certificate is of it.
			patch(ctx, `{"spec":{"paused":true}}`)
		})
	patch(ctx, `{"spec":{"paused":false}}`)
	waitCopies(ctx, "every copy trusts the new CA alone", func(trusted []*x509.Certificate, signedByNew bool) bool {
		return signedByNew && len(trusted) == 1 && holds(trusted, newCA)
	})
	underLoadPod(t, framework.CheckerPod{Namespace: ns, Cluster: name, Scenario: "cert-manager-ca-trust-new", Duration: 10 * time.Minute, TLSSecret: name + "-client-tls"},
		func(ctx context.Context) {
			err := framework.WaitFor(ctx, caRotationTimeout, framework.Poll, "status.certificatesRotated e2e-ca-1", func(ctx context.Context) (bool, string, error) {
				cl, err := f.GetCluster(ctx, ns, name)
				if err != nil {
					return false, err.Error(), nil
				}
				return cl.Status.CertificatesRotated == "e2e-ca-1", framework.DescribeStatus(cl), nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	waitReady(t, ns, name, 3, changeTimeout)

	told := clusterEventMessages(t, ns, name, "CARotation")
	for _, change := range []string{"issuer's CA: trusted CAs written into", "issuer's CA: restarting member"} {
		if !strings.Contains(told, change) {
			t.Errorf("no CARotation event says %q:\n%s", change, told)
		}
	}
	servesOnlyCertifiedClients(t, name, name+"-client-tls")
	refusesClientCertificateOf(t, ns, name, oldClient)
}

// parsePEMCertificates are the certificates of a PEM bundle; the test
// fails when it holds none.
func parsePEMCertificates(t *testing.T, bundle []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for rest := bundle; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cert)
	}
	if len(out) == 0 {
		t.Fatalf("no certificate in %q", bundle)
	}
	return out
}
