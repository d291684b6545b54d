package backupcontroller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/util/promutil"
)

// Metrics are the backup operator's Prometheus metrics. Labels are bounded: storage
// types come from a fixed set and failures are counted without their message (the
// original labelled a metric with raw error text).
type Metrics struct {
	backups     *prometheus.CounterVec
	failed      *prometheus.CounterVec
	lastSuccess *prometheus.GaugeVec
	interval    *prometheus.GaugeVec
	duration    prometheus.Histogram
	bytes       prometheus.Histogram
	// verifications and verifyFailed count backups read back (spec.verify).
	verifications *prometheus.CounterVec
	verifyFailed  *prometheus.CounterVec
	// archiveLag, archiveRevision and archiveGaps follow the continuous
	// archive (spec.backupPolicy.archive).
	archiveLag      *prometheus.GaugeVec
	archiveRevision *prometheus.GaugeVec
	archiveGaps     *prometheus.CounterVec
	// recoveryRevision and recoveryTime are status.archive.recoveryPoint.
	recoveryRevision *prometheus.GaugeVec
	recoveryTime     *prometheus.GaugeVec
	// archiveChunksPruned counts chunks deleted with the snapshots they followed.
	archiveChunksPruned *prometheus.CounterVec
	// drillTime, drillResult, drillRevision and drillPassed are
	// status.archive.drill; drillInterval is how long apart drills are meant
	// to be.
	drillTime     *prometheus.GaugeVec
	drillResult   *prometheus.GaugeVec
	drillRevision *prometheus.GaugeVec
	drillPassed   *prometheus.GaugeVec
	drillInterval *prometheus.GaugeVec

	mu sync.Mutex
	// successSeen holds the namespace/name of EtcdBackups whose last-success
	// series this process has set, from a backup or from the status.
	successSeen map[string]bool
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const ns = "etcd_backup_operator"
	m := &Metrics{
		successSeen: map[string]bool{},
		backups: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "backups_total",
			Help: "Backup attempts, successful or not, including those refused for a bad spec."}, []string{"storage_type"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "backups_failed_total",
			Help: "Backup attempts that failed; the reason is in the EtcdBackup's status and events."}, []string{"storage_type"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "last_success_timestamp_seconds",
			Help: "Unix time of the latest successful backup of each EtcdBackup."}, []string{"namespace", "name"}),
		// Alerts need the period to tell a stale periodic backup from a one-shot
		// backup that succeeded long ago and is not meant to run again.
		interval: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "backup_interval_seconds",
			Help: "backupPolicy.backupIntervalInSecond of each running periodic EtcdBackup, or the longest gap between its schedule's times; absent for one-shot backups."}, []string{"namespace", "name"}),
		// 0.1 s to ~7 min: a small cluster to a multi-GiB database over a slow link.
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "backup_duration_seconds",
			Help: "Time taken by backup attempts, from connecting to etcd to the stored object (and pruning).", Buckets: prometheus.ExponentialBuckets(0.1, 2, 13)}),
		// 64 KiB to 16 GiB, beyond etcd's largest supported quota.
		bytes: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "backup_bytes",
			Help: "Size of stored snapshots.", Buckets: prometheus.ExponentialBuckets(64<<10, 4, 10)}),
	}
	m.verifications = promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "verifications_total",
		Help: "Stored backups read back and checked (spec.verify)."}, []string{"storage_type"}))
	m.verifyFailed = promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "verifications_failed_total",
		Help: "Stored backups that could not be proven restorable; the reason is in the EtcdBackup's status.verified and events."}, []string{"storage_type"}))
	m.archiveLag = promutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "archive_lag_seconds",
		Help: "How long the oldest change not yet in the continuous archive of each EtcdBackup has waited; what a total loss of its cluster would lose now."}, []string{"namespace", "name"}))
	m.archiveRevision = promutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "archive_last_revision",
		Help: "The newest etcd revision stored in the continuous archive of each EtcdBackup."}, []string{"namespace", "name"}))
	m.recoveryRevision = promutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "archive_recovery_point_revision",
		Help: "The newest etcd revision a restore of each EtcdBackup to its latest change would reach now: its newest snapshot's, carried on by the archive's chunks that follow it without a hole."}, []string{"namespace", "name"}))
	m.recoveryTime = promutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "archive_recovery_point_timestamp_seconds",
		Help: "Unix time at which the cluster of each EtcdBackup was at its recovery point: what a total loss now would lose is everything written since."}, []string{"namespace", "name"}))
	m.archiveGaps = promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "archive_gaps_total",
		Help: "Holes in continuous archives: revisions compacted away before they were stored, each followed by a full snapshot."}, []string{"storage_type"}))
	m.archiveChunksPruned = promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "archive_chunks_pruned_total",
		Help: "Continuous archive chunks deleted because they end before the oldest snapshot kept, so no restore can use them."}, []string{"storage_type"}))
	m.drillTime = promutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "archive_drill_timestamp_seconds",
		Help: "Unix time at which the latest drill of each EtcdBackup's continuous archive ended (status.archive.drill.time)."}, []string{"namespace", "name"}))
	m.drillResult = promutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "archive_drill_result",
		Help: "1 for the result of the latest drill of each EtcdBackup's continuous archive (Passed, Failed or Compacted), 0 for the others."}, []string{"namespace", "name", "result"}))
	m.drillRevision = promutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "archive_drill_revision",
		Help: "The etcd revision the latest drill of each EtcdBackup's continuous archive restored and compared with the cluster."}, []string{"namespace", "name"}))
	m.drillPassed = promutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "archive_drill_last_passed_timestamp_seconds",
		Help: "Unix time at which the latest drill of each EtcdBackup's continuous archive that passed ended (status.archive.drill.lastPassedTime)."}, []string{"namespace", "name"}))
	m.drillInterval = promutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "archive_drill_interval_seconds",
		Help: "How long apart drills of each EtcdBackup's continuous archive are when all goes well; absent when it asks for none."}, []string{"namespace", "name"}))
	m.backups = promutil.Register(reg, m.backups)
	m.failed = promutil.Register(reg, m.failed)
	m.lastSuccess = promutil.Register(reg, m.lastSuccess)
	m.interval = promutil.Register(reg, m.interval)
	m.duration = promutil.Register(reg, m.duration)
	m.bytes = promutil.Register(reg, m.bytes)
	return m
}

func (m *Metrics) attempt(t api.BackupStorageType, seconds float64, failed bool) {
	l := storage.MetricLabel(t)
	m.backups.WithLabelValues(l).Inc()
	if failed {
		m.failed.WithLabelValues(l).Inc()
	}
	if seconds >= 0 {
		m.duration.Observe(seconds)
	}
}

func (m *Metrics) succeeded(namespace, name string, unixSeconds float64, size int64) {
	m.mu.Lock()
	m.successSeen[namespace+"/"+name] = true
	m.lastSuccess.WithLabelValues(namespace, name).Set(unixSeconds)
	m.mu.Unlock()
	m.bytes.Observe(float64(size))
}

// restoreLastSuccess sets the last-success series from an EtcdBackup's
// status.lastSuccessDate, unless this process has set it already. Without it, an
// operator that restarts (or crash-loops) before its next success exports no series
// at all, and EtcdBackupStale, which compares that series with the interval, can
// never fire however old the last backup is. The cache may lag behind a success
// this process recorded, so a series once set is never moved by a status.
func (m *Metrics) restoreLastSuccess(namespace, name string, t time.Time) {
	if t.IsZero() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := namespace + "/" + name
	if m.successSeen[key] {
		return
	}
	m.successSeen[key] = true
	m.lastSuccess.WithLabelValues(namespace, name).Set(float64(t.Unix()))
}

func (m *Metrics) verification(t api.BackupStorageType, failed bool) {
	l := storage.MetricLabel(t)
	m.verifications.WithLabelValues(l).Inc()
	if failed {
		m.verifyFailed.WithLabelValues(l).Inc()
	}
}

// periodic records the period of a running periodic backup; seconds <= 0 (no
// runner any more) drops it.
func (m *Metrics) periodic(namespace, name string, seconds int64) {
	if seconds <= 0 {
		m.interval.DeleteLabelValues(namespace, name)
		return
	}
	m.interval.WithLabelValues(namespace, name).Set(float64(seconds))
}

// archived records how far an EtcdBackup's archive is.
func (m *Metrics) archived(namespace, name string, revision int64, lag time.Duration) {
	m.archiveRevision.WithLabelValues(namespace, name).Set(float64(revision))
	m.archiveLag.WithLabelValues(namespace, name).Set(lag.Seconds())
}

// recoveryPoint records an archive's recovery point; nil (no snapshot to
// start from), or a point without a time, drops what is not known.
func (m *Metrics) recoveryPoint(namespace, name string, p *api.BackupRecoveryPoint) {
	if p == nil {
		m.recoveryRevision.DeleteLabelValues(namespace, name)
		m.recoveryTime.DeleteLabelValues(namespace, name)
		return
	}
	m.recoveryRevision.WithLabelValues(namespace, name).Set(float64(p.Revision))
	if p.Time == nil {
		m.recoveryTime.DeleteLabelValues(namespace, name)
		return
	}
	m.recoveryTime.WithLabelValues(namespace, name).Set(float64(p.Time.Unix()))
}

func (m *Metrics) archiveGap(t api.BackupStorageType) {
	m.archiveGaps.WithLabelValues(storage.MetricLabel(t)).Inc()
}

func (m *Metrics) archivePruned(t api.BackupStorageType, chunks int) {
	m.archiveChunksPruned.WithLabelValues(storage.MetricLabel(t)).Add(float64(chunks))
}

// drillResults are the values of the result label, each a series.
var drillResults = []api.BackupArchiveDrillResult{api.BackupArchiveDrillPassed, api.BackupArchiveDrillFailed, api.BackupArchiveDrillCompacted}

// drillsExpected records how long apart drills of an EtcdBackup are meant to
// be; every <= 0 (no runner, or no drills asked for) drops it with the
// drills' series, so that no alert fires on a drill nothing runs any more.
func (m *Metrics) drillsExpected(namespace, name string, every time.Duration) {
	if every <= 0 {
		m.drillInterval.DeleteLabelValues(namespace, name)
		m.drilled(namespace, name, nil)
		return
	}
	m.drillInterval.WithLabelValues(namespace, name).Set(every.Seconds())
}

// drilled records status.archive.drill; nil drops it.
func (m *Metrics) drilled(namespace, name string, d *api.BackupArchiveDrill) {
	if d == nil {
		m.drillTime.DeleteLabelValues(namespace, name)
		m.drillRevision.DeleteLabelValues(namespace, name)
		m.drillPassed.DeleteLabelValues(namespace, name)
		for _, r := range drillResults {
			m.drillResult.DeleteLabelValues(namespace, name, string(r))
		}
		return
	}
	m.drillTime.WithLabelValues(namespace, name).Set(float64(d.Time.Unix()))
	m.drillRevision.WithLabelValues(namespace, name).Set(float64(d.Revision))
	for _, r := range drillResults {
		v := 0.0
		if d.Result == r {
			v = 1
		}
		m.drillResult.WithLabelValues(namespace, name, string(r)).Set(v)
	}
	passed := d.LastPassed()
	if passed == nil {
		m.drillPassed.DeleteLabelValues(namespace, name)
		return
	}
	m.drillPassed.WithLabelValues(namespace, name).Set(float64(passed.Unix()))
}

// archiveStopped drops the series of an archive that no longer runs, so that
// an alert on its lag does not fire on a value nothing updates.
func (m *Metrics) archiveStopped(namespace, name string) {
	m.archiveRevision.DeleteLabelValues(namespace, name)
	m.archiveLag.DeleteLabelValues(namespace, name)
	m.recoveryPoint(namespace, name, nil)
}

// forget drops the series of a deleted EtcdBackup.
func (m *Metrics) forget(namespace, name string) {
	m.mu.Lock()
	delete(m.successSeen, namespace+"/"+name)
	m.lastSuccess.DeleteLabelValues(namespace, name)
	m.mu.Unlock()
	m.interval.DeleteLabelValues(namespace, name)
	m.archiveStopped(namespace, name)
	m.drillsExpected(namespace, name, 0)
}
