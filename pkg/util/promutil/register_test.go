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

func TestCountersWithoutTotal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		counters []string
		original map[string]string
		want     []string
	}{
		{"a counter named by convention passes", []string{"things_total"}, nil, nil},
		{"a counter without _total is reported", []string{"things_total", "things_failed"}, nil, []string{"things_failed"}},
		{"an original name passes beside its conventional twin", []string{"things_failed", "things_failed_total"},
			map[string]string{"things_failed": "things_failed_total"}, nil},
		{"an original name without its twin is reported", []string{"things_failed"},
			map[string]string{"things_failed": "things_failed_total"}, []string{"things_failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			for _, name := range tc.counters {
				c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "Things."})
				reg.MustRegister(c)
				c.Inc()
			}
			// Gauges are not counters, whatever their name.
			reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "things", Help: "Things."}))
			got, err := CountersWithoutTotal(reg, tc.original)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
