//go:build e2e

package e2e

import (
	"context"
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

// caRotationTimeout bounds a whole CA rotation of three members: two
// restarts of each, each after every member is ready again, and the
// kubelet's update of the secrets before each round of restarts.
const caRotationTimeout = 45 * time.Minute

// TestChaosLongCARotatedOnRequestUnderLoad (make chaos: the rotation waits for the
// kubelet to update the Secrets twice and restarts every member twice, so it
// takes tens of minutes) asks an issued-TLS cluster of three for a
// new CA (the rotate-ca annotation) while the checker writes and reads over
// https. The checker loads its client certificate and trusted CAs once, so
// it runs in two halves, each with the client Secret as it is then: the
// first from the moment the Secret trusts both CAs to the moment every leaf
// is of the new CA (the rotation is then paused, so that no member drops
// the old CA under the first checker), the second from the moment the
// Secret trusts the new CA alone to the end. Every step must be reached, no
// acknowledged write lost, a client using the client Secret served at the
// end, and a client certificate of the old CA refused by every member.
func TestChaosLongCARotatedOnRequestUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("rotca")
	cl := framework.NewCluster(name, 3, "3.6.16")
	cl.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{}}
	t.Cleanup(func() {
		_ = f.Kube.CoreV1().Secrets(opNS).Delete(context.WithoutCancel(ctx), name+"-ca", metav1.DeleteOptions{})
	})
	createCluster(t, cl)
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	secret := func(n string) *corev1.Secret {
		t.Helper()
		s, err := f.Kube.CoreV1().Secrets(opNS).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	oldClient := secret(name + "-client-tls")
	oldCA := string(secret(name + "-ca").Data["ca.crt"])
	leaves := []string{name + "-peer-tls", name + "-server-tls", name + "-operator-tls", name + "-client-tls"}
	caKeys := map[string]string{name + "-peer-tls": etcdutil.SecretPeerCA, name + "-server-tls": etcdutil.SecretServerCA,
		name + "-operator-tls": etcdutil.SecretClientCA, name + "-client-tls": etcdutil.SecretClientCA}
	// waitCA waits until the CA secret and every certificate secret say
	// what done wants.
	waitCA := func(ctx context.Context, what string, done func(ca *corev1.Secret, trusted map[string]string) bool) {
		t.Helper()
		err := framework.WaitFor(ctx, caRotationTimeout, framework.Poll, what, func(ctx context.Context) (bool, string, error) {
			ca, err := f.Kube.CoreV1().Secrets(opNS).Get(ctx, name+"-ca", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			trusted := map[string]string{}
			for _, l := range leaves {
				s, err := f.Kube.CoreV1().Secrets(opNS).Get(ctx, l, metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				trusted[l] = string(s.Data[caKeys[l]])
			}
			return done(ca, trusted), "CA secret annotations " + strings.Join(annotationsOf(ca), ", "), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	patch := func(ctx context.Context, p string) {
		t.Helper()
		if _, err := f.Kubectl(ctx, "-n", opNS, "patch", "etcd", name, "--type=merge", "-p", p); err != nil {
			t.Fatal(err)
		}
	}

	patch(ctx, `{"metadata":{"annotations":{"`+api.RotateCAAnnotation+`":"e2e-ca-1"}}}`)
	// a. Every certificate secret trusts the old CA and the new.
	waitCA(ctx, "every certificate secret trusts both CAs", func(ca *corev1.Secret, trusted map[string]string) bool {
		next := string(ca.Data["next-ca.crt"])
		for _, l := range leaves {
			if next == "" || !strings.Contains(trusted[l], oldCA) || !strings.Contains(trusted[l], next) {
				return false
			}
		}
		return true
	})
	underLoadPod(t, framework.CheckerPod{Namespace: opNS, Cluster: name, Scenario: "ca-rotation-trust-both", Duration: 15 * time.Minute, TLSSecret: name + "-client-tls"},
		func(ctx context.Context) {
			// b and c: members restarted, leaves of the new CA, which is
			// then the CA secret's own.
			waitCA(ctx, "the new CA adopted", func(ca *corev1.Secret, _ map[string]string) bool {
				return ca.Annotations["etcd.database.coreos.com/ca-rotation-step"] == "trust-new" || ca.Annotations["etcd.database.coreos.com/ca-rotated"] == "e2e-ca-1"
			})
			// No member drops the old CA while this checker's client
			// certificate is of it.
			patch(ctx, `{"spec":{"paused":true}}`)
		})
	patch(ctx, `{"spec":{"paused":false}}`)
	// d. Every certificate secret trusts the new CA alone.
	waitCA(ctx, "every certificate secret trusts the new CA alone", func(ca *corev1.Secret, trusted map[string]string) bool {
		if ca.Annotations["etcd.database.coreos.com/ca-rotated"] == "e2e-ca-1" {
			return true
		}
		for _, l := range leaves {
			if trusted[l] != string(ca.Data["ca.crt"]) {
				return false
			}
		}
		return string(ca.Data["ca.crt"]) != oldCA
	})
	underLoadPod(t, framework.CheckerPod{Namespace: opNS, Cluster: name, Scenario: "ca-rotation-trust-new", Duration: 10 * time.Minute, TLSSecret: name + "-client-tls"},
		func(ctx context.Context) {
			waitCA(ctx, "the rotation recorded as done", func(ca *corev1.Secret, _ map[string]string) bool {
				return ca.Annotations["etcd.database.coreos.com/ca-rotated"] == "e2e-ca-1" && ca.Annotations["etcd.database.coreos.com/ca-rotation-step"] == ""
			})
		})
	waitReady(t, opNS, name, 3, changeTimeout)

	// The events' messages say each step. client-go folds the tenth and
	// later similar events of an object within ten minutes into one whose
	// message is the latest ("(combined from similar events): ..."), so
	// the steps in the middle of a rotation (a dozen events) may not each
	// keep their own: the first steps and the last are what must be there.
	told := clusterEventMessages(t, opNS, name, "CARotation")
	for _, change := range []string{"began: a new CA is in", "the trusted CA written into", "restarting member", "done; the old CA is dropped from"} {
		if !strings.Contains(told, "CA rotation "+change) {
			t.Errorf("no CARotation event says %q:\n%s", change, told)
		}
	}
	servesOnlyCertifiedClients(t, name, name+"-client-tls")

	refusesClientCertificateOf(t, opNS, name, oldClient)
}

// refusesClientCertificateOf checks that no member of cluster name serves
// the client certificate of secret old (a copy of the client Secret taken
// before a CA changed), presented with the CAs the client Secret trusts
// now: the old CA is trusted by none.
func refusesClientCertificateOf(t *testing.T, ns, name string, old *corev1.Secret) {
	t.Helper()
	ctx := t.Context()
	current, err := f.Kube.CoreV1().Secrets(ns).Get(ctx, name+"-client-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-old-client", Namespace: ns},
		Data: map[string][]byte{
			etcdutil.SecretClientCert: old.Data[etcdutil.SecretClientCert],
			etcdutil.SecretClientKey:  old.Data[etcdutil.SecretClientKey],
			etcdutil.SecretClientCA:   current.Data[etcdutil.SecretClientCA],
		},
	}
	if _, err := f.Kube.CoreV1().Secrets(ns).Create(ctx, stale, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Kube.CoreV1().Secrets(ns).Delete(context.WithoutCancel(ctx), stale.Name, metav1.DeleteOptions{})
	})
	pods, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: api.LabelClusterName + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		endpoint := "https://" + p.Name + "." + name + "." + ns + ".svc:2379"
		out, ok, err := f.RunEtcdctlPod(ctx, framework.EtcdctlPod{
			Namespace: ns, Image: framework.EtcdImage("3.5.21"), Secret: stale.Name,
			Args: slices.Concat([]string{"--endpoints=" + endpoint, "--command-timeout=10s"}, framework.ClientTLSArgs, []string{"get", "/e2e/tls"}),
		})
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			t.Errorf("member %s serves a client certificate of the old CA after the CA changed: %s", p.Name, out)
		}
	}
}

// annotationsOf lists a secret's annotations of the CA rotation.
func annotationsOf(s *corev1.Secret) []string {
	var out []string
	for k, v := range s.Annotations {
		if strings.HasPrefix(k, "etcd.database.coreos.com/ca-rotat") {
			out = append(out, k+"="+v)
		}
	}
	slices.Sort(out)
	return out
}
