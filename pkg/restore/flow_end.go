package restore

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// The end of a restore: completed or failed, and released.

// complete records success: the cluster is back at full size.
func (f *Flow) complete(ctx context.Context, er *api.EtcdRestore, plan *Plan) error {
	if er.Status.Phase != api.RestorePhaseCompleted {
		msg := fmt.Sprintf("EtcdCluster %s restored from backup %s: all %d members ready", er.Name, plan.Backup.Path, plan.Cluster.Spec.Size)
		if p := plan.Point; p.Replays() {
			msg = fmt.Sprintf("EtcdCluster %s restored to revision %d from backup %s (revision %d) and the archive: all %d members ready",
				er.Name, p.Revision, plan.Backup.Path, p.SnapshotRevision, plan.Cluster.Spec.Size)
		}
		f.logFor(er).Info(msg)
		f.event(er, corev1.EventTypeNormal, ReasonCompleted, msg)
		f.cfg.Metrics.finished(er.Spec.BackupStorageType, false, f.secondsSince(er.Status.StartTime))
	}
	err := f.updateStatus(ctx, er, func(st *api.RestoreStatus) {
		st.Phase = api.RestorePhaseCompleted
		st.Succeeded = true
		st.Reason = ""
		st.CompletionTime = f.now()
		if plan.Point != nil {
			st.PointInTime = plan.Point.Status(plan.Backup.Path)
			// The seed's member ran: its replay step passed its checks.
			st.PointInTime.Replayed = plan.Point.Replays()
		}
	})
	if err != nil {
		return err
	}
	return f.release(ctx, er)
}

// fail records a failure. After the hand-over began, the restored cluster is
// left unpaused for the user to inspect: etcd-operator reports what it sees.
func (f *Flow) fail(ctx context.Context, er *api.EtcdRestore, reason string) error {
	if er.Status.Phase == api.RestorePhaseRestoring {
		if err := f.unpauseIfRestored(ctx, er); err != nil {
			return err
		}
	}
	if er.Status.Phase != api.RestorePhaseFailed {
		f.logFor(er).Warnf("restore failed: %s", reason)
		f.event(er, corev1.EventTypeWarning, ReasonFailed, reason)
		f.cfg.Metrics.finished(er.Spec.BackupStorageType, true, f.secondsSince(er.Status.StartTime))
	}
	err := f.updateStatus(ctx, er, func(st *api.RestoreStatus) {
		st.Phase = api.RestorePhaseFailed
		st.Succeeded = false
		st.Reason = reason
		if st.StartTime == nil {
			st.StartTime = f.now()
		}
		st.CompletionTime = f.now()
	})
	if err != nil {
		return err
	}
	return f.release(ctx, er)
}

func (f *Flow) unpauseIfRestored(ctx context.Context, er *api.EtcdRestore) error {
	cl, err := f.cfg.Etcd.EtcdV1beta2().EtcdClusters(er.Namespace).Get(ctx, er.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get EtcdCluster %s/%s: %w", er.Namespace, er.Name, err)
	}
	if cl.Annotations[RestoredByAnnotation] != string(er.UID) || !cl.Spec.Paused {
		return nil
	}
	_, err = f.unpause(ctx, er, cl)
	return err
}
