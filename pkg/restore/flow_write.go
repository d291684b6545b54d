package restore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
)

// Writes of the EtcdRestore: its plan, finalizer and status.

// writePlan stores the plan, signed with the restore's token (see token.go),
// and the finalizer on the EtcdRestore.
func (f *Flow) writePlan(ctx context.Context, er *api.EtcdRestore, plan *Plan) error {
	raw, err := plan.encode()
	if err != nil {
		return err
	}
	token, err := ensureToken(ctx, f.cfg.Kube.CoreV1(), er)
	if errors.Is(err, errTokenNotOwned) {
		return failure.Permanent(err)
	}
	if err != nil {
		return err
	}
	f.cfg.Tokens.remember(er, token)
	if token.onRestore && er.Annotations[TokenAnnotation] == "" {
		msg := fmt.Sprintf("the role may not create Secrets, so the restore's token is kept in annotation %s of this EtcdRestore "+
			"and handed to the seed in its environment; the backup server serves it only to the seed pod's address. "+
			"Grant {apiGroups: [\"\"], resources: [\"secrets\"], verbs: [\"create\"]} to keep tokens in Secrets", TokenAnnotation)
		f.logFor(er).Warn(msg)
		f.event(er, corev1.EventTypeWarning, ReasonTokenOnRestore, msg)
	}
	return f.updateMeta(ctx, er, func(m *metav1.ObjectMeta) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[PlanAnnotation] = raw
		m.Annotations[PlanMACAnnotation] = planMAC(token.value, raw)
		if token.onRestore {
			m.Annotations[TokenAnnotation] = string(token.value)
		}
		if !slices.Contains(m.Finalizers, Finalizer) {
			m.Finalizers = append(m.Finalizers, Finalizer)
		}
	})
}

// release removes the finalizer of an ended restore. The plan stays: it holds
// the old cluster's spec, which helps a user whose restore failed.
func (f *Flow) release(ctx context.Context, er *api.EtcdRestore) error {
	if !slices.Contains(er.Finalizers, Finalizer) {
		return nil
	}
	return f.updateMeta(ctx, er, func(m *metav1.ObjectMeta) {
		m.Finalizers = slices.DeleteFunc(m.Finalizers, func(s string) bool { return s == Finalizer })
	})
}

// updateMeta writes change into er's metadata; see updateStatus.
func (f *Flow) updateMeta(ctx context.Context, er *api.EtcdRestore, change func(*metav1.ObjectMeta)) error {
	upd := er.DeepCopy()
	change(&upd.ObjectMeta)
	if equality.Semantic.DeepEqual(upd.ObjectMeta, er.ObjectMeta) {
		return nil
	}
	out, err := f.cfg.Etcd.EtcdV1beta2().EtcdRestores(er.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
	return f.written(er, out, err, "update")
}

// updateStatus writes change into er's status, when it changes anything, and
// on success leaves the stored object in er, with the status written.
//
// The write carries the resourceVersion the sync read, never a fresh one: every
// decision of a sync rests on that read, so if anyone changed the restore since
// (another operator running it too, a user), the write must fail rather than
// overwrite what it did not see. Two cluster-wide operators on one restore
// showed why: the slower one, still checking the backup, found the cluster gone
// (deleted by the other's hand-over) and wrote Failed over Restoring, which
// would have left the cluster deleted and never re-created. A conflict is retried
// from a fresh read instead.
//
// A status the server did not store (a CRD serving the status subresource, a
// role without etcdrestores/status) is kept in StatusAnnotation instead: the
// flow acts on the phase only once it is written somewhere that outlives the
// operator, so that it never deletes the cluster on a phase only it knew.
func (f *Flow) updateStatus(ctx context.Context, er *api.EtcdRestore, change func(*api.RestoreStatus)) error {
	st := er.Status.DeepCopy()
	change(st)
	if equality.Semantic.DeepEqual(*st, er.Status) {
		return nil
	}
	upd := er.DeepCopy()
	upd.Status = *st
	out, err := f.restores.Write(ctx, upd)
	// The writer tells a status the server did not keep (ErrStatusNotStored)
	// and returns the object as stored.
	stored := err == nil
	if errors.Is(err, statusutil.ErrStatusNotStored) {
		err = nil
	}
	if err := f.written(er, out, err, "update status of"); err != nil {
		return err
	}
	_, kept := er.Annotations[StatusAnnotation]
	if stored {
		er.Status = *st
		if !kept {
			return nil
		}
		// Stored at last (the rule was added): the kept copy would only
		// confuse whoever reads the object.
		return f.updateMeta(ctx, er, func(m *metav1.ObjectMeta) { delete(m.Annotations, StatusAnnotation) })
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode the status of EtcdRestore %s/%s: %w", er.Namespace, er.Name, err)
	}
	if !kept {
		f.logFor(er).Warnf("the status of EtcdRestore %s was not stored; it is kept in annotation %s instead", er.Name, StatusAnnotation)
	}
	if err := f.updateMeta(ctx, er, func(m *metav1.ObjectMeta) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[StatusAnnotation] = string(raw)
	}); err != nil {
		return err
	}
	er.Status = *st
	return nil
}

// written takes the result of a write of er: the new object on success, errGone
// or an error marked failure.Retry when the restore went or changed meanwhile.
func (f *Flow) written(er, out *api.EtcdRestore, err error, verb string) error {
	switch {
	case err == nil:
		// A write of the metadata brings back the stored status, which may
		// be behind the one kept in the annotation.
		*er = *withKeptStatus(out)
		return nil
	case apierrors.IsNotFound(err):
		return errGone
	case apierrors.IsConflict(err):
		return failure.Retry(fmt.Errorf("EtcdRestore %s/%s changed while it was processed; starting again from its new state: %w", er.Namespace, er.Name, err))
	}
	return fmt.Errorf("%s EtcdRestore %s/%s: %w", verb, er.Namespace, er.Name, err)
}
