package operatorrun

import (
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// grantAll answers SelfSubjectAccessReviews as a role granting every verb on
// the given resources would.
func grantAll(kube *fake.Clientset, resources ...string) *fake.Clientset {
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		review.Status.Allowed = slices.Contains(resources, review.Spec.ResourceAttributes.Resource)
		return true, review, nil
	})
	return kube
}

func TestReportLackingPermissionsListsEveryMissingRuleOnce(t *testing.T) {
	needs := []Need{
		{Rule: Rule{Resource: "pods", Verbs: []string{"get", "create"}, Namespace: "ops"}, Without: "no pods"},
		{Rule: Rule{Group: "policy", Resource: "poddisruptionbudgets", Verbs: []string{"list", "create"}, Namespace: "ops"}, Without: "no budgets"},
		CRDNeed(),
		EventsNeed("ops"),
	}
	kube := grantAll(fake.NewClientset(ownPod()), "pods", "events")
	rec := &objectRecorder{events: make(chan recorded, 10)}
	lacking := ReportLackingPermissions(t.Context(), kube, rec, Identity{Namespace: "ns", PodName: "op-1"}, needs, logrus.NewEntry(logrus.New()))
	if len(lacking) != 2 || lacking[0].Resource != "poddisruptionbudgets" || lacking[1].Resource != "customresourcedefinitions" {
		t.Fatalf("lacking %v, want the budgets and the CRDs", lacking)
	}
	ev := receive(t, rec.events, "the event")
	for _, want := range []string{
		"the role lacks 2 rule(s)",
		`{apiGroups: ["policy"], resources: ["poddisruptionbudgets"], verbs: ["list", "create"]} in namespace ops (no budgets)`,
		`{apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions"], verbs: ["get", "create", "update"]} in a ClusterRole (-create-crd=true cannot install the CRD`,
	} {
		if !strings.Contains(ev.message, want) {
			t.Errorf("event %q does not say %q", ev.message, want)
		}
	}
	if ev.typ != corev1.EventTypeWarning || ev.reason != EventMissingPermissions {
		t.Errorf("event %s %s, want a Warning %s", ev.typ, ev.reason, EventMissingPermissions)
	}
	select {
	case e := <-rec.events:
		t.Errorf("a second event %+v: the missing rules must be one message", e)
	default:
	}

	// A role granting everything gets no event.
	all := grantAll(fake.NewClientset(), "pods", "poddisruptionbudgets", "customresourcedefinitions", "events")
	if got := ReportLackingPermissions(t.Context(), all, rec, Identity{Namespace: "ns", PodName: "op-1"}, needs, logrus.NewEntry(logrus.New())); got != nil {
		t.Errorf("lacking %v with every rule granted", got)
	}
}

func TestNotGrantedBy(t *testing.T) {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "services"}, Verbs: []string{"*"}},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"list", "watch"}},
	}
	for _, tc := range []struct {
		rule Rule
		want []string
	}{
		{Rule{Resource: "pods", Verbs: []string{"get", "delete"}}, nil},
		{Rule{Group: "policy", Resource: "poddisruptionbudgets", Verbs: []string{"list", "create"}}, []string{"create"}},
		{Rule{Group: "coordination.k8s.io", Resource: "leases", Verbs: []string{"get"}}, []string{"get"}},
		{Rule{Resource: "secrets", Verbs: []string{"get"}}, []string{"get"}},
	} {
		if got := NotGrantedBy(rules, tc.rule); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("NotGrantedBy(%v) = %v, want %v", tc.rule, got, tc.want)
		}
	}
}
