//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/openetcd/etcd-operator/hack/bench/benchreport"
	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// Bounds and sizes of the restore test. A restore of a small snapshot takes well
// under a minute on the local node: the old cluster's pods go within their grace
// period, the seed restores in seconds, and members join one at a time.
const (
	restoreTimeout   = 6 * time.Minute
	refusedTimeout   = 2 * time.Minute
	keysBeforeBackup = 1000
	keysAfterBackup  = 100
	// etcd refuses transactions of more than 128 operations (--max-txn-ops).
	putsPerTxn = 100
)

// TestRestoreAfterQuorumLoss is the backup -> disaster -> restore walkthrough of
// docs/user-guide/restore.md, on a namespace of its own with the three operators installed from the
// examples: 1000 keys are backed up to an S3-compatible store, 100 more are
// written, two of three members are killed (quorum lost), and an EtcdRestore made
// from example/etcd-restore-operator/restore_cr_minio.yaml brings the cluster back
// at full size with exactly the backed-up keys. Before that, restores from a
// missing and from a corrupt backup fail and leave the broken cluster as it is.
func TestRestoreAfterQuorumLoss(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	if _, err := os.Stat(f.Env.Path("cmd", "restore-operator")); err != nil {
		t.Fatalf("cmd/restore-operator is missing from the tree: %v", err)
	}
	bed := newBackupBed(t, "restore", true)
	ns, srv, bucket, secretName := bed.ns, bed.srv, bed.bucket, bed.secret

	// The cluster, its data, its backup, more data.
	name := framework.UniqueName("restore")
	const members, version = 3, "3.5.21"
	createClusterIn(t, ns, ns, framework.NewCluster(name, members, version))
	_, oldPods := waitReady(t, ns, name, 3, bootstrapTimeout(3))
	putKeys(t, ns, name, "/e2e/before/", keysBeforeBackup)
	key := "backups/" + name + ".db"
	recorded := backUp(t, ns, name, srv, bucket, key, secretName)
	putKeys(t, ns, name, "/e2e/after/", keysAfterBackup)
	if n := countKeys(t, ns, name, "/e2e/"); n != keysBeforeBackup+keysAfterBackup {
		t.Fatalf("%d keys before the disaster, want %d", n, keysBeforeBackup+keysAfterBackup)
	}

	// The disaster: two of three members die, quorum is lost.
	for _, victim := range oldPods[:2] {
		if err := f.KillPod(ctx, ns, victim); err != nil {
			t.Fatal(err)
		}
	}
	survivor := oldPods[2]
	t.Logf("killed %v; %s is left without quorum", oldPods[:2], survivor)
	broken := waitQuorumLost(t, ns, name)
	survivorPod, err := f.Kube.CoreV1().Pods(ns).Get(ctx, survivor, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// A corrupt copy of the backup: one byte flipped in the middle.
	good := download(t, srv, bucket, key)
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)/2] ^= 0xff
	corruptKey := "backups/" + name + "-corrupt.db"
	upload(t, srv, bucket, corruptKey, corrupt)

	restore := func(path string) *api.EtcdRestore {
		t.Helper()
		if err := f.CreateFromExample(ctx, ns, f.Env.Path("example", "etcd-restore-operator", "restore_cr_minio.yaml"),
			"s/name: example-etcd-cluster$/name: "+name+"/",
			"s|path: etcd-backups/example-etcd-cluster.backup|path: "+bucket+"/"+path+"|",
			"s/awsSecret: minio/awsSecret: "+secretName+"/",
			"s|endpoint: http://minio.minio.svc:9000|endpoint: "+srv.Endpoint+"|"); err != nil {
			t.Fatal(err)
		}
		er, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return er
	}

	for _, tc := range []struct{ what, path, reason string }{
		{"missing backup", "backups/" + name + "-missing.db", "does not exist"},
		{"corrupt backup", corruptKey, "is not an intact etcd snapshot"},
	} {
		t.Run("restore from a "+tc.what+" fails and leaves the cluster alone", func(t *testing.T) {
			er := restore(tc.path)
			st := waitRestore(t, ns, name, refusedTimeout, api.RestorePhaseFailed)
			if st.Succeeded || !strings.Contains(st.Reason, tc.reason) || !strings.Contains(st.Reason, "was not touched") {
				t.Errorf("status %+v, want a reason saying %q and that the cluster was not touched", st, tc.reason)
			}
			expectEvent(t, ns, er, corev1.EventTypeWarning, "RestoreFailed")
			cl, err := f.GetCluster(ctx, ns, name)
			if err != nil || cl.UID != broken.UID || cl.DeletionTimestamp != nil {
				t.Fatalf("the cluster was touched: %v, %v", cl, err)
			}
			p, err := f.Kube.CoreV1().Pods(ns).Get(ctx, survivor, metav1.GetOptions{})
			if err != nil || p.UID != survivorPod.UID || p.DeletionTimestamp != nil {
				t.Fatalf("the surviving member was touched: %v, %v", p, err)
			}
			deleteRestore(t, ns, name)
		})
	}
	if t.Failed() {
		return
	}

	// The restore.
	start := time.Now()
	er := restore(key)
	st := waitRestore(t, ns, name, restoreTimeout, api.RestorePhaseCompleted)
	took := time.Since(start)
	if !st.Succeeded || st.StartTime == nil || st.CompletionTime == nil {
		t.Errorf("final status %+v", st)
	}
	cl, newPods := waitReady(t, ns, name, 3, changeTimeout, oldPods...)
	if cl.UID == broken.UID || cl.Spec.Paused || cl.Spec.Size != 3 {
		t.Errorf("restored cluster uid %s (old %s), paused %v, size %d", cl.UID, broken.UID, cl.Spec.Paused, cl.Spec.Size)
	}
	t.Logf("restored %s in %.1fs (EtcdRestore created -> Completed); members %v", name, took.Seconds(), newPods)
	for _, r := range []string{"Validating", "VerifyingBackup", "BackupVerified", "DeletingCluster", "ClusterCreated", "SeedCreated", "ClusterHandedOver", "RestoreCompleted"} {
		expectEvent(t, ns, er, corev1.EventTypeNormal, r)
	}
	if !strings.Contains(eventMessage(t, ns, er, "BackupVerified"), "as EtcdBackup "+recorded+" recorded") {
		t.Errorf("the backup was not compared with the EtcdBackup %s that stored it", recorded)
	}
	if n := countKeys(t, ns, name, "/e2e/before/"); n != keysBeforeBackup {
		t.Errorf("%d of the %d backed-up keys are back", n, keysBeforeBackup)
	}
	if n := countKeys(t, ns, name, "/e2e/after/"); n != 0 {
		t.Errorf("%d keys written after the backup are there; the cluster was not restored from it", n)
	}
	if err := f.ExpectValue(ctx, ns, name, false, fmt.Sprintf("/e2e/before/%04d", keysBeforeBackup-1), "v", dataTimeout); err != nil {
		t.Error(err)
	}
	if err := f.PutAndGet(ctx, ns, name, false, "/e2e/restored", "writable", dataTimeout); err != nil {
		t.Errorf("the restored cluster does not take writes: %v", err)
	}
}

// TestClusterWideRestoreIntoAnotherNamespace: a restore operator run with
// --cluster-wide in its own namespace restores a cluster of another namespace
// whose EtcdRestore carries the scope annotation, which the original ignored; the seed
// there downloads the backup through the Service in the operator's namespace.
func TestClusterWideRestoreIntoAnotherNamespace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	if _, err := os.Stat(f.Env.Path("cmd", "restore-operator")); err != nil {
		t.Fatalf("cmd/restore-operator is missing from the tree: %v", err)
	}
	opNamespace := newNamespace(t, "restore-cw")
	installOperator(t, opNamespace, framework.Install{}) // the ClusterRole for the restore operator
	deployExampleOperator(t, opNamespace, f.Env.Path("example", "etcd-restore-operator", "deployment.yaml"),
		"s/# - --cluster-wide/- --cluster-wide/")
	ns := newNamespace(t, "restore-target")
	installOperator(t, ns, framework.Install{}) // etcd-operator for the cluster
	t.Cleanup(func() { releaseRestores(t, ns) })

	bucket, key := "e2e-restore-cw", "snapshot.db"
	srv := startS3Server(t, bucket)
	keys, _ := uploadLargeSnapshot(t, srv, bucket, key, 2)
	secretName := createS3Secret(t, ns, srv)

	name := framework.UniqueName("cw")
	const members, version = 3, "3.5.21"
	createClusterIn(t, ns, ns, framework.NewCluster(name, members, version))
	_, oldPods := waitReady(t, ns, name, 3, bootstrapTimeout(3))
	er := newS3Restore(name, srv, bucket+"/"+key, secretName)
	er.Annotations = map[string]string{api.ScopeAnnotation: api.ScopeClusterWide}
	start := time.Now()
	if _, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Create(ctx, er, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRestore(t, ns, name, restoreTimeout, api.RestorePhaseCompleted)
	t.Logf("restored %s/%s from %s in %.1fs", ns, name, opNamespace, time.Since(start).Seconds())
	waitReady(t, ns, name, 3, changeTimeout, oldPods...)
	if n := countKeys(t, ns, name, "/bench/"); n != keys {
		t.Errorf("%d keys after the restore, want the snapshot's %d", n, keys)
	}
}

// newS3Restore is an EtcdRestore of the cluster name (whose name it takes)
// from the backup at path ("<bucket>/<key>") on the test's S3 server.
func newS3Restore(name string, srv *framework.S3Server, path, secret string) *api.EtcdRestore {
	return &api.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.RestoreSpec{
			BackupStorageType: api.BackupStorageTypeS3,
			RestoreSource: api.RestoreSource{S3: &api.S3RestoreSource{
				Path: path, AWSSecret: secret, Endpoint: srv.Endpoint, ForcePathStyle: true,
			}},
			EtcdCluster: api.EtcdClusterRef{Name: name},
		},
	}
}

// deployExampleOperator runs an operator's example Deployment in ns as written
// (image aside, and the sed expressions given), waits for it to be Ready, and
// shows its log if the test fails.
func deployExampleOperator(t *testing.T, ns, file string, sed ...string) {
	t.Helper()
	ctx := t.Context()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(raw, &d); err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	if f.Env.OperatorImage != "" {
		sed = append(sed, "s|image: openetcd/etcd-operator:.*|image: "+f.Env.OperatorImage+"|")
	}
	t.Cleanup(func() {
		if t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			t.Logf("======== %s log\n%s", d.Name, lastLines(f.DeploymentLogs(ctx, ns, d.Name), 120))
		}
	})
	if err := f.CreateFromExample(ctx, ns, file, sed...); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitDeploymentReady(ctx, ns, d.Name, 1, framework.OperatorReadyTimeout); err != nil {
		t.Fatal(err)
	}
}

// putKeys writes n keys "<prefix>0000".."<prefix>n-1" with value "v" through the
// client service, in transactions piped to etcdctl (one kubectl exec per hundred
// keys instead of per key).
func putKeys(t *testing.T, ns, cluster, prefix string, n int) {
	t.Helper()
	putKeysOver(t, ns, cluster, false, prefix, n)
}

// putKeysOver is putKeys over TLS when secure (the member's server
// certificate as client certificate, as framework.Etcdctl does).
func putKeysOver(t *testing.T, ns, cluster string, secure bool, prefix string, n int) {
	t.Helper()
	etcdctl := []string{framework.EtcdctlPath, "--endpoints=" + framework.ClientURL(cluster, secure)}
	if secure {
		etcdctl = append(etcdctl, framework.MemberTLSArgs...)
	}
	etcdctl = append(etcdctl, "txn")
	for first := 0; first < n; first += putsPerTxn {
		var txn strings.Builder
		txn.WriteString("\n") // no compares
		for i := first; i < min(first+putsPerTxn, n); i++ {
			fmt.Fprintf(&txn, "put %s%04d v\n", prefix, i)
		}
		txn.WriteString("\n\n") // no failure branch
		err := framework.WaitFor(t.Context(), dataTimeout, time.Second, fmt.Sprintf("a transaction writing %s%04d...", prefix, first),
			func(ctx context.Context) (bool, string, error) {
				pods, err := f.ClusterPods(ctx, ns, cluster)
				if err != nil {
					return false, err.Error(), nil
				}
				ready := framework.ReadyPods(pods)
				if len(ready) == 0 {
					return false, framework.DescribePods(pods), nil
				}
				out, err := f.KubectlStdin(ctx, txn.String(), append([]string{"exec", "-i", "-n", ns, ready[0].Name, "-c", "etcd", "--"}, etcdctl...)...)
				if err != nil {
					return false, err.Error(), nil
				}
				return strings.HasPrefix(strings.TrimSpace(out), "SUCCESS"), out, nil
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d keys under %s", n, prefix)
}

var countRE = regexp.MustCompile(`"Count" : (\d+)`)

// countKeys counts the keys under prefix with a linearizable read.
func countKeys(t *testing.T, ns, cluster, prefix string) int {
	t.Helper()
	return countKeysOver(t, ns, cluster, false, prefix)
}

// countKeysOver is countKeys over TLS when secure.
func countKeysOver(t *testing.T, ns, cluster string, secure bool, prefix string) int {
	t.Helper()
	var n int
	err := framework.WaitFor(t.Context(), dataTimeout, time.Second, "the number of keys under "+prefix,
		func(ctx context.Context) (bool, string, error) {
			// --limit=1 rather than --count-only, which etcdctl 3.4 (the
			// original's clusters) lacks: the header's Count is the total.
			out, err := f.Etcdctl(ctx, ns, cluster, secure, "get", prefix, "--prefix", "--limit=1", "-w", "fields")
			if err != nil {
				return false, err.Error(), nil
			}
			m := countRE.FindStringSubmatch(out)
			if m == nil {
				return false, "", fmt.Errorf("no count in %q", out)
			}
			n, _ = strconv.Atoi(m[1])
			return true, "", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// backUp takes a one-shot backup with the backup operator and returns the name of
// the EtcdBackup that recorded it.
func backUp(t *testing.T, ns, cluster string, srv *framework.S3Server, bucket, key, secret string) string {
	t.Helper()
	ctx := t.Context()
	eb := &api.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-backup"},
		Spec: api.BackupSpec{
			EtcdEndpoints: []string{framework.ClientURL(cluster, false)},
			StorageType:   api.BackupStorageTypeS3,
			BackupSource: api.BackupSource{S3: &api.S3BackupSource{
				Path: bucket + "/" + key, AWSSecret: secret, Endpoint: srv.Endpoint, ForcePathStyle: true,
			}},
		},
	}
	if _, err := f.Etcd.EtcdV1beta2().EtcdBackups(ns).Create(ctx, eb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := waitOneShotBackup(t, ns, eb.Name)
	size, err := srv.Head(ctx, bucket, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backed up to s3://%s/%s: %d bytes, revision %d, sha256 %s", bucket, key, size, st.EtcdRevision, st.SHA256)
	return eb.Name
}

// waitOneShotBackup waits for a one-shot EtcdBackup to succeed and returns its
// status; its failure is final, so it fails the test at once.
func waitOneShotBackup(t *testing.T, ns, name string) api.BackupStatus {
	t.Helper()
	var st api.BackupStatus
	err := framework.WaitFor(t.Context(), backupTimeout, framework.Poll, "EtcdBackup "+name+" to succeed", func(ctx context.Context) (bool, string, error) {
		got, err := f.Etcd.EtcdV1beta2().EtcdBackups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		st = got.Status
		if !st.Succeeded && st.Reason != "" { // a one-shot backup's Reason is final
			return false, "", fmt.Errorf("backup failed: %s", st.Reason)
		}
		return st.Succeeded, fmt.Sprintf("%+v", st), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitQuorumLost waits for the cluster to report its quorum loss.
func waitQuorumLost(t *testing.T, ns, name string) *api.EtcdCluster {
	t.Helper()
	var cl *api.EtcdCluster
	err := framework.WaitFor(t.Context(), 2*time.Minute, framework.Poll, "the cluster to report the lost quorum",
		func(ctx context.Context) (bool, string, error) {
			got, err := f.GetCluster(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			cl = got
			c := framework.StatusCondition(got, api.ClusterConditionAvailable)
			return c != nil && c.Status == corev1.ConditionFalse, framework.DescribeStatus(got), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// waitRestore waits until the EtcdRestore reaches phase (or ends otherwise, which
// fails at once) and returns its status.
func waitRestore(t *testing.T, ns, name string, timeout time.Duration, phase api.RestorePhase) api.RestoreStatus {
	t.Helper()
	var st api.RestoreStatus
	err := framework.WaitFor(t.Context(), timeout, framework.Poll, fmt.Sprintf("EtcdRestore %s/%s to be %s", ns, name, phase),
		func(ctx context.Context) (bool, string, error) {
			er, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			st = er.Status
			seen := fmt.Sprintf("phase %q succeeded %v reason %q", st.Phase, st.Succeeded, st.Reason)
			ended := st.Phase == api.RestorePhaseCompleted || st.Phase == api.RestorePhaseFailed
			if ended && st.Phase != phase {
				return false, seen, fmt.Errorf("the restore ended %s instead: %s", st.Phase, st.Reason)
			}
			return st.Phase == phase, seen, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func restoreEvents(t *testing.T, ns string, er *api.EtcdRestore) []corev1.Event {
	t.Helper()
	evs, err := f.Kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.name": er.Name, "involvedObject.uid": string(er.UID),
	}.String()})
	if err != nil {
		t.Fatal(err)
	}
	return evs.Items
}

// expectEvent waits briefly for an event: events are written asynchronously.
func expectEvent(t *testing.T, ns string, er *api.EtcdRestore, eventType, reason string) {
	t.Helper()
	err := framework.WaitFor(t.Context(), 30*time.Second, framework.Poll, fmt.Sprintf("a %s event %s on EtcdRestore %s", eventType, reason, er.Name),
		func(context.Context) (bool, string, error) {
			var seen []string
			for _, e := range restoreEvents(t, ns, er) {
				if e.Type == eventType && e.Reason == reason {
					return true, "", nil
				}
				seen = append(seen, e.Type+"/"+e.Reason)
			}
			return false, fmt.Sprintf("events: %v", seen), nil
		})
	if err != nil {
		t.Error(err)
	}
}

func eventMessage(t *testing.T, ns string, er *api.EtcdRestore, reason string) string {
	t.Helper()
	for _, e := range restoreEvents(t, ns, er) {
		if e.Reason == reason {
			return e.Message
		}
	}
	return ""
}

// deleteRestore deletes an ended EtcdRestore and waits until it is gone: the next
// one has the same name (it must be the cluster's).
func deleteRestore(t *testing.T, ns, name string) {
	t.Helper()
	restores := f.Etcd.EtcdV1beta2().EtcdRestores(ns)
	if err := restores.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := framework.WaitFor(t.Context(), time.Minute, framework.Poll, "EtcdRestore "+name+" to be deleted", func(ctx context.Context) (bool, string, error) {
		got, err := restores.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, fmt.Sprintf("finalizers %v", got.Finalizers), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// releaseRestores takes the restore operator's finalizer off the EtcdRestores of ns
// at the end of a test, so that a restore stopped mid-way never blocks the deletion
// of the namespace; a restore the test let finish has none left.
func releaseRestores(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, er := range list.Items {
		if len(er.Finalizers) == 0 {
			continue
		}
		if !t.Failed() && slices.Contains(er.Finalizers, "etcd.database.coreos.com/restore-in-progress") {
			t.Errorf("EtcdRestore %s still has the restore operator's finalizer after the test", er.Name)
		}
		_, _ = f.Etcd.EtcdV1beta2().EtcdRestores(ns).Patch(ctx, er.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
}

func download(t *testing.T, srv *framework.S3Server, bucket, key string) []byte {
	t.Helper()
	out, err := srv.Client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = out.Body.Close() }()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func upload(t *testing.T, srv *framework.S3Server, bucket, key string, data []byte) {
	t.Helper()
	// Plain PUT: the SDK's default aws-chunked checksums are not understood by
	// every S3-compatible server.
	_, err := srv.Client.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)},
		func(o *s3.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired })
	if err != nil {
		t.Fatal(err)
	}
}

// TestMeasureRestore times a whole restore of a large snapshot on the local
// cluster, with E2E_RESTORE_BENCH_MIB=<size>: a snapshot of that much data is
// made on the host (embedded etcd) and uploaded to the S3-compatible server, then
// an empty 3-member cluster is restored from it. It reports how long each step
// took, from the EtcdRestore's events and the seed pod's conditions, and the
// restore operator's memory while it reads and serves the backup. It asserts
// nothing about time: the figures go to the log and to
// _output/bench/backup-restore/restore-on-cluster-<time>.json, from which
// hack/gen-docs backup-restore writes the section of docs/results/backup-restore.md.
func TestMeasureRestore(t *testing.T) {
	mib, _ := strconv.Atoi(os.Getenv("E2E_RESTORE_BENCH_MIB"))
	if mib <= 0 {
		t.Skip("set E2E_RESTORE_BENCH_MIB (for example 512) to measure a restore")
	}
	rep := measureRestore(t, mib)
	dir := filepath.Join(f.Env.RepoRoot, "_output", "bench", "backup-restore")
	path := filepath.Join(dir, "restore-on-cluster-"+time.Now().UTC().Format("20060102-150405")+".json")
	if err := benchreport.Write(path, rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("written to %s; `go run ./hack/gen-docs backup-restore -commit <sha>` writes it into docs/results", path)
}

// measureRestore is TestMeasureRestore's procedure for a snapshot of mib MiB; it
// reports when each stage was reached, and the seconds from the EtcdRestore's
// creation to Completed (which the bench shows).
func measureRestore(t *testing.T, mib int) benchreport.RestoreOnCluster {
	ctx := t.Context()
	ns := newNamespace(t, "restore-bench")
	installOperator(t, ns, framework.Install{})
	t.Cleanup(func() { releaseRestores(t, ns) })
	bucket, key := "e2e-restore-bench", "snapshot.db"
	srv := startS3Server(t, bucket)
	secretName := createS3Secret(t, ns, srv)
	keys, size := uploadLargeSnapshot(t, srv, bucket, key, mib)
	deployExampleOperator(t, ns, f.Env.Path("example", "etcd-restore-operator", "deployment.yaml"))

	name := framework.UniqueName("bench")
	const members, version = 3, "3.5.21"
	createClusterIn(t, ns, ns, framework.NewCluster(name, members, version))
	_, oldPods := waitReady(t, ns, name, 3, bootstrapTimeout(3))

	er := newS3Restore(name, srv, bucket+"/"+key, secretName)
	start := time.Now()
	er, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Create(ctx, er, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Sample, every second, the restore operator's memory (the kubelet's working
	// set) and when the restored cluster first reached each stage.
	var peakMiB float64
	var seed string
	first := map[string]time.Duration{}
	seen := func(stage string) {
		if _, ok := first[stage]; !ok {
			first[stage] = time.Since(start)
		}
	}
	sample := func(ctx context.Context) {
		if st, ok := deploymentContainerStats(t, ns, "etcd-restore-operator"); ok {
			peakMiB = max(peakMiB, st.workingSetMiB)
		}
		pods, err := f.ClusterPods(ctx, ns, name)
		if err != nil {
			return
		}
		ready := 0
		for _, p := range framework.LivePods(pods) {
			if slices.Contains(oldPods, p.Name) {
				continue
			}
			if _, isSeed := p.Annotations["etcd.database.coreos.com/restore-seed"]; isSeed {
				seen("seed pod created")
				seed = p.Name
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodInitialized && c.Status == corev1.ConditionTrue {
						seen("seed initialized (backup fetched and restored)")
					}
				}
			}
			if framework.IsPodReady(&p) {
				ready++
			}
		}
		for i := 1; i <= ready; i++ {
			seen(fmt.Sprintf("%d of 3 restored members Ready", i))
		}
	}
	var st api.RestoreStatus
	err = framework.WaitFor(ctx, 20*time.Minute, time.Second, "the restore to complete", func(ctx context.Context) (bool, string, error) {
		sample(ctx)
		got, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		st = got.Status
		if st.Phase == api.RestorePhaseFailed {
			return false, "", fmt.Errorf("restore failed: %s", st.Reason)
		}
		return st.Phase == api.RestorePhaseCompleted, fmt.Sprintf("%s: %s", st.Phase, st.Reason), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	waitReady(t, ns, name, 3, changeTimeout, oldPods...)
	if n := countKeys(t, ns, name, "/bench/"); n != keys {
		t.Errorf("%d keys after the restore, want %d", n, keys)
	}
	// The operator's own steps, from its events (second resolution).
	for _, e := range restoreEvents(t, ns, er) {
		ts := e.FirstTimestamp.Time
		if ts.IsZero() {
			ts = e.EventTime.Time
		}
		first["event "+e.Reason] = ts.Sub(start.Truncate(time.Second))
	}
	stages := make([]string, 0, len(first))
	for s := range first {
		stages = append(stages, s)
	}
	slices.SortStableFunc(stages, func(a, b string) int { return int(first[a] - first[b]) })
	rep := benchreport.RestoreOnCluster{SizeMiB: mib, SnapshotMiB: float64(size) / (1 << 20), Members: members, EtcdVersion: version,
		CompletedSeconds: took.Seconds(), PeakWorkingSetMiB: peakMiB}
	var report strings.Builder
	fmt.Fprintf(&report, "restore of a %.0f MiB snapshot (%d keys) into a 3-member cluster: %.1fs from EtcdRestore created to Completed\n",
		float64(size)/(1<<20), keys, took.Seconds())
	for _, s := range stages {
		fmt.Fprintf(&report, "  +%5.1fs  %s\n", first[s].Seconds(), s)
		rep.Stages = append(rep.Stages, benchreport.Stage{Seconds: first[s].Seconds(), Stage: s})
	}
	// How long each of the seed's init containers ran.
	if p, err := f.Kube.CoreV1().Pods(ns).Get(ctx, seed, metav1.GetOptions{}); err == nil {
		for _, cs := range p.Status.InitContainerStatuses {
			if term := cs.State.Terminated; term != nil {
				ran := term.FinishedAt.Sub(term.StartedAt.Time).Seconds()
				fmt.Fprintf(&report, "  seed init container %-16s ran %5.1fs\n", cs.Name, ran)
				rep.InitContainers = append(rep.InitContainers, benchreport.InitContainer{Name: cs.Name, Seconds: ran})
			}
		}
	}
	fmt.Fprintf(&report, "  restore operator's peak working set (kubelet samples) while it checked and served the backup: %.0f MiB", peakMiB)
	t.Log(report.String())
	return rep
}

// uploadLargeSnapshot fills an embedded etcd on the host with about mib MiB,
// streams its snapshot to the S3 server and returns the number of keys and the
// snapshot's size.
func uploadLargeSnapshot(t *testing.T, srv *framework.S3Server, bucket, key string, mib int) (int, int64) {
	t.Helper()
	ctx := t.Context()
	e, err := backuptest.StartEtcd(backuptest.EtcdOptions{Dir: t.TempDir(), QuotaBytes: int64(mib)*3<<20 + 1<<30})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const valueSize = 256 << 10
	keys := mib << 20 / valueSize
	if err := e.Fill(ctx, "/bench/", keys, valueSize); err != nil {
		t.Fatal(err)
	}
	store, err := s3store.New(s3store.Config{
		Bucket: bucket, Region: srv.Region, Endpoint: srv.Endpoint, ForcePathStyle: true,
		Credentials: aws.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := backup.SaveSnapshot(ctx, backup.Source{Endpoints: []string{e.Endpoint}}, store, func(int64) string { return key })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("uploaded a snapshot of %d keys: %.1f MiB", keys, float64(snap.Size)/(1<<20))
	return keys, snap.Size
}

// containerStats are a container's figures in the kubelet's summary API.
type containerStats struct {
	workingSetMiB float64
	// cpuSeconds is the CPU time used since the container started.
	cpuSeconds float64
}

// deploymentContainerStats reads the container named like the Deployment in
// its pod from the kubelet's summary API, through the apiserver's node proxy.
func deploymentContainerStats(t *testing.T, ns, deployment string) (containerStats, bool) {
	raw, err := f.Kube.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", f.Env.NodeName, "proxy", "stats", "summary").DoRaw(t.Context())
	if err != nil {
		return containerStats{}, false
	}
	var summary struct {
		Pods []struct {
			PodRef struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"podRef"`
			Containers []struct {
				Name   string `json:"name"`
				Memory struct {
					WorkingSetBytes uint64 `json:"workingSetBytes"`
				} `json:"memory"`
				CPU struct {
					UsageCoreNanoSeconds uint64 `json:"usageCoreNanoSeconds"`
				} `json:"cpu"`
			} `json:"containers"`
		} `json:"pods"`
	}
	if err := json.Unmarshal(raw, &summary); err != nil {
		return containerStats{}, false
	}
	for _, p := range summary.Pods {
		if p.PodRef.Namespace != ns || !strings.HasPrefix(p.PodRef.Name, deployment+"-") {
			continue
		}
		for _, c := range p.Containers {
			if c.Name == deployment {
				return containerStats{
					workingSetMiB: float64(c.Memory.WorkingSetBytes) / (1 << 20),
					cpuSeconds:    float64(c.CPU.UsageCoreNanoSeconds) / 1e9,
				}, true
			}
		}
	}
	return containerStats{}, false
}
