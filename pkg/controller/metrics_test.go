package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/openetcd/etcd-operator/pkg/util/promutil"
)

func TestControllerCountersAreNamedWithTotal(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	for _, c := range []twinCounter{m.created, m.deleted, m.changed, m.failed} {
		c.Inc()
	}
	bad, err := promutil.CountersWithoutTotal(reg, originalCounterNames)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("counters without _total: %v", bad)
	}
	// Both names count the same events.
	if a, b := testutil.ToFloat64(m.created.original), testutil.ToFloat64(m.created.total); a != 1 || b != 1 {
		t.Errorf("clusters_created %v, clusters_created_total %v, want 1 and 1", a, b)
	}
}
