package restore

import (
	"github.com/prometheus/client_golang/prometheus"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/util/promutil"
)

// Metrics are the restore operator's Prometheus metrics. Labels are bounded: the
// storage type comes from a fixed set, the result is completed or failed, and
// failure reasons stay in the EtcdRestore's status and events. A nil *Metrics
// records nothing.
type Metrics struct {
	restores *prometheus.CounterVec
	failed   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns = "etcd_restore_operator"
	m := &Metrics{
		restores: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "restores_total",
			Help: "Restores started, counted when they begin validating."}, []string{"storage_type"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "restores_failed_total",
			Help: "Restores that ended Failed; the reason is in the EtcdRestore's status and events."}, []string{"storage_type"}),
		// 1 s to ~2.3 h: a tiny cluster on a fast node to a multi-GiB one on a slow link.
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "restore_duration_seconds",
			Help:    "Time from the start of a restore to its end (Completed: the cluster available at full size).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14)}, []string{"result"}),
	}
	m.restores = promutil.Register(reg, m.restores)
	m.failed = promutil.Register(reg, m.failed)
	m.duration = promutil.Register(reg, m.duration)
	return m
}

func (m *Metrics) started(t api.BackupStorageType) {
	if m != nil {
		m.restores.WithLabelValues(storage.MetricLabel(t)).Inc()
	}
}

func (m *Metrics) finished(t api.BackupStorageType, failed bool, seconds float64) {
	if m == nil {
		return
	}
	result := "completed"
	if failed {
		result = "failed"
		m.failed.WithLabelValues(storage.MetricLabel(t)).Inc()
	}
	if seconds >= 0 {
		m.duration.WithLabelValues(result).Observe(seconds)
	}
}
