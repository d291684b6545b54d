//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/crds"
	"github.com/openetcd/etcd-operator/pkg/operatorrun"
	"github.com/openetcd/etcd-operator/pkg/restore"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// Names the original's example resources give.
const (
	exampleCluster        = "example-etcd-cluster"
	exampleBackup         = "example-etcd-cluster-backup"
	examplePeriodicBackup = "example-etcd-cluster-periodic-backup"
)

// Bounds of the restore that starts before its rules are complete.
const (
	// rulesMissingFor is how long the restore operator runs an EtcdRestore
	// under the original's Role alone, before the rules it lacks are added:
	// long enough for a restore that goes ahead without them to reach the
	// hand-over (a small snapshot is verified within seconds).
	rulesMissingFor = 45 * time.Second
	// restoreWatchPoll is how often the background watch looks at the
	// EtcdRestore and its cluster: a cluster deleted and a failure reported
	// within a second must not slip between two looks.
	restoreWatchPoll = 500 * time.Millisecond
	// restoreWatchLook bounds one look of the watch, so that a hung request
	// does not stop it.
	restoreWatchLook = 10 * time.Second
	// keptClusterFor is how long a failed restore's cluster is watched for
	// a deletion that comes late.
	keptClusterFor = 15 * time.Second
)

// TestOriginalInstallFromBootstrapToDisasterRecovery goes through the
// original's walkthroughs as they were published, on our operators: the
// original's ClusterRole for all three operators, their three Deployments with
// only the image replaced (so --create-crd at its default, true), its example
// cluster, its one-shot and periodic backups to S3 and, after every member was
// killed, its restore. The role grants no */status rule, so each operator
// installs its CRD without the status subresource and writes status in the
// object: the cluster's phase, the backup's success and the restore's phase
// are there for `kubectl get -o yaml` as the walkthroughs show them. The restore
// brings the cluster back at its size with the keys the one-shot backup holds,
// without the rights to create a Secret or a Lease the role does not give.
//
// Not parallel: the operators replace the three cluster-wide CRDs, which are
// put back at the end (Go starts the parallel tests after the sequential ones).
func TestOriginalInstallFromBootstrapToDisasterRecovery(t *testing.T) {
	ctx := t.Context()
	// Registered first, so it runs last: once the namespace, and with it the
	// operators that installed their own definitions, is gone.
	putBackCRDsAtEnd(t)
	ns := newNamespace(t, "original-dr")
	dumpOnFailure(t, ns)
	grantOriginalClusterRole(t, ns)
	t.Cleanup(func() { releaseRestores(t, ns) })
	pod := deployOriginalOperator(t, ns, "deployment.yaml", framework.OperatorDeployment)
	deployOriginalOperator(t, ns, "backup-deployment.yaml", "etcd-backup-operator")
	deployOriginalOperator(t, ns, "restore-deployment.yaml", "etcd-restore-operator")
	// The role grants Endpoints and no Lease: the original's lock.
	msg := waitPodEvent(t, pod, corev1.EventTypeNormal, operatorrun.EventLeaderElectionLock, framework.OperatorReadyTimeout)
	if !strings.Contains(msg, "leader election uses Endpoints "+ns+"/etcd-operator") {
		t.Errorf("event %q does not say the Endpoints lock is used", msg)
	}
	waitCRDsWithoutStatusSubresource(t)

	// The original's example cluster. Its etcd 3.2.13 images do not run on
	// current nodes (README, "Supported versions"), so the version
	// is the one line changed.
	name := exampleCluster
	watchCluster(t, framework.DumpTarget{Namespace: ns, Cluster: name, OperatorNamespace: ns})
	if err := f.CreateFromExample(ctx, ns, originalManifest("example-etcd-cluster.yaml"),
		`s/version: "3.2.13"/version: "3.5.21"/`); err != nil {
		t.Fatal(err)
	}
	_, oldPods := waitReady(t, ns, name, 3, bootstrapTimeout(3))
	expectKubectlShows(t, ns, "etcd", name, "phase: Running")
	original, err := f.GetCluster(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	putKeys(t, ns, name, "/e2e/before/", keysBeforeBackup)

	bucket := "e2e-original-dr"
	srv := startS3Server(t, bucket)
	secret := createS3Secret(t, ns, srv)
	endpoints := framework.ClientURL(name, false)

	// The one-shot backup, through the backup walkthrough's sed pipeline.
	oneShot := bucket + "/" + name + ".backup"
	if err := f.CreateFromExample(ctx, ns, originalManifest("backup_cr.yaml"), walkthroughSed(srv, oneShot, secret, endpoints)...); err != nil {
		t.Fatal(err)
	}
	st := waitOneShotBackup(t, ns, exampleBackup)
	expectKubectlShows(t, ns, "etcdbackup", exampleBackup, "succeeded: true")
	t.Logf("one-shot backup %s: revision %d, %d bytes", st.BackupPath, st.EtcdRevision, st.BackupSize)

	// The periodic backup, filled in the same way; it backs up at once and
	// then every 125 s, and holds the backup operator's finalizer.
	periodic := bucket + "/periodic/" + name + ".backup"
	deleteBackupAtEnd(t, ns, examplePeriodicBackup)
	if err := f.CreateFromExample(ctx, ns, originalManifest("periodic_backup_cr.yaml"), walkthroughSed(srv, periodic, secret, endpoints)...); err != nil {
		t.Fatal(err)
	}
	waitPeriodicBackupRecorded(t, ns, examplePeriodicBackup, periodic, srv, bucket)
	expectKubectlShows(t, ns, "etcdbackup", examplePeriodicBackup, "succeeded: true")
	putKeys(t, ns, name, "/e2e/after/", keysAfterBackup)

	// The disaster, as the original's walkthrough simulates it.
	if _, err := f.Kubectl(ctx, "delete", "pod", "-n", ns, "-l", framework.ClusterSelector(name), "--force", "--grace-period=0"); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed every member at once: %v", oldPods)

	// The restore, through the restore walkthrough's sed pipeline.
	if err := f.CreateFromExample(ctx, ns, originalManifest("restore_cr.yaml"), walkthroughSed(srv, oneShot, secret, "")...); err != nil {
		t.Fatal(err)
	}
	er, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitRestore(t, ns, name, restoreTimeout, api.RestorePhaseCompleted)
	expectKubectlShows(t, ns, "etcdrestore", name, "phase: Completed", "succeeded: true")
	cl, newPods := waitReady(t, ns, name, 3, changeTimeout, oldPods...)
	t.Logf("restored in %.1fs (EtcdRestore seen -> Completed); members %v", time.Since(start).Seconds(), newPods)
	expectRestoredFromTheBackup(t, cl, original.UID, er.UID)
	if err := f.PutAndGet(ctx, ns, name, false, "/e2e/restored", "writable", dataTimeout); err != nil {
		t.Errorf("the restored cluster does not take writes: %v", err)
	}
}

// TestRestoreStartedBeforeTheRulesAreCompleteKeepsTheCluster: a user installs
// the restore operator under the original's Role, which lacks the rules it
// needs (etcdrestores/status on CRDs that serve the status subresource, secrets
// create, leases), starts a restore, and adds the rules some time later. Before
// and after, the restore either completes or fails leaving the cluster it was
// given; it never deletes the cluster and then says it failed. (It need not
// wait for the rules: it keeps its status in an annotation, its token on the
// EtcdRestore, and leads on the Endpoints lock; restore.StatusOf reads what
// it kept.)
//
// The operators run with --create-crd=false, so the shared CRDs stay as they
// are and the test may run in parallel with the others.
func TestRestoreStartedBeforeTheRulesAreCompleteKeepsTheCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "restore-rules")
	dumpOnFailure(t, ns)
	t.Cleanup(func() { releaseRestores(t, ns) })
	grantOriginalRole(t, ns)
	// The shared CRDs serve the status subresource, which the original's Role
	// does not grant. etcd-operator needs etcdclusters/status for the
	// cluster's status to be stored (the waits read it) and the backup
	// operator etcdbackups/status for the backup's. The three operators share
	// the namespace's default service account, as the original's Deployments
	// have it, so the restore operator has these two as well: what it lacks is
	// etcdrestores/status, secrets create and leases.
	grantRule(t, ns, "etcd-operator-status", rbacv1.PolicyRule{APIGroups: []string{api.GroupName},
		Resources: []string{"etcdclusters/status"}, Verbs: []string{"get", "update", "patch"}})
	grantRule(t, ns, "etcd-backup-operator-status", rbacv1.PolicyRule{APIGroups: []string{api.GroupName},
		Resources: []string{"etcdbackups/status"}, Verbs: []string{"get", "update", "patch"}})
	applyCRDs(t)
	deployOriginalOperator(t, ns, "deployment.yaml", framework.OperatorDeployment, withoutCRDInstall(framework.OperatorDeployment))
	deployOriginalOperator(t, ns, "backup-deployment.yaml", "etcd-backup-operator", withoutCRDInstall("etcd-backup-operator"))

	name := framework.UniqueName("rules")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	_, oldPods := waitReady(t, ns, name, 3, bootstrapTimeout(3))
	putKeys(t, ns, name, "/e2e/before/", keysBeforeBackup)
	bucket, key := "e2e-restore-rules", "backups/"+name+".db"
	srv := startS3Server(t, bucket)
	secret := createS3Secret(t, ns, srv)
	backUp(t, ns, name, srv, bucket, key, secret)
	putKeys(t, ns, name, "/e2e/after/", keysAfterBackup)
	original, err := f.GetCluster(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}

	deployOriginalOperator(t, ns, "restore-deployment.yaml", "etcd-restore-operator", withoutCRDInstall("etcd-restore-operator"))
	stop := watchRestoreKeepsCluster(t, ns, name, original.UID)
	defer stop()
	er, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Create(ctx, newS3Restore(name, srv, bucket+"/"+key, secret), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recordRestore(t, er, rulesMissingFor)

	grantRule(t, ns, "etcd-restore-operator-leases", rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"},
		Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}})
	// etcdclusters/status again, as the restore operator's own role names it.
	grantRule(t, ns, "etcd-restore-operator-status", rbacv1.PolicyRule{APIGroups: []string{api.GroupName},
		Resources: []string{"etcdrestores/status", "etcdclusters/status"}, Verbs: []string{"get", "update", "patch"}})
	grantRule(t, ns, "etcd-restore-operator-secrets", rbacv1.PolicyRule{APIGroups: []string{""},
		Resources: []string{"secrets"}, Verbs: []string{"create"}})
	t.Logf("added the rules the restore operator lacked")

	var end api.RestoreStatus
	err = framework.WaitFor(ctx, restoreTimeout, framework.Poll, "EtcdRestore "+name+" to end, Completed or Failed",
		func(ctx context.Context) (bool, string, error) {
			got, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			// Under the original's Role the status is kept in an
			// annotation until the rule is added: the restore's own reading.
			end = restore.StatusOf(got)
			return end.Phase == api.RestorePhaseCompleted || end.Phase == api.RestorePhaseFailed,
				fmt.Sprintf("phase %q reason %q", end.Phase, end.Reason), nil
		})
	if err != nil {
		t.Fatal(err)
	}

	if end.Phase == api.RestorePhaseFailed {
		err := framework.Holds(ctx, keptClusterFor, framework.Poll, "the original EtcdCluster stays, not being deleted",
			func(ctx context.Context) (bool, string, error) {
				cl, err := f.GetCluster(ctx, ns, name)
				if err != nil {
					return !apierrors.IsNotFound(err), err.Error(), nil
				}
				return cl.UID == original.UID && cl.DeletionTimestamp == nil,
					fmt.Sprintf("uid %s (original %s), deletion %v", cl.UID, original.UID, cl.DeletionTimestamp), nil
			})
		if err != nil {
			t.Error(err)
		}
		if n := countKeys(t, ns, name, "/e2e/after/"); n != keysAfterBackup {
			t.Errorf("%d of the %d keys written after the backup are in the cluster the failed restore left", n, keysAfterBackup)
		}
		t.Logf("the restore failed and left the original cluster: %s", end.Reason)
		return
	}
	cl, _ := waitReady(t, ns, name, 3, changeTimeout, oldPods...)
	expectRestoredFromTheBackup(t, cl, original.UID, er.UID)
	t.Logf("the restore completed")
}

// putBackCRDsAtEnd puts this tree's three definitions back when the test
// ends, whatever the operators it ran installed instead. The CRDs are
// cluster-wide, so only tests that run while no other does (not parallel) may
// let operators replace them.
func putBackCRDsAtEnd(t *testing.T) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		log := logrus.NewEntry(logrus.New())
		for _, crd := range crds.All() {
			if err := crds.Install(ctx, f.APIExt, crd, log); err != nil {
				t.Errorf("cleanup: put back CRD %s: %v", crd.Name, err)
			}
		}
	})
}

// deployOriginalOperator creates one of the original's operator Deployments
// (file, under testdata/original) in ns with our image, edited further by
// sed, waits for its pod to run (the original's Deployments have no
// readiness probe), and shows its log if the test fails.
func deployOriginalOperator(t *testing.T, ns, file, deployment string, sed ...string) corev1.Pod {
	t.Helper()
	if deployment != framework.OperatorDeployment { // dumpOnFailure shows etcd-operator's
		t.Cleanup(func() {
			if t.Failed() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				t.Logf("======== %s log\n%s", deployment, lastLines(f.DeploymentLogs(ctx, ns, deployment), 120))
			}
		})
	}
	sed = append([]string{"s|image: quay.io/coreos/etcd-operator:v0.9.4|image: " + operatorImage() + "|"}, sed...)
	if err := f.CreateFromExample(t.Context(), ns, originalManifest(file), sed...); err != nil {
		t.Fatal(err)
	}
	return runningPod(t, ns, deployment)
}

// withoutCRDInstall is the sed expression that adds -create-crd=false after
// the command of an original Deployment, whose container runs command.
func withoutCRDInstall(command string) string {
	return `s|^\( *\)- ` + command + `$|&\n\1- -create-crd=false|`
}

// walkthroughSed is the original walkthroughs' sed pipeline for its backup
// and restore resources: the S3 path, the secret and, for a backup, the
// cluster's endpoints (none for a restore, whose resource has no such
// placeholder). The original's resources have no field for an S3-compatible
// store, ours do (see example/*_minio.yaml), and the test's store is one: its
// endpoint and path-style addressing are added under s3, the one change
// beyond the walkthrough.
func walkthroughSed(srv *framework.S3Server, path, secret, endpoints string) []string {
	sed := []string{
		"s|<full-s3-path>|" + path + "|g",
		"s|<aws-secret>|" + secret + "|g",
		`s|^\( *\)s3:$|&\n\1  endpoint: ` + srv.Endpoint + `\n\1  forcePathStyle: true|`,
	}
	if endpoints != "" {
		sed = append(sed, `s|<etcd-cluster-endpoints>|"`+endpoints+`"|g`)
	}
	return sed
}

// expectKubectlShows checks that `kubectl get <resource> <name> -o yaml`
// shows each of want, as the original's walkthroughs check a status.
func expectKubectlShows(t *testing.T, ns, resource, name string, want ...string) {
	t.Helper()
	out, err := f.Kubectl(t.Context(), "get", resource, "-n", ns, name, "-o", "yaml")
	if err != nil {
		t.Errorf("kubectl get %s %s: %v", resource, name, err)
		return
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("kubectl get %s %s -o yaml does not show %q:\n%s", resource, name, w, out)
		}
	}
}

// waitCRDsWithoutStatusSubresource waits until none of the three definitions
// serves the status subresource: what the operators install when their role
// cannot update status through it.
func waitCRDsWithoutStatusSubresource(t *testing.T) {
	t.Helper()
	crdClient := f.APIExt.ApiextensionsV1().CustomResourceDefinitions()
	for _, want := range crds.All() {
		err := framework.WaitFor(t.Context(), framework.OperatorReadyTimeout, framework.Poll, "CRD "+want.Name+" without the status subresource",
			func(ctx context.Context) (bool, string, error) {
				crd, err := crdClient.Get(ctx, want.Name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				for _, v := range crd.Spec.Versions {
					if v.Served && v.Subresources != nil && v.Subresources.Status != nil {
						return false, "version " + v.Name + " serves the status subresource", nil
					}
				}
				return true, "", nil
			})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// waitPeriodicBackupRecorded waits for a periodic EtcdBackup's status to record
// a stored backup under path ("<path>_v<revision>_<time>"), and checks the
// object is in the bucket.
func waitPeriodicBackupRecorded(t *testing.T, ns, name, path string, srv *framework.S3Server, bucket string) {
	t.Helper()
	var st api.BackupStatus
	err := framework.WaitFor(t.Context(), backupTimeout, framework.Poll, "EtcdBackup "+name+" to record a backup",
		func(ctx context.Context) (bool, string, error) {
			got, err := f.Etcd.EtcdV1beta2().EtcdBackups(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			st = got.Status
			return st.Succeeded && strings.HasPrefix(st.BackupPath, path+"_v") && !st.LastSuccessDate.IsZero(), fmt.Sprintf("%+v", st), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Head(t.Context(), bucket, strings.TrimPrefix(st.BackupPath, bucket+"/")); err != nil {
		t.Errorf("the periodic backup its status records: %v", err)
	}
	t.Logf("periodic backup recorded: %s at %s", st.BackupPath, st.LastSuccessDate)
}

// watchRestoreKeepsCluster polls, in the background, the EtcdRestore name and
// the EtcdCluster it restores, and fails the test if ever the restore says
// Failed while the cluster it was given (uid original) is gone, replaced or
// being deleted: a restore completes, or fails leaving the cluster as it was.
// It logs every change of what it sees. The returned stop ends it; call it
// before the test's cleanups delete the cluster.
func watchRestoreKeepsCluster(t *testing.T, ns, name string, original types.UID) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		var last string
		reported := map[string]bool{}
		tick := time.NewTicker(restoreWatchPoll)
		defer tick.Stop()
		for {
			look, cancelLook := context.WithTimeout(ctx, restoreWatchLook)
			seen, broken := restoreKeptCluster(look, ns, name, original)
			cancelLook()
			if seen != "" && ctx.Err() == nil {
				if seen != last {
					t.Logf("+%.1fs %s", time.Since(start).Seconds(), seen)
					last = seen
				}
				if broken != "" && !reported[broken] {
					reported[broken] = true
					t.Errorf("%s (%s)", broken, seen)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// restoreKeptCluster is one look of watchRestoreKeepsCluster: what it saw,
// and what is broken, if anything. It looks at the restore first: Failed is
// final, so a cluster missing after it was read is missing under a failed
// restore.
func restoreKeptCluster(ctx context.Context, ns, name string, original types.UID) (seen, broken string) {
	er, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", ""
	}
	cl, err := f.GetCluster(ctx, ns, name)
	var cluster string
	switch {
	case apierrors.IsNotFound(err):
		cluster = "absent"
	case err != nil:
		return "", ""
	case cl.UID == original:
		cluster = "the original"
	case cl.Annotations[restore.RestoredByAnnotation] == string(er.UID):
		cluster = "re-created by the restore"
	default:
		cluster = fmt.Sprintf("uid %s, neither the original nor the restore's", cl.UID)
	}
	if err == nil && cl.DeletionTimestamp != nil {
		cluster += ", being deleted"
	}
	st := restore.StatusOf(er)
	seen = fmt.Sprintf("EtcdRestore phase %q reason %q; EtcdCluster %s", st.Phase, st.Reason, cluster)
	if st.Phase != api.RestorePhaseFailed {
		return seen, ""
	}
	switch {
	case err != nil:
		return seen, "the EtcdCluster is gone while the EtcdRestore says Failed"
	case cl.UID != original:
		return seen, "the EtcdRestore says Failed but the EtcdCluster is not the original"
	case cl.DeletionTimestamp != nil:
		return seen, "the EtcdRestore says Failed while the original EtcdCluster is being deleted"
	}
	return seen, ""
}

// recordRestore polls an EtcdRestore every second for d and logs what it
// showed: its status, the annotations and finalizers the restore operator
// put on it, and the reasons of its events.
func recordRestore(t *testing.T, er *api.EtcdRestore, d time.Duration) {
	t.Helper()
	start := time.Now()
	var record []string
	var last string
	sel := fields.Set{"involvedObject.name": er.Name, "involvedObject.uid": string(er.UID)}.String()
	err := framework.Holds(t.Context(), d, time.Second, "the EtcdRestore can be read", func(ctx context.Context) (bool, string, error) {
		got, err := f.Etcd.EtcdV1beta2().EtcdRestores(er.Namespace).Get(ctx, er.Name, metav1.GetOptions{})
		if err != nil {
			return true, err.Error(), nil
		}
		var annotations []string
		for k := range got.Annotations {
			annotations = append(annotations, k)
		}
		slices.Sort(annotations)
		var reasons []string
		if evs, err := f.Kube.CoreV1().Events(er.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel}); err == nil {
			for _, e := range evs.Items {
				reasons = append(reasons, e.Type+"/"+e.Reason)
			}
		}
		st := restore.StatusOf(got)
		seen := fmt.Sprintf("phase %q reason %q (stored phase %q); annotations %v; finalizers %v; events %v",
			st.Phase, st.Reason, got.Status.Phase, annotations, got.Finalizers, reasons)
		if seen != last {
			record = append(record, fmt.Sprintf("+%.0fs %s", time.Since(start).Seconds(), seen))
			last = seen
		}
		return true, seen, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("EtcdRestore %s while the restore operator lacked rules:\n%s", er.Name, strings.Join(record, "\n"))
}

// expectRestoredFromTheBackup checks that cl was re-created by the EtcdRestore
// restore (not the cluster of uid original) and holds exactly the keys written
// before the backup: all of /e2e/before/, none of /e2e/after/.
func expectRestoredFromTheBackup(t *testing.T, cl *api.EtcdCluster, original, restoreUID types.UID) {
	t.Helper()
	if cl.UID == original || cl.Annotations[restore.RestoredByAnnotation] != string(restoreUID) {
		t.Errorf("cluster uid %s (old %s), annotation %s=%q; want a cluster re-created by EtcdRestore %s",
			cl.UID, original, restore.RestoredByAnnotation, cl.Annotations[restore.RestoredByAnnotation], restoreUID)
	}
	if n := countKeys(t, cl.Namespace, cl.Name, "/e2e/before/"); n != keysBeforeBackup {
		t.Errorf("%d of the %d backed-up keys are back", n, keysBeforeBackup)
	}
	if n := countKeys(t, cl.Namespace, cl.Name, "/e2e/after/"); n != 0 {
		t.Errorf("%d keys written after the backup are there; the cluster was not restored from it", n)
	}
}
