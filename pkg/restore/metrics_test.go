package restore

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/promutil"
)

func TestRestoreCountersAreNamedWithTotal(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	// A value in every metric, so that each family is gathered.
	m.started(api.BackupStorageTypeS3)
	m.finished(api.BackupStorageTypeS3, true, 1)
	bad, err := promutil.CountersWithoutTotal(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("counters without _total: %v", bad)
	}
}
