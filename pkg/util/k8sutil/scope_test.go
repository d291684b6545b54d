package k8sutil

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

func TestScopeNoticesTellOncePerCause(t *testing.T) {
	backup := func(scope *string) *v1beta2.EtcdBackup {
		b := &v1beta2.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "b", UID: "u1"}}
		if scope != nil {
			b.Annotations = map[string]string{v1beta2.ScopeAnnotation: *scope}
		}
		return b
	}
	wrong, right := "ClusterWide", v1beta2.ScopeClusterWide
	tests := []struct {
		name        string
		clusterWide bool
		scope       *string
		managed     bool
		event       string
	}{
		{"a namespaced operator runs an unannotated backup", false, nil, true, ""},
		{"a namespaced operator leaves an annotated backup to a cluster-wide one", false, &right, false, "Normal ScopeSkipped ignored by the operator of namespace team"},
		{"a cluster-wide operator leaves an unannotated backup to a namespaced one", true, nil, false, "Normal ScopeSkipped ignored by the cluster-wide operator"},
		{"a misspelt scope is run by no operator, and is a warning", true, &wrong, false, `Warning InvalidScope annotation etcd.database.coreos.com/scope is "ClusterWide"`},
		{"a misspelt scope is refused by a namespaced operator too", false, &wrong, false, "Warning InvalidScope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			n := NewScopeNotices(rec, tc.clusterWide, v1beta2.EtcdBackupResourceKind)
			for range 3 {
				if got := n.Managed(backup(tc.scope)); got != tc.managed {
					t.Fatalf("managed = %v, want %v", got, tc.managed)
				}
			}
			var events []string
			for len(rec.Events) > 0 {
				events = append(events, <-rec.Events)
			}
			switch {
			case tc.event == "" && len(events) > 0:
				t.Errorf("events %q for a managed backup", events)
			case tc.event != "" && (len(events) != 1 || !strings.HasPrefix(events[0], tc.event)):
				t.Errorf("events %q, want one starting %q", events, tc.event)
			}
		})
	}
}
func TestWatchedNamespace(t *testing.T) {
	tests := []struct {
		name        string
		clusterWide bool
		want        string
	}{
		{"a namespaced operator watches its own namespace", false, "operators"},
		{"a cluster-wide operator watches every namespace", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := WatchedNamespace("operators", tt.clusterWide); got != tt.want {
				t.Fatalf("WatchedNamespace = %q, want %q", got, tt.want)
			}
		})
	}
}
