package restore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// kubeObjects are the secret and the old cluster's dependents.
func kubeObjects() []k8sruntime.Object {
	return append([]k8sruntime.Object{awsSecretObject()}, oldDependents()...)
}

// The whole restore, step by step, with etcd-operator's and the garbage
// collector's parts played by the test.
func TestRestoreHappyPath(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	recorded := &api.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: testNamespace},
		Status: api.BackupStatus{Succeeded: true, BackupPath: testBucket + "/good.db",
			BackupSize: int64(len(snapshot)), SHA256: sha256Hex(snapshot)},
	}
	f := newFixture(t, kubeObjects(), newCluster(), newRestore(testCluster, "good.db", srv), recorded)

	// 1. Verified, planned, old cluster deleted in the foreground; its dependents
	// are still there, so nothing is created yet.
	if d := f.mustSync(testCluster); d <= 0 {
		t.Fatalf("a restore in progress must be looked at again, got requeue %v", d)
	}
	er := f.restore(testCluster)
	if er.Status.Phase != api.RestorePhaseRestoring || er.Status.Succeeded || er.Status.StartTime == nil {
		t.Fatalf("status after the first pass: %+v", er.Status)
	}
	plan, ok, err := PlanOf(er)
	if !ok || err != nil {
		t.Fatalf("no plan: %v", err)
	}
	if plan.Cluster.UID != oldUID || plan.Backup.Size != int64(len(snapshot)) || plan.Backup.SHA256 != sha256Hex(snapshot) || plan.Backup.RecordedBy != "nightly" {
		t.Fatalf("plan %+v", plan)
	}
	if !slices.Contains(er.Finalizers, Finalizer) {
		t.Fatalf("finalizers %v: the restore could be deleted with its plan mid-way", er.Finalizers)
	}
	// The plan is signed with a random token in a Secret the restore owns.
	token, err := readToken(context.Background(), f.kube.CoreV1(), er)
	if err != nil || len(token) != 2*tokenBytes {
		t.Fatalf("the restore's token: %q, %v", token, err)
	}
	if _, err := verifiedPlan(er, token); err != nil {
		t.Fatalf("the plan as written does not verify: %v", err)
	}
	// The backup server knows the token, to serve the seed without asking the API first.
	if uid, _, ok := f.flow.cfg.Tokens.check(testNamespace, testCluster, string(token), ""); !ok || uid != restoreUID {
		t.Fatalf("the backup server does not know the token of the restore in progress (%v, uid %q)", ok, uid)
	}
	if f.cluster() != nil {
		t.Fatal("the old EtcdCluster was not deleted")
	}
	var deleted bool
	for _, a := range f.etcd.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "etcdclusters" {
			opts := d.GetDeleteOptions()
			if opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationForeground {
				t.Errorf("delete propagation %v, want Foreground", opts.PropagationPolicy)
			}
			if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != oldUID {
				t.Errorf("delete preconditions %+v, want the old cluster's UID", opts.Preconditions)
			}
			deleted = true
		}
	}
	if !deleted {
		t.Fatal("no delete of the EtcdCluster")
	}
	for _, r := range []string{ReasonValidating, ReasonVerifyingBackup, ReasonBackupVerified, ReasonDeletingCluster} {
		if !f.events.has(corev1.EventTypeNormal, r) {
			t.Errorf("no Normal event %s; events: %v", r, f.events.list())
		}
	}

	// 2. While the old services and pods remain, the new cluster is not created:
	// they would be garbage-collected after it created its own.
	f.mustSync(testCluster)
	if f.cluster() != nil {
		t.Fatal("the cluster was re-created while the old one's dependents still existed")
	}
	if r := f.restore(testCluster).Status.Reason; !strings.Contains(r, "service example ") || !strings.Contains(r, "pod example-aaaaaaaaaa") {
		t.Errorf("status.reason %q does not say what is awaited", r)
	}
	// The client Service is not among them: it stays for the restored cluster.
	if r := f.restore(testCluster).Status.Reason; strings.Contains(r, "example-client") {
		t.Errorf("status.reason %q: the restore waits for the client Service to go", r)
	}

	// 3. The garbage collector is done: re-create paused, phase Running, seed, unpause.
	for _, o := range oldDependents() {
		m := o.(metav1.Object)
		var err error
		if m.GetName() == k8sutil.ClientServiceName(testCluster) {
			continue // the old cluster no longer owns it
		}
		if _, isPod := o.(*corev1.Pod); isPod {
			err = f.kube.CoreV1().Pods(testNamespace).Delete(context.Background(), m.GetName(), metav1.DeleteOptions{})
		} else {
			err = f.kube.CoreV1().Services(testNamespace).Delete(context.Background(), m.GetName(), metav1.DeleteOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	before := len(f.writesTo("etcdclusters", "services", "pods"))
	f.mustSync(testCluster)
	want := []string{"create etcdclusters", "update etcdclusters/status", "create services", "update services", "create pods", "update etcdclusters"}
	if got := f.writesTo("etcdclusters", "services", "pods")[before:]; !slices.Equal(got, want) {
		t.Fatalf("writes %v, want %v: created paused, phase Running before the seed (or etcd-operator bootstraps an empty cluster), "+
			"the peer service made and the kept client service given to the cluster before the seed (or its DNS check caches a miss), unpaused after it", got, want)
	}
	if _, err := f.kube.CoreV1().Services(testNamespace).Get(context.Background(), testCluster, metav1.GetOptions{}); err != nil {
		t.Fatalf("no peer service for the seed: %v", err)
	}
	cl := f.cluster()
	old := newCluster()
	if cl.UID == oldUID || cl.Annotations[RestoredByAnnotation] != string(restoreUID) || cl.Annotations["note"] != "keep me" || cl.Labels["team"] != "storage" {
		t.Errorf("restored cluster metadata %+v", cl.ObjectMeta)
	}
	if cl.Spec.Paused || cl.Spec.Size != old.Spec.Size || cl.Spec.Version != old.Spec.Version {
		t.Errorf("restored cluster spec %+v, want the old spec, unpaused", cl.Spec)
	}
	if cl.Status.Phase != api.ClusterPhaseRunning {
		t.Errorf("restored cluster phase %q, want Running (etcd-operator must not bootstrap it)", cl.Status.Phase)
	}
	seed, err := f.kube.CoreV1().Pods(testNamespace).Get(context.Background(), SeedMemberName(testCluster, restoreUID), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no seed pod: %v", err)
	}
	if !k8sutil.IsOwnedBy(seed, cl) {
		t.Errorf("seed owners %v, want the restored cluster %s", seed.OwnerReferences, cl.UID)
	}
	fetch := strings.Join(seed.Spec.InitContainers[1].Command, " ")
	if !strings.Contains(fetch, fmt.Sprintf("--size=%d", len(snapshot))) || !strings.Contains(fetch, "--sha256="+sha256Hex(snapshot)) {
		t.Errorf("fetch step %q does not check the verified size and sha256", fetch)
	}
	for _, r := range []string{ReasonClusterCreated, ReasonSeedCreated, ReasonHandedOver} {
		if !f.events.has(corev1.EventTypeNormal, r) {
			t.Errorf("no Normal event %s", r)
		}
	}

	// 4. Not succeeded until the cluster is Available with all its members ready.
	f.setClusterStatus(1, true)
	f.mustSync(testCluster)
	if st := f.restore(testCluster).Status; st.Succeeded || st.Phase != api.RestorePhaseRestoring {
		t.Fatalf("status with 1 of 3 members ready: %+v", st)
	}
	f.setClusterStatus(3, false)
	f.mustSync(testCluster)
	if st := f.restore(testCluster).Status; st.Succeeded {
		t.Fatalf("succeeded while the cluster is not Available: %+v", st)
	}
	f.setClusterStatus(3, true)
	if d := f.mustSync(testCluster); d != 0 {
		t.Errorf("a completed restore asked to be looked at again in %v", d)
	}
	er = f.restore(testCluster)
	if st := er.Status; !st.Succeeded || st.Phase != api.RestorePhaseCompleted || st.CompletionTime == nil || st.Reason != "" {
		t.Fatalf("final status %+v", st)
	}
	if slices.Contains(er.Finalizers, Finalizer) {
		t.Error("the finalizer stayed after completion")
	}
	if !f.events.has(corev1.EventTypeNormal, ReasonCompleted) {
		t.Error("no RestoreCompleted event")
	}
	if _, _, ok := f.flow.cfg.Tokens.check(testNamespace, testCluster, string(token), ""); ok {
		t.Error("the backup server still knows the token of the completed restore")
	}
	if n := f.metric("etcd_restore_operator_restores_total", map[string]string{"storage_type": "S3"}); n != 1 {
		t.Errorf("restores_total = %v, want 1", n)
	}
	if n := f.metric("etcd_restore_operator_restore_duration_seconds", map[string]string{"result": "completed"}); n != 1 {
		t.Errorf("restore_duration_seconds count = %v, want 1", n)
	}

	// 5. A finished restore is never run again.
	f.etcd.ClearActions()
	f.kube.ClearActions()
	f.mustSync(testCluster)
	for _, a := range f.etcd.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("a completed restore did %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if len(f.kube.Actions()) > 0 {
		t.Errorf("a completed restore touched Kubernetes objects: %v", f.kube.Actions())
	}
}

// Every failure before the hand-over ends the restore with a clear reason and a
// Warning event, and leaves the cluster exactly as it was.
func TestRefusedRestoresLeaveTheClusterAlone(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	putObject(t, store, "truncated.db", snapshot[:len(snapshot)-100])
	corrupt := slices.Clone(snapshot)
	corrupt[len(corrupt)/2] ^= 0xff
	putObject(t, store, "corrupt.db", corrupt)
	putObject(t, store, "tiny.db", []byte("not a snapshot"))
	// A different snapshot of the same length: intact in itself, not the one recorded.
	other := slices.Clone(snapshot)
	other[100] ^= 0xff
	otherBody := other[:len(other)-sha256.Size]
	sum := sha256.Sum256(otherBody)
	other = append(slices.Clone(otherBody), sum[:]...)
	putObject(t, store, "replaced.db", other)

	recordedAs := func(key string, size int64, sum string) *api.EtcdBackup {
		return &api.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Name: "b-" + key, Namespace: testNamespace},
			Status:     api.BackupStatus{Succeeded: true, BackupPath: testBucket + "/" + key, BackupSize: size, SHA256: sum},
		}
	}
	tests := []struct {
		name    string
		restore func() *api.EtcdRestore
		extra   []k8sruntime.Object
		noKube  bool // no secret
		attempt int
		want    string
	}{
		{name: "missing object", restore: func() *api.EtcdRestore { return newRestore(testCluster, "missing.db", srv) },
			want: "backups/missing.db does not exist"},
		{name: "truncated snapshot", restore: func() *api.EtcdRestore { return newRestore(testCluster, "truncated.db", srv) },
			want: "not an intact etcd snapshot: its trailing sha256 does not match"},
		{name: "corrupt snapshot", restore: func() *api.EtcdRestore { return newRestore(testCluster, "corrupt.db", srv) },
			want: "not an intact etcd snapshot"},
		{name: "object shorter than a trailer", restore: func() *api.EtcdRestore { return newRestore(testCluster, "tiny.db", srv) },
			want: "shorter than the 32-byte sha256 trailer"},
		{name: "size differs from the EtcdBackup's record", restore: func() *api.EtcdRestore { return newRestore(testCluster, "good.db", srv) },
			extra: []k8sruntime.Object{recordedAs("good.db", int64(len(snapshot))+1, sha256Hex(snapshot))},
			want:  "does not match what EtcdBackup b-good.db recorded"},
		{name: "sha256 differs from the EtcdBackup's record", restore: func() *api.EtcdRestore { return newRestore(testCluster, "replaced.db", srv) },
			extra: []k8sruntime.Object{recordedAs("replaced.db", int64(len(snapshot)), sha256Hex(snapshot))},
			want:  "it was overwritten or damaged since"},
		{name: "name differs from the cluster's", restore: func() *api.EtcdRestore {
			er := newRestore("other", "good.db", srv)
			return er
		}, want: `must equal the EtcdRestore's name "other"`},
		{name: "missing cluster", restore: func() *api.EtcdRestore {
			er := newRestore("ghost", "good.db", srv)
			er.Spec.EtcdCluster.Name = "ghost"
			return er
		}, want: "EtcdCluster ns/ghost does not exist"},
		{name: "ABS without an abs block", restore: func() *api.EtcdRestore {
			er := newRestore(testCluster, "good.db", srv)
			er.Spec.BackupStorageType = api.BackupStorageTypeABS
			return er
		}, want: "spec.abs: Required value"},
		{name: "GCS without a gcs block", restore: func() *api.EtcdRestore {
			er := newRestore(testCluster, "good.db", srv)
			er.Spec.BackupStorageType = api.BackupStorageTypeGCS
			return er
		}, want: "spec.gcs: Required value"},
		{name: "path without a key", restore: func() *api.EtcdRestore {
			er := newRestore(testCluster, "", srv)
			er.Spec.S3.Path = testBucket
			return er
		}, want: `spec.s3.path: Invalid value: "backups"`},
		{name: "S3 without an s3 block", restore: func() *api.EtcdRestore {
			er := newRestore(testCluster, "good.db", srv)
			er.Spec.S3 = nil
			return er
		}, want: "spec.s3: Required value"},
		{name: "the operator's cloud identity asked for where it is not lent", restore: func() *api.EtcdRestore {
			er := newRestore(testCluster, "good.db", srv)
			er.Spec.S3.AWSSecret, er.Spec.S3.CredentialSource = "", api.CredentialSourceOperatorServiceAccount
			return er
		}, want: "spec.s3.credentialSource OperatorServiceAccount: the operator does not lend its cloud identity to namespace ns"},
		{name: "missing secret, after the last retry", restore: func() *api.EtcdRestore { return newRestore(testCluster, "good.db", srv) },
			noKube: true, attempt: 3, want: "secret ns/aws (spec.s3.awsSecret) not found (gave up after 4 attempts)"},
		{name: "unreachable store, after the last retry", restore: func() *api.EtcdRestore { return newRestore(testCluster, "good.db", nil) },
			attempt: 3, want: "(gave up after 4 attempts)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			er := tc.restore()
			etcdObjs := append([]k8sruntime.Object{newCluster(), er}, tc.extra...)
			kube := kubeObjects()
			if tc.noKube {
				kube = oldDependents()
			}
			f := newFixture(t, kube, etcdObjs...)
			d, err := f.sync(er.Name, tc.attempt)
			if err != nil || d != 0 {
				t.Fatalf("sync = %v, %v; a refused restore is final", d, err)
			}
			st := f.restore(er.Name).Status
			if st.Phase != api.RestorePhaseFailed || st.Succeeded || st.CompletionTime == nil {
				t.Fatalf("status %+v, want Failed", st)
			}
			if !strings.Contains(st.Reason, tc.want) {
				t.Errorf("reason %q does not contain %q", st.Reason, tc.want)
			}
			if !strings.Contains(st.Reason, "was not touched") {
				t.Errorf("reason %q does not say the cluster was left alone", st.Reason)
			}
			if !f.events.has(corev1.EventTypeWarning, ReasonFailed) {
				t.Errorf("no Warning %s event: %v", ReasonFailed, f.events.list())
			}
			f.expectUntouched()
			if n := f.metric("etcd_restore_operator_restores_failed_total", map[string]string{"storage_type": string(er.Spec.BackupStorageType)}); n != 1 {
				t.Errorf("restores_failed_total = %v, want 1", n)
			}
			// Failed is final: another pass does nothing.
			f.etcd.ClearActions()
			f.mustSync(er.Name)
			for _, a := range f.etcd.Actions() {
				if a.GetVerb() != "get" {
					t.Errorf("a failed restore did %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
		})
	}
}

// A failure that may pass is retried, reported as it happens, and changes nothing.
func TestMissingSecretIsRetriedFirst(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	f := newFixture(t, oldDependents(), newCluster(), newRestore(testCluster, "good.db", srv))
	_, err := f.sync(testCluster, 0)
	if !failure.IsRetry(err) {
		t.Fatalf("sync error %v, want one marked failure.Retry", err)
	}
	st := f.restore(testCluster).Status
	if st.Phase != api.RestorePhaseValidating || !strings.Contains(st.Reason, "secret ns/aws (spec.s3.awsSecret) not found") {
		t.Fatalf("status %+v", st)
	}
	if !f.events.has(corev1.EventTypeWarning, ReasonRetrying) {
		t.Errorf("no Warning %s event", ReasonRetrying)
	}
	f.expectUntouched()

	// The secret appears: the next attempt goes through.
	if _, err := f.kube.CoreV1().Secrets(testNamespace).Create(context.Background(), awsSecretObject(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sync(testCluster, 1); err != nil {
		t.Fatal(err)
	}
	if st := f.restore(testCluster).Status; st.Phase != api.RestorePhaseRestoring {
		t.Fatalf("status %+v after the secret appeared", st)
	}
}

// startHandOver runs a restore up to the seed and unpause, with the garbage
// collector done at once.
func startHandOver(t *testing.T) (*fixture, *corev1.Pod) {
	t.Helper()
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	f := newFixture(t, []k8sruntime.Object{awsSecretObject()}, newCluster(), newRestore(testCluster, "good.db", srv))
	f.mustSync(testCluster) // verify, plan, delete
	f.mustSync(testCluster) // re-create, seed, unpause
	seed, err := f.kube.CoreV1().Pods(testNamespace).Get(context.Background(), SeedMemberName(testCluster, restoreUID), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no seed: %v", err)
	}
	return f, seed
}

func TestFailedSeedFailsTheRestoreAndLeavesTheClusterUnpaused(t *testing.T) {
	f, seed := startHandOver(t)
	seed.Status = corev1.PodStatus{
		Phase: corev1.PodFailed,
		InitContainerStatuses: []corev1.ContainerStatus{
			{Name: k8sutil.DNSCheckContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
			{Name: FetchContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, Message: "the downloaded backup has sha256 00ff, but the verified backup has abcd"}}},
		},
	}
	if _, err := f.kube.CoreV1().Pods(testNamespace).UpdateStatus(context.Background(), seed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := f.mustSync(testCluster); d != 0 {
		t.Fatalf("requeue %v after a final failure", d)
	}
	st := f.restore(testCluster).Status
	want := "seed pod " + seed.Name + " failed: container fetch-backup exited with code 1: the downloaded backup has sha256 00ff"
	if st.Phase != api.RestorePhaseFailed || !strings.Contains(st.Reason, want) {
		t.Fatalf("status %+v, want Failed with %q", st, want)
	}
	if cl := f.cluster(); cl == nil || cl.Spec.Paused {
		t.Fatalf("the restored cluster must stay, unpaused, for inspection: %+v", cl)
	}
	if slices.Contains(f.restore(testCluster).Finalizers, Finalizer) {
		t.Error("the finalizer stayed after the failure")
	}
}

func TestSeedThatNeverBecomesReadyTimesOut(t *testing.T) {
	f, _ := startHandOver(t)
	f.clock.Step(f.flow.Timeout() - time.Second)
	f.mustSync(testCluster)
	if st := f.restore(testCluster).Status; st.Phase != api.RestorePhaseRestoring || !strings.Contains(st.Reason, "waiting for seed pod") {
		t.Fatalf("status %+v before the timeout", st)
	}
	f.clock.Step(2 * time.Second)
	f.mustSync(testCluster)
	st := f.restore(testCluster).Status
	if st.Phase != api.RestorePhaseFailed || !strings.Contains(st.Reason, "did not complete within 20m0s") || !strings.Contains(st.Reason, "waiting for seed pod") {
		t.Fatalf("status %+v, want Failed by the timeout with what was awaited", st)
	}
	if cl := f.cluster(); cl == nil || cl.Spec.Paused {
		t.Fatalf("the restored cluster must stay, unpaused: %+v", cl)
	}
}

// The old cluster went, and someone created another of the same name before the
// restore could: that one is not ours to touch.
func TestClusterCreatedBySomeoneElseIsLeftAlone(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	f := newFixture(t, kubeObjects(), newCluster(), newRestore(testCluster, "good.db", srv))
	f.mustSync(testCluster) // deletes; dependents remain
	intruder := newCluster()
	intruder.UID = "33333333-3333-4333-8333-333333333333"
	if _, err := f.etcd.EtcdV1beta2().EtcdClusters(testNamespace).Create(context.Background(), intruder, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.etcd.ClearActions()
	f.mustSync(testCluster)
	st := f.restore(testCluster).Status
	if st.Phase != api.RestorePhaseFailed || !strings.Contains(st.Reason, "was created by someone else") {
		t.Fatalf("status %+v", st)
	}
	if acts := f.clusterActions(); len(acts) > 0 {
		t.Errorf("the other cluster was written to: %v", acts)
	}
}

// Deleting the EtcdRestore once its plan is written but before the old cluster
// went abandons the restore; the finalizer goes so the deletion completes.
func TestRestoreDeletedBeforeTheClusterWasTouchedIsAbandoned(t *testing.T) {
	srv, _ := startS3(t)
	er := newRestore(testCluster, "good.db", srv)
	plan := &Plan{Cluster: recordCluster(newCluster()), Source: er.Spec, Backup: VerifiedBackup{Path: testBucket + "/good.db", Size: 1, SHA256: strings.Repeat("0", 64)}}
	raw, err := plan.encode()
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	er.Annotations = map[string]string{PlanAnnotation: raw}
	er.Finalizers = []string{Finalizer}
	er.DeletionTimestamp = &now
	er.Status.Phase = api.RestorePhaseRestoring
	f := newFixture(t, kubeObjects(), newCluster(), er)
	f.mustSync(testCluster)
	got := f.restore(testCluster)
	if got.Status.Phase != api.RestorePhaseFailed || !strings.Contains(got.Status.Reason, "restore abandoned") {
		t.Fatalf("status %+v", got.Status)
	}
	if slices.Contains(got.Finalizers, Finalizer) {
		t.Error("the finalizer blocks the deletion")
	}
	f.expectUntouched()
}

// After the hand-over etcd-operator may replace the seed like any member; a
// restore that no longer finds its seed then just watches the cluster grow.
func TestReplacedSeedAfterHandOverIsFine(t *testing.T) {
	f, seed := startHandOver(t)
	if err := f.kube.CoreV1().Pods(testNamespace).Delete(context.Background(), seed.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.setClusterStatus(2, true)
	f.mustSync(testCluster)
	if st := f.restore(testCluster).Status; st.Phase != api.RestorePhaseRestoring || !strings.Contains(st.Reason, "2 of 3 members ready") {
		t.Fatalf("status %+v", st)
	}
	f.setClusterStatus(3, true)
	f.mustSync(testCluster)
	if st := f.restore(testCluster).Status; st.Phase != api.RestorePhaseCompleted || !st.Succeeded {
		t.Fatalf("status %+v", st)
	}
}

// A restore interrupted anywhere picks up from the objects: here the seed exists
// but was not recorded (the operator stopped in between); no second seed appears.
func TestSecondPassDoesNotCreateASecondSeed(t *testing.T) {
	f, _ := startHandOver(t)
	for range 3 {
		f.mustSync(testCluster)
	}
	pods, err := f.kube.CoreV1().Pods(testNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d pods, want the one seed", len(pods.Items))
	}
	var creates int
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			creates++
		}
	}
	if creates != 1 {
		t.Errorf("%d pod creations, want 1", creates)
	}
}

// A namespaced and a cluster-wide operator never run the same restore: the scope
// annotation decides, as it does for EtcdClusters.
func TestScopeAnnotationDecidesWhichOperatorRuns(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	for _, tc := range []struct {
		name        string
		annotated   bool
		clusterWide bool
		runs        bool
	}{
		{"namespaced operator, plain restore", false, false, true},
		{"namespaced operator, cluster-wide restore", true, false, false},
		{"cluster-wide operator, cluster-wide restore", true, true, true},
		{"cluster-wide operator, plain restore", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			er := newRestore(testCluster, "good.db", srv)
			if tc.annotated {
				er.Annotations = map[string]string{api.ScopeAnnotation: api.ScopeClusterWide}
			}
			f := newFixture(t, kubeObjects(), newCluster(), er)
			f.flow.cfg.ClusterWide = tc.clusterWide
			f.mustSync(testCluster)
			if ran := f.restore(testCluster).Status.Phase != ""; ran != tc.runs {
				t.Fatalf("ran = %v, want %v", ran, tc.runs)
			}
			if !tc.runs {
				f.expectUntouched()
			}
		})
	}
}

// A cluster on persistent volumes gets a seed on one too (the original's seed
// always used emptyDir), claimed like any member's and owned by the cluster.
func TestSeedOfAClusterOnPersistentVolumesGetsAClaim(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	old := newCluster()
	old.Spec.Pod = &api.PodPolicy{PersistentVolumeClaimSpec: &corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	f := newFixture(t, []k8sruntime.Object{awsSecretObject()}, old, newRestore(testCluster, "good.db", srv))
	f.mustSync(testCluster)
	f.mustSync(testCluster)
	seedName := SeedMemberName(testCluster, restoreUID)
	pvc, err := f.kube.CoreV1().PersistentVolumeClaims(testNamespace).Get(context.Background(), seedName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no claim for the seed: %v", err)
	}
	if cl := f.cluster(); !k8sutil.IsOwnedBy(pvc, cl) {
		t.Errorf("claim owners %v, want the restored cluster", pvc.OwnerReferences)
	}
	seed, err := f.kube.CoreV1().Pods(testNamespace).Get(context.Background(), seedName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range seed.Spec.Volumes {
		if v.Name == k8sutil.EtcdDataVolumeName && (v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != seedName) {
			t.Errorf("data volume %+v, want the claim %s", v.VolumeSource, seedName)
		}
	}
	if got := f.writesTo("persistentvolumeclaims", "pods"); !slices.Equal(got, []string{"create persistentvolumeclaims", "create pods"}) {
		t.Errorf("writes %v: the claim must exist before the pod", got)
	}
}

// Two operators on one restore (two cluster-wide ones, or a standby that has not
// noticed it lost its Lease): the slower one, still checking the backup, finds
// the cluster gone because the faster one's hand-over deleted it. It must not
// write Failed over Restoring, or the cluster would never be re-created: its
// writes carry the resourceVersion it read and are refused.
func TestASlowerSecondOperatorCannotFailARestoreInProgress(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	f := newFixture(t, kubeObjects(), newCluster(), newRestore(testCluster, "good.db", srv))
	stale := f.restore(testCluster) // what the slower operator read

	f.mustSync(testCluster) // the faster operator: verified, planned, cluster deleted
	if st := f.restore(testCluster).Status; st.Phase != api.RestorePhaseRestoring || f.cluster() != nil {
		t.Fatalf("the first operator did not start the hand-over: %+v", st)
	}
	_, err := f.flow.prepare(context.Background(), stale, 0)
	if !failure.IsRetry(err) {
		t.Fatalf("prepare on a stale read = %v, want a retry for the conflict", err)
	}
	if st := f.restore(testCluster).Status; st.Phase != api.RestorePhaseRestoring {
		t.Fatalf("the slower operator overwrote the restore in progress: %+v", st)
	}
	// Started again from a fresh read, it carries on with the hand-over.
	f.mustSync(testCluster)
	if st := f.restore(testCluster).Status; st.Phase != api.RestorePhaseRestoring {
		t.Fatalf("status %+v", st)
	}
}

// The restored cluster's client Service takes the old one's cluster IP, so that
// clients that resolved the name reach the restored members; an address taken
// meanwhile gives way to a new one.
func TestRestoredClientServiceKeepsTheOldClusterIP(t *testing.T) {
	for _, tc := range []struct {
		name   string
		taken  bool
		wantIP string
	}{
		{name: "the old address is taken again", wantIP: "10.96.7.7"},
		{name: "an address taken meanwhile gives way to a new one", taken: true, wantIP: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, store := startS3(t)
			putObject(t, store, "good.db", snapshot)
			objs := []k8sruntime.Object{newCluster(), newRestore(testCluster, "good.db", srv)}
			f := newFixture(t, kubeObjects(), objs...)
			ctx := context.Background()
			services := f.kube.CoreV1().Services(testNamespace)
			old, err := services.Get(ctx, k8sutil.ClientServiceName(testCluster), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			old.Spec.ClusterIP, old.Spec.ClusterIPs = "10.96.7.7", []string{"10.96.7.7"}
			if _, err := services.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.taken {
				f.kube.PrependReactor("create", "services", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
					svc := a.(k8stesting.CreateAction).GetObject().(*corev1.Service)
					if svc.Spec.ClusterIP == "10.96.7.7" {
						return true, nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name,
							field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs"), svc.Spec.ClusterIPs, "provided IP is already allocated")})
					}
					return false, nil, nil
				})
			}
			f.mustSync(testCluster)
			if plan, _, _ := PlanOf(f.restore(testCluster)); plan == nil || plan.Cluster.ClientIP != "10.96.7.7" {
				t.Fatalf("the plan does not keep the old client Service's address: %+v", plan)
			}
			for _, o := range oldDependents() {
				m := o.(metav1.Object)
				if _, isPod := o.(*corev1.Pod); isPod {
					err = f.kube.CoreV1().Pods(testNamespace).Delete(ctx, m.GetName(), metav1.DeleteOptions{})
				} else {
					err = services.Delete(ctx, m.GetName(), metav1.DeleteOptions{})
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			before := len(f.writesTo("etcdclusters", "services"))
			f.mustSync(testCluster)
			// Made before the cluster: etcd-operator makes one on a new address
			// as soon as it sees the cluster.
			if writes := f.writesTo("etcdclusters", "services")[before:]; !tc.taken && (len(writes) < 2 || writes[0] != "create services" || writes[1] != "create etcdclusters") {
				t.Errorf("writes %v: the client Service is not made before the cluster", writes)
			}
			svc, err := services.Get(ctx, k8sutil.ClientServiceName(testCluster), metav1.GetOptions{})
			if err != nil {
				t.Fatalf("no client Service for the restored cluster: %v", err)
			}
			if svc.Spec.ClusterIP != tc.wantIP || !k8sutil.IsOwnedBy(svc, f.cluster()) {
				t.Fatalf("client Service cluster IP %q owned by %v, want %q owned by the restored cluster", svc.Spec.ClusterIP, svc.OwnerReferences, tc.wantIP)
			}
		})
	}
}

// The old cluster's client Service is not deleted with it: the hand-over takes
// it out of what the old cluster owns before deleting the cluster, and the
// restored cluster gets the same object. A Service deleted and made again
// leaves its address routed nowhere in between, and clients that connect then
// stay pinned to wherever that led.
func TestTheClientServiceOutlivesTheOldCluster(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	f := newFixture(t, kubeObjects(), newCluster(), newRestore(testCluster, "good.db", srv))
	ctx := context.Background()
	services := f.kube.CoreV1().Services(testNamespace)
	name := k8sutil.ClientServiceName(testCluster)
	old, err := services.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old.UID = "c0ffee00-0000-4000-8000-000000000001"
	if old, err = services.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.mustSync(testCluster)
	if f.cluster() != nil {
		t.Fatal("the old cluster was not deleted")
	}
	// The garbage collector: whatever the old cluster still owns goes.
	pods, _ := f.kube.CoreV1().Pods(testNamespace).List(ctx, metav1.ListOptions{})
	for _, p := range pods.Items {
		if slices.ContainsFunc(p.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == oldUID }) {
			if err := f.kube.CoreV1().Pods(testNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	svcs, _ := services.List(ctx, metav1.ListOptions{})
	for _, svc := range svcs.Items {
		if slices.ContainsFunc(svc.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == oldUID }) {
			if err := services.Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.mustSync(testCluster)
	svc, err := services.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the client Service went with the old cluster: %v", err)
	}
	if svc.UID != old.UID || !k8sutil.IsOwnedBy(svc, f.cluster()) {
		t.Errorf("client Service uid %s owned by %v, want the old one (uid %s) owned by the restored cluster", svc.UID, svc.OwnerReferences, old.UID)
	}
}

// A plan changed by anyone but the restore operator is not followed: the
// hand-over stops with a reason instead of creating what the edit asks for.
func TestAnAlteredPlanIsNotFollowed(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	f := newFixture(t, kubeObjects(), newCluster(), newRestore(testCluster, "good.db", srv))
	f.mustSync(testCluster)
	er := f.restore(testCluster)
	plan, ok, err := PlanOf(er)
	if !ok || err != nil {
		t.Fatalf("no plan: %v", err)
	}
	plan.Cluster.Spec.Size = 1
	if er.Annotations[PlanAnnotation], err = plan.encode(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.etcd.EtcdV1beta2().EtcdRestores(testNamespace).Update(context.Background(), er, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := len(f.writesTo("etcdclusters", "services", "pods"))
	_, _ = f.sync(testCluster, 0)
	got := f.restore(testCluster)
	if got.Status.Phase != api.RestorePhaseFailed || !strings.Contains(got.Status.Reason, "changed by someone other than the restore operator") {
		t.Fatalf("status after the plan was altered: %+v", got.Status)
	}
	if writes := f.writesTo("etcdclusters", "services", "pods")[before:]; len(writes) > 0 {
		t.Errorf("the altered plan was acted on: %v", writes)
	}
}
