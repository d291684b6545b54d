//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// The secrets example/tls/gen-certs.sh --create-secrets creates and
// example/tls/example-tls-cluster.yaml names.
var tlsSecrets = []string{"etcd-peer-tls", "etcd-server-tls", "etcd-client-tls"}

// TestTLSClusterServesOnlyClientsWithCertificates is the original's TestTLS taken to
// the client: a cluster like example/tls/example-tls-cluster.yaml, which waits
// until its certificates, made by example/tls/gen-certs.sh, appear; then etcdctl
// over https from a pod that mounts the client certificate, and a refusal for one
// that does not present it. The certificates are valid 20 days: the cluster
// serves all the same, and warns ahead that they expire (status.reason, a
// CertificateExpiresSoon event).
func TestTLSClusterServesOnlyClientsWithCertificates(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("tls")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, s := range tlsSecrets {
			if err := f.Kube.CoreV1().Secrets(opNS).Delete(ctx, s, metav1.DeleteOptions{}); err != nil {
				t.Logf("cleanup: delete secret %s: %v", s, err)
			}
		}
	})
	watchCluster(t, framework.DumpTarget{Namespace: opNS, Cluster: name, Secure: true, OperatorNamespace: opNS})
	err := f.CreateFromExample(ctx, opNS, f.Env.Path("example", "tls", "example-tls-cluster.yaml"), "s/^  name: example$/  name: "+name+"/")
	if err != nil {
		t.Fatal(err)
	}
	// The secrets come after the cluster, as they do when a certificate
	// manager issues them: the cluster waits and says why (the original
	// failed it for good).
	err = framework.WaitFor(ctx, changeTimeout, framework.Poll, "status.reason to name the missing operator secret",
		func(ctx context.Context) (bool, string, error) {
			cl, err := f.GetCluster(ctx, opNS, name)
			if err != nil {
				return false, "", err
			}
			return strings.Contains(cl.Status.Reason, "etcd-client-tls") && cl.Status.Phase != "Failed", framework.DescribeStatus(cl), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Run(ctx, framework.Cmd{
		Name: "bash",
		Args: []string{f.Env.Path("example", "tls", "gen-certs.sh"), "--create-secrets"},
		Env:  []string{"CLUSTER=" + name, "NAMESPACE=" + opNS, "OUT=" + t.TempDir(), "DAYS=20"},
	})
	if err != nil {
		t.Fatalf("gen-certs.sh: %v", err)
	}

	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	servesOnlyCertifiedClients(t, name, "etcd-client-tls")
	err = framework.WaitFor(ctx, changeTimeout, framework.Poll, "status.reason to say the certificates expire soon",
		func(ctx context.Context) (bool, string, error) {
			cl, err := f.GetCluster(ctx, opNS, name)
			if err != nil {
				return false, "", err
			}
			return strings.Contains(cl.Status.Reason, "server.crt") && strings.Contains(cl.Status.Reason, "expires on"), framework.DescribeStatus(cl), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if msg := waitClusterEvent(t, opNS, name, corev1.EventTypeWarning, "CertificateExpiresSoon", changeTimeout); !strings.Contains(msg, "expires on") {
		t.Errorf("CertificateExpiresSoon event: %q", msg)
	}
}

// TestIssuedTLSClusterFromOneLine: a cluster like
// example/tls/issued-tls-cluster.yaml (TLS: {issued: {}}) needs no secret of
// the user's: the operator makes the CA and the certificates (these owned by
// the cluster, the CA by nothing) and users reach it with
// <cluster>-client-tls. Deleted and made again under its name, as a restore
// does, the cluster gets certificates from the same CA, which outlived it, so
// what clients trust still holds.
func TestIssuedTLSClusterFromOneLine(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("issued")
	watchCluster(t, framework.DumpTarget{Namespace: opNS, Cluster: name, Secure: true, OperatorNamespace: opNS})
	create := func() *api.EtcdCluster {
		t.Helper()
		err := f.CreateFromExample(ctx, opNS, f.Env.Path("example", "tls", "issued-tls-cluster.yaml"), "s/^  name: example$/  name: "+name+"/")
		if err != nil {
			t.Fatal(err)
		}
		waitReady(t, opNS, name, 3, bootstrapTimeout(3))
		cl, err := f.GetCluster(ctx, opNS, name)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	t.Cleanup(func() {
		_ = f.Kube.CoreV1().Secrets(opNS).Delete(context.WithoutCancel(ctx), name+"-ca", metav1.DeleteOptions{})
	})
	cl := create()
	ca := func() *corev1.Secret {
		t.Helper()
		s, err := f.Kube.CoreV1().Secrets(opNS).Get(ctx, name+"-ca", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("CA secret %s-ca: %v", name, err)
		}
		if len(s.OwnerReferences) > 0 {
			t.Errorf("CA secret %s has owners %+v: it would go with the cluster", s.Name, s.OwnerReferences)
		}
		return s
	}
	first := ca()
	for _, suffix := range []string{"-peer-tls", "-server-tls", "-operator-tls", "-client-tls"} {
		s, err := f.Kube.CoreV1().Secrets(opNS).Get(ctx, name+suffix, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("secret %s%s: %v", name, suffix, err)
		}
		if ref := metav1.GetControllerOf(s); ref == nil || ref.UID != cl.UID {
			t.Errorf("secret %s is not owned by the cluster: %+v", s.Name, ref)
		}
	}
	servesOnlyCertifiedClients(t, name, name+"-client-tls")

	if err := f.DeleteCluster(ctx, opNS, name); err != nil {
		t.Fatal(err)
	}
	err := framework.WaitFor(ctx, dataTimeout, framework.Poll, "the pods and certificates' secrets of "+name+" collected with it",
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.ClusterPods(ctx, opNS, name)
			if err != nil || len(pods) > 0 {
				return false, fmt.Sprintf("pods %s (%v)", framework.DescribePods(pods), err), nil
			}
			_, err = f.Kube.CoreV1().Secrets(opNS).Get(ctx, name+"-peer-tls", metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprintf("secret %s-peer-tls: %v", name, err), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	create()
	if again := ca(); again.UID != first.UID || string(again.Data["ca.crt"]) != string(first.Data["ca.crt"]) {
		t.Errorf("the cluster made again under its name has another CA secret (uid %s, was %s)", again.UID, first.UID)
	}
	servesOnlyCertifiedClients(t, name, name+"-client-tls")
}

// servesOnlyCertifiedClients checks, with etcdctl in pods that mount
// secret (etcd-client.* keys), that the ready cluster name serves a client
// with the certificate, refuses one without, and has its members talk https.
func servesOnlyCertifiedClients(t *testing.T, name, secret string) {
	t.Helper()
	ctx := t.Context()
	etcdctl := func(secret string, args ...string) (string, bool) {
		t.Helper()
		out, ok, err := f.RunEtcdctlPod(ctx, framework.EtcdctlPod{
			Namespace: opNS, Image: framework.EtcdImage("3.5.21"), Secret: secret,
			Args: append([]string{"--endpoints=" + framework.ClientURL(name, true)}, args...),
		})
		if err != nil {
			t.Fatal(err)
		}
		return out, ok
	}
	withCert := framework.ClientTLSArgs
	if out, ok := etcdctl(secret, slices.Concat(withCert, []string{"put", "/e2e/tls", "over https"})...); !ok {
		t.Fatalf("etcdctl put with the client certificate failed: %s", out)
	}
	if out, ok := etcdctl(secret, slices.Concat(withCert, []string{"get", "/e2e/tls", "--print-value-only"})...); !ok || strings.TrimSpace(out) != "over https" {
		t.Errorf("etcdctl get with the client certificate: ok=%v output %q, want \"over https\"", ok, out)
	}
	// The CA alone verifies the server but presents no client certificate: members
	// run with --client-cert-auth and must refuse.
	if out, ok := etcdctl(secret, withCert[0], "get", "/e2e/tls"); ok {
		t.Errorf("etcdctl without a client certificate was served: %s", out)
	}

	out, ok := etcdctl(secret, slices.Concat(withCert, []string{"member", "list", "-w", "json"})...)
	if !ok {
		t.Fatalf("etcdctl member list: %s", out)
	}
	var list struct {
		Members []framework.Member `json:"members"`
	}
	// The pod log may carry etcdctl's warnings before the JSON.
	start := strings.Index(out, "{")
	if start < 0 {
		t.Fatalf("member list printed no JSON: %q", out)
	}
	if err := json.Unmarshal([]byte(out[start:]), &list); err != nil {
		t.Fatalf("parse member list %q: %v", out, err)
	}
	for _, m := range list.Members {
		for _, u := range append(m.PeerURLs, m.ClientURLs...) {
			if !strings.HasPrefix(u, "https://") {
				t.Errorf("member %s advertises %s; peer and client traffic must be https", m.Name, u)
			}
		}
	}
	if len(list.Members) != 3 {
		t.Errorf("etcd lists %d members, want 3", len(list.Members))
	}
}

// TestIssuedCertificatesRotatedOnRequestUnderLoad asks an issued-TLS cluster
// for new certificates (the rotate-certificates annotation, as `kubectl etcd
// rotate-certs` sets it) while the checker writes and reads over https with
// the client certificate it mounted before: every certificate Secret is
// renewed in place from the same CA, the status records the request, and
// no acknowledged write is lost; afterwards the renewed client certificate
// is served.
func TestIssuedCertificatesRotatedOnRequestUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("rotate")
	cl := framework.NewCluster(name, 3, "3.6.16")
	cl.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{}}
	t.Cleanup(func() {
		_ = f.Kube.CoreV1().Secrets(opNS).Delete(context.WithoutCancel(ctx), name+"-ca", metav1.DeleteOptions{})
	})
	createCluster(t, cl)
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	certificatesRotatedUnderLoad(t, opNS, name, "issued-rotation")
	servesOnlyCertifiedClients(t, name, name+"-client-tls")
}

// certificatesRotatedUnderLoad asks cluster name, running in ns with issued
// TLS, for new certificates (the rotate-certificates annotation, as `kubectl
// etcd rotate-certs` sets it) while the checker writes and reads over https
// with the client certificate it mounted before, waits for
// status.certificatesRotated, and checks that every certificate Secret holds
// a new certificate and that each renewal was told.
func certificatesRotatedUnderLoad(t *testing.T, ns, name, scenario string) {
	t.Helper()
	ctx := t.Context()
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
	underLoadPod(t, framework.CheckerPod{Namespace: ns, Cluster: name, Scenario: scenario, Duration: 90 * time.Second, TLSSecret: name + "-client-tls"},
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
}
