// Package backupcontroller runs EtcdBackups: one-shot backups from a rate-limited
// workqueue, periodic ones from one runner goroutine per EtcdBackup.
package backupcontroller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	versioned "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
	informers "github.com/openetcd/etcd-operator/pkg/generated/informers/externalversions/etcd/v1beta2"
	listers "github.com/openetcd/etcd-operator/pkg/generated/listers/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/keyqueue"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
)

// Event reasons on EtcdBackups.
const (
	ReasonBackupSucceeded = "BackupSucceeded"
	ReasonBackupFailed    = "BackupFailed"
	// ReasonPruneFailed: the backup was stored but older ones could not all be deleted.
	ReasonPruneFailed = "BackupPruneFailed"
)

// Defaults of Config.
const (
	// DefaultMaxRetries is how often a one-shot backup that failed for a reason that
	// may pass (etcd or the store unreachable, the secret not there yet) is retried
	// before its Reason becomes final; the original's number. With the default rate
	// limiter the retries span about three minutes.
	DefaultMaxRetries = 15
	// DefaultMaxFailureBackoff caps the wait between attempts of a periodic backup
	// that keeps failing (an interval longer than it is kept), and is the wait
	// after a permanent failure: a fixed secret or bucket is noticed within it.
	DefaultMaxFailureBackoff = time.Hour
	// DefaultMaxConcurrentBackups bounds the backups running at once, one-shot and
	// periodic together: each holds a few upload part buffers, so this bounds the
	// operator's memory however many EtcdBackups there are.
	DefaultMaxConcurrentBackups = 2
)

// BackupFunc takes one backup for an EtcdBackup and, with verify, reads it back
// (Result.Verified, Result.VerifyErr). Errors marked backup.Permanent are final at
// once; others are retried (one-shot) or wait for the next period.
type BackupFunc func(ctx context.Context, eb *api.EtcdBackup, verify bool) (*backup.Result, error)

// Config wires a Controller.
type Config struct {
	Client   versioned.Interface
	Informer informers.EtcdBackupInformer
	Recorder record.EventRecorder
	Metrics  *Metrics
	Backup   BackupFunc
	// Archive runs the continuous archive of periodic EtcdBackups that ask for
	// one; nil leaves spec.backupPolicy.archive without effect.
	Archive ArchiveFunc
	// PruneArchive deletes the chunks no kept snapshot needs, after a
	// periodic snapshot was stored; nil keeps every chunk.
	PruneArchive PruneArchiveFunc
	// DrillArchive restores an archive's recovery point and compares it with
	// the live cluster, before each verified snapshot; nil drills nothing.
	DrillArchive DrillArchiveFunc
	Log          *logrus.Entry
	// ClusterWide selects the EtcdBackups this operator runs by the scope annotation,
	// with the same rule as etcd-operator's EtcdClusters (api.IsManagedBy), so that a
	// namespaced and a cluster-wide backup operator never both run one backup.
	ClusterWide bool

	// Optional; zero values mean the defaults above, the real clock and
	// workqueue.DefaultTypedControllerRateLimiter.
	MaxRetries           int
	MaxConcurrentBackups int
	MaxFailureBackoff    time.Duration
	Clock                clock.WithTicker
	RateLimiter          workqueue.TypedRateLimiter[string]
}

// Controller reconciles EtcdBackups.
type Controller struct {
	client      versioned.Interface
	lister      listers.EtcdBackupLister
	synced      cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[string]
	recorder    record.EventRecorder
	status      *statusutil.BackupWriter
	metrics     *Metrics
	backup      BackupFunc
	archive     ArchiveFunc
	pruneChunks PruneArchiveFunc
	drill       DrillArchiveFunc
	log         *logrus.Entry
	clusterWide bool
	// scope says why EtcdBackups of the other scope are left alone.
	scope      *k8sutil.ScopeNotices
	clock      clock.WithTicker
	maxRetries int
	// maxFailureBackoff: see DefaultMaxFailureBackoff.
	maxFailureBackoff time.Duration
	// slots bounds concurrent backups; a backup holds one while it runs.
	slots chan struct{}

	mu sync.Mutex
	// runners are the periodic runners by namespace/name.
	runners map[string]*runner
	// liveRunners counts runner goroutines that have not returned yet; it falls to
	// zero only when they really exited (the original's never did).
	liveRunners atomic.Int64
	// liveArchivers counts the archive goroutines of runners that have not
	// returned yet: at most one per runner, so one per EtcdBackup.
	liveArchivers atomic.Int64

	// afterSync, if set, is called after every sync; tests wait on it.
	afterSync func(key string, err error)
}

// runner is one periodic EtcdBackup's schedule, for one spec. A runner is told
// by its spec, not by the generation: on a CRD without the status subresource
// every status write moves the generation, and a runner restarted by its own
// write would back up without end.
type runner struct {
	uid  types.UID
	spec api.BackupSpec
	// stored counts the backups this runner stored; only its goroutine uses it.
	stored int64
	// lastRun is, for a schedule, the start of the last successful backup, or
	// the time the schedule counts from. Its goroutine writes it; the next
	// runner reads it once this one has returned.
	lastRun time.Time
	cancel  context.CancelFunc
	done    chan struct{}
	// snapshotMu keeps the runner's snapshots and its archive's one at a
	// time: two at once in the same second of the same revision have the
	// same name, and their uploads would mix. snapshot is the revision of the
	// newest one either stored, which the archive continues.
	snapshotMu sync.Mutex
	snapshot   int64
	// drilled is when the runner's latest drill started; only its goroutine
	// uses it.
	drilled time.Time
}

// New wires the event handlers; nothing runs until Run.
func New(cfg Config) *Controller {
	c := &Controller{
		client:      cfg.Client,
		lister:      cfg.Informer.Lister(),
		synced:      cfg.Informer.Informer().HasSynced,
		recorder:    cfg.Recorder,
		metrics:     cfg.Metrics,
		backup:      cfg.Backup,
		archive:     cfg.Archive,
		pruneChunks: cfg.PruneArchive,
		drill:       cfg.DrillArchive,
		log:         cfg.Log.WithField("pkg", "backup-controller"),
		clusterWide: cfg.ClusterWide,
		scope:       k8sutil.NewScopeNotices(cfg.Recorder, cfg.ClusterWide, api.EtcdBackupResourceKind),
		clock:       cfg.Clock,
		maxRetries:  cfg.MaxRetries,
		runners:     map[string]*runner{},
	}
	c.status = statusutil.ForBackups(cfg.Client, cfg.Recorder, c.log)
	if c.metrics == nil {
		c.metrics = NewMetrics(prometheus.NewRegistry())
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.maxRetries <= 0 {
		c.maxRetries = DefaultMaxRetries
	}
	c.maxFailureBackoff = cfg.MaxFailureBackoff
	if c.maxFailureBackoff <= 0 {
		c.maxFailureBackoff = DefaultMaxFailureBackoff
	}
	n := cfg.MaxConcurrentBackups
	if n <= 0 {
		n = DefaultMaxConcurrentBackups
	}
	c.slots = make(chan struct{}, n)
	limiter := cfg.RateLimiter
	if limiter == nil {
		limiter = workqueue.DefaultTypedControllerRateLimiter[string]()
	}
	c.queue = keyqueue.New("etcdbackups", limiter, cfg.Informer.Informer(), c.log)
	return c
}

// Run waits for the informer's cache, calls synced (if not nil), then processes
// EtcdBackups with the given number of workers until ctx is done. It returns after
// every worker and runner goroutine has stopped. Finalizers stay on periodic
// EtcdBackups: the next leader takes their schedules over.
func (c *Controller) Run(ctx context.Context, workers int, synced func()) error {
	err := keyqueue.Run(ctx, c.queue, c.synced, "EtcdBackup", workers, synced, c.log, c.processNext)
	c.stopAllRunners()
	return err
}

// LiveRunners is the number of periodic runner goroutines still running.
func (c *Controller) LiveRunners() int { return int(c.liveRunners.Load()) }

// LiveArchivers is the number of continuous archive goroutines still running.
func (c *Controller) LiveArchivers() int { return int(c.liveArchivers.Load()) }

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	err := c.sync(ctx, key)
	if err != nil && ctx.Err() == nil {
		if !failure.IsRetry(err) { // runOneShot has logged those
			c.logForKey(key).Warnf("sync failed, will retry: %v", err)
		}
		c.queue.AddRateLimited(key)
	} else {
		c.queue.Forget(key)
	}
	if c.afterSync != nil {
		c.afterSync(key, err)
	}
	return true
}

func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // cannot happen with keys from enqueue; retrying would not help
	}
	eb, err := c.lister.EtcdBackups(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.stopRunner(key)
		c.metrics.forget(namespace, name)
		return nil
	}
	if err != nil {
		return err
	}
	if !c.scope.Managed(eb) {
		// The other kind of backup operator runs it, or none: the event on
		// the EtcdBackup says which.
		c.stopRunner(key)
		return nil
	}
	if eb.DeletionTimestamp != nil {
		// The finalizer goes only after the runner returned, so no backup of a
		// deleted EtcdBackup can still be running or write to it.
		c.stopRunner(key)
		c.metrics.forget(namespace, name)
		return c.setFinalizer(ctx, eb, false)
	}
	c.metrics.restoreLastSuccess(namespace, name, eb.Status.LastSuccessDate.Time)

	periodic := eb.Spec.IsPeriodic()
	if !periodic {
		// Also covers a periodic backup turned one-shot.
		c.stopRunner(key)
		if err := c.setFinalizer(ctx, eb, false); err != nil {
			return err
		}
		if eb.Status.Succeeded || eb.Status.Reason != "" {
			return nil // a finished one-shot backup never runs again
		}
	}
	if err := checkSpec(&eb.Spec); err != nil {
		c.stopRunner(key)
		if err := c.setFinalizer(ctx, eb, false); err != nil {
			return err
		}
		return c.reject(ctx, eb, err)
	}
	if periodic {
		if err := c.ensureRunner(ctx, key, eb); err != nil {
			return err
		}
		// The status is what the drills found: a drill writes it, and its
		// update brings the EtcdBackup here again.
		if eb.Status.Archive != nil && drillsAsked(&eb.Spec) {
			c.metrics.drilled(namespace, name, eb.Status.Archive.Drill)
		}
		return nil
	}
	return c.runOneShot(ctx, key, eb)
}

// checkSpec refuses what cannot be backed up. The schema rejects most of it, but an
// old CRD without one lets anything in.
func checkSpec(spec *api.BackupSpec) error {
	if err := storage.CheckSupported(spec.StorageType); err != nil {
		return err
	}
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("invalid spec: %w", err)
	}
	return nil
}

// reject reports a spec that cannot be backed up, once: the status update it makes
// comes back as an informer event, which must not report it again.
func (c *Controller) reject(ctx context.Context, eb *api.EtcdBackup, err error) error {
	reason := err.Error()
	if !eb.Status.Succeeded && eb.Status.Reason == reason {
		return nil
	}
	c.logFor(eb).Warnf("refused: %s", reason)
	c.metrics.attempt(eb.Spec.StorageType, -1, true)
	return c.recordFailure(ctx, eb, reason, false)
}

func (c *Controller) runOneShot(ctx context.Context, key string, eb *api.EtcdBackup) error {
	res, err := c.runBackup(ctx, eb, verifyDue(eb, 0))
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: the next leader runs it
	}
	if err == nil && res.VerifyErr != nil {
		// Another backup may well be sound (the store damaged this one, or
		// could not be read): retried like failures that may pass.
		if attempt := c.queue.NumRequeues(key) + 1; attempt <= c.maxRetries {
			c.logFor(eb).Warnf("backup attempt %d of %d failed verification, will retry: %v", attempt, c.maxRetries+1, res.VerifyErr)
			c.recorder.Event(eb, corev1.EventTypeWarning, ReasonVerificationFailed, verifyFailureReason(res))
			return failure.Retry(res.VerifyErr)
		}
		return c.recordVerifyFailure(ctx, eb, res)
	}
	if err == nil {
		return c.recordSuccess(ctx, eb, res)
	}
	reason := err.Error()
	if attempt := c.queue.NumRequeues(key) + 1; !failure.IsPermanent(err) && attempt <= c.maxRetries {
		c.logFor(eb).Warnf("backup attempt %d of %d failed, will retry: %s", attempt, c.maxRetries+1, reason)
		c.recorder.Event(eb, corev1.EventTypeWarning, ReasonBackupFailed, reason)
		return failure.Retry(err)
	}
	return c.recordFailure(ctx, eb, reason, false)
}

// ensureRunner keeps exactly one runner for the current spec of a periodic backup.
// A new spec stops the old runner and starts over, backing up at once.
func (c *Controller) ensureRunner(ctx context.Context, key string, eb *api.EtcdBackup) error {
	c.mu.Lock()
	r := c.runners[key]
	c.mu.Unlock()
	if r != nil && r.uid == eb.UID && equality.Semantic.DeepEqual(r.spec, eb.Spec) {
		return nil
	}
	c.stopRunner(key)
	var lastRun time.Time
	if r != nil && r.uid == eb.UID {
		lastRun = r.lastRun // its goroutine has returned
	}
	// The finalizer comes first: a runner must never exist for an EtcdBackup that
	// could disappear without the controller seeing its deletion.
	if err := c.setFinalizer(ctx, eb, true); err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	start := scheduleStart(eb, lastRun, c.clock.Now())
	r = &runner{uid: eb.UID, spec: *eb.Spec.DeepCopy(), cancel: cancel, done: make(chan struct{}), lastRun: start}
	c.mu.Lock()
	c.runners[key] = r
	c.mu.Unlock()
	c.liveRunners.Add(1)
	go func() {
		defer close(r.done) // last, so that stopRunner sees the counts already down
		defer c.liveRunners.Add(-1)
		// The archive lives in the runner, so that it is stopped with it (a
		// deleted or changed EtcdBackup, a lost leadership) and stopRunner,
		// waiting for done, never lets two run for one EtcdBackup.
		var archived chan struct{}
		if r.spec.BackupPolicy.Archive != nil && c.archive != nil {
			archived = make(chan struct{})
			c.liveArchivers.Add(1)
			go func() {
				defer close(archived)
				defer c.liveArchivers.Add(-1)
				c.keepArchiving(rctx, key, eb, r)
			}()
		}
		c.keepRunning(rctx, key, eb, r)
		if archived != nil {
			<-archived
		}
	}()
	pol := eb.Spec.BackupPolicy
	if pol.Schedule == "" {
		c.periodStarted(eb, time.Duration(pol.BackupIntervalInSecond)*time.Second)
		c.logFor(eb).Infof("periodic backup every %ds started", pol.BackupIntervalInSecond)
		return nil
	}
	// checkSpec has parsed it.
	if sched, err := api.ParseBackupSchedule(pol.Schedule, pol.TimeZone); err == nil {
		c.periodStarted(eb, longestGap(sched, c.clock.Now()))
		c.logFor(eb).Infof("scheduled backup %q (%s) started; next at %s", pol.Schedule, sched.Location(),
			nextScheduledRun(sched, start, c.clock.Now()).Format(time.RFC3339))
	}
	return nil
}

// periodStarted records the period of a runner just started, and how long
// apart its drills are meant to be.
func (c *Controller) periodStarted(eb *api.EtcdBackup, period time.Duration) {
	c.metrics.periodic(eb.Namespace, eb.Name, int64(period.Seconds()))
	every, _ := drillsExpected(&eb.Spec, period)
	c.metrics.drillsExpected(eb.Namespace, eb.Name, every)
}

// keepRunning runs the runner until ctx is done. A panic outside the backup
// itself (runBackup has its own) is reported on the EtcdBackup, and the runner
// starts again after the longest wait a failure can bring, so that one bad
// EtcdBackup neither stops the operator nor hammers its store.
func (c *Controller) keepRunning(ctx context.Context, key string, eb *api.EtcdBackup, r *runner) {
	for {
		err := failure.Safely(c.logFor(eb), "the periodic backup runner", func() { c.runPeriodic(ctx, key, r) })
		if err == nil {
			return
		}
		c.recorder.Event(eb, corev1.EventTypeWarning, ReasonBackupFailed, err.Error()+"; the runner starts again")
		t := c.clock.NewTimer(c.maxFailureBackoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// runPeriodic backs up at once and then every interval until ctx is done, or
// at the times of a schedule (runScheduled). It returns, rather than breaking
// out of a select, when cancelled.
//
// A failing backup streams a whole snapshot to the store each time, so failures
// space the attempts out: after consecutive failures that may pass the wait
// doubles from the interval up to maxFailureBackoff (or the interval, if longer),
// and after a permanent failure (refused credentials, a missing bucket) it is
// that cap at once. A success returns to the interval.
func (c *Controller) runPeriodic(ctx context.Context, key string, r *runner) {
	if r.spec.BackupPolicy.Schedule != "" {
		c.runScheduled(ctx, key, r)
		return
	}
	interval := time.Duration(r.spec.BackupPolicy.BackupIntervalInSecond) * time.Second
	backoff := failure.Backoff{Min: interval, Max: max(interval, c.maxFailureBackoff)}
	for {
		start := c.clock.Now()
		wait := nextAttempt(&backoff, c.periodicBackup(ctx, key, r))
		t := c.clock.NewTimer(start.Add(wait).Sub(c.clock.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// nextAttempt is how long after an attempt that ended with err the next one
// starts; b runs from the interval to the cap.
func nextAttempt(b *failure.Backoff, err error) time.Duration {
	switch {
	case err == nil:
		b.Reset()
		return b.Min
	case failure.IsPermanent(err):
		return b.Max
	}
	return b.Next()
}

// periodicBackup takes one backup of a periodic EtcdBackup and records it. It
// returns the backup's error, which decides when the next attempt is.
func (c *Controller) periodicBackup(ctx context.Context, key string, r *runner) error {
	if ctx.Err() != nil {
		return nil
	}
	namespace, name, _ := cache.SplitMetaNamespaceKey(key)
	eb, err := c.lister.EtcdBackups(namespace).Get(name)
	if err != nil || eb.UID != r.uid || !equality.Semantic.DeepEqual(eb.Spec, r.spec) || eb.DeletionTimestamp != nil {
		return nil // gone or changed: a worker is about to stop or replace this runner
	}
	r.snapshotMu.Lock()
	defer r.snapshotMu.Unlock()
	verify := verifyDue(eb, r.stored)
	// Before the new snapshot: the recovery point then replays the most.
	if now := c.clock.Now(); drillDue(eb, verify, lastDrill(eb, r), now) && c.drillArchive(ctx, eb) {
		r.drilled = now
	}
	res, backupErr := c.runBackup(ctx, eb, verify)
	if ctx.Err() != nil {
		return nil // stopped mid-backup; that is not the backup's failure
	}
	if backupErr == nil {
		r.snapshot = res.Revision
	}
	switch {
	case backupErr == nil && res.VerifyErr != nil:
		r.stored++
		err = c.recordVerifyFailure(ctx, eb, res)
		backupErr = res.VerifyErr
	case backupErr == nil:
		r.stored++
		err = c.recordSuccess(ctx, eb, res)
		c.pruneArchive(ctx, eb)
	default:
		err = c.recordFailure(ctx, eb, backupErr.Error(), failure.IsPermanent(backupErr))
	}
	if err != nil && ctx.Err() == nil {
		c.logFor(eb).Errorf("cannot record the backup result (the next period will): %v", err)
	}
	return backupErr
}

// runBackup takes a backup slot and runs the backup function, counting the attempt.
// A panic in it becomes an error: bad input must never take the operator down.
func (c *Controller) runBackup(ctx context.Context, eb *api.EtcdBackup, verify bool) (res *backup.Result, err error) {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.slots }()
	start := c.clock.Now()
	if perr := failure.Safely(c.logFor(eb), "the backup", func() { res, err = c.backup(ctx, eb, verify) }); perr != nil {
		res, err = nil, failure.Permanent(perr)
	}
	if ctx.Err() == nil {
		c.metrics.attempt(eb.Spec.StorageType, c.clock.Since(start).Seconds(), err != nil)
		if err == nil && (res.Verified != nil || res.VerifyErr != nil) {
			c.metrics.verification(eb.Spec.StorageType, res.VerifyErr != nil)
		}
	}
	return res, err
}

func (c *Controller) recordSuccess(ctx context.Context, eb *api.EtcdBackup, res *backup.Result) error {
	now := c.clock.Now()
	c.metrics.succeeded(eb.Namespace, eb.Name, float64(now.Unix()), res.Size)
	log := c.logFor(eb).WithField("path", res.Path)
	log.Infof("stored revision %d of etcd %s from %s (%d bytes, sha256 %s)", res.Revision, res.EtcdVersion, res.Endpoint, res.Size, res.SHA256)
	reason := ""
	if res.PruneErr != nil {
		reason = "backup stored, but deleting old backups failed: " + res.PruneErr.Error()
		log.Warn(reason)
		c.recorder.Event(eb, corev1.EventTypeWarning, ReasonPruneFailed, reason)
	}
	if len(res.Pruned) > 0 {
		log.Infof("deleted %d old backups: %v", len(res.Pruned), res.Pruned)
	}
	verified := verificationStatus(res, now)
	if verified != nil {
		log.Infof("read back and verified: revision %d, %d keys", verified.Revision, verified.TotalKeys)
	}
	// Reported before it is written, as failures are: whoever reads the
	// status finds the events that go with it.
	c.recorder.Eventf(eb, corev1.EventTypeNormal, ReasonBackupSucceeded, "stored revision %d (etcd %s, %d bytes, sha256 %s) at %s",
		res.Revision, res.EtcdVersion, res.Size, res.SHA256, res.Path)
	if res.Verified != nil {
		c.recorder.Eventf(eb, corev1.EventTypeNormal, ReasonBackupVerified, "read %s back: an intact etcd snapshot at revision %d with %d keys",
			res.Path, res.Verified.Revision, res.Verified.TotalKeys)
	}
	err := c.updateStatus(ctx, eb, func(st *api.BackupStatus) {
		keep := verified
		if keep == nil {
			keep = st.Verified // still the newest verification there is
		}
		*st = api.BackupStatus{
			Succeeded:       true,
			Reason:          reason,
			EtcdVersion:     res.EtcdVersion,
			EtcdRevision:    res.Revision,
			LastSuccessDate: metav1.NewTime(now.Truncate(time.Second)),
			BackupPath:      res.Path,
			BackupSize:      res.Size,
			SHA256:          res.SHA256,
			Encoding:        encodingStatus(eb, res),
			Verified:        keep,
			Archive:         st.Archive, // the archive's, not the snapshot's
		}
	})
	return err
}

// encodingStatus is how res was stored, for status.encoding; nil when it is
// what etcd sent.
func encodingStatus(eb *api.EtcdBackup, res *backup.Result) *api.BackupEncoding {
	if res.Compression == backup.CompressionNone && res.KeyID == "" {
		return nil
	}
	enc := &api.BackupEncoding{Compression: api.BackupCompression(res.Compression), KeyID: res.KeyID}
	if res.KeyID != "" {
		enc.Encryption = api.BackupEncryptionAESGCM
		if eb.Spec.Encryption != nil {
			enc.KeySecret = eb.Spec.Encryption.KeySecret
		}
	}
	return enc
}

// recordFailure writes a failure. The fields of the last success stay: they still
// describe the newest backup there is. A permanent failure already recorded is
// not reported again: it fails the same way until someone fixes its cause.
func (c *Controller) recordFailure(ctx context.Context, eb *api.EtcdBackup, reason string, permanent bool) error {
	if permanent && !eb.Status.Succeeded && eb.Status.Reason == reason {
		c.logFor(eb).Debugf("backup failed again, as reported: %s", reason)
		return nil
	}
	c.logFor(eb).Warnf("backup failed: %s", reason)
	c.recorder.Event(eb, corev1.EventTypeWarning, ReasonBackupFailed, reason)
	return c.updateStatus(ctx, eb, func(st *api.BackupStatus) {
		st.Succeeded = false
		st.Reason = reason
	})
}

// updateStatus applies change to the newest EtcdBackup and writes it, unless
// nothing changed. It reads from the API server, not the cache, so that it never
// writes over a change it has not seen; a conflict is retried from a fresh read,
// as the result it records holds whatever changed meanwhile.
func (c *Controller) updateStatus(ctx context.Context, eb *api.EtcdBackup, change func(*api.BackupStatus)) error {
	_, err := c.status.Change(ctx, eb.Namespace, eb.Name, eb.UID, change)
	// A status the server does not store is the writer's to report (a
	// Warning event on the backup); the backup itself went as it went.
	if apierrors.IsNotFound(err) || errors.Is(err, statusutil.ErrStatusNotStored) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update status of %s/%s: %w", eb.Namespace, eb.Name, err)
	}
	return nil
}

// setFinalizer adds or removes the periodic finalizer.
func (c *Controller) setFinalizer(ctx context.Context, eb *api.EtcdBackup, want bool) error {
	if slices.Contains(eb.Finalizers, api.BackupPeriodicFinalizer) == want {
		return nil
	}
	upd := eb.DeepCopy()
	if want {
		upd.Finalizers = append(upd.Finalizers, api.BackupPeriodicFinalizer)
	} else {
		upd.Finalizers = slices.DeleteFunc(upd.Finalizers, func(f string) bool { return f == api.BackupPeriodicFinalizer })
	}
	_, err := c.client.EtcdV1beta2().EtcdBackups(eb.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) && !want {
		return nil
	}
	if err != nil {
		verb := map[bool]string{true: "add", false: "remove"}[want]
		return fmt.Errorf("%s finalizer %s on %s/%s: %w", verb, api.BackupPeriodicFinalizer, eb.Namespace, eb.Name, err)
	}
	return nil
}

// stopRunner cancels a runner and waits until its goroutine has returned.
func (c *Controller) stopRunner(key string) {
	c.mu.Lock()
	r := c.runners[key]
	delete(c.runners, key)
	c.mu.Unlock()
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
	if namespace, name, err := cache.SplitMetaNamespaceKey(key); err == nil {
		c.metrics.periodic(namespace, name, 0)
		c.metrics.drillsExpected(namespace, name, 0)
	}
	c.logForKey(key).Info("periodic backup stopped")
}

func (c *Controller) stopAllRunners() {
	c.mu.Lock()
	keys := make([]string, 0, len(c.runners))
	for k := range c.runners {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.stopRunner(k)
	}
}

func (c *Controller) logFor(eb *api.EtcdBackup) *logrus.Entry {
	return c.log.WithFields(logrus.Fields{"backup-name": eb.Name, "backup-namespace": eb.Namespace})
}

func (c *Controller) logForKey(key string) *logrus.Entry {
	namespace, name, _ := cache.SplitMetaNamespaceKey(key)
	return c.log.WithFields(logrus.Fields{"backup-name": name, "backup-namespace": namespace})
}
