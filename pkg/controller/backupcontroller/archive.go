package backupcontroller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// Event reasons of the continuous archive.
const (
	// ReasonArchiveGap: revisions were compacted away before the archive stored
	// them; a full snapshot follows and the archive continues after it.
	ReasonArchiveGap = "BackupArchiveGap"
	// ReasonArchiveFailed: the archive stopped for another reason (the store
	// failed past the backlog's bound, or it could not be opened); it starts
	// again after a wait.
	ReasonArchiveFailed = "BackupArchiveFailed"
)

// archiveStatusEvery bounds how often an archive's progress is written to
// the EtcdBackup's status: chunks are stored every few seconds, and a status
// write per chunk would put the API server's load on the archive's pace.
const archiveStatusEvery = 10 * time.Second

// Archive is a running continuous archive: an *archive.Archiver with what it
// holds open, or a fake in tests.
type Archive interface {
	// Run archives until ctx ends or it cannot go on (archive.Archiver.Run).
	Run(ctx context.Context) error
	Progress() archive.Progress
	// Prefix is "<bucket>/<key prefix>" of the chunks, for the status.
	Prefix() string
	// Close releases the etcd client and anything else Run used.
	Close()
}

// ArchiveFunc opens the continuous archive of an EtcdBackup, continuing
// after revision after when the store holds no chunk beyond it.
type ArchiveFunc func(ctx context.Context, eb *api.EtcdBackup, after int64) (Archive, error)

// snapshotAfter is the revision of the newest periodic snapshot the status
// records under the spec's current path, which the archive continues; 0 when
// there is none (no success yet, or the path changed since), and a snapshot
// must be taken first so that snapshot and archive together hold every change.
func snapshotAfter(eb *api.EtcdBackup) int64 {
	snap, _ := newestSnapshot(&eb.Spec, &eb.Status)
	return snap.Revision
}

// newestSnapshot is the newest periodic snapshot st records under spec's
// current path: its revision, and when that revision was read (from its
// name; zero when the name does not say). ok is false when there is none.
func newestSnapshot(spec *api.BackupSpec, st *api.BackupStatus) (snap archive.Point, ok bool) {
	path := backupPath(spec)
	if st.EtcdRevision <= 0 || path == "" || !strings.HasPrefix(st.BackupPath, path+"_v") {
		return archive.Point{}, false
	}
	snap.Revision = st.EtcdRevision
	if rev, at, named := periodicName(path, st.BackupPath); named && rev == st.EtcdRevision {
		snap.Time = at
	}
	return snap, true
}

// recoveryPoint is the newest point a restore to the latest change would
// reach now, for status.archive.recoveryPoint: the newest snapshot the
// status records, carried on by the archive's spans that follow it without
// a hole (archive.Reach, which the restore operator plans "latest" with).
// nil while no snapshot under the current path is known: a restore would
// have none to start from.
func recoveryPoint(spec *api.BackupSpec, st *api.BackupStatus, spans []archive.Span) *api.BackupRecoveryPoint {
	snap, ok := newestSnapshot(spec, st)
	if !ok {
		return nil
	}
	reached, _ := archive.Reach(snap, spans)
	rp := &api.BackupRecoveryPoint{Revision: reached.Revision, SnapshotRevision: snap.Revision}
	if !reached.Time.IsZero() {
		// Down to the second, never up: the point is not later than said.
		t := metav1.NewTime(reached.Time.Truncate(time.Second))
		rp.Time = &t
	}
	return rp
}

// backupPath is the "<bucket>/<key>" the spec stores snapshots under.
func backupPath(spec *api.BackupSpec) string {
	src := &spec.BackupSource
	switch spec.StorageType {
	case api.BackupStorageTypeS3:
		if src.S3 != nil {
			return src.S3.Path
		}
	case api.BackupStorageTypeABS:
		if src.ABS != nil {
			return src.ABS.Path
		}
	case api.BackupStorageTypeGCS:
		if src.GCS != nil {
			return src.GCS.Path
		}
	case api.BackupStorageTypeOSS:
		if src.OSS != nil {
			return src.OSS.Path
		}
	}
	return ""
}

// keepArchiving runs a runner's archive until ctx is done; a panic is
// reported and the archive starts again after a wait, as keepRunning does.
func (c *Controller) keepArchiving(ctx context.Context, key string, eb *api.EtcdBackup, r *runner) {
	defer func() {
		if namespace, name, err := cache.SplitMetaNamespaceKey(key); err == nil {
			c.metrics.archiveStopped(namespace, name)
		}
	}()
	for {
		err := failure.Safely(c.logFor(eb), "the archive", func() { c.runArchive(ctx, key, r) })
		if err == nil {
			return
		}
		c.recorder.Event(eb, corev1.EventTypeWarning, ReasonArchiveFailed, err.Error()+"; the archive starts again")
		if !c.sleep(ctx, c.maxFailureBackoff) {
			return
		}
	}
}

// runArchive archives a runner's cluster until ctx is done. It continues the
// newest snapshot, or takes one first; after a gap it takes one at once and
// continues after it. Other failures start it again after a growing wait:
// it resumes from its last stored chunk.
func (c *Controller) runArchive(ctx context.Context, key string, r *runner) {
	backoff := failure.Backoff{Min: time.Second, Max: max(time.Minute, r.spec.BackupPolicy.Archive.Interval())}
	after := int64(-1) // not known yet
	// atLeast is the oldest snapshot the archive may continue: after a gap,
	// none older than the compaction.
	atLeast := int64(1)
	for ctx.Err() == nil {
		eb := c.currentFor(key, r)
		if eb == nil {
			return // gone or changed: a worker is about to stop or replace this runner
		}
		if after < 0 {
			after = snapshotAfter(eb)
		}
		if after == 0 {
			res, err := c.archiveSnapshot(ctx, eb, r, atLeast)
			if err != nil {
				if ctx.Err() == nil {
					c.logFor(eb).Warnf("the archive waits for a snapshot to continue: %v", err)
				}
				if !c.sleep(ctx, backoff.Next()) {
					return
				}
				continue
			}
			after = res.Revision
		}
		err := c.archiveOnce(ctx, eb, after)
		if ctx.Err() != nil {
			return
		}
		var gap *archive.GapError
		if errors.As(err, &gap) {
			atLeast = max(atLeast, gap.CompactedTo)
			after = c.fillGap(ctx, eb, r, gap)
			backoff = failure.Backoff{Min: backoff.Min, Max: backoff.Max}
			continue
		}
		reason := fmt.Sprintf("the continuous archive stopped: %v", err)
		c.logFor(eb).Warn(reason)
		c.recorder.Event(eb, corev1.EventTypeWarning, ReasonArchiveFailed, reason)
		if !c.sleep(ctx, backoff.Next()) {
			return
		}
	}
}

// currentFor is the EtcdBackup a runner runs, or nil when it was deleted or
// changed since.
func (c *Controller) currentFor(key string, r *runner) *api.EtcdBackup {
	namespace, name, _ := cache.SplitMetaNamespaceKey(key)
	eb, err := c.lister.EtcdBackups(namespace).Get(name)
	if err != nil || eb.UID != r.uid || !equality.Semantic.DeepEqual(eb.Spec, r.spec) || eb.DeletionTimestamp != nil {
		return nil
	}
	return eb
}

// archiveSnapshot takes a full snapshot for the archive to continue and
// records it as a periodic backup. The runner's newest snapshot does
// instead when it is at revision atLeast or newer (the runner backs up as it
// starts, as the archive does); atLeast 0 always takes a new one.
func (c *Controller) archiveSnapshot(ctx context.Context, eb *api.EtcdBackup, r *runner, atLeast int64) (*backup.Result, error) {
	r.snapshotMu.Lock()
	defer r.snapshotMu.Unlock()
	if atLeast > 0 && r.snapshot >= atLeast {
		return &backup.Result{Snapshot: backup.Snapshot{Revision: r.snapshot}}, nil
	}
	res, err := c.runBackup(ctx, eb, false)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		if rerr := c.recordFailure(ctx, eb, err.Error(), failure.IsPermanent(err)); rerr != nil {
			c.logFor(eb).Errorf("cannot record the backup result: %v", rerr)
		}
		return nil, err
	}
	r.snapshot = res.Revision
	if rerr := c.recordSuccess(ctx, eb, res); rerr != nil {
		c.logFor(eb).Errorf("cannot record the backup result: %v", rerr)
	}
	if res.VerifyErr == nil {
		c.pruneArchive(ctx, eb)
	}
	return res, nil
}

// fillGap reports a gap, takes the full snapshot it asks for and returns the
// revision the archive continues after: the snapshot's, or 0 (take one
// again) when it failed or is older than the compaction.
func (c *Controller) fillGap(ctx context.Context, eb *api.EtcdBackup, r *runner, gap *archive.GapError) int64 {
	now := c.clock.Now()
	c.metrics.archiveGap(eb.Spec.StorageType)
	reason := fmt.Sprintf("the archive lacks revisions %d to %d, compacted before they were stored: taking a full snapshot to continue after",
		gap.From, gap.CompactedTo)
	c.logFor(eb).WithFields(logrus.Fields{"from": gap.From, "compacted-to": gap.CompactedTo}).Warn(reason)
	c.recorder.Event(eb, corev1.EventTypeWarning, ReasonArchiveGap, reason)
	st := &api.BackupArchiveGap{From: gap.From, CompactedTo: gap.CompactedTo, When: metav1.NewTime(now.Truncate(time.Second))}
	c.writeArchiveStatus(ctx, eb, func(a *api.BackupArchiveStatus) { a.LastGap = st })
	res, err := c.archiveSnapshot(ctx, eb, r, 0)
	if err != nil {
		return 0
	}
	after, err := gap.RestartAfter(&res.Snapshot)
	if err != nil {
		c.logFor(eb).Warnf("the snapshot after the gap does not fill it: %v", err)
		return 0
	}
	st.SnapshotRevision = after
	c.writeArchiveStatus(ctx, eb, func(a *api.BackupArchiveStatus) { a.LastGap = st })
	return after
}

// archiveOnce opens the archive and runs it until ctx ends or it stops,
// publishing its progress every archiveStatusEvery.
func (c *Controller) archiveOnce(ctx context.Context, eb *api.EtcdBackup, after int64) error {
	a, err := c.archive(ctx, eb, after)
	if err != nil {
		return err
	}
	defer a.Close()
	c.logFor(eb).WithField("prefix", a.Prefix()).Infof("continuous archive started after revision %d", after)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t := c.clock.NewTicker(archiveStatusEvery)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			c.publishArchive(ctx, eb, a)
			return err
		case <-t.C():
			c.publishArchive(ctx, eb, a)
		}
	}
}

// publishArchive writes an archive's progress to metrics, and to the status
// when it changed.
func (c *Controller) publishArchive(ctx context.Context, eb *api.EtcdBackup, a Archive) {
	p := a.Progress()
	c.metrics.archived(eb.Namespace, eb.Name, p.Revision, p.Lag)
	// The cache tells whether anything changed without a read from the API
	// server, which a write makes (updateStatus) and an idle archive needs not.
	if cur, err := c.lister.EtcdBackups(eb.Namespace).Get(eb.Name); err == nil && cur.UID == eb.UID {
		want := cur.Status.Archive.DeepCopy()
		if want == nil {
			want = &api.BackupArchiveStatus{}
		}
		setArchiveProgress(want, a.Prefix(), p, recoveryPoint(&eb.Spec, &cur.Status, p.Spans))
		c.metrics.recoveryPoint(eb.Namespace, eb.Name, want.RecoveryPoint)
		if equality.Semantic.DeepEqual(want, cur.Status.Archive) {
			return
		}
	}
	// The recovery point is made from the status written, whose newest
	// snapshot may be newer than the cache's.
	var written *api.BackupRecoveryPoint
	err := c.updateStatus(ctx, eb, func(st *api.BackupStatus) {
		want := st.Archive.DeepCopy()
		if want == nil {
			want = &api.BackupArchiveStatus{}
		}
		written = recoveryPoint(&eb.Spec, st, p.Spans)
		setArchiveProgress(want, a.Prefix(), p, written)
		st.Archive = want
	})
	if err != nil && ctx.Err() == nil {
		c.logFor(eb).Warnf("cannot record the archive's progress (the next update will): %v", err)
	}
	if err == nil {
		c.metrics.recoveryPoint(eb.Namespace, eb.Name, written)
	}
}

// setArchiveProgress copies progress and the recovery point it makes into
// the status, in whole seconds so that a status written again only for a
// moved nanosecond is not.
func setArchiveProgress(st *api.BackupArchiveStatus, prefix string, p archive.Progress, point *api.BackupRecoveryPoint) {
	st.Prefix = prefix
	st.RecoveryPoint = point
	if p.Revision > 0 {
		st.LastRevision = p.Revision
	}
	if !p.Time.IsZero() {
		t := metav1.NewTime(p.Time.Truncate(time.Second))
		st.LastTime = &t
	}
	st.LagSeconds = int64(p.Lag / time.Second)
	st.LagRevisions = p.LagRevisions
}

func (c *Controller) writeArchiveStatus(ctx context.Context, eb *api.EtcdBackup, change func(*api.BackupArchiveStatus)) {
	err := c.updateStatus(ctx, eb, func(st *api.BackupStatus) {
		a := st.Archive.DeepCopy()
		if a == nil {
			a = &api.BackupArchiveStatus{}
		}
		change(a)
		st.Archive = a
	})
	if err != nil && ctx.Err() == nil {
		c.logFor(eb).Warnf("cannot record the archive's progress (the next update will): %v", err)
	}
}

// sleep waits d, or returns false when ctx ends first.
func (c *Controller) sleep(ctx context.Context, d time.Duration) bool {
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
