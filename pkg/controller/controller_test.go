package controller

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/cluster"
	etcdfake "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

func etcdCluster(ns, name string, annotations map[string]string, phase api.ClusterPhase) *api.EtcdCluster {
	return &api.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations, UID: types.UID("uid-" + ns + "-" + name)},
		Spec:       api.ClusterSpec{Size: 1, Paused: true},
		Status:     api.ClusterStatus{Phase: phase},
	}
}

// fixture is a controller on fake clientsets whose informers are running.
type fixture struct {
	t    *testing.T
	ctrl *Controller
	etcd *etcdfake.Clientset
	reg  *prometheus.Registry
}

func newFixture(t *testing.T, clusterWide bool, objs ...*api.EtcdCluster) *fixture {
	t.Helper()
	var seed []runtime.Object
	for _, o := range objs {
		seed = append(seed, o)
	}
	etcd := etcdfake.NewSimpleClientset(seed...)
	reg := prometheus.NewRegistry()
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	ctrl := New(Config{
		Namespace:   "operator",
		ClusterWide: clusterWide,
		KubeClient:  kubefake.NewSimpleClientset(),
		EtcdClient:  etcd,
		Recorder:    record.NewFakeRecorder(100),
		Registerer:  reg,
		Cluster:     cluster.Config{ReconcileInterval: time.Hour, PendingTimeout: time.Minute},
		Log:         logrus.NewEntry(log),
	})
	ctx, cancel := context.WithCancel(context.Background())
	synced := make(chan struct{})
	go func() { _ = ctrl.Run(ctx, func() { close(synced) }) }()
	t.Cleanup(cancel)
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("caches did not sync")
	}
	return &fixture{t: t, ctrl: ctrl, etcd: etcd, reg: reg}
}

func (f *fixture) waitManaged(want ...string) {
	f.t.Helper()
	sort.Strings(want)
	var got []string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		got = f.ctrl.Managed()
		sort.Strings(got)
		return strings.Join(got, ",") == strings.Join(want, ","), nil
	})
	if err != nil {
		f.t.Fatalf("managed clusters = %v, want %v", got, want)
	}
}

func TestScopeRule(t *testing.T) {
	clusterwide := map[string]string{api.ScopeAnnotation: api.ScopeClusterWide}
	other := map[string]string{api.ScopeAnnotation: "something-else"}
	objs := []*api.EtcdCluster{
		etcdCluster("operator", "plain", nil, ""),
		etcdCluster("operator", "annotated", clusterwide, ""),
		etcdCluster("operator", "other-scope", other, ""),
		etcdCluster("elsewhere", "plain-elsewhere", nil, ""),
		etcdCluster("elsewhere", "annotated-elsewhere", clusterwide, ""),
	}
	tests := []struct {
		name        string
		clusterWide bool
		want        []string
	}{
		{"a namespaced operator takes only unannotated clusters of its namespace", false, []string{"operator/plain"}},
		{"a cluster-wide operator takes only clusterwide-annotated clusters, in every namespace", true,
			[]string{"operator/annotated", "elsewhere/annotated-elsewhere"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			newFixture(t, tc.clusterWide, objs...).waitManaged(tc.want...)
		})
	}
}

func TestIsManagedBy(t *testing.T) {
	tests := []struct {
		annotations map[string]string
		clusterWide bool
		want        bool
	}{
		{nil, false, true},
		{nil, true, false},
		{map[string]string{api.ScopeAnnotation: api.ScopeClusterWide}, true, true},
		{map[string]string{api.ScopeAnnotation: api.ScopeClusterWide}, false, false},
		{map[string]string{api.ScopeAnnotation: "namespaced"}, true, false},
		{map[string]string{api.ScopeAnnotation: ""}, false, false},
	}
	for _, tc := range tests {
		got := api.IsManagedBy(&metav1.ObjectMeta{Annotations: tc.annotations}, tc.clusterWide)
		if got != tc.want {
			t.Errorf("annotations %v, cluster-wide %v: got %v, want %v", tc.annotations, tc.clusterWide, got, tc.want)
		}
	}
}

func TestDeleteStopsTheClusterGoroutine(t *testing.T) {
	f := newFixture(t, false, etcdCluster("operator", "a", nil, ""), etcdCluster("operator", "b", nil, ""))
	f.waitManaged("operator/a", "operator/b")
	f.ctrl.mu.Lock()
	goroutine := f.ctrl.clusters["operator/a"]
	f.ctrl.mu.Unlock()

	if err := f.etcd.EtcdV1beta2().EtcdClusters("operator").Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitManaged("operator/b")
	select {
	case <-goroutine.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the deleted cluster's goroutine did not exit")
	}
	if got := testutil.ToFloat64(f.ctrl.metrics.clusters); got != 1 {
		t.Fatalf("clusters gauge = %v, want 1", got)
	}
}

func TestTombstoneDeletesToo(t *testing.T) {
	f := newFixture(t, false, etcdCluster("operator", "a", nil, ""))
	f.waitManaged("operator/a")
	f.ctrl.onDelete(cache.DeletedFinalStateUnknown{Key: "operator/a", Obj: etcdCluster("operator", "a", nil, "")})
	f.waitManaged()
}

func TestFailedClustersAreIgnored(t *testing.T) {
	f := newFixture(t, false, etcdCluster("operator", "failed", nil, api.ClusterPhaseFailed), etcdCluster("operator", "ok", nil, ""))
	f.waitManaged("operator/ok")
	if got := testutil.ToFloat64(f.ctrl.metrics.failed.total); got < 1 {
		t.Fatalf("clusters_failed = %v, want at least 1", got)
	}
}

func TestLosingTheScopeAnnotationHandsTheClusterOver(t *testing.T) {
	f := newFixture(t, false, etcdCluster("operator", "a", nil, ""))
	f.waitManaged("operator/a")
	cl, err := f.etcd.EtcdV1beta2().EtcdClusters("operator").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cl.Annotations = map[string]string{api.ScopeAnnotation: api.ScopeClusterWide}
	if _, err := f.etcd.EtcdV1beta2().EtcdClusters("operator").Update(context.Background(), cl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitManaged()
}

func TestUpdatesReachTheRunningGoroutine(t *testing.T) {
	f := newFixture(t, false, etcdCluster("operator", "a", nil, ""))
	f.waitManaged("operator/a")
	before := testutil.ToFloat64(f.ctrl.metrics.changed.total)
	cl, _ := f.etcd.EtcdV1beta2().EtcdClusters("operator").Get(context.Background(), "a", metav1.GetOptions{})
	cl.Spec.Size = 3
	if _, err := f.etcd.EtcdV1beta2().EtcdClusters("operator").Update(context.Background(), cl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return testutil.ToFloat64(f.ctrl.metrics.changed.total) > before, nil
	})
	if err != nil {
		t.Fatal("the update was not handed to the cluster goroutine")
	}
	f.waitManaged("operator/a")
}

// TestScopeMismatchIsTold: a cluster left alone
// because of its scope annotation says so once, in an event on it.
func TestScopeMismatchIsTold(t *testing.T) {
	wrong := etcdCluster("operator", "wrong", map[string]string{api.ScopeAnnotation: "ClusterWide"}, "")
	plain := etcdCluster("operator", "plain", nil, "")
	f := newFixture(t, false, wrong, plain)
	f.waitManaged("operator/plain")
	rec := f.ctrl.cfg.Recorder.(*record.FakeRecorder)

	// Another update of the mis-annotated cluster is not told again.
	wrong = wrong.DeepCopy()
	wrong.Labels = map[string]string{"touched": "yes"}
	if _, err := f.etcd.EtcdV1beta2().EtcdClusters("operator").Update(context.Background(), wrong, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Annotating a managed cluster hands it over, and says so.
	plain = plain.DeepCopy()
	plain.Annotations = map[string]string{api.ScopeAnnotation: api.ScopeClusterWide}
	if _, err := f.etcd.EtcdV1beta2().EtcdClusters("operator").Update(context.Background(), plain, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitManaged()

	// The informer delivers the updates in order and the fake recorder
	// records synchronously: every event is in by now.
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	sort.Strings(events)
	if len(events) != 2 ||
		!strings.HasPrefix(events[0], "Normal ScopeSkipped ignored by the operator of namespace operator: the annotation etcd.database.coreos.com/scope: clusterwide") ||
		!strings.HasPrefix(events[1], `Warning InvalidScope annotation etcd.database.coreos.com/scope is "ClusterWide", not "clusterwide": no etcd operator manages this resource`) {
		t.Errorf("events %q", events)
	}
}
