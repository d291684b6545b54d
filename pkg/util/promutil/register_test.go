package promutil

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func counter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "things_total", Help: "Things."}, []string{"kind"})
}

func TestRegisteringTwiceReusesTheFirstCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	first := Register(reg, counter())
	second := Register(reg, counter())
	first.WithLabelValues("a").Inc()
	second.WithLabelValues("a").Inc()
	if n := testutil.ToFloat64(first.WithLabelValues("a")); n != 2 {
		t.Errorf("count %v, want 2: both registrations count into one series", n)
	}
}

func TestANilRegistryRegistersNothingButTheCollectorWorks(t *testing.T) {
	c := Register(nil, counter())
	c.WithLabelValues("a").Inc()
	if n := testutil.ToFloat64(c.WithLabelValues("a")); n != 1 {
		t.Errorf("count %v, want 1", n)
	}
}

func TestAClashingNamePanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	Register(reg, counter())
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "register metrics") {
			t.Errorf("recover() = %v, want a panic about the clash", r)
		}
	}()
	Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "things_total", Help: "Other things."}))
}
