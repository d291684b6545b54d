package restore

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// ServiceName is the Service in front of the backup server, as in the original.
const ServiceName = "etcd-restore-operator"

// podHashLabels differ between the pods of one workload (one per revision of the
// template), so a selector must not include them: it would lose the operator as
// soon as its Deployment rolls.
var podHashLabels = []string{"pod-template-hash", "controller-revision-hash"}

// NewService is the Service seed pods download backups through: port 19999 to the
// operator pods, selected by the operator pod's own labels without the
// per-revision hash, and by leaderLabel set to "true": only the leader serves
// backups, and standby replicas are Ready too (a rolling update waits for
// them), so readiness cannot keep seeds away from them. leaderLabel is "" when
// the operator may not label its pod: every replica is then selected, and a
// seed sent to a standby retries.
func NewService(namespace string, self *corev1.Pod, leaderLabel string) (*corev1.Service, error) {
	selector := maps.Clone(self.Labels)
	for _, l := range podHashLabels {
		delete(selector, l)
	}
	if leaderLabel != "" {
		delete(selector, leaderLabel)
	}
	if len(selector) == 0 {
		return nil, fmt.Errorf("pod %s/%s has no labels (besides its template hash) for the %s Service to select it by; give the Deployment's pod template a label such as name: etcd-restore-operator",
			self.Namespace, self.Name, ServiceName)
	}
	labels := maps.Clone(selector)
	if leaderLabel != "" {
		selector[leaderLabel] = "true"
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: ServiceName, Namespace: namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{podOwner(self)},
		},
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports: []corev1.ServicePort{{
				Name:       "backup",
				Protocol:   corev1.ProtocolTCP,
				Port:       BackupServerPort,
				TargetPort: intstr.FromInt32(BackupServerPort),
			}},
		},
	}, nil
}

// podOwner makes the operator's pod an owner of the Service, so that garbage
// collection deletes the Service once no operator pod is left (the Deployment
// deleted), and never while one is. Every replica adds itself as it starts;
// the collector drops the references of pods that are gone as long as one
// remains. A pod, not the Deployment: finding the Deployment would take reading
// ReplicaSets and Deployments, rights the operator has no other use for. And
// not a delete on shutdown: a replica stopping during a rolling update would
// take the Service from the one that replaces it.
func podOwner(p *corev1.Pod) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID}
}

// withOwners adds the owners of want that got lacks; it keeps the others.
func withOwners(got, want []metav1.OwnerReference) ([]metav1.OwnerReference, bool) {
	out := slices.Clone(got)
	changed := false
	for _, w := range want {
		if !slices.ContainsFunc(out, func(o metav1.OwnerReference) bool { return o.UID == w.UID }) {
			out = append(out, w)
			changed = true
		}
	}
	return out, changed
}

// EnsureService creates the Service, or brings an existing one's selector and
// ports back to want (a Deployment whose labels changed, an older version's)
// and adds want's owner (this operator pod) to it.
func EnsureService(ctx context.Context, kube kubernetes.Interface, want *corev1.Service) error {
	svcs := kube.CoreV1().Services(want.Namespace)
	_, err := svcs.Create(ctx, want, metav1.CreateOptions{})
	switch {
	case err == nil:
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("create service %s/%s: %w", want.Namespace, want.Name, err)
	}
	got, err := svcs.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get service %s/%s: %w", want.Namespace, want.Name, err)
	}
	owners, newOwner := withOwners(got.OwnerReferences, want.OwnerReferences)
	if !newOwner && equality.Semantic.DeepEqual(got.Spec.Selector, want.Spec.Selector) && portsMatch(got.Spec.Ports, want.Spec.Ports) {
		return nil
	}
	upd := got.DeepCopy()
	upd.OwnerReferences = owners
	upd.Spec.Selector = want.Spec.Selector
	upd.Spec.Ports = want.Spec.Ports
	if _, err := svcs.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update service %s/%s: %w", want.Namespace, want.Name, err)
	}
	return nil
}

// portsMatch ignores what the apiserver fills in (nodePort and such).
func portsMatch(got, want []corev1.ServicePort) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Port != w.Port || g.TargetPort != w.TargetPort || g.Protocol != w.Protocol {
			return false
		}
	}
	return true
}
