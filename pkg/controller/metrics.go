package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/openetcd/etcd-operator/pkg/util/promutil"
)

// metrics are the original's controller metrics, under the same names.
type metrics struct {
	clusters                  prometheus.Gauge
	created, deleted, changed prometheus.Counter
	failed                    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	const ns, sub = "etcd_operator", "controller"
	m := &metrics{
		clusters: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "clusters",
			Help: "Number of EtcdClusters this operator manages."}),
		created: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "clusters_created",
			Help: "EtcdClusters taken over by this operator."}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "clusters_deleted",
			Help: "EtcdClusters deleted, or no longer managed by this operator."}),
		changed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "clusters_modified",
			Help: "Changes of managed EtcdClusters."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "clusters_failed",
			Help: "Events of EtcdClusters in phase Failed, which are ignored."}),
	}
	m.clusters = promutil.Register(reg, m.clusters)
	m.created = promutil.Register(reg, m.created)
	m.deleted = promutil.Register(reg, m.deleted)
	m.changed = promutil.Register(reg, m.changed)
	m.failed = promutil.Register(reg, m.failed)
	return m
}
