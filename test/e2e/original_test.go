//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/crds"
	"github.com/openetcd/etcd-operator/pkg/operatorrun"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// originalManifest is one of the original's published manifests, as kept
// under test/e2e/testdata/original.
func originalManifest(name string) string {
	return f.Env.Path("test", "e2e", "testdata", "original", name)
}

func operatorImage() string {
	if f.Env.OperatorImage != "" {
		return f.Env.OperatorImage
	}
	return "openetcd/etcd-operator:v0.1.0"
}

// nextOperatorImage is the operator image under its second tag (see
// NEXT_TAG_SUFFIX in hack/local-cluster/lib.sh): the same image, which a
// Deployment rolled to it takes for a new one.
func nextOperatorImage() string {
	return operatorImage() + "-next"
}

// grantOriginalRole applies the original's namespaced Role and RoleBinding in
// ns, filled in with sed as its create_role.sh filled them; edit changes the
// Role further, the way a user trims it.
func grantOriginalRole(t *testing.T, ns string, edit ...string) {
	t.Helper()
	fill := []string{"s/<ROLE_NAME>/etcd-operator/g", "s/<NAMESPACE>/" + ns + "/g"}
	if err := f.CreateFromExample(t.Context(), ns, originalManifest("role-template.yaml"), append(fill, edit...)...); err != nil {
		t.Fatal(err)
	}
	if err := f.CreateFromExample(t.Context(), ns, originalManifest("role-binding-template.yaml"),
		append(fill, "s/<ROLE_BINDING_NAME>/etcd-operator/g")...); err != nil {
		t.Fatal(err)
	}
}

// grantOriginalClusterRole applies the original's ClusterRole and
// ClusterRoleBinding for the default service account of ns, filled in with sed
// as its create_role.sh filled them, under a name of the namespace's own
// (cluster-scoped objects outlive the namespace); they are deleted when the
// test ends.
func grantOriginalClusterRole(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	op := &framework.Operator{Namespace: ns, RBACName: "e2e-" + ns}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := op.Uninstall(ctx, f); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := f.CreateFromExample(ctx, ns, originalManifest("cluster-role-template.yaml"), "s/<ROLE_NAME>/"+op.RBACName+"/g"); err != nil {
		t.Fatal(err)
	}
	if err := f.CreateFromExample(ctx, ns, originalManifest("cluster-role-binding-template.yaml"),
		"s/<ROLE_NAME>/"+op.RBACName+"/g", "s/<ROLE_BINDING_NAME>/"+op.RBACName+"/g", "s/<NAMESPACE>/"+ns+"/g"); err != nil {
		t.Fatal(err)
	}
}

// grantRule adds one rule for the default service account of ns, as a user
// adds the rule a message names.
func grantRule(t *testing.T, ns, name string, rule rbacv1.PolicyRule) {
	t.Helper()
	ctx := t.Context()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: []rbacv1.PolicyRule{rule}}
	if _, err := f.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}}}
	if _, err := f.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// applyCRDs applies example/crd/ as the admin, as an install with
// --create-crd=false needs.
func applyCRDs(t *testing.T) {
	t.Helper()
	if _, err := f.Kubectl(t.Context(), "apply", "-f", f.Env.Path("example", "crd")+"/"); err != nil {
		t.Fatalf("apply example/crd: %v", err)
	}
}

// dumpOnFailure dumps the namespace and its operator's log if the test fails.
func dumpOnFailure(t *testing.T, ns string) {
	t.Cleanup(func() {
		if t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dump(ctx, t, framework.DumpTarget{Namespace: ns, OperatorNamespace: ns})
		}
	})
}

// runningOperatorPod waits for the operator Deployment's one pod to run (not
// to be Ready: the original's Deployment has no readiness probe).
func runningOperatorPod(t *testing.T, ns string) corev1.Pod {
	t.Helper()
	return runningPod(t, ns, framework.OperatorDeployment)
}

// runningPod waits for the one pod of a Deployment to run.
func runningPod(t *testing.T, ns, deployment string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	err := framework.WaitFor(t.Context(), framework.OperatorReadyTimeout, framework.Poll, "the pod of "+deployment+" running in "+ns,
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.DeploymentPods(ctx, ns, deployment)
			if err != nil {
				return false, err.Error(), nil
			}
			live := framework.LivePods(pods)
			if len(live) != 1 || live[0].Status.Phase != corev1.PodRunning {
				return false, framework.DescribePods(pods), nil
			}
			pod = live[0]
			return true, "", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// waitPodEvent waits for an event of the given reason on the pod, by UID as
// `kubectl describe pod` finds them, and returns its message.
func waitPodEvent(t *testing.T, pod corev1.Pod, typ, reason string, timeout time.Duration) string {
	t.Helper()
	var msg string
	sel := fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": pod.Name, "involvedObject.uid": string(pod.UID), "reason": reason}.String()
	err := framework.WaitFor(t.Context(), timeout, framework.Poll, fmt.Sprintf("a %s event %s on pod %s", typ, reason, pod.Name),
		func(ctx context.Context) (bool, string, error) {
			list, err := f.Kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, e := range list.Items {
				if e.Type == typ {
					msg = e.Message
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%d events", len(list.Items)), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestOriginalRoleElectsOnEndpoints installs the operator as an install of the
// original stands: its namespaced Role (endpoints, no leases, no
// etcdclusters/status), its Deployment (no readiness probe) with
// --create-crd=false and example/crd applied by the admin. The operator must
// elect itself on the original's Endpoints lock, say so, name in one event
// what else the role lacks, and say on the cluster which rule its status
// needs (example/crd serves the status subresource, which the role does not
// grant); with that rule the cluster runs to Available and serves data.
func TestOriginalRoleElectsOnEndpoints(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "original-rbac")
	dumpOnFailure(t, ns)
	grantOriginalRole(t, ns)
	applyCRDs(t)
	if err := f.CreateFromExample(ctx, ns, originalManifest("deployment.yaml"),
		"s|image: quay.io/coreos/etcd-operator:v0.9.4|image: "+operatorImage()+"|",
		`s|^\( *\)- etcd-operator$|&\n\1- -create-crd=false|`); err != nil {
		t.Fatal(err)
	}
	pod := runningOperatorPod(t, ns)

	msg := waitPodEvent(t, pod, corev1.EventTypeNormal, operatorrun.EventLeaderElectionLock, framework.OperatorReadyTimeout)
	if !strings.Contains(msg, "leader election uses Endpoints "+ns+"/etcd-operator") || !strings.Contains(msg, `resources: ["leases"]`) {
		t.Errorf("event %q does not say the Endpoints lock is used and how to move to a Lease", msg)
	}
	// What the original's role lacks besides the lock, in one message.
	msg = waitPodEvent(t, pod, corev1.EventTypeWarning, operatorrun.EventMissingPermissions, framework.OperatorReadyTimeout)
	if !strings.Contains(msg, `resources: ["poddisruptionbudgets"]`) || strings.Contains(msg, `resources: ["pods"]`) {
		t.Errorf("event %q does not name just what the original's role lacks (poddisruptionbudgets)", msg)
	}
	err := framework.WaitFor(ctx, time.Minute, framework.Poll, "the Endpoints lock held by "+pod.Name, func(ctx context.Context) (bool, string, error) {
		e, err := f.Kube.CoreV1().Endpoints(ns).Get(ctx, "etcd-operator", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		raw := e.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
		var rec resourcelock.LeaderElectionRecord
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			return false, fmt.Sprintf("annotation %q: %v", raw, err), nil
		}
		return rec.HolderIdentity == pod.Name, raw, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Kube.CoordinationV1().Leases(ns).Get(ctx, "etcd-operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Lease etcd-operator: %v, want none (the role does not grant leases)", err)
	}

	name := framework.UniqueName("orig")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	statusRuleNamedThenEnough(t, ns, name)
	if err := f.PutAndGet(ctx, ns, name, false, "/e2e/original-rbac", "ok", dataTimeout); err != nil {
		t.Fatal(err)
	}
}

// statusRuleNamedThenEnough runs a 3-member cluster under the original's
// roles, which lack etcdclusters/status, on example/crd, whose status
// subresource ignores status in updates of the object: one Warning event on
// the EtcdCluster names the rule. The operator keeps the status it cannot
// store in memory, so the cluster still grows to 3 members and serves without
// the rule; adding the rule the event names is enough for the status to be
// stored, without a restart: after a write through the object that stored
// nothing, the next write tries the status subresource again.
func statusRuleNamedThenEnough(t *testing.T, ns, name string) *api.EtcdCluster {
	t.Helper()
	ctx := t.Context()
	msg := waitClusterEvent(t, ns, name, corev1.EventTypeWarning, statusutil.ReasonStatusSubresourceForbidden, bootstrapTimeout(1))
	if want := `resources: ["etcdclusters/status"]`; !strings.Contains(msg, want) {
		t.Errorf("event %q does not name the rule %s", msg, want)
	}
	if err := framework.WaitFor(ctx, bootstrapTimeout(3), framework.Poll, "3 Ready members of "+name+" without etcdclusters/status",
		f.ReadyPodsCond(ns, name, 3)); err != nil {
		t.Fatal(err)
	}
	out, err := f.Etcdctl(ctx, ns, name, false, "member", "list")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || strings.Contains(out, "unstarted") || strings.Contains(out, ", true") {
		t.Errorf("member list without the rule:\n%s\nwant 3 started voting members", out)
	}
	if err := f.PutAndGet(ctx, ns, name, false, "/e2e/without-status-rule", "ok", dataTimeout); err != nil {
		t.Fatal(err)
	}
	stored, err := f.GetCluster(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status.Phase != api.ClusterPhaseNone {
		t.Fatalf("stored status %s: a status was stored without etcdclusters/status, so this test no longer shows the cluster growing without it", framework.DescribeStatus(stored))
	}
	grantStatusRule(t, ns)
	cl, _ := waitReady(t, ns, name, 3, changeTimeout)
	err = framework.WaitFor(ctx, changeTimeout, framework.Poll, "the Available condition of "+name+" True in its stored status",
		func(ctx context.Context) (bool, string, error) {
			got, err := f.GetCluster(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			cl = got
			c := framework.StatusCondition(cl, api.ClusterConditionAvailable)
			return c != nil && c.Status == corev1.ConditionTrue, framework.DescribeStatus(cl), nil
		})
	if err != nil {
		t.Error(err)
	}
	return cl
}

// grantStatusRule adds the rule a StatusSubresourceForbidden event names.
func grantStatusRule(t *testing.T, ns string) {
	t.Helper()
	grantRule(t, ns, "etcd-operator-status", rbacv1.PolicyRule{APIGroups: []string{api.GroupName},
		Resources: []string{"etcdclusters/status"}, Verbs: []string{"get", "update", "patch"}})
}

// waitClusterCRDStatusSubresource waits until the EtcdCluster CRD serves
// the status subresource, or no longer does, and returns it.
func waitClusterCRDStatusSubresource(t *testing.T, served bool, timeout time.Duration) *apiextv1.CustomResourceDefinition {
	t.Helper()
	var crd *apiextv1.CustomResourceDefinition
	err := framework.WaitFor(t.Context(), timeout, framework.Poll, fmt.Sprintf("the CRD %s serving the status subresource: %v", etcdClusterCRD, served),
		func(ctx context.Context) (bool, string, error) {
			got, err := f.APIExt.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, etcdClusterCRD, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			crd = got
			sub := got.Spec.Versions[0].Subresources
			return (sub != nil && sub.Status != nil) == served, fmt.Sprintf("subresources %+v", sub), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// clusterEvents lists the events of a reason on an EtcdCluster, as `kubectl
// describe etcd` finds them.
func clusterEvents(ctx context.Context, ns, name, reason string) ([]corev1.Event, error) {
	sel := fields.Set{"involvedObject.kind": api.EtcdClusterResourceKind, "involvedObject.name": name, "reason": reason}.String()
	list, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// clusterEventMessages is the messages of the events of a reason on an
// EtcdCluster, a line each.
func clusterEventMessages(t *testing.T, ns, name, reason string) string {
	t.Helper()
	events, err := clusterEvents(t.Context(), ns, name, reason)
	if err != nil {
		t.Fatal(err)
	}
	var messages []string
	for _, e := range events {
		messages = append(messages, e.Message)
	}
	return strings.Join(messages, "\n")
}

// waitClusterEvent waits for an event of the given type and reason on an
// EtcdCluster and returns its message.
func waitClusterEvent(t *testing.T, ns, name, typ, reason string, timeout time.Duration) string {
	t.Helper()
	var msg string
	err := framework.WaitFor(t.Context(), timeout, framework.Poll, fmt.Sprintf("a %s event %s on EtcdCluster %s/%s", typ, reason, ns, name),
		func(ctx context.Context) (bool, string, error) {
			events, err := clusterEvents(ctx, ns, name, reason)
			if err != nil {
				return false, err.Error(), nil
			}
			for _, e := range events {
				if e.Type == typ {
					msg = e.Message
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%d events", len(events)), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestMemberImagesHaveAShellAsPublished: the published etcd images up to 3.4
// were built on Debian, and guides written for the original's clusters run
// etcdctl in a member through `env` or `sh -c`; from 3.5 they are distroless,
// with no shell. The local images are built the same way (hack/local-cluster/
// images.sh), so a guide's command works on a 3.4 member exactly as written,
// and nothing of ours may come to depend on a shell in a 3.5+ member.
func TestMemberImagesHaveAShellAsPublished(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	old, newer := framework.UniqueName("guide34"), framework.UniqueName("guide36")
	createCluster(t, framework.NewCluster(old, 1, "3.4.23"))
	createCluster(t, framework.NewCluster(newer, 1, "3.6.6"))

	_, pods := waitReady(t, opNS, old, 1, bootstrapTimeout(1))
	guide := func(args ...string) string {
		t.Helper()
		cmd := append([]string{"exec", "-n", opNS, pods[0], "--"}, args...)
		out, err := f.Kubectl(ctx, cmd...)
		if err != nil {
			t.Errorf("kubectl %s on a 3.4.23 member: %v", strings.Join(cmd, " "), err)
		}
		return strings.TrimSpace(out)
	}
	// etcdctl 3.4 says "is healthy" on stderr; its exit status tells.
	guide("env", "ETCDCTL_API=3", "etcdctl", "endpoint", "health")
	if out := guide("env", "ETCDCTL_API=3", "etcdctl", "put", "/e2e/guide", "as the guide says"); out != "OK" {
		t.Errorf("put said %q, want OK", out)
	}
	if out := guide("env", "ETCDCTL_API=3", "etcdctl", "get", "/e2e/guide", "--print-value-only"); out != "as the guide says" {
		t.Errorf("get said %q", out)
	}
	if out := guide("sh", "-c", "ETCDCTL_API=3 etcdctl get /e2e/guide --print-value-only"); out != "as the guide says" {
		t.Errorf("get through sh -c said %q", out)
	}

	_, pods = waitReady(t, opNS, newer, 1, bootstrapTimeout(1))
	out, err := f.Kubectl(ctx, "exec", "-n", opNS, pods[0], "--", "sh", "-c", "true")
	if err == nil || !strings.Contains(err.Error(), "executable file not found") {
		t.Errorf("sh in a 3.6.6 member: %q, %v; want no shell, as in the published distroless image", out, err)
	}
	if _, err := f.EtcdctlExec(ctx, opNS, pods[0], "endpoint", "health"); err != nil {
		t.Errorf("etcdctl exec'd directly in a 3.6.6 member: %v", err)
	}
}

// TestRoleWithoutAnyLockNamesTheRuleToAdd: a role granting neither leases nor
// endpoints (the original's, endpoints trimmed) cannot elect a leader. The
// pod stays unready with /readyz naming the rule, a Warning event on the pod
// names it too, and adding that rule is enough.
func TestRoleWithoutAnyLockNamesTheRuleToAdd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "no-lock")
	dumpOnFailure(t, ns)
	grantOriginalRole(t, ns, `/^  - endpoints$/d`)
	applyCRDs(t)
	sed := []string{"s/- --create-crd=true/- --create-crd=false/"}
	if f.Env.OperatorImage != "" {
		sed = append(sed, "s|image: openetcd/etcd-operator:.*|image: "+f.Env.OperatorImage+"|")
	}
	if err := f.CreateFromExample(ctx, ns, f.Env.Path("example", "deployment.yaml"), sed...); err != nil {
		t.Fatal(err)
	}
	pod := runningOperatorPod(t, ns)
	rule := `{apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"]} in namespace ` + ns
	msg := waitPodEvent(t, pod, corev1.EventTypeWarning, operatorrun.EventLeaderElectionForbidden, framework.OperatorReadyTimeout)
	if !strings.Contains(msg, rule) {
		t.Errorf("event %q does not name the rule %s", msg, rule)
	}
	body, err := f.Kube.CoreV1().Pods(ns).ProxyGet("http", pod.Name, "8080", "/readyz", nil).DoRaw(ctx)
	if err == nil || !strings.Contains(string(body), rule) {
		t.Errorf("/readyz answered %q (%v), want a failure naming %s", body, err, rule)
	}
	if framework.IsPodReady(&pod) {
		t.Error("the operator pod is Ready though its role allows no lock")
	}

	grantRule(t, ns, "etcd-operator-leases", rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}})
	if err := f.WaitDeploymentReady(ctx, ns, framework.OperatorDeployment, 1, framework.OperatorReadyTimeout); err != nil {
		t.Fatal(err)
	}
	lease, err := f.Kube.CoordinationV1().Leases(ns).Get(ctx, "etcd-operator", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != pod.Name {
		t.Fatalf("Lease etcd-operator: %+v, %v; want it held by %s once the rule was added", lease, err, pod.Name)
	}
}

// TestOriginalClusterRoleAndDeploymentRunACluster installs the operator the
// way the original's README did: create_role.sh's ClusterRole and binding
// (filled in with sed), and its Deployment unchanged but for the API version
// and the image, so with -create-crd at its default and no readiness probe.
// The role grants etcdclusters but not etcdclusters/status, so the operator
// installs the CRD without the status subresource: status is part of the
// object, as in the original, and kubectl shows it. Once the rule is added,
// a restart of the operator installs the CRD with the subresource again.
//
// Not parallel: it changes the cluster-wide CRD the other tests use, and puts
// it back at the end (Go starts the parallel tests after the sequential ones).
func TestOriginalClusterRoleAndDeploymentRunACluster(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t, "original-cr")
	dumpOnFailure(t, ns)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := crds.Install(ctx, f.APIExt, crds.EtcdCluster(), logrus.NewEntry(logrus.New())); err != nil {
			t.Errorf("cleanup: put back the EtcdCluster CRD: %v", err)
		}
	})
	grantOriginalClusterRole(t, ns)
	if err := f.CreateFromExample(ctx, ns, originalManifest("deployment.yaml"),
		"s|image: quay.io/coreos/etcd-operator:v0.9.4|image: "+operatorImage()+"|"); err != nil {
		t.Fatal(err)
	}
	pod := runningOperatorPod(t, ns)
	msg := waitPodEvent(t, pod, corev1.EventTypeNormal, operatorrun.EventLeaderElectionLock, framework.OperatorReadyTimeout)
	if !strings.Contains(msg, "leader election uses Endpoints "+ns+"/etcd-operator") {
		t.Errorf("event %q does not say the Endpoints lock is used", msg)
	}
	crd := waitClusterCRDStatusSubresource(t, false, framework.OperatorReadyTimeout)
	if sub := crd.Spec.Versions[0].Subresources; sub == nil || sub.Scale == nil {
		t.Errorf("the CRD lost its scale subresource: %+v", sub)
	}

	name := framework.UniqueName("origcr")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	cl, _ := waitReady(t, ns, name, 3, bootstrapTimeout(3))
	if cl.Status.Phase != api.ClusterPhaseRunning || cl.Status.ReadyMembers != "3/3" {
		t.Errorf("stored status phase %q, readyMembers %q; want Running, 3/3", cl.Status.Phase, cl.Status.ReadyMembers)
	}
	out, err := f.Kubectl(ctx, "get", "etcd", "-n", ns, name)
	if got := strings.Join(strings.Fields(out), " "); err != nil || !strings.Contains(got, " 3/3 ") || !strings.Contains(got, " Running ") {
		t.Errorf("kubectl get etcd shows no status (%v):\n%s", err, out)
	}
	if err := f.PutAndGet(ctx, ns, name, false, "/e2e/original-cr", "ok", dataTimeout); err != nil {
		t.Fatal(err)
	}

	// With the rule, a restart gets the status subresource back, and the
	// status the object holds stays.
	grantStatusRule(t, ns)
	if err := f.Kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitClusterCRDStatusSubresource(t, true, framework.OperatorReadyTimeout)
	err = framework.WaitFor(ctx, changeTimeout, framework.Poll, "the Available condition of "+name+" True in its stored status",
		func(ctx context.Context) (bool, string, error) {
			got, err := f.GetCluster(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			c := framework.StatusCondition(got, api.ClusterConditionAvailable)
			return c != nil && c.Status == corev1.ConditionTrue, framework.DescribeStatus(got), nil
		})
	if err != nil {
		t.Error(err)
	}
}

// TestWalkthroughPipelinesFillTheExamples runs the original walkthroughs' sed
// pipelines over the example backup and restore resources and has the real
// apiserver admit the result (a server-side dry run): the placeholders are
// where the original had them, so the user's bucket, secret and endpoints
// land in the resource.
func TestWalkthroughPipelinesFillTheExamples(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "walkthrough")
	ensureBackupRestoreCRDs(t)
	sed := []string{
		"-e", `s|<full-s3-path>|mybucket/etcd.backup|g`,
		"-e", `s|<aws-secret>|aws|g`,
		"-e", `s|<etcd-cluster-endpoints>|"http://example-etcd-cluster-client:2379"|g`,
	}
	for _, file := range []string{"etcd-backup-operator/backup_cr.yaml", "etcd-backup-operator/periodic_backup_cr.yaml", "etcd-restore-operator/restore_cr.yaml"} {
		manifest, err := f.Run(ctx, framework.Cmd{Name: "sed", Args: append(append([]string(nil), sed...), f.Env.Path("example", file))})
		if err != nil {
			t.Fatal(err)
		}
		out, err := f.KubectlStdin(ctx, manifest, "create", "-n", ns, "--dry-run=server", "-o", "json", "-f", "-")
		if err != nil {
			t.Errorf("%s after the walkthrough's sed is refused: %v", file, err)
			continue
		}
		var obj struct {
			Spec struct {
				EtcdEndpoints []string `json:"etcdEndpoints"`
				S3            struct {
					Path      string `json:"path"`
					AWSSecret string `json:"awsSecret"`
				} `json:"s3"`
			} `json:"spec"`
		}
		if err := json.Unmarshal([]byte(out), &obj); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		s := obj.Spec
		if s.S3.Path != "mybucket/etcd.backup" || s.S3.AWSSecret != "aws" ||
			(strings.Contains(file, "backup") && (len(s.EtcdEndpoints) != 1 || s.EtcdEndpoints[0] != "http://example-etcd-cluster-client:2379")) {
			t.Errorf("%s after the walkthrough's sed: %+v; the placeholders are not where the original had them", file, s)
		}
	}
}

// TestOriginalRestoreOperatorSharesItsLockWithItsService: under the original's
// Role the restore operator elects on the Endpoints object
// etcd-restore-operator, which is also the Endpoints of the Service it makes
// for seed pods, as in the original. Kubernetes' endpoints controller and the
// lock must both keep their part of it: the pod's address for the seeds, and
// a record the leader keeps renewing.
func TestOriginalRestoreOperatorSharesItsLockWithItsService(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "original-restore")
	dumpOnFailure(t, ns)
	grantOriginalRole(t, ns)
	grantRule(t, ns, "etcd-restore-operator-status", rbacv1.PolicyRule{APIGroups: []string{api.GroupName}, Resources: []string{"etcdrestores/status"}, Verbs: []string{"get", "update", "patch"}})
	applyCRDs(t)
	if err := f.CreateFromExample(ctx, ns, originalManifest("restore-deployment.yaml"),
		"s|image: quay.io/coreos/etcd-operator:v0.9.4|image: "+operatorImage()+"|",
		`s|^\( *\)- etcd-restore-operator$|&\n\1- -create-crd=false|`); err != nil {
		t.Fatal(err)
	}
	pod := runningPod(t, ns, "etcd-restore-operator")
	msg := waitPodEvent(t, pod, corev1.EventTypeNormal, operatorrun.EventLeaderElectionLock, framework.OperatorReadyTimeout)
	if !strings.Contains(msg, "leader election uses Endpoints "+ns+"/etcd-restore-operator") {
		t.Errorf("event %q does not say the Endpoints lock is used", msg)
	}
	// Two renewals seen with the pod's address in place: the lock's updates
	// keep the addresses, and the endpoints controller's keep the record.
	var renewals []string
	err := framework.WaitFor(ctx, time.Minute, framework.Poll, "Endpoints etcd-restore-operator with the pod's address and a renewed lock",
		func(ctx context.Context) (bool, string, error) {
			e, err := f.Kube.CoreV1().Endpoints(ns).Get(ctx, "etcd-restore-operator", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			var rec resourcelock.LeaderElectionRecord
			raw := e.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
			if err := json.Unmarshal([]byte(raw), &rec); err != nil || rec.HolderIdentity != pod.Name {
				return false, fmt.Sprintf("record %q", raw), nil
			}
			addressed := false
			for _, ss := range e.Subsets {
				for _, a := range ss.Addresses {
					addressed = addressed || (a.TargetRef != nil && a.TargetRef.Name == pod.Name)
				}
			}
			seen := fmt.Sprintf("record %s, subsets %+v", raw, e.Subsets)
			if !addressed {
				return false, seen, nil
			}
			if r := rec.RenewTime.String(); len(renewals) == 0 || renewals[len(renewals)-1] != r {
				renewals = append(renewals, r)
			}
			return len(renewals) >= 2, seen, nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// swapClusterCRD replaces the spec of the live EtcdCluster CRD with the one of
// a manifest, and puts this tree's definition back when the test ends. The CRD
// is cluster-wide, so only tests that run while no other does (not parallel)
// may call it.
func swapClusterCRD(t *testing.T, manifest string) {
	t.Helper()
	ctx := t.Context()
	raw, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var want apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &want); err != nil {
		t.Fatalf("%s: %v", manifest, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := crds.Install(ctx, f.APIExt, crds.EtcdCluster(), logrus.NewEntry(logrus.New())); err != nil {
			t.Errorf("cleanup: put back the EtcdCluster CRD: %v", err)
		}
	})
	crdClient := f.APIExt.ApiextensionsV1().CustomResourceDefinitions()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := crdClient.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		live.Spec = want.Spec
		_, err = crdClient.Update(ctx, live, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("replace the EtcdCluster CRD with %s: %v", manifest, err)
	}
	if err := crds.WaitEstablished(ctx, f.APIExt, want.Name); err != nil {
		t.Fatal(err)
	}
}

// TestHandMadeCRDShowsStatusUnderTheOriginalRole installs the operator as the
// original's docs did: the EtcdCluster CRD made by hand (no status
// subresource, a schema that keeps every field), the original's namespaced
// Role exactly (no etcdclusters/status), its Deployment with
// --create-crd=false. Status is written with an update of the object, as the
// original did, so the cluster reaches Running and kubectl shows its status.
// Then a hand-made CRD whose schema prunes status: the operator says so once,
// and runs the cluster on the status it keeps in memory.
//
// Not parallel: it replaces the cluster-wide CRD the other tests use, and puts
// it back at the end (Go starts the parallel tests after the sequential ones).
func TestHandMadeCRDShowsStatusUnderTheOriginalRole(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t, "handmade-crd")
	dumpOnFailure(t, ns)
	grantOriginalRole(t, ns)
	swapClusterCRD(t, originalManifest("crd.yaml"))
	if err := f.CreateFromExample(ctx, ns, originalManifest("deployment.yaml"),
		"s|image: quay.io/coreos/etcd-operator:v0.9.4|image: "+operatorImage()+"|",
		`s|^\( *\)- etcd-operator$|&\n\1- -create-crd=false|`); err != nil {
		t.Fatal(err)
	}

	name := framework.UniqueName("handmade")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	cl, _ := waitReady(t, ns, name, 3, bootstrapTimeout(3))
	if cl.Status.Phase != api.ClusterPhaseRunning || cl.Status.ReadyMembers != "3/3" {
		t.Errorf("status phase %q, readyMembers %q; want Running, 3/3", cl.Status.Phase, cl.Status.ReadyMembers)
	}
	if err := f.PutAndGet(ctx, ns, name, false, "/e2e/handmade", "ok", dataTimeout); err != nil {
		t.Fatal(err)
	}
	out, err := f.Kubectl(ctx, "describe", "etcd", "-n", ns, name)
	if got := strings.Join(strings.Fields(out), " "); err != nil || !strings.Contains(got, "Status: ") || !strings.Contains(got, "Phase: Running") {
		t.Errorf("kubectl describe etcd shows no status (%v):\n%s", err, out)
	}
	out, err = f.Kubectl(ctx, "get", "etcd", "-n", ns, name, "-o", "yaml")
	if err != nil || !strings.Contains(out, "phase: Running") || !strings.Contains(out, "readyMembers: 3/3") {
		t.Errorf("kubectl get -o yaml shows no status (%v):\n%s", err, out)
	}

	// A schema that prunes status: the status of a new cluster is never
	// stored, and the operator says so in one Warning event with the fix.
	swapClusterCRD(t, originalManifest("crd-pruning-status.yaml"))
	pruned := framework.UniqueName("pruned")
	createClusterIn(t, ns, ns, framework.NewCluster(pruned, 1, "3.5.21"))
	msg := waitClusterEvent(t, ns, pruned, corev1.EventTypeWarning, statusutil.ReasonStatusNotStored, changeTimeout)
	if !strings.Contains(msg, "example/crd") {
		t.Errorf("event %q does not say to apply example/crd", msg)
	}
	// The status is kept in memory, so the cluster runs all the same. One
	// warning, however many passes: the recorder counts repeats of an event in
	// its count, and a second event of the reason would be a second object.
	if err := framework.WaitFor(ctx, bootstrapTimeout(1), framework.Poll, "the pod of "+pruned, f.ReadyPodsCond(ns, pruned, 1)); err != nil {
		t.Error(err)
	}
	if err := f.PutAndGet(ctx, ns, pruned, false, "/e2e/pruned", "ok", dataTimeout); err != nil {
		t.Error(err)
	}
	events, err := clusterEvents(ctx, ns, pruned, statusutil.ReasonStatusNotStored)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Count > 1 {
		t.Errorf("StatusNotStored events on %s: %+v, want one given once", pruned, events)
	}
}
