package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// The restore's part of the safety contract (docs/design/safety.md): a restore
// either completes or leaves the cluster as it found it, and its message says
// which. It is checked over every combination of what installs made for the
// original lack (the status subresource rule, the right to create Secrets),
// rules added while a restore waits, and an operator that dies after any write
// of any of the first passes, with the real Flow against fake clientsets and
// the garbage collector's and etcd-operator's parts played by the test.

// statusMode is how the apiserver answers status writes of the operator's
// resources.
type statusMode int

const (
	// statusGranted: the CRD serves /status and the role may write it.
	statusGranted statusMode = iota
	// statusServedForbidden: the CRD serves /status (example/crd), the role
	// may not write it (the original's), and an update of the object keeps
	// the stored status.
	statusServedForbidden
	// statusInObject: the CRD serves no /status (one made by hand, or by the
	// operator under the original's role): an update of the object stores it.
	statusInObject
)

func (m statusMode) String() string {
	return [...]string{"status subresource granted", "status subresource forbidden", "status in the object"}[m]
}

// world is one run: the fixture and the apiserver's behaviour as the schedule
// has it.
type world struct {
	*fixture
	mode statusMode
	// granted: the missing rules were added.
	granted atomic.Bool
	// writesLeft counts down the writes the operator makes before it dies;
	// negative: it does not die.
	writesLeft atomic.Int64
	// violations of the contract seen by the reactors.
	violations []string
}

var errOperatorDied = errors.New("the operator died")

func newWorld(t *testing.T, mode statusMode, secretsForbidden bool, srv string) *world {
	t.Helper()
	w := &world{mode: mode}
	w.writesLeft.Store(-1)
	srvURL := srv
	w.fixture = newFixture(t, kubeObjects(), newCluster(), newRestoreAt(srvURL))
	for _, res := range []string{"etcdrestores", "etcdclusters"} {
		w.answerStatusWrites(res)
	}
	if secretsForbidden {
		w.kube.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
			if w.granted.Load() {
				return false, nil, nil
			}
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("the role grants secrets get only"))
		})
	}
	// The contract's first half, checked at the moment it matters: the old
	// cluster is deleted only under a phase Restoring that outlives the
	// operator.
	w.etcd.PrependReactor("delete", "etcdclusters", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		stored, err := w.etcd.Tracker().Get(api.SchemeGroupVersion.WithResource("etcdrestores"), testNamespace, testCluster)
		if err != nil {
			w.violations = append(w.violations, "the EtcdCluster was deleted with no EtcdRestore stored")
			return false, nil, nil
		}
		if p := StatusOf(stored.(*api.EtcdRestore)).Phase; p != api.RestorePhaseRestoring {
			w.violations = append(w.violations, fmt.Sprintf("the EtcdCluster was deleted while the stored restore's phase was %q", p))
		}
		// A foreground deletion: the object stays, marked, until the garbage
		// collector is done with its dependents (playTheOthers).
		gvr := api.SchemeGroupVersion.WithResource("etcdclusters")
		cur, err := w.etcd.Tracker().Get(gvr, testNamespace, a.(k8stesting.DeleteAction).GetName())
		if err != nil {
			return false, nil, nil
		}
		cl := cur.(*api.EtcdCluster).DeepCopy()
		if pre := a.(k8stesting.DeleteAction).GetDeleteOptions().Preconditions; pre != nil && pre.UID != nil && *pre.UID != cl.UID {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), cl.Name, errors.New("UID precondition failed"))
		}
		if cl.DeletionTimestamp == nil {
			now := metav1.Now()
			cl.DeletionTimestamp = &now
			cl.Finalizers = append(cl.Finalizers, metav1.FinalizerDeleteDependents)
		}
		return true, cl, w.etcd.Tracker().Update(gvr, cl, testNamespace)
	})
	// The operator dies: every write after the budget fails, read-only
	// calls still work (they change nothing).
	die := func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		switch a.GetVerb() {
		case "get", "list", "watch":
			return false, nil, nil
		}
		if w.writesLeft.Load() < 0 {
			return false, nil, nil
		}
		if w.writesLeft.Add(-1) < 0 {
			return true, nil, errOperatorDied
		}
		return false, nil, nil
	}
	w.etcd.PrependReactor("*", "*", die)
	w.kube.PrependReactor("*", "*", die)
	return w
}

func newRestoreAt(srvURL string) *api.EtcdRestore {
	er := newRestore(testCluster, "good.db", nil)
	er.Spec.S3.Endpoint = srvURL
	return er
}

// answerStatusWrites makes the fake answer status writes of resource as the
// mode says, until the rules are granted.
func (w *world) answerStatusWrites(resource string) {
	gvr := api.SchemeGroupVersion.WithResource(resource)
	w.etcd.PrependReactor("update", resource, func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if w.mode == statusGranted || w.mode == statusServedForbidden && w.granted.Load() {
			return false, nil, nil
		}
		u := a.(k8stesting.UpdateAction)
		if u.GetSubresource() == "status" {
			if w.mode == statusInObject {
				return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: api.GroupName, Resource: resource + "/status"}, "")
			}
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: api.GroupName, Resource: resource + "/status"}, "", nil)
		}
		if w.mode == statusInObject {
			return false, nil, nil
		}
		obj := u.GetObject().DeepCopyObject()
		meta, err := apimeta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		old, err := w.etcd.Tracker().Get(gvr, meta.GetNamespace(), meta.GetName())
		if err != nil {
			return true, nil, err
		}
		if om, _ := apimeta.Accessor(old); om.GetResourceVersion() != meta.GetResourceVersion() && resource == "etcdrestores" {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), meta.GetName(), errors.New("the object has been modified"))
		}
		switch o := obj.(type) {
		case *api.EtcdRestore:
			o.Status = *old.(*api.EtcdRestore).Status.DeepCopy()
		case *api.EtcdCluster:
			o.Status = *old.(*api.EtcdCluster).Status.DeepCopy()
		}
		w.bumpVersion(meta)
		return true, obj, w.etcd.Tracker().Update(gvr, obj, meta.GetNamespace())
	})
}

// playTheOthers does what the garbage collector and etcd-operator would do
// between two passes: the deleted cluster's dependents go, and a restored,
// unpaused cluster with its seed grows to full size. They write through the
// tracker: they are not the restore operator.
func (w *world) playTheOthers() {
	ctx := context.Background()
	cl := w.cluster()
	if cl != nil && cl.DeletionTimestamp != nil {
		_ = w.etcd.Tracker().Delete(api.SchemeGroupVersion.WithResource("etcdclusters"), testNamespace, cl.Name)
		cl = nil
	}
	if cl == nil || cl.UID != oldUID {
		for _, o := range oldDependents() {
			m := o.(metav1.Object)
			if m.GetName() == k8sutil.ClientServiceName(testCluster) {
				continue
			}
			gvr := corev1.SchemeGroupVersion.WithResource("services")
			if _, isPod := o.(*corev1.Pod); isPod {
				gvr = corev1.SchemeGroupVersion.WithResource("pods")
			}
			_ = w.kube.Tracker().Delete(gvr, testNamespace, m.GetName())
		}
	}
	if cl == nil || cl.UID == oldUID || cl.Spec.Paused {
		return
	}
	if _, err := w.kube.CoreV1().Pods(testNamespace).Get(ctx, SeedMemberName(testCluster, restoreUID), metav1.GetOptions{}); err != nil {
		return
	}
	cl.Status.Phase = api.ClusterPhaseRunning
	cl.Status.Members.Ready = []string{"example-m0", "example-m1", "example-m2"}
	cl.Status.Conditions = []api.ClusterCondition{{Type: api.ClusterConditionAvailable, Status: corev1.ConditionTrue}}
	_ = w.etcd.Tracker().Update(api.SchemeGroupVersion.WithResource("etcdclusters"), cl, testNamespace)
}

// storedRestore is the EtcdRestore as stored, with the status the flow acts on.
func (w *world) storedRestore() *api.EtcdRestore {
	obj, err := w.etcd.Tracker().Get(api.SchemeGroupVersion.WithResource("etcdrestores"), testNamespace, testCluster)
	if err != nil {
		return nil
	}
	return withKeptStatus(obj.(*api.EtcdRestore))
}

// checkEnd is the contract's second half: completed with the cluster
// restored, or failed with the old cluster as it was, saying so.
func (w *world) checkEnd() []string {
	out := w.violations
	er := w.storedRestore()
	cl := w.cluster()
	if er == nil {
		return append(out, "the EtcdRestore is gone")
	}
	st := StatusOf(er)
	switch st.Phase {
	case api.RestorePhaseCompleted:
		if cl == nil || cl.Annotations[RestoredByAnnotation] != string(restoreUID) {
			out = append(out, fmt.Sprintf("Completed, but the cluster is %v", describeCluster(cl)))
		}
	case api.RestorePhaseFailed:
		untouched := cl != nil && cl.UID == oldUID && cl.DeletionTimestamp == nil
		if strings.Contains(st.Reason, "was not touched") && !untouched {
			out = append(out, fmt.Sprintf("Failed saying the cluster was not touched, but it is %v: %s", describeCluster(cl), st.Reason))
		}
		if cl == nil {
			out = append(out, "Failed with no EtcdCluster left: "+st.Reason)
		}
		// Every schedule here can complete: a failure is a defect too.
		out = append(out, "Failed: "+st.Reason)
	default:
		out = append(out, fmt.Sprintf("not ended: phase %q, reason %q, cluster %v", st.Phase, st.Reason, describeCluster(cl)))
	}
	return out
}

func describeCluster(cl *api.EtcdCluster) string {
	if cl == nil {
		return "absent"
	}
	return fmt.Sprintf("uid %s, restored-by %q, paused %v, deleting %v", cl.UID, cl.Annotations[RestoredByAnnotation], cl.Spec.Paused, cl.DeletionTimestamp != nil)
}

func TestARestoreCompletesOrLeavesTheClusterWhateverTheRoleLacks(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	const passes = 16
	runs, failures := 0, 0
	for _, mode := range []statusMode{statusGranted, statusServedForbidden, statusInObject} {
		for _, secretsForbidden := range []bool{false, true} {
			for _, grantAt := range []int{-1, 1, 3} { // the pass before which the rules are added; -1: never
				for _, dieAt := range []int{-1, 0, 1, 2, 3} { // the pass in which the operator dies; -1: never
					for budget := range 7 { // writes made before it dies
						if dieAt < 0 && budget > 0 {
							break
						}
						name := fmt.Sprintf("%v, secrets create forbidden %v, rules added before pass %d, dies in pass %d after %d writes",
							mode, secretsForbidden, grantAt, dieAt, budget)
						runs++
						if v := runRestoreSchedule(t, mode, secretsForbidden, grantAt, dieAt, budget, passes, srv.URL); len(v) > 0 {
							failures++
							if failures <= 5 {
								t.Errorf("%s:\n  %s", name, strings.Join(v, "\n  "))
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d schedules, %d broke the contract", runs, failures)
}

func runRestoreSchedule(t *testing.T, mode statusMode, secretsForbidden bool, grantAt, dieAt, budget, passes int, srvURL string) []string {
	w := newWorld(t, mode, secretsForbidden, srvURL)
	w.flow.cfg.Log.Logger.SetOutput(discard{})
	for pass := range passes {
		if pass == grantAt {
			w.granted.Store(true)
		}
		if pass == dieAt {
			w.writesLeft.Store(int64(budget))
		}
		ctx, cancel := context.WithCancel(context.Background())
		_, _ = w.flow.Sync(ctx, testNamespace, testCluster, 0)
		cancel()
		w.writesLeft.Store(-1)
		w.playTheOthers()
		if er := w.storedRestore(); er != nil && Finished(er) && !hasFinalizer(er) {
			break
		}
	}
	return w.checkEnd()
}

func hasFinalizer(er *api.EtcdRestore) bool {
	for _, f := range er.Finalizers {
		if f == Finalizer {
			return true
		}
	}
	return false
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
