package restore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// The hand-over: the old cluster is deleted and the restored one created,
// paused, in its place.

// restore runs the hand-over from the plan and watches it until the restored
// cluster is available at full size, failing it when it takes longer than the
// timeout.
func (f *Flow) restore(ctx context.Context, er *api.EtcdRestore) (time.Duration, error) {
	plan, ok, err := PlanOf(er)
	if !ok || err != nil {
		if err == nil {
			err = fmt.Errorf("annotation %s is missing", PlanAnnotation)
		}
		return 0, f.fail(ctx, er, fmt.Sprintf("the restore plan is lost (%v): the spec of EtcdCluster %s is not known any more; if the cluster is gone, re-create it and restore again", err, er.Name))
	}
	if er.DeletionTimestamp != nil {
		if untouched, err := f.oldClusterUntouched(ctx, er, plan); err != nil {
			return 0, err
		} else if untouched {
			return 0, f.fail(ctx, er, fmt.Sprintf("the EtcdRestore was deleted before EtcdCluster %s was touched; restore abandoned", er.Name))
		}
	}
	// The plan says which cluster to delete and what to create in its place: it
	// is followed only as the restore operator signed it.
	token, err := tokenOf(ctx, f.cfg.Kube.CoreV1(), er)
	switch {
	case apierrors.IsNotFound(err) || errors.Is(err, errTokenNotOwned):
		return 0, f.fail(ctx, er, fmt.Sprintf("the restore's token is gone (%v): its plan cannot be trusted any more; restore again with a new EtcdRestore", err))
	case err != nil:
		return 0, failure.Retry(err)
	}
	if _, err := verifiedPlan(er, token.value); err != nil {
		return 0, f.fail(ctx, er, fmt.Sprintf("the restore plan is not followed: %v; restore again with a new EtcdRestore", err))
	}
	f.cfg.Tokens.remember(er, token)
	elapsed := f.cfg.Clock.Since(plan.Started.Time)
	waiting, err := f.handOver(ctx, er, plan, token)
	var permanent bool
	switch {
	case err != nil && ctx.Err() != nil:
		return 0, ctx.Err()
	case err != nil:
		permanent = failure.IsPermanent(err)
		if !permanent && elapsed < f.cfg.Timeout {
			f.logFor(er).Warnf("hand-over step failed, will retry: %v", err)
			return 0, failure.Retry(err)
		}
		waiting = err.Error()
	case waiting == "":
		return 0, f.complete(ctx, er, plan)
	}
	if permanent || elapsed >= f.cfg.Timeout {
		reason := waiting
		if !permanent {
			reason = fmt.Sprintf("the restore did not complete within %v (the restore timeout); last seen: %s", f.cfg.Timeout, waiting)
		}
		return 0, f.fail(ctx, er, reason)
	}
	if err := f.updateStatus(ctx, er, func(st *api.RestoreStatus) { st.Reason = waiting }); err != nil {
		return 0, err
	}
	return min(f.cfg.PollInterval, f.cfg.Timeout-elapsed+time.Millisecond), nil
}

// oldClusterUntouched tells whether the cluster the plan replaces is still there
// and not being deleted.
func (f *Flow) oldClusterUntouched(ctx context.Context, er *api.EtcdRestore, plan *Plan) (bool, error) {
	cl, err := f.cfg.Etcd.EtcdV1beta2().EtcdClusters(er.Namespace).Get(ctx, er.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get EtcdCluster %s/%s: %w", er.Namespace, er.Name, err)
	}
	return cl.UID == plan.Cluster.UID && cl.DeletionTimestamp == nil, nil
}

// handOver does the next step of the hand-over and returns what it now waits
// for; "" means the restore is complete. Every step is idempotent and found
// again from the objects themselves, so it can be interrupted anywhere:
//
//  1. delete the old EtcdCluster (foreground, UID precondition) and wait until it
//     and its pods, services and PVCs are gone, so that none of them can be
//     garbage-collected after the new cluster created its own (the original
//     raced here);
//  2. create the EtcdCluster again, same name and spec, paused, marked as this
//     restore's;
//  3. set its phase to Running, which tells etcd-operator not to bootstrap it,
//     and its record of the last disaster recovery, which the deletion lost;
//  4. create the seed pod, which fetches and restores the backup;
//  5. unpause: etcd-operator adopts the seed and grows the cluster to its size;
//  6. wait until the cluster reports all its members ready and Available.
func (f *Flow) handOver(ctx context.Context, er *api.EtcdRestore, plan *Plan, token restoreToken) (string, error) {
	clusters := f.cfg.Etcd.EtcdV1beta2().EtcdClusters(er.Namespace)
	name := er.Name
	cl, err := clusters.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		left, err := f.oldDependents(ctx, er.Namespace, name, plan.Cluster.UID)
		if err != nil {
			return "", err
		}
		if len(left) > 0 {
			return fmt.Sprintf("waiting for %s of the old EtcdCluster %s to be deleted", strings.Join(left, ", "), name), nil
		}
		if cl, err = f.createRestored(ctx, er, plan); err != nil || cl == nil {
			return fmt.Sprintf("waiting for EtcdCluster %s to be created", name), err
		}
	case err != nil:
		return "", fmt.Errorf("get EtcdCluster %s/%s: %w", er.Namespace, name, err)
	case cl.UID == plan.Cluster.UID:
		return f.deleteOld(ctx, er, cl)
	case cl.Annotations[RestoredByAnnotation] != string(er.UID):
		return "", failure.Permanent(fmt.Errorf("EtcdCluster %s (uid %s) was created by someone else while the restore replaced the old one; it is left alone", name, cl.UID))
	}

	if cl.DeletionTimestamp != nil {
		return "", failure.Permanent(fmt.Errorf("the restored EtcdCluster %s is being deleted", name))
	}
	seed, err := f.ensureSeed(ctx, er, plan, cl, token)
	if err != nil {
		return "", err
	}
	if seed != nil {
		f.cfg.Tokens.bindSeed(er, seed.Status.PodIP)
	}
	if cl.Spec.Paused && seed != nil {
		if cl, err = f.unpause(ctx, er, cl); err != nil {
			return "", err
		}
		f.event(er, corev1.EventTypeNormal, ReasonHandedOver,
			fmt.Sprintf("unpaused EtcdCluster %s: etcd-operator adopts the seed %s once it runs and grows the cluster to %d members", name, seed.Name, cl.Spec.Size))
	}
	return f.progress(cl, seed)
}

// deleteOld deletes the old cluster in the foreground, so that the garbage
// collector deletes its dependents before the cluster itself, and never a
// cluster of the same name that is not the planned one (UID precondition).
func (f *Flow) deleteOld(ctx context.Context, er *api.EtcdRestore, cl *api.EtcdCluster) (string, error) {
	if cl.DeletionTimestamp == nil {
		if err := f.keepClientService(ctx, er, cl); err != nil {
			return "", err
		}
		uid := cl.UID
		err := f.cfg.Etcd.EtcdV1beta2().EtcdClusters(cl.Namespace).Delete(ctx, cl.Name, metav1.DeleteOptions{
			Preconditions:     &metav1.Preconditions{UID: &uid},
			PropagationPolicy: new(metav1.DeletePropagationForeground),
		})
		switch {
		case err == nil:
			f.event(er, corev1.EventTypeNormal, ReasonDeletingCluster,
				fmt.Sprintf("deleting EtcdCluster %s (uid %s) and everything it owns, to re-create it from the verified backup", cl.Name, uid))
			f.logFor(er).Infof("deleting EtcdCluster %s (uid %s)", cl.Name, uid)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Gone already, or replaced: the next look sorts it out.
		default:
			return "", fmt.Errorf("delete EtcdCluster %s/%s: %w", cl.Namespace, cl.Name, err)
		}
	}
	msg := fmt.Sprintf("waiting for the old EtcdCluster %s (uid %s) and its pods, services and PVCs to be deleted", cl.Name, cl.UID)
	if extra := slices.DeleteFunc(slices.Clone(cl.Finalizers), func(s string) bool { return s == metav1.FinalizerDeleteDependents }); len(extra) > 0 {
		msg += fmt.Sprintf(" (it has finalizers %v that someone else must remove)", extra)
	}
	return msg, nil
}

// keepClientService takes the old cluster's client Service out of what its
// deletion takes with it: the restored cluster gets it (adoptClientService),
// same object, same address. A Service deleted and made again leaves its
// address routed nowhere in between, and a client that connects then is pinned
// (by the node's connection tracking) to wherever that led, for as long as the
// connection lives, even once the Service is back: on the test machine a
// gateway that answers every address took the checker's connections and failed
// their requests for minutes after the restored cluster served. A Service that
// stays refuses connections while no member is ready and routes them to the
// restored members as they become so.
func (f *Flow) keepClientService(ctx context.Context, er *api.EtcdRestore, cl *api.EtcdCluster) error {
	services := f.cfg.Kube.CoreV1().Services(cl.Namespace)
	name := k8sutil.ClientServiceName(cl.Name)
	svc, err := services.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get service %s/%s: %w", cl.Namespace, name, err)
	}
	kept := slices.DeleteFunc(slices.Clone(svc.OwnerReferences), func(r metav1.OwnerReference) bool { return r.UID == cl.UID })
	if len(kept) == len(svc.OwnerReferences) {
		return nil // not the old cluster's
	}
	svc = svc.DeepCopy()
	svc.OwnerReferences = kept
	if _, err := services.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("keep service %s/%s for the restored cluster: %w", cl.Namespace, name, err)
	}
	f.logFor(er).WithField("clusterIP", svc.Spec.ClusterIP).Infof("service %s kept for the restored cluster: the old cluster no longer owns it", name)
	return nil
}

// oldDependents lists what the old cluster owned and is still there. The garbage
// collector does not wait for them before it removes a foreground-deleted owner:
// the operator's objects carry no blockOwnerDeletion.
func (f *Flow) oldDependents(ctx context.Context, namespace, name string, uid types.UID) ([]string, error) {
	owned := func(obj metav1.Object) bool {
		ref := metav1.GetControllerOfNoCopy(obj)
		return ref != nil && ref.UID == uid
	}
	sel := metav1.ListOptions{LabelSelector: k8sutil.ClusterSelector(name).String()}
	core := f.cfg.Kube.CoreV1()
	var left []string
	pods, err := core.Pods(namespace).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list pods of %s/%s: %w", namespace, name, err)
	}
	for i := range pods.Items {
		if owned(&pods.Items[i]) {
			left = append(left, "pod "+pods.Items[i].Name)
		}
	}
	for _, svc := range []string{k8sutil.PeerServiceName(name), k8sutil.ClientServiceName(name)} {
		s, err := core.Services(namespace).Get(ctx, svc, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("get service %s/%s: %w", namespace, svc, err)
		case owned(s):
			left = append(left, "service "+svc)
		}
	}
	pvcs, err := core.PersistentVolumeClaims(namespace).List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list PVCs of %s/%s: %w", namespace, name, err)
	}
	for i := range pvcs.Items {
		if owned(&pvcs.Items[i]) {
			left = append(left, "PVC "+pvcs.Items[i].Name)
		}
	}
	return left, nil
}

// createRestored creates the cluster again from the plan, paused. It returns nil
// without error when a cluster of that name appeared meanwhile: the next look
// tells whose it is.
func (f *Flow) createRestored(ctx context.Context, er *api.EtcdRestore, plan *Plan) (*api.EtcdCluster, error) {
	annotations := maps.Clone(plan.Cluster.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[RestoredByAnnotation] = string(er.UID)
	refs := make([]metav1.OwnerReference, 0, len(plan.Cluster.OwnerReferences))
	for _, r := range plan.Cluster.OwnerReferences {
		// Setting blockOwnerDeletion needs rights on the owner that the
		// operator need not have; it only changes how the owner is deleted.
		r.BlockOwnerDeletion = nil
		refs = append(refs, r)
	}
	cl := &api.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{
			Name:            er.Name,
			Namespace:       er.Namespace,
			Labels:          maps.Clone(plan.Cluster.Labels),
			Annotations:     annotations,
			OwnerReferences: refs,
		},
		Spec: *plan.Cluster.Spec.DeepCopy(),
	}
	// Paused until the seed exists: etcd-operator must neither bootstrap an empty
	// cluster nor count the seed as dead while it is still being restored.
	cl.Spec.Paused = true
	if err := f.createClientService(ctx, er, cl, plan.Cluster.ClientIP); err != nil {
		return nil, err
	}
	out, err := f.cfg.Etcd.EtcdV1beta2().EtcdClusters(er.Namespace).Create(ctx, cl, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("create EtcdCluster %s/%s: %w", er.Namespace, er.Name, err)
	}
	f.event(er, corev1.EventTypeNormal, ReasonClusterCreated,
		fmt.Sprintf("created EtcdCluster %s (uid %s), paused, with the spec of the old one", out.Name, out.UID))
	f.logFor(er).Infof("created EtcdCluster %s (uid %s), paused", out.Name, out.UID)
	return out, nil
}
