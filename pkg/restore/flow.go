package restore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	versioned "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
)

// Event reasons on EtcdRestores: Normal at each step, Warning on trouble.
const (
	ReasonValidating      = "Validating"
	ReasonVerifyingBackup = "VerifyingBackup"
	ReasonBackupVerified  = "BackupVerified"
	ReasonDeletingCluster = "DeletingCluster"
	ReasonClusterCreated  = "ClusterCreated"
	ReasonSeedCreated     = "SeedCreated"
	ReasonHandedOver      = "ClusterHandedOver"
	ReasonCompleted       = "RestoreCompleted"
	ReasonRetrying        = "RestoreRetrying"
	ReasonFailed          = "RestoreFailed"
)

// Defaults of Config.
const (
	// DefaultTimeout bounds the hand-over, from the old cluster's deletion to the
	// restored cluster available at full size, and separately the reading of the
	// backup during verification. A restore that runs out of it is Failed with
	// what it was waiting for; the restored cluster object stays, unpaused, for the
	// user to inspect. Twenty minutes leave room for a multi-GiB snapshot fetched
	// and restored on a slow volume and for members joining one at a time.
	DefaultTimeout = 20 * time.Minute
	// DefaultPollInterval is how often a restore in progress looks at the
	// cluster; each look is a few GETs.
	DefaultPollInterval = 2 * time.Second
	// DefaultMaxRetries is how often a failure that may pass (the store or the API
	// unreachable, the secret not created yet) is retried before the old cluster
	// is touched; with the controller's rate limiter that is about 40 seconds. After the
	// hand-over began, failures are retried until the timeout instead: giving up
	// then would leave the user without a cluster.
	DefaultMaxRetries = 12
)

// Config wires a Flow.
type Config struct {
	Kube     kubernetes.Interface
	Etcd     versioned.Interface
	Recorder record.EventRecorder
	Log      *logrus.Entry
	Metrics  *Metrics

	// OperatorNamespace is where the backup server's Service is.
	OperatorNamespace string
	// ClusterWide selects the EtcdRestores this operator runs by the scope
	// annotation, with etcd-operator's rule for EtcdClusters (api.IsManagedBy):
	// a cluster-wide operator runs the annotated ones of every namespace, a
	// namespaced one the others of its namespace, so two never run one restore.
	ClusterWide bool
	// FetchImage runs the seed's fetch step: the operator's own image.
	FetchImage      string
	FetchPullPolicy corev1.PullPolicy

	// Optional; zero values mean the defaults above, ServiceName, StoreOpener
	// with Kube's secrets and the real clock.
	ServiceName  string
	Timeout      time.Duration
	PollInterval time.Duration
	MaxRetries   int
	Open         OpenFunc
	Clock        clock.PassiveClock
}

// Flow runs EtcdRestores. It keeps no state of its own: everything it needs
// after a crash is in the EtcdRestore (phase and plan) and in the objects it
// created, so any replica can pick a restore up where another left it.
type Flow struct {
	cfg Config
	// restores and clusters write the statuses of EtcdRestores and, for the
	// hand-over, of EtcdClusters.
	restores *statusutil.RestoreWriter
	clusters *statusutil.ClusterWriter
}

// NewFlow fills in the defaults of cfg.
func NewFlow(cfg Config) *Flow {
	if cfg.ServiceName == "" {
		cfg.ServiceName = ServiceName
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.Open == nil {
		cfg.Open = StoreOpener(cfg.Kube.CoreV1())
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	cfg.Log = cfg.Log.WithField("pkg", "restore")
	return &Flow{
		cfg:      cfg,
		restores: statusutil.ForRestores(cfg.Etcd, cfg.Recorder, cfg.Log),
		clusters: statusutil.ForClusters(cfg.Etcd, cfg.Recorder, cfg.Log),
	}
}

// Timeout is the configured restore timeout.
func (f *Flow) Timeout() time.Duration { return f.cfg.Timeout }

// RetryError is a failure that may pass; the caller retries the restore later.
type RetryError struct{ Err error }

func (e *RetryError) Error() string { return e.Err.Error() }
func (e *RetryError) Unwrap() error { return e.Err }

// errGone: the EtcdRestore was deleted, or replaced by another of the same name.
var errGone = errors.New("the EtcdRestore is gone")

// Finished tells whether a restore has ended; an ended restore is never run again.
func Finished(er *api.EtcdRestore) bool {
	return er.Status.Phase == api.RestorePhaseCompleted || er.Status.Phase == api.RestorePhaseFailed
}

// Sync moves the restore namespace/name as far as it can now. It returns how soon
// to look again (0: only on the next change), or an error to retry with backoff;
// attempt is the number of retries of that error so far. The EtcdRestore is read
// from the API server, not from a cache: acting on a stale phase could mean
// verifying a backup against a cluster this very restore already deleted.
func (f *Flow) Sync(ctx context.Context, namespace, name string, attempt int) (time.Duration, error) {
	er, err := f.cfg.Etcd.EtcdV1beta2().EtcdRestores(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get EtcdRestore %s/%s: %w", namespace, name, err)
	}
	if !api.IsManagedBy(er, f.cfg.ClusterWide) {
		return 0, nil // the other kind of restore operator runs it
	}
	var requeue time.Duration
	switch {
	case Finished(er):
		// The finalizer is still there if the operator stopped between writing
		// the result and removing it.
		err = f.release(ctx, er)
	case er.Status.Phase == api.RestorePhaseRestoring:
		requeue, err = f.restore(ctx, er)
	case er.DeletionTimestamp != nil:
		// Deleted before anything was touched: nothing to undo.
	default:
		requeue, err = f.prepare(ctx, er, attempt)
	}
	if errors.Is(err, errGone) {
		return 0, nil
	}
	return requeue, err
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
	plan := &Plan{Cluster: recordCluster(old), Source: *er.Spec.DeepCopy(), Backup: vb, Started: *f.now()}
	if err := f.writePlan(ctx, er, plan); err != nil {
		return 0, err
	}
	if err := f.updateStatus(ctx, er, func(st *api.RestoreStatus) {
		st.Phase = api.RestorePhaseRestoring
		st.Reason = ""
	}); err != nil {
		return 0, err
	}
	return f.restore(ctx, er)
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
	vb, err := VerifySnapshot(vctx, store, loc)
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
	return 0, &RetryError{Err: err}
}

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
	elapsed := f.cfg.Clock.Since(plan.Started.Time)
	waiting, err := f.handOver(ctx, er, plan)
	var permanent bool
	switch {
	case err != nil && ctx.Err() != nil:
		return 0, ctx.Err()
	case err != nil:
		permanent = failure.IsPermanent(err)
		if !permanent && elapsed < f.cfg.Timeout {
			f.logFor(er).Warnf("hand-over step failed, will retry: %v", err)
			return 0, &RetryError{Err: err}
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
//  3. set its phase to Running, which tells etcd-operator not to bootstrap it;
//  4. create the seed pod, which fetches and restores the backup;
//  5. unpause: etcd-operator adopts the seed and grows the cluster to its size;
//  6. wait until the cluster reports all its members ready and Available.
func (f *Flow) handOver(ctx context.Context, er *api.EtcdRestore, plan *Plan) (string, error) {
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
	seed, err := f.ensureSeed(ctx, er, plan, cl)
	if err != nil {
		return "", err
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

// ensureSeed creates the seed pod (and its PVC) once the restored cluster's phase
// says Running, and records it in the plan. It returns the seed, or nil once
// etcd-operator has taken the cluster over and replaced the seed like any member.
func (f *Flow) ensureSeed(ctx context.Context, er *api.EtcdRestore, plan *Plan, cl *api.EtcdCluster) (*corev1.Pod, error) {
	seedName := SeedMemberName(cl.Name, er.UID)
	pods, err := f.cfg.Kube.CoreV1().Pods(er.Namespace).List(ctx, metav1.ListOptions{LabelSelector: k8sutil.ClusterSelector(cl.Name).String()})
	if err != nil {
		return nil, fmt.Errorf("list pods of %s/%s: %w", er.Namespace, cl.Name, err)
	}
	var seed *corev1.Pod
	var others []string
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case !k8sutil.IsOwnedBy(p, cl):
		case p.Name == seedName:
			seed = p
		default:
			others = append(others, p.Name)
		}
	}
	if seed != nil {
		return seed, f.recordSeed(ctx, er, plan, seedName)
	}
	if plan.Seed != "" && !cl.Spec.Paused {
		return nil, nil // handed over; the seed was replaced since
	}
	// Creating the seed is safe only while etcd-operator cannot have bootstrapped
	// the cluster on its own: it is paused, or its phase already says Running.
	if len(others) > 0 || !cl.Spec.Paused && cl.Status.Phase != api.ClusterPhaseRunning {
		return nil, failure.Permanent(fmt.Errorf("EtcdCluster %s was unpaused before the restore created its seed (phase %q, member pods %v): it does not hold the backup's data",
			cl.Name, cl.Status.Phase, others))
	}
	if cl.Status.Phase == api.ClusterPhaseNone {
		if err := f.setPhaseRunning(ctx, cl); err != nil {
			return nil, err
		}
	}
	defaulted := cl.WithDefaults()
	// The seed's DNS check must not look its name up before the headless service
	// exists: CoreDNS caches that first NXDOMAIN for the zone TTL (30 s on kubeadm
	// clusters), and etcd-operator's first pass over the new cluster may come after
	// the seed. The service is the one etcd-operator would create, owned by the
	// restored cluster, so it adopts it as its own.
	peer := k8sutil.NewPeerService(defaulted)
	if _, err := f.cfg.Kube.CoreV1().Services(er.Namespace).Create(ctx, peer, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service %s/%s for the seed: %w", er.Namespace, peer.Name, err)
	}
	if pvc := k8sutil.NewEtcdPVC(defaulted, seedName, defaulted.Spec.Version); pvc != nil {
		if _, err := f.cfg.Kube.CoreV1().PersistentVolumeClaims(er.Namespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create PVC %s/%s of the seed: %w", er.Namespace, seedName, err)
		}
	}
	pod := NewSeedPod(SeedConfig{
		Cluster:         cl,
		RestoreName:     er.Name,
		MemberName:      seedName,
		BackupURL:       BackupURL(f.cfg.ServiceName, f.cfg.OperatorNamespace, defaulted.Spec.Pod.ClusterDomain, er.Namespace, er.Name),
		Backup:          plan.Backup,
		FetchImage:      f.cfg.FetchImage,
		FetchPullPolicy: f.cfg.FetchPullPolicy,
		FetchTimeout:    f.cfg.Timeout,
	})
	seed, err = f.cfg.Kube.CoreV1().Pods(er.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		seed, err = f.cfg.Kube.CoreV1().Pods(er.Namespace).Get(ctx, seedName, metav1.GetOptions{})
	} else if err == nil {
		f.event(er, corev1.EventTypeNormal, ReasonSeedCreated,
			fmt.Sprintf("created seed pod %s: it fetches backup %s and restores it before etcd starts", seedName, plan.Backup.Path))
		f.logFor(er).Infof("created seed pod %s", seedName)
	}
	if err != nil {
		return nil, fmt.Errorf("create seed pod %s/%s: %w", er.Namespace, seedName, err)
	}
	return seed, f.recordSeed(ctx, er, plan, seedName)
}

// recordSeed writes the seed's name into the plan, once.
func (f *Flow) recordSeed(ctx context.Context, er *api.EtcdRestore, plan *Plan, name string) error {
	if plan.Seed == name {
		return nil
	}
	plan.Seed = name
	return f.writePlan(ctx, er, plan)
}

// setPhaseRunning writes phase Running through the status subresource: the
// hand-over signal of pkg/cluster (see adoptPhase there), which then never
// bootstraps the cluster itself. Only the phase is changed, whatever
// etcd-operator has written meanwhile.
func (f *Flow) setPhaseRunning(ctx context.Context, cl *api.EtcdCluster) error {
	_, err := f.clusters.Change(ctx, cl.Namespace, cl.Name, cl.UID, func(st *api.ClusterStatus) {
		if st.Phase == api.ClusterPhaseNone {
			st.Phase = api.ClusterPhaseRunning
		}
	})
	if err != nil {
		return fmt.Errorf("set the phase of EtcdCluster %s/%s to Running: %w", cl.Namespace, cl.Name, err)
	}
	return nil
}

// unpause hands the cluster over to etcd-operator.
func (f *Flow) unpause(ctx context.Context, er *api.EtcdRestore, cl *api.EtcdCluster) (*api.EtcdCluster, error) {
	clusters := f.cfg.Etcd.EtcdV1beta2().EtcdClusters(cl.Namespace)
	out := cl
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := clusters.Get(ctx, cl.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != cl.UID || !cur.Spec.Paused {
			out = cur
			return nil
		}
		cur.Spec.Paused = false
		out, err = clusters.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("unpause EtcdCluster %s/%s: %w", cl.Namespace, cl.Name, err)
	}
	f.logFor(er).Infof("unpaused EtcdCluster %s", cl.Name)
	return out, nil
}

// progress tells whether the restored cluster is complete, a seed that cannot
// work any more (a permanent error), or what is still awaited.
func (f *Flow) progress(cl *api.EtcdCluster, seed *corev1.Pod) (string, error) {
	ready := len(cl.Status.Members.Ready)
	available := false
	for _, c := range cl.Status.Conditions {
		if c.Type == api.ClusterConditionAvailable && c.Status == corev1.ConditionTrue {
			available = true
		}
	}
	if ready == cl.Spec.Size && available {
		return "", nil
	}
	if seed == nil {
		return fmt.Sprintf("waiting for etcd-operator to grow the restored cluster: %d of %d members ready, Available %v", ready, cl.Spec.Size, available), nil
	}
	if msg := seedFailure(seed); msg != "" && ready == 0 {
		return "", failure.Permanent(fmt.Errorf("seed pod %s failed: %s", seed.Name, msg))
	}
	if seed.Status.Phase == corev1.PodPending || seed.Status.Phase == "" {
		return fmt.Sprintf("waiting for seed pod %s to restore the backup and start: %s", seed.Name, describePending(seed)), nil
	}
	return fmt.Sprintf("waiting for etcd-operator to grow the restored cluster: %d of %d members ready, Available %v", ready, cl.Spec.Size, available), nil
}

// seedFailure says why the seed pod ended, if it did.
func seedFailure(p *corev1.Pod) string {
	if p.Status.Phase != corev1.PodFailed {
		return ""
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			msg := strings.TrimSpace(t.Message)
			if msg == "" {
				msg = t.Reason
			}
			return fmt.Sprintf("container %s exited with code %d: %s", cs.Name, t.ExitCode, msg)
		}
	}
	if p.Status.Message != "" {
		return p.Status.Message
	}
	return "the pod failed (" + p.Status.Reason + ")"
}

// describePending says which step a pending seed is at.
func describePending(p *corev1.Pod) string {
	for _, cs := range p.Status.InitContainerStatuses {
		switch {
		case cs.State.Running != nil:
			return "init container " + cs.Name + " running"
		case cs.State.Waiting != nil:
			w := cs.State.Waiting
			if w.Message != "" {
				return fmt.Sprintf("init container %s waiting (%s: %s)", cs.Name, w.Reason, w.Message)
			}
			return fmt.Sprintf("init container %s waiting (%s)", cs.Name, w.Reason)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return "not scheduled: " + c.Message
		}
	}
	return "pending"
}

// complete records success: the cluster is back at full size.
func (f *Flow) complete(ctx context.Context, er *api.EtcdRestore, plan *Plan) error {
	if er.Status.Phase != api.RestorePhaseCompleted {
		msg := fmt.Sprintf("EtcdCluster %s restored from backup %s: all %d members ready", er.Name, plan.Backup.Path, plan.Cluster.Spec.Size)
		f.logFor(er).Info(msg)
		f.event(er, corev1.EventTypeNormal, ReasonCompleted, msg)
		f.cfg.Metrics.finished(er.Spec.BackupStorageType, false, f.secondsSince(er.Status.StartTime))
	}
	err := f.updateStatus(ctx, er, func(st *api.RestoreStatus) {
		st.Phase = api.RestorePhaseCompleted
		st.Succeeded = true
		st.Reason = ""
		st.CompletionTime = f.now()
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

// writePlan stores the plan and the finalizer on the EtcdRestore.
func (f *Flow) writePlan(ctx context.Context, er *api.EtcdRestore, plan *Plan) error {
	raw, err := plan.encode()
	if err != nil {
		return err
	}
	return f.updateMeta(ctx, er, func(m *metav1.ObjectMeta) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[PlanAnnotation] = raw
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

// updateStatus writes change into er's status through the status subresource,
// when it changes anything, and on success leaves the stored object in er.
//
// The write carries the resourceVersion the sync read, never a fresh one: every
// decision of a sync rests on that read, so if anyone changed the restore since
// (another operator running it too, a user), the write must fail rather than
// overwrite what it did not see. Two cluster-wide operators on one restore
// showed why: the slower one, still checking the backup, found the cluster gone
// (deleted by the other's hand-over) and wrote Failed over Restoring, which
// would have left the cluster deleted and never re-created. A conflict is retried
// from a fresh read instead.
func (f *Flow) updateStatus(ctx context.Context, er *api.EtcdRestore, change func(*api.RestoreStatus)) error {
	st := er.Status.DeepCopy()
	change(st)
	if equality.Semantic.DeepEqual(*st, er.Status) {
		return nil
	}
	upd := er.DeepCopy()
	upd.Status = *st
	out, err := f.restores.Write(ctx, upd)
	return f.written(er, out, err, "update status of")
}

// written takes the result of a write of er: the new object on success, errGone
// or a RetryError when the restore went or changed meanwhile.
func (f *Flow) written(er, out *api.EtcdRestore, err error, verb string) error {
	switch {
	case err == nil:
		*er = *out
		return nil
	case apierrors.IsNotFound(err):
		return errGone
	case apierrors.IsConflict(err):
		return &RetryError{Err: fmt.Errorf("EtcdRestore %s/%s changed while it was processed; starting again from its new state: %w", er.Namespace, er.Name, err)}
	}
	return fmt.Errorf("%s EtcdRestore %s/%s: %w", verb, er.Namespace, er.Name, err)
}

// event records an event on the EtcdRestore; the kind is set on a copy so the
// recorder can build the reference whatever scheme it has.
func (f *Flow) event(er *api.EtcdRestore, eventType, reason, msg string) {
	if f.cfg.Recorder == nil {
		return
	}
	obj := er.DeepCopy()
	obj.APIVersion = api.SchemeGroupVersion.String()
	obj.Kind = api.EtcdRestoreResourceKind
	f.cfg.Recorder.Event(obj, eventType, reason, msg)
}

func (f *Flow) now() *metav1.Time {
	t := metav1.NewTime(f.cfg.Clock.Now().Truncate(time.Second))
	return &t
}

func (f *Flow) secondsSince(t *metav1.Time) float64 {
	if t == nil {
		return -1
	}
	return f.cfg.Clock.Since(t.Time).Seconds()
}

func (f *Flow) logFor(er *api.EtcdRestore) *logrus.Entry {
	return f.cfg.Log.WithFields(logrus.Fields{"restore-name": er.Name, "restore-namespace": er.Namespace})
}
