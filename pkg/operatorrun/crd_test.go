package operatorrun

import (
	"errors"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/openetcd/etcd-operator/pkg/crds"
)

func TestCRDForRole(t *testing.T) {
	tests := []struct {
		name string
		// granted as grant reads it; nil with reviewErr.
		granted   []string
		reviewErr error
		// wantStatus: the CRD installed serves the status subresource.
		wantStatus bool
		// log is what the one warning says, "" for none.
		log []string
	}{
		{name: "the published roles, granting etcdclusters and etcdclusters/status, keep the status subresource",
			granted: []string{"etcdclusters", "etcdclusters/status"}, wantStatus: true},
		{name: `a role granting "*/status" keeps the status subresource`,
			granted: []string{"etcdclusters", "*/status"}, wantStatus: true},
		{name: "the original's role, granting etcdclusters only, installs the CRD without the status subresource and says what to grant",
			granted: []string{"etcdclusters"}, wantStatus: false, log: []string{
				"the role may not update etcdclusters/status, so the CRD is installed without the status subresource",
				"status is written with an update of the object, as the original etcd-operator did",
				`grant {apiGroups: ["etcd.database.coreos.com"], resources: ["etcdclusters/status"], verbs: [get, update, patch]} and restart the operator`,
			}},
		{name: "a role that may update neither the object nor its status keeps the status subresource: nothing is gained",
			granted: []string{"etcdclusters:get"}, wantStatus: true},
		{name: "a review the apiserver cannot answer keeps the status subresource and says so",
			reviewErr: errors.New("the apiserver is unavailable"), wantStatus: true, log: []string{
				"the CRD keeps its status subresource, as the role's permissions on etcdclusters are unknown", "the apiserver is unavailable",
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kube := grant(fake.NewClientset(), tc.granted...)
			var asked []authorizationv1.ResourceAttributes
			kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				asked = append(asked, *a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).Spec.ResourceAttributes)
				return tc.reviewErr != nil, nil, tc.reviewErr
			})
			logger, hook := logtest.NewNullLogger()
			want := crds.EtcdCluster()
			got := CRDForRole(t.Context(), kube, want, "ops", logrus.NewEntry(logger))

			if sub := got.Spec.Versions[0].Subresources; (sub != nil && sub.Status != nil) != tc.wantStatus {
				t.Errorf("status subresource served: %v, want %v", !tc.wantStatus, tc.wantStatus)
			}
			if tc.wantStatus && got != want {
				t.Error("the definition kept is not the one handed in")
			}
			for _, a := range asked {
				if a.Namespace != "ops" || a.Group != "etcd.database.coreos.com" || a.Resource != "etcdclusters" {
					t.Errorf("asked %+v, want etcdclusters of etcd.database.coreos.com in namespace ops", a)
				}
			}
			entries := hook.AllEntries()
			if len(tc.log) == 0 {
				if len(entries) != 0 {
					t.Errorf("logged %q, want nothing", entries[0].Message)
				}
				return
			}
			if len(entries) != 1 {
				t.Fatalf("%d log lines, want one", len(entries))
			}
			e := entries[0]
			if e.Level != logrus.WarnLevel || e.Data["crd"] != want.Name || e.Data["namespace"] != "ops" {
				t.Errorf("logged at %s with fields %v, want a warning naming the CRD and the namespace", e.Level, e.Data)
			}
			for _, w := range tc.log {
				if !strings.Contains(e.Message, w) {
					t.Errorf("log %q does not say %q", e.Message, w)
				}
			}
		})
	}
}

func TestCRDForRoleAsksForEveryNamespaceWhenClusterWide(t *testing.T) {
	kube := grant(fake.NewClientset(), "etcdbackups")
	logger, hook := logtest.NewNullLogger()
	got := CRDForRole(t.Context(), kube, crds.EtcdBackup(), "", logrus.NewEntry(logger))
	if got.Spec.Versions[0].Subresources != nil {
		t.Errorf("subresources %+v, want none", got.Spec.Versions[0].Subresources)
	}
	if e := hook.LastEntry(); e == nil || e.Data["namespace"] != "all namespaces" || !strings.Contains(e.Message, "etcdbackups/status") {
		t.Errorf("log %v, want etcdbackups/status named for all namespaces", e)
	}
}
