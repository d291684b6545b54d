package operatorrun

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/openetcd/etcd-operator/pkg/util/promutil"
)

func TestRequestKind(t *testing.T) {
	for _, tc := range []struct {
		method, path, verb, resource string
	}{
		{"GET", "/api/v1/namespaces/ns/pods?labelSelector=app%3Detcd", "list", "pods"},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=5", "watch", "pods"},
		{"GET", "/api/v1/pods?watch=1", "watch", "pods"},
		{"GET", "/api/v1/namespaces/ns/pods/p-1", "get", "pods"},
		{"GET", "/api/v1/namespaces/ns", "get", "namespaces"},
		{"DELETE", "/api/v1/namespaces/ns/pods/p-1", "delete", "pods"},
		{"DELETE", "/api/v1/namespaces/ns/pods", "deletecollection", "pods"},
		{"POST", "/api/v1/namespaces/ns/events", "create", "events"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/etcd-operator", "update", "leases"},
		{"PUT", "/apis/etcd.database.coreos.com/v1beta2/namespaces/ns/etcdclusters/c/status", "update", "etcdclusters/status"},
		{"PATCH", "/api/v1/namespaces/ns/pods/p-1", "patch", "pods"},
		{"GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/etcdclusters.etcd.database.coreos.com", "get", "customresourcedefinitions"},
		{"GET", "/apis", "get", "other"},
		{"GET", "/version", "get", "other"},
	} {
		u, err := url.Parse(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		verb, resource := requestKind(tc.method, u)
		if verb != tc.verb || resource != tc.resource {
			t.Errorf("%s %s = %s %s, want %s %s", tc.method, tc.path, verb, resource, tc.verb, tc.resource)
		}
	}
}

// TestRequestCounterCountsWhatTheClientSends wraps a real client-go client the
// way NewClients does and checks the counter against the requests a fake
// apiserver saw.
func TestRequestCounterCountsWhatTheClientSends(t *testing.T) {
	seen := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen++
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"}}`))
	}))
	defer srv.Close()
	count := newRequestCounter("etcd-operator")
	cfg := &rest.Config{Host: srv.URL}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return requestCounter{next: rt, count: count} })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := kube.CoreV1().Pods("ns").Get(t.Context(), "p", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.CoreV1().Pods("ns").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(count.WithLabelValues("get", "pods")); got != 3 {
		t.Errorf("get pods = %v, want 3", got)
	}
	if got := testutil.ToFloat64(count.WithLabelValues("create", "pods")); got != 1 {
		t.Errorf("create pods = %v, want 1", got)
	}
	if seen != 4 {
		t.Errorf("the server saw %d requests, want 4", seen)
	}
	if n := testutil.CollectAndCount(count, "etcd_operator_kubernetes_requests_total"); n != 2 {
		t.Errorf("%d series, want 2", n)
	}
}

func TestRequestCountersAreNamedWithTotal(t *testing.T) {
	for _, binary := range []string{"etcd-operator", "etcd-backup-operator", "etcd-restore-operator"} {
		reg := prometheus.NewRegistry()
		count := newRequestCounter(binary)
		reg.MustRegister(count)
		count.WithLabelValues("get", "pods").Inc()
		bad, err := promutil.CountersWithoutTotal(reg, nil)
		if err != nil || len(bad) > 0 {
			t.Errorf("%s: counters without _total: %v (%v)", binary, bad, err)
		}
	}
}
