package restore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// The first stage of a restore: validate the spec, verify the backup, and
// retry or fail what went wrong, before the old cluster is touched.

// beforeHandOver runs a restore whose phase says the hand-over has not begun.
// The phase is not taken on trust: if the cluster the plan replaces is already
// going, or replaced by this restore, the hand-over began under a phase that
// was lost (a status nobody stored, an annotation someone removed), and only
// the hand-over may go on; preparing again would find the cluster being
// deleted and fail the restore saying the cluster was not touched.
func (f *Flow) beforeHandOver(ctx context.Context, er *api.EtcdRestore, attempt int) (time.Duration, error) {
	began, err := f.handOverBegan(ctx, er)
	if err != nil {
		return 0, err
	}
	if began {
		f.logFor(er).Warnf("the hand-over of EtcdCluster %s had begun though the restore's phase says %q: resuming it", er.Name, er.Status.Phase)
		if err := f.updateStatus(ctx, er, func(st *api.RestoreStatus) { st.Phase = api.RestorePhaseRestoring }); err != nil {
			return 0, err
		}
		return f.restore(ctx, er)
	}
	if er.DeletionTimestamp != nil {
		// Deleted before anything was touched: nothing to undo, and the
		// finalizer, if the plan was written, is released with the result.
		if !slices.Contains(er.Finalizers, Finalizer) {
			return 0, nil
		}
		return 0, f.fail(ctx, er, fmt.Sprintf("the EtcdRestore was deleted before EtcdCluster %s was touched; restore abandoned", er.Name))
	}
	return f.prepare(ctx, er, attempt)
}

// handOverBegan tells whether er has a plan and the cluster it replaces is
// gone, being deleted, or already replaced by this restore.
func (f *Flow) handOverBegan(ctx context.Context, er *api.EtcdRestore) (bool, error) {
	plan, ok, err := PlanOf(er)
	if !ok || err != nil {
		return false, nil
	}
	cl, err := f.cfg.Etcd.EtcdV1beta2().EtcdClusters(er.Namespace).Get(ctx, er.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get EtcdCluster %s/%s: %w", er.Namespace, er.Name, err)
	}
	return cl.UID == plan.Cluster.UID && cl.DeletionTimestamp != nil || cl.Annotations[RestoredByAnnotation] == string(er.UID), nil
}

// prepare proves the restore can be done without touching anything: the spec,
// the cluster, the credentials, and the backup read through once. It ends by
// writing the plan and phase Restoring, then starts the hand-over.
func (f *Flow) prepare(ctx context.Context, er *api.EtcdRestore, attempt int) (time.Duration, error) {
	if er.Status.Phase == "" {
		f.cfg.Metrics.started(er.Spec.BackupStorageType)
		f.event(er, corev1.EventTypeNormal, ReasonValidating,
			fmt.Sprintf("checking the spec, EtcdCluster %s and the backup source", er.Spec.EtcdCluster.Name))
	}
	err := f.updateStatus(ctx, er, func(st *api.RestoreStatus) {
		if st.Phase == "" {
			st.Phase = api.RestorePhaseValidating
		}
		if st.StartTime == nil {
			st.StartTime = f.now()
		}
	})
	if err != nil {
		return 0, err
	}
	_, store, loc, err := f.validate(ctx, er)
	if err != nil {
		return f.failOrRetry(ctx, er, attempt, err)
	}
	var point *PointPlan
	if er.Spec.PointInTime != nil {
		if loc, point, err = f.choosePoint(ctx, er, store, loc); err != nil {
			return f.failOrRetry(ctx, er, attempt, err)
		}
	}
	if er.Status.Phase != api.RestorePhaseFetching {
		f.event(er, corev1.EventTypeNormal, ReasonVerifyingBackup,
			fmt.Sprintf("reading backup %s through to check it before EtcdCluster %s is touched", loc.Path(), er.Name))
	}
	if err := f.updateStatus(ctx, er, func(st *api.RestoreStatus) { st.Phase = api.RestorePhaseFetching }); err != nil {
		return 0, err
	}
	vb, err := f.verify(ctx, er, store, loc)
	if err != nil {
		return f.failOrRetry(ctx, er, attempt, err)
	}
	msg := fmt.Sprintf("backup %s is an intact etcd snapshot: %d bytes, sha256 %s", vb.Path, vb.Size, vb.SHA256)
	if vb.Encrypted || vb.Compression != "" {
		msg += " (stored " + backup.Form{Encrypted: vb.Encrypted, Compression: vb.Compression}.String() + ")"
	}
	if vb.RecordedBy != "" {
		msg += ", as EtcdBackup " + vb.RecordedBy + " recorded"
	}
	f.event(er, corev1.EventTypeNormal, ReasonBackupVerified, msg)
	f.logFor(er).Info(msg)

	// The cluster as it is now: reading the backup may have taken minutes.
	old, _, _, err := f.validate(ctx, er)
	if err != nil {
		return f.failOrRetry(ctx, er, attempt, err)
	}
	if point != nil && vb.Revision != 0 && vb.Revision != point.SnapshotRevision {
		return f.failOrRetry(ctx, er, attempt, failure.Permanent(fmt.Errorf("snapshot %s is named after revision %d, but EtcdBackup %s recorded revision %d for it",
			vb.Path, point.SnapshotRevision, vb.RecordedBy, vb.Revision)))
	}
	plan := &Plan{Cluster: recordCluster(old), Source: *er.Spec.DeepCopy(), Backup: vb, Point: point, Started: *f.now()}
	plan.Cluster.ClientIP = f.clientIPOf(ctx, er, old)
	if err := f.writePlan(ctx, er, plan); err != nil {
		// A conflict starts the pass again; anything else (a refused
		// write, the API unreachable) is said on the restore and retried.
		if errors.Is(err, errGone) || failure.IsRetry(err) {
			return 0, err
		}
		return f.failOrRetry(ctx, er, attempt, err)
	}
	if err := f.updateStatus(ctx, er, func(st *api.RestoreStatus) {
		st.Phase = api.RestorePhaseRestoring
		st.Reason = ""
		if point != nil {
			st.PointInTime = point.Status(vb.Path)
		}
	}); err != nil {
		return 0, err
	}
	return f.restore(ctx, er)
}

// choosePoint plans a restore to spec.pointInTime (see point.go) from the
// store of the backup whose path base names, and returns where the snapshot
// it starts from is.
func (f *Flow) choosePoint(ctx context.Context, er *api.EtcdRestore, store backup.Store, base storage.Location) (storage.Location, *PointPlan, error) {
	key, err := f.keyOf(ctx, er)
	if err != nil {
		return base, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	loc, point, err := choosePoint(pctx, &er.Spec, store, base, key)
	if err != nil {
		return base, nil, fmt.Errorf("restore to %s from %s: %w", er.Spec.PointInTime.String(), base.Path(), err)
	}
	msg := fmt.Sprintf("restoring to %s: snapshot %s (revision %d)", er.Spec.PointInTime.String(), loc.Path(), point.SnapshotRevision)
	if point.Replays() {
		msg += fmt.Sprintf(", then the archive up to revision %d: %d revisions, %d changes to %d keys", point.Revision, point.Revisions, point.Events, point.Keys)
		if point.Time != nil {
			msg += fmt.Sprintf(", the last received at %s", point.Time.UTC().Format(time.RFC3339Nano))
		}
	} else {
		msg += ", which is the point: nothing to replay"
	}
	if point.Point.Latest {
		msg += fmt.Sprintf("; the archive's newest change is revision %d", point.ArchiveRevision)
	}
	f.event(er, corev1.EventTypeNormal, ReasonPointChosen, msg)
	f.logFor(er).Info(msg)
	if point.Shortfall != "" {
		// Not refused: what is past the hole or the unreadable chunk cannot
		// be replayed by any later attempt, and stays in the store.
		warn := "the restore cannot reach the newest change the backup holds: " + point.Shortfall
		f.event(er, corev1.EventTypeWarning, ReasonPointShortOfNewest, warn)
		f.logFor(er).WithField("shortfall", point.Shortfall).Warn(warn)
	}
	return loc, point, nil
}

// keyOf is the key spec.encryption names, or nil.
func (f *Flow) keyOf(ctx context.Context, er *api.EtcdRestore) ([]byte, error) {
	if er.Spec.Encryption == nil {
		return nil, nil
	}
	return storage.EncryptionKey(ctx, f.cfg.Kube.CoreV1(), er.Namespace, er.Spec.Encryption)
}

// validate checks everything but the backup's content, and opens its store.
func (f *Flow) validate(ctx context.Context, er *api.EtcdRestore) (*api.EtcdCluster, backup.Store, storage.Location, error) {
	var loc storage.Location
	if err := storage.CheckSupported(er.Spec.BackupStorageType); err != nil {
		return nil, nil, loc, err
	}
	if err := er.Validate(); err != nil {
		return nil, nil, loc, failure.Permanent(fmt.Errorf("invalid spec: %w", err))
	}
	cl, err := f.cfg.Etcd.EtcdV1beta2().EtcdClusters(er.Namespace).Get(ctx, er.Spec.EtcdCluster.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, loc, failure.Permanent(fmt.Errorf("EtcdCluster %s/%s does not exist: an EtcdRestore replaces an existing cluster and copies its spec; create the cluster (it may be paused) and a new EtcdRestore",
			er.Namespace, er.Spec.EtcdCluster.Name))
	case err != nil:
		return nil, nil, loc, fmt.Errorf("get EtcdCluster %s/%s: %w", er.Namespace, er.Spec.EtcdCluster.Name, err)
	case cl.DeletionTimestamp != nil:
		return nil, nil, loc, failure.Permanent(fmt.Errorf("EtcdCluster %s/%s is being deleted; its spec cannot be relied on", cl.Namespace, cl.Name))
	}
	if err := cl.Validate(); err != nil {
		return nil, nil, loc, failure.Permanent(fmt.Errorf("EtcdCluster %s/%s has an invalid spec, which the restored cluster would copy; fix it first: %w", cl.Namespace, cl.Name, err))
	}
	store, loc, err := f.cfg.Open(ctx, er.Namespace, &er.Spec)
	if err != nil {
		return nil, nil, loc, err
	}
	return cl, store, loc, nil
}

// verify reads the backup through and compares it with the EtcdBackup that
// recorded it, if any.
func (f *Flow) verify(ctx context.Context, er *api.EtcdRestore, store backup.Store, loc storage.Location) (VerifiedBackup, error) {
	vctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	key, err := f.keyOf(ctx, er)
	if err != nil {
		return VerifiedBackup{}, err
	}
	vb, err := VerifySnapshot(vctx, store, loc, key)
	if err != nil {
		if ctx.Err() == nil && errors.Is(vctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("reading the backup did not finish within %v: %w", f.cfg.Timeout, err)
		}
		return vb, err
	}
	backups, err := f.cfg.Etcd.EtcdV1beta2().EtcdBackups(er.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return vb, fmt.Errorf("list the EtcdBackups of %s to compare the backup with their records: %w", er.Namespace, err)
	}
	return CheckRecorded(vb, backups.Items)
}

// failOrRetry ends a restore whose preparation failed, or retries it. Nothing has
// been touched yet, so giving up is safe.
func (f *Flow) failOrRetry(ctx context.Context, er *api.EtcdRestore, attempt int, err error) (time.Duration, error) {
	if ctx.Err() != nil {
		return 0, ctx.Err() // shutting down; the next leader runs it again
	}
	reason := err.Error()
	if failure.IsPermanent(err) || attempt >= f.cfg.MaxRetries {
		if !failure.IsPermanent(err) {
			reason = fmt.Sprintf("%s (gave up after %d attempts)", reason, attempt+1)
		}
		return 0, f.fail(ctx, er, reason+"; EtcdCluster "+er.Spec.EtcdCluster.Name+" was not touched")
	}
	f.logFor(er).Warnf("attempt %d of %d failed, will retry: %s", attempt+1, f.cfg.MaxRetries+1, reason)
	f.event(er, corev1.EventTypeWarning, ReasonRetrying, fmt.Sprintf("attempt %d of %d: %s; nothing was changed", attempt+1, f.cfg.MaxRetries+1, reason))
	if uerr := f.updateStatus(ctx, er, func(st *api.RestoreStatus) { st.Reason = reason }); uerr != nil {
		return 0, uerr
	}
	return 0, failure.Retry(err)
}

// clientIPOf is the cluster IP of the old cluster's client Service, or "" when
// it has none that is its own. Only a convenience for clients: a failure to
// read it is logged, and the restored Service gets a new address.
func (f *Flow) clientIPOf(ctx context.Context, er *api.EtcdRestore, old *api.EtcdCluster) string {
	svc, err := f.cfg.Kube.CoreV1().Services(old.Namespace).Get(ctx, k8sutil.ClientServiceName(old.Name), metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			f.logFor(er).WithError(err).Warn("cannot read the client Service: the restored one gets a new cluster IP")
		}
		return ""
	}
	if !k8sutil.IsOwnedBy(svc, old) || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return ""
	}
	return svc.Spec.ClusterIP
}
