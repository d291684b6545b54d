package promutil

import (
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// CountersWithoutTotal gathers g and returns the counters whose name lacks the
// _total suffix. Prometheus's naming conventions give every counter that
// suffix, and client_golang appends nothing in the text format the operators
// serve: a counter named without it is exposed without it.
//
// original lists the names kept from the original etcd-operator, which
// dashboards made for it query, each with the conventional name it is exposed
// under as well; such a name passes only when that twin is gathered as a
// counter too. Only gathered families are seen: a vector without series is
// not, so a test records a value in every metric before calling this.
func CountersWithoutTotal(g prometheus.Gatherer, original map[string]string) ([]string, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	counters := map[string]bool{}
	for _, f := range families {
		if f.GetType() == dto.MetricType_COUNTER {
			counters[f.GetName()] = true
		}
	}
	var bad []string
	for name := range counters {
		if strings.HasSuffix(name, "_total") {
			continue
		}
		if twin, ok := original[name]; ok && counters[twin] {
			continue
		}
		bad = append(bad, name)
	}
	sort.Strings(bad)
	return bad, nil
}
