package backupcontroller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/promutil"
)

func TestBackupCountersAreNamedWithTotal(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	// A value in every metric, so that each family is gathered.
	m.attempt(api.BackupStorageTypeS3, 1, true)
	m.succeeded("ns", "b", 1, 1)
	m.verification(api.BackupStorageTypeS3, true)
	m.periodic("ns", "b", 60)
	m.archivePruned(api.BackupStorageTypeS3, 2)
	bad, err := promutil.CountersWithoutTotal(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("counters without _total: %v", bad)
	}
}
