package restore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// Restores under the roles made for the original, which grant Secrets get
// only and no status subresource: each permission it lacks has a way around
// that keeps the restore's guarantees.

// runToTheEnd passes over the restore, playing the others between passes,
// until it ended and let go of its finalizer.
func (w *world) runToTheEnd(t *testing.T) *api.EtcdRestore {
	t.Helper()
	for range 20 {
		_, _ = w.flow.Sync(context.Background(), testNamespace, testCluster, 0)
		w.playTheOthers()
		if er := w.storedRestore(); er != nil && Finished(er) && !hasFinalizer(er) {
			return er
		}
	}
	t.Fatalf("the restore did not end: %+v", w.storedRestore())
	return nil
}

func TestWithoutTheRightToCreateSecretsTheSeedGetsTheTokenFromTheRestore(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	w := newWorld(t, statusGranted, true, srv.URL)
	ctx := context.Background()
	seedName := SeedMemberName(testCluster, restoreUID)
	var seed *corev1.Pod
	for range 10 {
		w.mustSync(testCluster)
		if p, err := w.kube.CoreV1().Pods(testNamespace).Get(ctx, seedName, metav1.GetOptions{}); err == nil {
			seed = p
			break
		}
		w.playTheOthers()
	}
	if seed == nil {
		t.Fatalf("no seed pod; restore %+v", w.storedRestore().Status)
	}
	er := w.storedRestore()
	token := er.Annotations[TokenAnnotation]
	if len(token) != 2*tokenBytes {
		t.Fatalf("annotation %s = %q, want the restore's token", TokenAnnotation, token)
	}
	if _, err := verifiedPlan(er, []byte(token)); err != nil {
		t.Fatalf("the plan is not signed with the kept token: %v", err)
	}
	if !w.events.has(corev1.EventTypeWarning, ReasonTokenOnRestore) {
		t.Errorf("no Warning %s saying where the token is and the rule to add; events %v", ReasonTokenOnRestore, w.events.list())
	}
	fetch := seed.Spec.InitContainers[1]
	if !slices.Contains(fetch.Env, corev1.EnvVar{Name: TokenEnv, Value: token}) {
		t.Errorf("the fetch step's environment %v does not hold the token", fetch.Env)
	}
	for _, v := range seed.Spec.Volumes {
		if v.Name == tokenVolume {
			t.Errorf("the seed mounts a token Secret that cannot exist: %+v", v)
		}
	}
	// The backup server serves the token only to the seed's address, once
	// the flow has seen it.
	if _, _, ok := w.flow.cfg.Tokens.check(testNamespace, testCluster, token, "10.1.2.3"); ok {
		t.Error("a token kept on the restore was served before the seed's address was known")
	}
	seed.Status.PodIP = "10.1.2.3"
	if err := w.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), seed, testNamespace); err != nil {
		t.Fatal(err)
	}
	w.mustSync(testCluster)
	if _, _, ok := w.flow.cfg.Tokens.check(testNamespace, testCluster, token, "10.1.2.3"); !ok {
		t.Error("the seed's own address was refused")
	}
	if _, _, ok := w.flow.cfg.Tokens.check(testNamespace, testCluster, token, "10.1.2.4"); ok {
		t.Error("another address was served the backup with the seed's token")
	}
	if er := w.runToTheEnd(t); StatusOf(er).Phase != api.RestorePhaseCompleted {
		t.Fatalf("restore ended %+v", StatusOf(er))
	}
}

func TestWithoutTheStatusSubresourceTheRestoreKeepsItsProgressOnItself(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	w := newWorld(t, statusServedForbidden, false, srv.URL)
	w.mustSync(testCluster)
	er := w.storedRestore()
	stored, err := w.etcd.EtcdV1beta2().EtcdRestores(testNamespace).Get(context.Background(), testCluster, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status.Phase != "" {
		t.Fatalf("stored phase %q: the fake stores status it should drop", stored.Status.Phase)
	}
	if p := StatusOf(er).Phase; p != api.RestorePhaseRestoring {
		t.Fatalf("the phase kept in %s is %q, want Restoring once the old cluster is being deleted", StatusAnnotation, p)
	}
	end := w.runToTheEnd(t)
	if st := StatusOf(end); st.Phase != api.RestorePhaseCompleted || !st.Succeeded {
		t.Fatalf("restore ended %+v", st)
	}
	// Ended for the controller too, which reads the informer's copy: never
	// run again.
	if !Finished(end) {
		t.Error("a restore completed in its annotation is not Finished")
	}

	// The rule added: the next status write stores the status, and the kept
	// copy goes.
	w.granted.Store(true)
	cur, err := w.etcd.EtcdV1beta2().EtcdRestores(testNamespace).Get(context.Background(), testCluster, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur = withKeptStatus(cur)
	if err := w.flow.updateStatus(context.Background(), cur, func(st *api.RestoreStatus) { st.Reason = "noted" }); err != nil {
		t.Fatal(err)
	}
	after := w.restore(testCluster)
	if after.Status.Phase != api.RestorePhaseCompleted || after.Status.Reason != "noted" {
		t.Errorf("stored status %+v, want the kept one written through the subresource", after.Status)
	}
	if _, kept := after.Annotations[StatusAnnotation]; kept {
		t.Errorf("annotation %s stayed once the status was stored", StatusAnnotation)
	}
}

func TestAFailureToWriteThePlanIsToldOnTheRestore(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	w := newWorld(t, statusGranted, false, srv.URL)
	w.kube.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd is slow today"))
	})
	if _, err := w.sync(testCluster, 0); err == nil {
		t.Fatal("a pass whose plan could not be written succeeded")
	}
	if r := w.restore(testCluster).Status.Reason; !strings.Contains(r, "etcd is slow today") {
		t.Errorf("status.reason %q does not say why the restore waits", r)
	}
	if !w.events.has(corev1.EventTypeWarning, ReasonRetrying) {
		t.Errorf("no Warning %s; events %v", ReasonRetrying, w.events.list())
	}
	w.expectOldClusterKept()
}

// expectOldClusterKept checks that the old cluster is still there, untouched.
func (w *world) expectOldClusterKept() {
	w.t.Helper()
	if cl := w.cluster(); cl == nil || cl.UID != oldUID || cl.DeletionTimestamp != nil {
		w.t.Fatalf("the old EtcdCluster is %s", describeCluster(cl))
	}
}
