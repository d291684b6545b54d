package cluster

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/promutil"
)

// Metrics are the per-cluster metrics. Every series carries the cluster's
// namespace and name (the original labelled its histogram ClusterName only, so
// two clusters of the same name in different namespaces shared a series), and
// a cluster's series are deleted when its goroutine stops, so deleted clusters
// do not linger on dashboards. A nil *Metrics records nothing.
type Metrics struct {
	reconcileDuration *prometheus.HistogramVec
	reconcileFailed   *prometheus.CounterVec
	desiredSize       *prometheus.GaugeVec
	members           *prometheus.GaugeVec
	readyMembers      *prometheus.GaugeVec
	phase             *prometheus.GaugeVec
	// The same in Prometheus's naming conventions (unit and _total suffixes),
	// beside the original's names that existing dashboards query.
	passSeconds   *prometheus.HistogramVec
	failuresTotal *prometheus.CounterVec
	quorum        *prometheus.GaugeVec
}

// phaseLabels are the values of the phase label; "" is shown as "None", the
// name the original gave the empty phase.
var phaseLabels = []api.ClusterPhase{api.ClusterPhaseNone, api.ClusterPhaseCreating, api.ClusterPhaseRunning, api.ClusterPhaseFailed}

func phaseLabel(p api.ClusterPhase) string {
	if p == api.ClusterPhaseNone {
		return "None"
	}
	return string(p)
}

// NewMetrics registers the cluster metrics on reg (see promutil.Register); a
// nil reg registers nothing.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	clusterLabels := []string{"namespace", "name"}
	m := &Metrics{
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "etcd_operator",
			Subsystem: "cluster",
			Name:      "reconcile_duration",
			Help:      "Time of one reconcile pass of a cluster, in seconds.",
			Buckets:   prometheus.ExponentialBuckets(0.1, 2, 10),
		}, clusterLabels),
		reconcileFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "etcd_operator",
			Subsystem: "cluster",
			Name:      "reconcile_failed",
			Help:      "Reconcile passes that ended with a problem, by problem code (Reason).",
		}, append(clusterLabels, "Reason")),
		desiredSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "etcd_operator",
			Subsystem: "cluster",
			Name:      "desired_size",
			Help:      "spec.size of the cluster.",
		}, clusterLabels),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "etcd_operator",
			Subsystem: "cluster",
			Name:      "members",
			Help:      "Members of the cluster known to the operator.",
		}, clusterLabels),
		readyMembers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "etcd_operator",
			Subsystem: "cluster",
			Name:      "ready_members",
			Help:      "Members whose pod is Ready.",
		}, clusterLabels),
		phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "etcd_operator",
			Subsystem: "cluster",
			Name:      "phase",
			Help:      "1 for the cluster's current phase, 0 for the others.",
		}, append(clusterLabels, "phase")),
		passSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "etcd_operator",
			Subsystem: "cluster",
			Name:      "reconcile_duration_seconds",
			Help:      "Time of one reconcile pass of a cluster (reconcile_duration, named by convention).",
			Buckets:   prometheus.ExponentialBuckets(0.1, 2, 10),
		}, clusterLabels),
		failuresTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "etcd_operator",
			Subsystem: "cluster",
			Name:      "reconcile_failures_total",
			Help:      "Reconcile passes that ended with a problem, by problem code (reconcile_failed, named by convention).",
		}, append(clusterLabels, "reason")),
		quorum: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "etcd_operator",
			Subsystem: "cluster",
			Name:      "quorum",
			Help:      "1 while a majority of the cluster's members is ready, so that it can commit writes; 0 otherwise.",
		}, clusterLabels),
	}
	m.reconcileDuration = promutil.Register(reg, m.reconcileDuration)
	m.passSeconds = promutil.Register(reg, m.passSeconds)
	m.failuresTotal = promutil.Register(reg, m.failuresTotal)
	m.quorum = promutil.Register(reg, m.quorum)
	m.reconcileFailed = promutil.Register(reg, m.reconcileFailed)
	m.desiredSize = promutil.Register(reg, m.desiredSize)
	m.members = promutil.Register(reg, m.members)
	m.readyMembers = promutil.Register(reg, m.readyMembers)
	m.phase = promutil.Register(reg, m.phase)
	return m
}

func (m *Metrics) observePass(ns, name string, d time.Duration) {
	if m == nil {
		return
	}
	m.reconcileDuration.WithLabelValues(ns, name).Observe(d.Seconds())
	m.passSeconds.WithLabelValues(ns, name).Observe(d.Seconds())
}

func (m *Metrics) failed(ns, name, reason string) {
	if m == nil {
		return
	}
	m.reconcileFailed.WithLabelValues(ns, name, reason).Inc()
	m.failuresTotal.WithLabelValues(ns, name, reason).Inc()
}

// setState records the cluster's gauges after a pass.
func (m *Metrics) setState(ns, name string, desired, members, ready int, phase api.ClusterPhase) {
	if m == nil {
		return
	}
	m.desiredSize.WithLabelValues(ns, name).Set(float64(desired))
	m.members.WithLabelValues(ns, name).Set(float64(members))
	m.readyMembers.WithLabelValues(ns, name).Set(float64(ready))
	quorum := 0.0
	if members > 0 && ready > members/2 {
		quorum = 1
	}
	m.quorum.WithLabelValues(ns, name).Set(quorum)
	for _, p := range phaseLabels {
		v := 0.0
		if p == phase {
			v = 1
		}
		m.phase.WithLabelValues(ns, name, phaseLabel(p)).Set(v)
	}
}

// forget deletes every series of a cluster whose goroutine stopped.
func (m *Metrics) forget(ns, name string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"namespace": ns, "name": name}
	m.reconcileDuration.DeletePartialMatch(l)
	m.reconcileFailed.DeletePartialMatch(l)
	m.desiredSize.DeletePartialMatch(l)
	m.members.DeletePartialMatch(l)
	m.readyMembers.DeletePartialMatch(l)
	m.phase.DeletePartialMatch(l)
	m.passSeconds.DeletePartialMatch(l)
	m.failuresTotal.DeletePartialMatch(l)
	m.quorum.DeletePartialMatch(l)
}
