package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/openetcd/etcd-operator/pkg/util/promutil"
)

// metrics are the original's controller metrics, under the same names, and
// the same counters named by Prometheus's conventions (with _total).
type metrics struct {
	clusters                  prometheus.Gauge
	created, deleted, changed twinCounter
	failed                    twinCounter
}

// twinCounter counts once and is exposed twice: under the original's name,
// which dashboards made for it query, and with the _total suffix a counter
// takes by convention (the client library adds none).
type twinCounter struct{ original, total prometheus.Counter }

func (c twinCounter) Inc() {
	c.original.Inc()
	c.total.Inc()
}

// originalCounterNames are the counters kept from the original without the
// _total suffix, each with the name it also has by convention.
var originalCounterNames = map[string]string{
	"etcd_operator_controller_clusters_created":  "etcd_operator_controller_clusters_created_total",
	"etcd_operator_controller_clusters_deleted":  "etcd_operator_controller_clusters_deleted_total",
	"etcd_operator_controller_clusters_modified": "etcd_operator_controller_clusters_modified_total",
	"etcd_operator_controller_clusters_failed":   "etcd_operator_controller_clusters_failed_total",
}

func newMetrics(reg prometheus.Registerer) *metrics {
	const ns, sub = "etcd_operator", "controller"
	counter := func(name, help string) twinCounter {
		opts := prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}
		c := twinCounter{original: prometheus.NewCounter(opts)}
		opts.Name += "_total"
		c.total = prometheus.NewCounter(opts)
		c.original = promutil.Register(reg, c.original)
		c.total = promutil.Register(reg, c.total)
		return c
	}
	m := &metrics{
		clusters: promutil.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "clusters",
			Help: "Number of EtcdClusters this operator manages."})),
		created: counter("clusters_created", "EtcdClusters taken over by this operator."),
		deleted: counter("clusters_deleted", "EtcdClusters deleted, or no longer managed by this operator."),
		changed: counter("clusters_modified", "Changes of managed EtcdClusters."),
		failed:  counter("clusters_failed", "Events of EtcdClusters in phase Failed, which are ignored."),
	}
	return m
}
