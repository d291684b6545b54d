package cluster

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/promutil"
)

// Metrics are the per-cluster metrics. Every series carries the cluster's
// namespace and name (the original labelled its histogram ClusterName only, so
// two clusters of the same name in different namespaces shared a series), and
// a cluster's series are deleted when its goroutine stops, so deleted clusters
// do not linger on dashboards. A nil *Metrics records nothing.
//
// The figures of each cluster are kept as plain numbers and turned into
// series only when scraped. A client_golang vector keeps every series as an
// object of its own, with its label pairs and, for a histogram, two sets of
// buckets: a large share of what the operator keeps per idle cluster
// (BenchmarkIdleClusterMemory measures it).
type Metrics struct {
	c *clusterCollector
}

// passBuckets are the upper bounds of the pass duration histograms.
var passBuckets = prometheus.ExponentialBuckets(0.1, 2, passBucketCount)

const passBucketCount = 10

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
	return &Metrics{c: promutil.Register(reg, newClusterCollector())}
}

func (m *Metrics) observePass(ns, name string, d time.Duration) {
	if m == nil {
		return
	}
	m.c.update(ns, name, func(s *clusterSeries) {
		v := d.Seconds()
		// Prometheus counts a value in the first bucket whose upper bound
		// is at least the value.
		i := sort.SearchFloat64s(passBuckets, v)
		if i < passBucketCount {
			s.buckets[i]++
		}
		s.passes++
		s.passSeconds += v
	})
}

func (m *Metrics) failed(ns, name, reason string) {
	if m == nil {
		return
	}
	m.c.update(ns, name, func(s *clusterSeries) { count(&s.failures, reason) })
}

// setState records the cluster's gauges after a pass.
func (m *Metrics) setState(ns, name string, desired, members, ready int, phase api.ClusterPhase) {
	if m == nil {
		return
	}
	m.c.update(ns, name, func(s *clusterSeries) {
		s.state = &clusterState{desired: int32(desired), members: int32(members), ready: int32(ready), phase: phase}
	})
}

// setCertificates records the expiry of every certificate of the cluster's
// TLS secrets, as listed in a pass; a certificate no longer listed (renewed,
// or TLS turned off) loses its series.
func (m *Metrics) setCertificates(ns, name string, certs []etcdutil.Certificate) {
	if m == nil {
		return
	}
	m.c.update(ns, name, func(s *clusterSeries) {
		s.certs = s.certs[:0]
		for _, c := range certs {
			s.certs = append(s.certs, certExpiry{secret: c.Secret, key: c.Key, serial: c.Serial, subject: c.Subject, notAfter: c.NotAfter.Unix()})
		}
	})
}

// certificateRenewed counts a certificate secret renewed.
func (m *Metrics) certificateRenewed(ns, name, secret string) {
	if m == nil {
		return
	}
	m.c.update(ns, name, func(s *clusterSeries) { count(&s.renewed, secret) })
}

// count adds one to the counter of key, making the map on first use.
func count(counters *map[string]uint64, key string) {
	if *counters == nil {
		*counters = map[string]uint64{}
	}
	(*counters)[key]++
}

// forget deletes every series of a cluster whose goroutine stopped.
func (m *Metrics) forget(ns, name string) {
	if m == nil {
		return
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	delete(m.c.clusters, clusterKey{ns, name})
}

type clusterKey struct{ namespace, name string }

// clusterSeries is what the series of one cluster are made of.
type clusterSeries struct {
	// buckets count the passes per bucket of passBuckets (not cumulated);
	// passes is 0 until the first pass is observed, and there is no
	// histogram series until then.
	buckets     [passBucketCount]uint64
	passes      uint64
	passSeconds float64
	// failures count the failed passes by problem code.
	failures map[string]uint64
	// state is nil until the first pass set the gauges.
	state *clusterState
	// certs are the certificates of the last pass.
	certs []certExpiry
	// renewed counts the renewals of issued certificates by secret.
	renewed map[string]uint64
}

// certExpiry is one certificate's series: the serial tells apart the CAs of
// one bundle.
type certExpiry struct {
	secret, key, serial, subject string
	notAfter                     int64
}

type clusterState struct {
	desired, members, ready int32
	phase                   api.ClusterPhase
}

// originalCounterNames are the counters kept from the original without the
// _total suffix, each with the name it also has by convention.
var originalCounterNames = map[string]string{
	"etcd_operator_cluster_reconcile_failed": "etcd_operator_cluster_reconcile_failures_total",
}

// clusterCollector makes the series of every cluster when scraped.
type clusterCollector struct {
	reconcileDuration, passSeconds *prometheus.Desc
	reconcileFailed, failuresTotal *prometheus.Desc
	desiredSize, members, ready    *prometheus.Desc
	phase, quorum                  *prometheus.Desc
	certExpiry, certsRenewed       *prometheus.Desc

	mu       sync.Mutex
	clusters map[clusterKey]*clusterSeries
}

func newClusterCollector() *clusterCollector {
	clusterLabels := []string{"namespace", "name"}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("etcd_operator", "cluster", name), help, append(clusterLabels, labels...), nil)
	}
	return &clusterCollector{
		reconcileDuration: desc("reconcile_duration", "Time of one reconcile pass of a cluster, in seconds."),
		reconcileFailed:   desc("reconcile_failed", "Reconcile passes that ended with a problem, by problem code (Reason).", "Reason"),
		desiredSize:       desc("desired_size", "spec.size of the cluster."),
		members:           desc("members", "Members of the cluster known to the operator."),
		ready:             desc("ready_members", "Members whose pod is Ready."),
		phase:             desc("phase", "1 for the cluster's current phase, 0 for the others.", "phase"),
		// The same in Prometheus's naming conventions (unit and _total
		// suffixes), beside the original's names that existing dashboards
		// query.
		passSeconds:   desc("reconcile_duration_seconds", "Time of one reconcile pass of a cluster (reconcile_duration, named by convention)."),
		failuresTotal: desc("reconcile_failures_total", "Reconcile passes that ended with a problem, by problem code (reconcile_failed, named by convention).", "reason"),
		quorum:        desc("quorum", "1 while a majority of the cluster's members is ready, so that it can commit writes; 0 otherwise."),
		certExpiry: desc("certificate_expiry_timestamp_seconds", "When a certificate of the cluster's TLS secrets expires (notAfter), in Unix seconds.",
			"secret", "key", "serial", "subject"),
		certsRenewed: desc("certificates_renewed_total", "Certificates of issued TLS the operator renewed, by secret.", "secret"),
		clusters:     map[clusterKey]*clusterSeries{},
	}
}

func (c *clusterCollector) update(ns, name string, f func(*clusterSeries)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := clusterKey{ns, name}
	s := c.clusters[k]
	if s == nil {
		s = &clusterSeries{}
		c.clusters[k] = s
	}
	f(s)
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.reconcileDuration, c.passSeconds, c.reconcileFailed, c.failuresTotal,
		c.desiredSize, c.members, c.ready, c.phase, c.quorum, c.certExpiry, c.certsRenewed} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.clusters {
		ns, name := k.namespace, k.name
		if s.passes > 0 {
			buckets := make(map[float64]uint64, len(passBuckets))
			var cum uint64
			for i, le := range passBuckets {
				cum += s.buckets[i]
				buckets[le] = cum
			}
			for _, d := range []*prometheus.Desc{c.reconcileDuration, c.passSeconds} {
				ch <- prometheus.MustNewConstHistogram(d, s.passes, s.passSeconds, buckets, ns, name)
			}
		}
		for reason, n := range s.failures {
			ch <- prometheus.MustNewConstMetric(c.reconcileFailed, prometheus.CounterValue, float64(n), ns, name, reason)
			ch <- prometheus.MustNewConstMetric(c.failuresTotal, prometheus.CounterValue, float64(n), ns, name, reason)
		}
		for _, e := range s.certs {
			ch <- prometheus.MustNewConstMetric(c.certExpiry, prometheus.GaugeValue, float64(e.notAfter), ns, name, e.secret, e.key, e.serial, e.subject)
		}
		for secret, n := range s.renewed {
			ch <- prometheus.MustNewConstMetric(c.certsRenewed, prometheus.CounterValue, float64(n), ns, name, secret)
		}
		st := s.state
		if st == nil {
			continue
		}
		gauge := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{ns, name}, extra...)...)
		}
		gauge(c.desiredSize, float64(st.desired))
		gauge(c.members, float64(st.members))
		gauge(c.ready, float64(st.ready))
		quorum := 0.0
		if st.members > 0 && st.ready > st.members/2 {
			quorum = 1
		}
		gauge(c.quorum, quorum)
		for _, p := range phaseLabels {
			v := 0.0
			if p == st.phase {
				v = 1
			}
			gauge(c.phase, v, phaseLabel(p))
		}
	}
}
