package restore

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

func operatorPod(labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-restore-operator-5d9f7-abcde", Namespace: opNamespace, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Image: "proxy:1"},
			{Name: "operator", Image: "openetcd/etcd-operator:v0.1.0", ImagePullPolicy: corev1.PullNever,
				Command: []string{"etcd-restore-operator", "--create-crd=true"}},
		}},
	}
}

// leaderLabel is the label the operator sets on the leader's pod
// (operatorrun.LeaderLabel).
const leaderLabel = "etcd.database.coreos.com/leader"

func TestServiceSelectsTheLeadingOperatorPodOfEveryRevision(t *testing.T) {
	for _, tc := range []struct {
		name         string
		labels       map[string]string
		leaderLabel  string
		wantSelector map[string]string
	}{
		{"the leader label and the pod's labels without the template hash are selected",
			map[string]string{"name": "etcd-restore-operator", "pod-template-hash": "5d9f7"}, leaderLabel,
			map[string]string{"name": "etcd-restore-operator", leaderLabel: "true"}},
		{"a leader's own pod, already labelled, gives the same selector",
			map[string]string{"name": "etcd-restore-operator", leaderLabel: "true"}, leaderLabel,
			map[string]string{"name": "etcd-restore-operator", leaderLabel: "true"}},
		{"without the right to label its pod every replica is selected",
			map[string]string{"name": "etcd-restore-operator", "pod-template-hash": "5d9f7"}, "",
			map[string]string{"name": "etcd-restore-operator"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := NewService(opNamespace, operatorPod(tc.labels), tc.leaderLabel)
			if err != nil {
				t.Fatal(err)
			}
			if !cmp.Equal(svc.Spec.Selector, tc.wantSelector) {
				t.Errorf("selector %v, want %v", svc.Spec.Selector, tc.wantSelector)
			}
			if want := map[string]string{"name": "etcd-restore-operator"}; !cmp.Equal(svc.Labels, want) {
				t.Errorf("labels %v, want %v", svc.Labels, want)
			}
			if svc.Name != "etcd-restore-operator" || svc.Namespace != opNamespace || len(svc.Spec.Ports) != 1 ||
				svc.Spec.Ports[0].Port != 19999 || svc.Spec.Ports[0].TargetPort != intstr.FromInt32(19999) {
				t.Errorf("service %+v", svc)
			}
		})
	}
	if _, err := NewService(opNamespace, operatorPod(map[string]string{"pod-template-hash": "5d9f7"}), leaderLabel); err == nil {
		t.Error("a pod with only its template hash as label got a Service that would select nothing stable")
	}
}

func TestEnsureServiceCreatesThenCorrects(t *testing.T) {
	kube := kubefake.NewSimpleClientset()
	ctx := context.Background()
	want, err := NewService(opNamespace, operatorPod(map[string]string{"name": "etcd-restore-operator"}), leaderLabel)
	if err != nil {
		t.Fatal(err)
	}
	if err := EnsureService(ctx, kube, want); err != nil {
		t.Fatal(err)
	}
	// An older Deployment's labels: the selector is brought back.
	got, _ := kube.CoreV1().Services(opNamespace).Get(ctx, ServiceName, metav1.GetOptions{})
	got.Spec.Selector = map[string]string{"app": "old"}
	got.Spec.ClusterIP = "10.0.0.7"
	if _, err := kube.CoreV1().Services(opNamespace).Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := EnsureService(ctx, kube, want); err != nil {
		t.Fatal(err)
	}
	got, _ = kube.CoreV1().Services(opNamespace).Get(ctx, ServiceName, metav1.GetOptions{})
	if !cmp.Equal(got.Spec.Selector, want.Spec.Selector) || got.Spec.ClusterIP != "10.0.0.7" {
		t.Errorf("after correction: selector %v, clusterIP %s", got.Spec.Selector, got.Spec.ClusterIP)
	}
	// Nothing to correct: no write.
	kube.ClearActions()
	if err := EnsureService(ctx, kube, want); err != nil {
		t.Fatal(err)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() == "update" {
			t.Error("an up-to-date Service was updated")
		}
	}
}

func TestTheServiceGoesWithTheLastOperatorPod(t *testing.T) {
	kube := kubefake.NewSimpleClientset()
	ctx := context.Background()
	first := operatorPod(map[string]string{"name": "etcd-restore-operator"})
	first.UID = "pod-1"
	second := operatorPod(map[string]string{"name": "etcd-restore-operator"})
	second.Name, second.UID = "etcd-restore-operator-5d9f7-fghij", "pod-2"
	for _, p := range []*corev1.Pod{first, second, first} {
		want, err := NewService(opNamespace, p, leaderLabel)
		if err != nil {
			t.Fatal(err)
		}
		if err := EnsureService(ctx, kube, want); err != nil {
			t.Fatal(err)
		}
	}
	got, err := kube.CoreV1().Services(opNamespace).Get(ctx, ServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Every replica owns it, so garbage collection deletes it only once none is
	// left, and a replica starting does not take it from another.
	var uids []string
	for _, o := range got.OwnerReferences {
		if o.Kind != "Pod" || o.APIVersion != "v1" || o.Controller != nil && *o.Controller {
			t.Errorf("owner %+v", o)
		}
		uids = append(uids, string(o.UID))
	}
	if !cmp.Equal(uids, []string{"pod-1", "pod-2"}) {
		t.Errorf("owners %v, want both pods once", uids)
	}
}
