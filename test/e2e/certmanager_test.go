//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

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
// acknowledged write is lost.
func TestCertManagerIssuesTheCertificatesAndRenewsThemUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := opNS
	if _, err := f.Kubectl(ctx, "get", "crd", "certificates.cert-manager.io"); err != nil {
		t.Fatalf("cert-manager is not installed on the local cluster (%v): run `make e2e-cert-manager`, or bash hack/cert-manager/build.sh && bash hack/cert-manager/deploy.sh", err)
	}
	name := framework.UniqueName("cm")
	// The example's issuer objects, under names of this test's own.
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

	leaves := map[string]string{
		name + "-peer-tls": etcdutil.SecretPeerCert, name + "-server-tls": etcdutil.SecretServerCert,
		name + "-operator-tls": etcdutil.SecretClientCert, name + "-client-tls": etcdutil.SecretClientCert,
	}
	serials := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for secret, key := range leaves {
			s, err := f.Kube.CoreV1().Secrets(ns).Get(ctx, secret, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			block, _ := pem.Decode(s.Data[key])
			if block == nil {
				t.Fatalf("%s of secret %s is not PEM", key, secret)
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			out[secret] = fmt.Sprintf("%s (%s) until %s", cert.SerialNumber, cert.Issuer.CommonName, cert.NotAfter.UTC().Format(time.RFC3339))
		}
		return out
	}
	before := serials()
	underLoadPod(t, framework.CheckerPod{Namespace: ns, Cluster: name, Scenario: "cert-manager-rotation", Duration: 90 * time.Second, TLSSecret: name + "-client-tls"},
		func(ctx context.Context) {
			patch := `{"metadata":{"annotations":{"` + api.RotateCertificatesAnnotation + `":"e2e-1"}}}`
			if _, err := f.Kubectl(ctx, "-n", ns, "patch", "etcd", name, "--type=merge", "-p", patch); err != nil {
				t.Fatal(err)
			}
			err := framework.WaitFor(ctx, changeTimeout, framework.Poll, "status.certificatesRotated e2e-1",
				func(ctx context.Context) (bool, string, error) {
					cl, err := f.GetCluster(ctx, ns, name)
					if err != nil {
						return false, err.Error(), nil
					}
					return cl.Status.CertificatesRotated == "e2e-1", framework.DescribeStatus(cl), nil
				})
			if err != nil {
				t.Fatal(err)
			}
		})
	after := serials()
	for secret := range leaves {
		if before[secret] == after[secret] {
			t.Errorf("secret %s still holds certificate %s after the rotation", secret, before[secret])
		}
	}
	t.Logf("certificates before: %v; after: %v", before, after)
	if n := strings.Count(eventsOf(t, ns, name), "CertificateRenewed"); n < len(leaves) {
		t.Errorf("%d CertificateRenewed events, want %d", n, len(leaves))
	}
	servesOnlyCertifiedClients(t, name, name+"-client-tls")
}
