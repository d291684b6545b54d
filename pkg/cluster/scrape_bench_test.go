package cluster

import (
	"fmt"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// BenchmarkScrape is what one scrape of /metrics costs the operator per
// cluster at rest: its two pass histograms and its gauges made into series
// and written out as Prometheus text.
func BenchmarkScrape(b *testing.B) {
	const clusters = 100
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	for i := range clusters {
		name := fmt.Sprintf("idle-%d", i)
		m.observePass("ns", name, 30*time.Millisecond)
		m.setState("ns", name, 1, 1, 1, api.ClusterPhaseRunning)
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		if _, err := io.Copy(io.Discard, w.Body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/clusters, "µs/cluster")
}
