//go:build e2e

package e2e

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

	certificatesRotatedUnderLoad(t, ns, name, "cert-manager-rotation")
	servesOnlyCertifiedClients(t, name, name+"-client-tls")
}
