//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// tlsSwitchTimeout bounds one half of a TLS switch of three members: each
// member restarted once or twice (and its peer URL updated), each restart
// after every member is ready again.
const tlsSwitchTimeout = 20 * time.Minute

// TestChaosLongTLSSwitchedOnAndOffUnderLoad (make chaos) switches issued TLS
// on in a running plaintext cluster of three members on claims, and off
// again, while the checker writes and reads through the client Service. The
// hold annotation keeps each switch at the stage where the client port
// serves both schemes, so that the checker moves over as users' clients
// do: an http checker from the plain cluster to the hold, an https one
// from the hold to the end of the switch on; off, an https checker to the
// hold and an http one to the end. Each half: linearizable, no
// acknowledged write lost; at the end the same members (IDs) on the same
// claims, every key kept.
func TestChaosLongTLSSwitchedOnAndOffUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("tlssw")
	createHostPathPVs(t, "e2e-"+name, 4)
	cl := framework.NewCluster(name, 3, "3.6.16")
	cl.Spec.Pod = &api.PodPolicy{PersistentVolumeClaimSpec: claimSpec("e2e-" + name)}
	cl.Annotations = map[string]string{api.HoldClientsAnnotation: "true"}
	watchCluster(t, framework.DumpTarget{Namespace: opNS, Cluster: name, OperatorNamespace: opNS})
	t.Cleanup(func() {
		_ = f.Kube.CoreV1().Secrets(opNS).Delete(context.WithoutCancel(ctx), name+"-ca", metav1.DeleteOptions{})
	})
	createCluster(t, cl)
	logVolumesOnFailure(t, "e2e-"+name)
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	ids, claims := memberIDs(t, opNS, name), claimUIDs(t, name)

	patch := func(ctx context.Context, p string) {
		t.Helper()
		if _, err := f.Kubectl(ctx, "-n", opNS, "patch", "etcd", name, "--type=merge", "-p", p); err != nil {
			t.Fatal(err)
		}
	}
	release := `{"metadata":{"annotations":{"` + api.HoldClientsAnnotation + `":null}}}`
	checker := func(scenario string, d time.Duration, https bool) framework.CheckerPod {
		p := framework.CheckerPod{Namespace: opNS, Cluster: name, Scenario: scenario, Duration: d, Rate: 20, Clients: 4}
		if https {
			p.TLSSecret = name + "-client-tls"
		}
		return p
	}

	began := time.Now()
	patch(ctx, `{"spec":{"TLS":{"issued":{}}}}`)
	underLoadPod(t, checker("tls-switch-on-http", 4*time.Minute, false), func(ctx context.Context) {
		waitTLSStage(ctx, t, name, k8sutil.TLSPeersSecure, "holds with clients served http and https")
	})
	underLoadPod(t, checker("tls-switch-on-https", 3*time.Minute, true), func(ctx context.Context) {
		patch(ctx, release)
		waitTLSStage(ctx, t, name, k8sutil.TLSSecure, "")
		t.Logf("TLS switched on in %.1f s", time.Since(began).Seconds())
	})

	began = time.Now()
	patch(ctx, `{"metadata":{"annotations":{"`+api.HoldClientsAnnotation+`":"true"}},"spec":{"TLS":null}}`)
	underLoadPod(t, checker("tls-switch-off-https", 4*time.Minute, true), func(ctx context.Context) {
		waitTLSStage(ctx, t, name, k8sutil.TLSCertificates, "holds with clients served http and https")
	})
	underLoadPod(t, checker("tls-switch-off-http", 3*time.Minute, false), func(ctx context.Context) {
		patch(ctx, release)
		waitTLSStage(ctx, t, name, k8sutil.TLSPlain, "")
		t.Logf("TLS switched off in %.1f s", time.Since(began).Seconds())
	})

	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	sameMembers(t, ids, memberIDs(t, opNS, name))
	if after := claimUIDs(t, name); !maps.Equal(claims, after) {
		t.Errorf("claims before %v, after %v: a member's claim was replaced", claims, after)
	}
}

// waitTLSStage waits until the three member pods of cluster name run in
// stage want and are ready, and, when reason is not empty, the status says
// it.
func waitTLSStage(ctx context.Context, t *testing.T, name string, want k8sutil.TLSStage, reason string) {
	t.Helper()
	err := framework.WaitFor(ctx, tlsSwitchTimeout, framework.Poll, fmt.Sprintf("every member in TLS stage %s", want), func(ctx context.Context) (bool, string, error) {
		pods, err := f.Kube.CoreV1().Pods(opNS).List(ctx, metav1.ListOptions{LabelSelector: "etcd_cluster=" + name})
		if err != nil {
			return false, err.Error(), nil
		}
		var stages []string
		done := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			form, ok := k8sutil.MemberTLSOf(p)
			if !ok {
				continue
			}
			stages = append(stages, p.Name+": "+form.Stage().String())
			if form.Stage() == want && p.DeletionTimestamp == nil && k8sutil.IsPodReady(p) {
				done++
			}
		}
		cl, err := f.GetCluster(ctx, opNS, name)
		if err != nil {
			return false, err.Error(), nil
		}
		seen := strings.Join(stages, ", ") + "; reason: " + cl.Status.Reason
		return done == 3 && len(stages) == 3 && (reason == "" || strings.Contains(cl.Status.Reason, reason)), seen, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
