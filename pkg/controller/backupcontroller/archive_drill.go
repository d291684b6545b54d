package backupcontroller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// Event reasons of the archive's drills.
const (
	// ReasonArchiveDrilled: the recovery point, restored, is what the
	// cluster held there.
	ReasonArchiveDrilled = "BackupArchiveDrilled"
	// ReasonArchiveDrillFailed: it is not, or it could not be restored.
	ReasonArchiveDrillFailed = "BackupArchiveDrillFailed"
	// ReasonArchiveDrillCompacted: the cluster compacted the point's revision
	// before the drill read it; nothing was compared.
	ReasonArchiveDrillCompacted = "BackupArchiveDrillCompacted"
)

// DrillPoint is the point a drill restores: a snapshot ("bucket/key", as
// status.backupPath records it) and the revision the archive brings it to.
type DrillPoint struct {
	BackupPath       string
	SnapshotRevision int64
	Revision         int64
}

// DrillArchiveFunc restores an EtcdBackup's point and compares it with its
// live cluster (archive.Drill).
type DrillArchiveFunc func(ctx context.Context, eb *api.EtcdBackup, p DrillPoint) (archive.Drilled, error)

// drillPoint is the point a drill of eb restores now: its recovery point,
// when it was made from the newest snapshot the status records; none
// otherwise (the next publication of the archive's progress makes it anew).
func drillPoint(eb *api.EtcdBackup) (DrillPoint, bool) {
	st := &eb.Status
	if eb.Spec.BackupPolicy == nil || eb.Spec.BackupPolicy.Archive == nil || st.Archive == nil || st.Archive.RecoveryPoint == nil {
		return DrillPoint{}, false
	}
	rp := st.Archive.RecoveryPoint
	snap, ok := newestSnapshot(&eb.Spec, st)
	if !ok || snap.Revision != rp.SnapshotRevision {
		return DrillPoint{}, false
	}
	return DrillPoint{BackupPath: st.BackupPath, SnapshotRevision: rp.SnapshotRevision, Revision: rp.Revision}, true
}

// drillEarly is how much sooner than its interval a drill may run: snapshots
// that come at the interval but a timer's jitter early, or a drill measured
// from the end the status records rather than its start, must not push it to
// the snapshot after.
func drillEarly(interval time.Duration) time.Duration {
	return min(interval/10, time.Minute)
}

// drillDue says whether a drill of eb runs before its next periodic snapshot,
// which verify says is verified: with each verified snapshot by default, or,
// with spec.backupPolicy.archive.drill.intervalInSecond, once that long has
// passed since the previous drill (last; zero when none is known).
func drillDue(eb *api.EtcdBackup, verify bool, last, now time.Time) bool {
	interval, enabled := eb.Spec.BackupPolicy.Archive.Drills()
	switch {
	case !enabled:
		return false
	case interval == 0:
		return verify
	}
	return last.IsZero() || now.Sub(last) >= interval-drillEarly(interval)
}

// lastDrill is when r drilled last: the start of its own latest drill, or,
// before it drilled, the end of the latest drill the status records (of an
// earlier runner or process).
func lastDrill(eb *api.EtcdBackup, r *runner) time.Time {
	if !r.drilled.IsZero() {
		return r.drilled
	}
	if a := eb.Status.Archive; a != nil && a.Drill != nil {
		return a.Drill.Time.Time
	}
	return time.Time{}
}

// drillsExpected is how long apart drills of spec are when all goes well,
// for the alert on drills that stopped passing; false when spec asks for
// none. period is the backup's (for a schedule, its longest gap). A drill
// comes with a snapshot, so an interval is rounded up to whole periods.
func drillsExpected(spec *api.BackupSpec, period time.Duration) (time.Duration, bool) {
	if !drillsAsked(spec) || period <= 0 {
		return 0, false
	}
	if interval, _ := spec.BackupPolicy.Archive.Drills(); interval > 0 {
		n := (interval - drillEarly(interval) + period - 1) / period
		return max(n, 1) * period, true
	}
	return time.Duration(spec.VerifyEvery()) * period, true
}

// drillsAsked says whether spec asks for drills: a periodic backup's archive
// whose drills are on, with an interval or with verified snapshots.
func drillsAsked(spec *api.BackupSpec) bool {
	if !spec.IsPeriodic() {
		return false
	}
	interval, enabled := spec.BackupPolicy.Archive.Drills()
	return enabled && (interval > 0 || spec.VerifyEvery() > 0)
}

// drillArchive restores eb's recovery point and compares it with the live
// cluster, before a periodic snapshot replaces the newest point: the point
// then spans the most chunks it ever does. It records the result in
// status.archive.drill and an event; it decides nothing else, since the
// archive and the snapshots go on whatever it finds. It holds a backup slot,
// as it reads a whole snapshot. It says whether a drill ran to its end.
func (c *Controller) drillArchive(ctx context.Context, eb *api.EtcdBackup) bool {
	p, ok := drillPoint(eb)
	if c.drill == nil || !ok {
		return false
	}
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	var done archive.Drilled
	var err error
	perr := failure.Safely(c.logFor(eb), "the archive's drill", func() { done, err = c.drill(ctx, eb, p) })
	<-c.slots
	if ctx.Err() != nil {
		return false
	}
	if perr != nil {
		err = perr
	}
	if err == nil && done.Revision > p.Revision {
		// The snapshot held more than the archive had reached: the drill
		// compared it at its own revision, the newest a restore gives.
		p.Revision = done.Revision
	}
	st := drillStatus(p, done, err, c.clock.Now())
	log := c.logFor(eb).WithFields(logrus.Fields{"snapshot": p.BackupPath, "revision": p.Revision})
	switch st.Result {
	case api.BackupArchiveDrillPassed:
		msg := fmt.Sprintf("restored revision %d (snapshot %s at revision %d, then %d archived revisions): the %d keys are what the cluster held there",
			p.Revision, p.BackupPath, p.SnapshotRevision, st.Revisions, st.Keys)
		log.Info(msg)
		c.recorder.Event(eb, corev1.EventTypeNormal, ReasonArchiveDrilled, msg)
	case api.BackupArchiveDrillCompacted:
		log.Info(st.Reason)
		c.recorder.Event(eb, corev1.EventTypeNormal, ReasonArchiveDrillCompacted, st.Reason)
	default:
		log.Warn(st.Reason)
		c.recorder.Event(eb, corev1.EventTypeWarning, ReasonArchiveDrillFailed, st.Reason)
	}
	c.writeArchiveStatus(ctx, eb, func(a *api.BackupArchiveStatus) {
		if st.Result != api.BackupArchiveDrillPassed {
			st.LastPassedTime = a.Drill.LastPassed().DeepCopy()
		}
		a.Drill = st
	})
	return true
}

// drillStatus is status.archive.drill for a drill of p that gave done and err.
func drillStatus(p DrillPoint, done archive.Drilled, err error, now time.Time) *api.BackupArchiveDrill {
	st := &api.BackupArchiveDrill{Time: metav1.NewTime(now.Truncate(time.Second)), BackupPath: p.BackupPath,
		SnapshotRevision: p.SnapshotRevision, Revision: p.Revision, Revisions: done.Revisions, Keys: int64(done.Keys)}
	switch {
	case err != nil:
		st.Result = api.BackupArchiveDrillFailed
		st.Reason = fmt.Sprintf("the restore of revision %d (snapshot %s, then the archive) could not be proven: %v", p.Revision, p.BackupPath, err)
	case done.Compacted:
		st.Result = api.BackupArchiveDrillCompacted
		st.Reason = fmt.Sprintf("the cluster compacted revision %d before the drill read it, so the restore of it was not compared; the next drill reads a newer one", p.Revision)
	default:
		st.Result = api.BackupArchiveDrillPassed
		st.LastPassedTime = st.Time.DeepCopy()
	}
	return st
}

// DrillArchive is the real DrillArchiveFunc: it opens the cluster and the
// store an EtcdBackup names, as Backup does, and drills p through a
// temporary copy of the snapshot and a scratch etcd restored from it, both
// in VerifyDir.
func (b *Backuper) DrillArchive(ctx context.Context, eb *api.EtcdBackup, p DrillPoint) (archive.Drilled, error) {
	spec := &eb.Spec
	// Reading the snapshot back costs what storing it did.
	tctx, cancel := context.WithTimeout(ctx, 2*time.Duration(spec.BackupPolicy.BackupTimeout())*time.Second)
	defer cancel()
	o, err := b.open(tctx, eb)
	if err != nil {
		return archive.Drilled{}, err
	}
	key, ok := strings.CutPrefix(p.BackupPath, o.loc.Bucket+"/")
	if !ok {
		return archive.Drilled{}, fmt.Errorf("the snapshot %s is not in the bucket %s the spec names", p.BackupPath, o.loc.Bucket)
	}
	dial := b.DialTimeout
	if dial <= 0 {
		dial = etcdutil.DefaultDialTimeout
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: o.target.endpoints, TLS: o.tls, DialTimeout: dial, Logger: zap.NewNop()})
	if err != nil {
		return archive.Drilled{}, fmt.Errorf("etcd client %v: %w", o.target.endpoints, err)
	}
	defer func() { _ = client.Close() }()
	return archive.Drill(tctx, archive.DrillOptions{Store: o.store, Prefix: o.loc.Key + api.ArchivePathSuffix, Key: o.codec.Key,
		Snapshot: key, SnapshotRevision: p.SnapshotRevision, Revision: p.Revision, Dir: b.VerifyDir, Client: client})
}
