package backupcontroller

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
)

// PruneArchiveFunc deletes the chunks of an EtcdBackup's continuous archive
// that no snapshot left in its store needs any more.
type PruneArchiveFunc func(ctx context.Context, eb *api.EtcdBackup) (*ArchivePruning, error)

// ArchivePruning is what pruning an archive chose and did.
type ArchivePruning struct {
	archive.Expiry
	// Prefix is "<bucket>/<key prefix>" of the chunks.
	Prefix string
	// Deleted are the keys that went; fewer than Expiry.Delete when some
	// deletions failed (the error says which).
	Deleted []string
}

// prunesArchive tells whether the chunks of eb follow its snapshots out:
// only when the snapshots themselves are pruned (maxBackups or retention),
// since chunks without a snapshot before them serve no restore, and only
// for an EtcdBackup that archives or has archived.
func prunesArchive(eb *api.EtcdBackup) bool {
	pol := eb.Spec.BackupPolicy
	if pol == nil || !eb.Spec.IsPeriodic() || (pol.MaxBackups <= 0 && pol.Retention == nil) {
		return false
	}
	return pol.Archive != nil || eb.Status.Archive != nil
}

// pruneArchive deletes, once a periodic snapshot was stored and the
// snapshots' retention ran, the chunks no kept snapshot needs, and reports
// what it did. The caller holds the runner's snapshotMu, so no snapshot is
// stored while the kept ones are listed.
func (c *Controller) pruneArchive(ctx context.Context, eb *api.EtcdBackup) {
	if c.pruneChunks == nil || !prunesArchive(eb) || ctx.Err() != nil {
		return
	}
	res, err := c.pruneChunks(ctx, eb)
	if ctx.Err() != nil {
		return
	}
	log := c.logFor(eb)
	if res != nil {
		log = log.WithField("prefix", res.Prefix)
		if !res.Held {
			log = log.WithFields(logrus.Fields{"oldest-kept-snapshot": res.OldestKept.Key, "oldest-kept-revision": res.OldestKept.Revision})
		}
		if n := len(res.Deleted); n > 0 {
			c.metrics.archivePruned(eb.Spec.StorageType, n)
			log.WithField("deleted", n).Infof("deleted %d archive chunks: %s", n, res.Reason)
		}
		if res.Held {
			reason := "the continuous archive's chunks are not pruned: " + res.Reason
			log.Warn(reason)
			c.recorder.Event(eb, corev1.EventTypeWarning, ReasonPruneFailed, reason)
		}
	}
	if err != nil {
		reason := fmt.Sprintf("deleting old chunks of the continuous archive failed: %v", err)
		log.Warn(reason)
		c.recorder.Event(eb, corev1.EventTypeWarning, ReasonPruneFailed, reason)
	}
}

// PruneArchive is the real PruneArchiveFunc: it opens the store an
// EtcdBackup names, lists the periodic snapshots left under its path (the
// snapshots' retention has run), and deletes the chunks under the archive's
// prefix that end before the oldest of them (archive.Expired).
func (b *Backuper) PruneArchive(ctx context.Context, eb *api.EtcdBackup) (*ArchivePruning, error) {
	spec := &eb.Spec
	tctx, cancel := context.WithTimeout(ctx, time.Duration(spec.BackupPolicy.BackupTimeout())*time.Second)
	defer cancel()
	store, loc, err := storage.ForBackup(tctx, b.Secrets, b.CloudIdentity, eb.Namespace, spec)
	if err != nil {
		return nil, err
	}
	objs, err := store.List(tctx, loc.Key+"_v")
	if err != nil {
		return nil, fmt.Errorf("list snapshots under %q: %w", loc.Key+"_v", err)
	}
	prefix := loc.Key + api.ArchivePathSuffix
	e, deleted, err := archive.Prune(tctx, store, prefix, keptSnapshots(loc.Key, objs))
	return &ArchivePruning{Expiry: e, Prefix: loc.Bucket + "/" + prefix, Deleted: deleted}, err
}

// keptSnapshots are the objects under "<base>_v", with the revision their
// names record, as backup.PeriodicKey writes them. Any other object there
// gets no revision, so that nothing is pruned past a snapshot of a shape this
// code does not know (an older or newer naming, a path of which this one is
// a prefix): the user hears of it instead.
func keptSnapshots(base string, objs []backup.ObjectInfo) []archive.KeptSnapshot {
	out := make([]archive.KeptSnapshot, 0, len(objs))
	for _, o := range objs {
		out = append(out, archive.KeptSnapshot{Key: o.Key, Revision: snapshotRevision(base, o.Key)})
	}
	return out
}

// snapshotRevision reads the revision out of "<base>_v<revision>_<time>";
// 0 when key is not of that shape.
func snapshotRevision(base, key string) int64 {
	rev, _, _ := periodicName(base, key)
	return rev
}

// periodicName reads "<base>_v<revision>_<time>", as backup.PeriodicKey
// writes it: the revision, and when it was read; ok is false for any other
// shape.
func periodicName(base, key string) (rev int64, at time.Time, ok bool) {
	rest, ok := strings.CutPrefix(key, base+"_v")
	if !ok {
		return 0, time.Time{}, false
	}
	revText, timeText, ok := strings.Cut(rest, "_")
	if !ok || revText == "" || strings.TrimLeft(revText, "0123456789") != "" {
		return 0, time.Time{}, false
	}
	at, err := time.Parse(backup.PeriodicTimeLayout, timeText)
	if err != nil {
		return 0, time.Time{}, false
	}
	rev, err = strconv.ParseInt(revText, 10, 64)
	if err != nil || rev <= 0 {
		return 0, time.Time{}, false
	}
	return rev, at, true
}
