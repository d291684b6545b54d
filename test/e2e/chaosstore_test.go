//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/restore"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// Fault scenarios of the cluster's surroundings: client TLS, the object store
// of the backups, the members' space. Each runs the checker (underLoad) as the
// scenarios of chaos_test.go do.

// TestChaosTLSLeaderKill is the leader kill on a cluster with client TLS: the
// checker talks https with the client certificate of the cluster's own secret,
// the way a client in the cluster would, and must see a linearizable history
// with nothing acknowledged lost.
func TestChaosTLSLeaderKill(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("chaos-tls")
	secrets := createTLSSecrets(t, opNS, name)
	cl := framework.NewCluster(name, 3, "3.5.21")
	cl.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{
		Member:         &api.MemberSecret{PeerSecret: secrets.peer, ServerSecret: secrets.server},
		OperatorSecret: secrets.client,
	}}
	createCluster(t, cl)
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	underLoadPod(t, framework.CheckerPod{Namespace: opNS, Cluster: name, Scenario: "tls-leader-kill", Duration: 45 * time.Second, TLSSecret: secrets.client},
		func(ctx context.Context) { killTheLeader(ctx, t, name, true) })
}

// tlsSecretNames are the three secrets of a static-TLS cluster.
type tlsSecretNames struct{ peer, server, client string }

// createTLSSecrets makes the certificates of cluster in ns with
// example/tls/gen-certs.sh and stores them under names of the cluster's own (the
// script's fixed names would collide between tests); they go when the test ends.
func createTLSSecrets(t *testing.T, ns, cluster string) tlsSecretNames {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	if _, err := f.Run(ctx, framework.Cmd{
		Name: "bash",
		Args: []string{f.Env.Path("example", "tls", "gen-certs.sh")},
		Env:  []string{"CLUSTER=" + cluster, "NAMESPACE=" + ns, "OUT=" + dir},
	}); err != nil {
		t.Fatalf("gen-certs.sh: %v", err)
	}
	names := tlsSecretNames{peer: cluster + "-peer", server: cluster + "-server", client: cluster + "-client"}
	for secretName, files := range map[string][]string{
		names.peer:   {"peer.crt", "peer.key", "peer-ca.crt"},
		names.server: {"server.crt", "server.key", "server-ca.crt"},
		names.client: {"etcd-client.crt", "etcd-client.key", "etcd-client-ca.crt"},
	} {
		data := map[string][]byte{}
		for _, file := range files {
			b, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			data[file] = b
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName}, Data: data}
		if _, err := f.Kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = f.Kube.CoreV1().Secrets(ns).Delete(ctx, secretName, metav1.DeleteOptions{})
		})
	}
	return names
}

// TestChaosLongNoSpaceUnderLoad fills a member's space while the checker runs:
// a cluster whose quota is tiny (2 MiB, as TestNoSpaceIsRecoveredByTheOperator)
// gets 100 KiB values until etcd raises the NOSPACE alarm and refuses every
// write. Writes refused then are failures the clients see, never acknowledged;
// the operator reports the alarm (condition, events), compacts, defragments and
// disarms it, and writes work again. Nothing acknowledged before, during or
// after may be missing. The checker runs at a low rate so that its own writes
// do not fill the quota again before the recovery, and long enough that its
// clients write again after it.
func TestChaosLongNoSpaceUnderLoad(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("chaos-nospace")
	cl := framework.NewCluster(name, 3, "3.5.21")
	// A tiny claim: the operator derives etcd's quota from the claim's size
	// (8 MiB gives 2 MiB, api.QuotaForClaim), so the database fills it as a
	// full disk would, and etcd raises NOSPACE. The local volumes are host
	// directories whose size nothing enforces; the quota is what etcd obeys.
	group := "e2e-" + name
	createHostPathPVs(t, group, 4)
	claim := claimSpec(group)
	claim.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("8Mi")
	cl.Spec.Pod = &api.PodPolicy{PersistentVolumeClaimSpec: claim}
	createCluster(t, cl)
	logVolumesOnFailure(t, group)
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	p := framework.CheckerPod{Namespace: opNS, Cluster: name, Scenario: "nospace-tiny-claim", Duration: 150 * time.Second, Rate: 10}
	var recoveredAfter time.Duration
	underLoadPod(t, p, func(ctx context.Context) {
		fillUntilNoSpace(t, opNS, pods[0])
		full := time.Now()
		t.Log("NOSPACE: the quota is exhausted and etcd refuses writes")
		if !waitNoSpaceRecovered(t, opNS, name, pods[0]) {
			t.Log("the NoSpace condition was not seen (the recovery was faster than the poll); the events say it")
		}
		recoveredAfter = time.Since(full)
		waitReady(t, opNS, name, 3, changeTimeout)
	})
	t.Logf("writes resumed %.1fs after NOSPACE", recoveredAfter.Seconds())
}

// Bounds of the object-store outage scenario.
const (
	// outageSeconds is how long the store stays away: longer than a few backup
	// intervals, so that several attempts fail.
	outageSeconds = 20
	// outageIntervalSeconds and outageKeep: the periodic backup of the scenario.
	outageIntervalSeconds = 5
	outageKeep            = 3
	// A failing periodic backup backs off from the interval, doubling (5, 10, 20,
	// 40 s): the first attempt after the store is back comes within that.
	outageRecoveryTimeout = 3 * time.Minute
)

// TestChaosLongS3Outage stops the S3-compatible store of the backups while the
// checker runs against the cluster, first during periodic backups, then during
// a restore, then in the middle of a restore's hand-over.
//
// During periodic backups: the attempts fail cleanly (status.Reason set, a
// BackupFailed Warning event, the last success still described by the status
// and still in the bucket afterwards), the backups resume once the store is
// back, and every object in the bucket is a whole snapshot (its length and the
// sha256 etcd appends check out). The clients see nothing.
//
// During a restore: with the store away the restore cannot read the backup
// through, so it retries (RestoreRetrying events saying nothing was changed) or
// fails, and the cluster it was to replace keeps running untouched under the
// checker: same pods, nothing acknowledged lost. Once the store is back the
// restore goes ahead; the store is stopped again as soon as the hand-over
// starts, and the restore still ends with the whole snapshot: exactly the keys
// the backup held, never part of them.
func TestChaosLongS3Outage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bed := newBackupBed(t, "chaos-s3", true)
	ns, srv, bucket, secret := bed.ns, bed.srv, bed.bucket, bed.secret

	name := framework.UniqueName("chaos-s3")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, ns, name, 3, bootstrapTimeout(3))
	putKeys(t, ns, name, "/e2e/before/", 1000)

	prefix := "periodic/" + name
	eb := createBackupIn(t, ns, &api.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-periodic"},
		Spec: api.BackupSpec{
			EtcdEndpoints: []string{framework.ClientURL(name, false)},
			StorageType:   api.BackupStorageTypeS3,
			BackupSource: api.BackupSource{S3: &api.S3BackupSource{
				Path: bucket + "/" + prefix, AWSSecret: secret, Endpoint: srv.Endpoint, ForcePathStyle: true,
			}},
			BackupPolicy: &api.BackupPolicy{BackupIntervalInSecond: outageIntervalSeconds, MaxBackups: outageKeep},
		},
	})
	backups := f.Etcd.EtcdV1beta2().EtcdBackups(ns)
	backupStatus := func(ctx context.Context) (api.BackupStatus, error) {
		got, err := backups.Get(ctx, eb.Name, metav1.GetOptions{})
		if err != nil {
			return api.BackupStatus{}, err
		}
		return got.Status, nil
	}

	underLoad(t, ns, name, "s3-outage-during-periodic-backup", 100*time.Second, func(ctx context.Context) {
		var good api.BackupStatus
		err := framework.WaitFor(ctx, backupTimeout, framework.Poll, "a first periodic backup", func(ctx context.Context) (bool, string, error) {
			st, err := backupStatus(ctx)
			good = st
			return err == nil && st.Succeeded && st.BackupPath != "", fmt.Sprintf("%+v %v", st, err), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		srv.Stop()
		stopped := time.Now()
		t.Logf("stopped the store after the backup %s", good.BackupPath)

		var failed api.BackupStatus
		err = framework.WaitFor(ctx, backupTimeout, framework.Poll, "the periodic backup to report the store's outage", func(ctx context.Context) (bool, string, error) {
			st, err := backupStatus(ctx)
			failed = st
			return err == nil && !st.Succeeded && st.Reason != "", fmt.Sprintf("%+v %v", st, err), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("status.Reason %.1fs after the outage began: %q", time.Since(stopped).Seconds(), failed.Reason)
		// A backup that was uploading when the store went may have succeeded
		// after good was read: the status must still describe a success.
		if failed.BackupPath == "" || failed.EtcdRevision < good.EtcdRevision || failed.SHA256 == "" {
			t.Errorf("a failed backup erased what the status says of the last good one: %+v, was %+v", failed, good)
		}
		expectObjectEvent(t, ns, eb.Name, eb.UID, corev1.EventTypeWarning, "BackupFailed", stopped)

		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(stopped.Add(outageSeconds * time.Second))):
		}
		if err := srv.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		// Older backups are pruned after a newer one is stored, never before: the
		// last good one the status names is still there.
		during, err := srv.List(ctx, bucket, prefix)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(framework.KeysOf(during), strings.TrimPrefix(failed.BackupPath, bucket+"/")) {
			t.Errorf("the last good backup %s is gone after the outage: %v", failed.BackupPath, framework.KeysOf(during))
		}
		t.Logf("restarted the store after %.0fs; stored: %v", restarted.Sub(stopped).Seconds(), framework.KeysOf(during))

		err = framework.WaitFor(ctx, outageRecoveryTimeout, framework.Poll, "a periodic backup after the store is back", func(ctx context.Context) (bool, string, error) {
			st, err := backupStatus(ctx)
			return err == nil && st.Succeeded && st.BackupPath != good.BackupPath, fmt.Sprintf("%+v %v", st, err), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("backups resumed %.1fs after the store came back", time.Since(restarted).Seconds())
	})
	if t.Failed() {
		return
	}
	// The periodic backup stops here, so that the bucket holds still.
	if err := backups.Delete(ctx, eb.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitFor(ctx, time.Minute, framework.Poll, "the periodic backup to stop", func(ctx context.Context) (bool, string, error) {
		_, err := backups.Get(ctx, eb.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	}); err != nil {
		t.Fatal(err)
	}
	stored, err := srv.List(ctx, bucket, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) == 0 || len(stored) > outageKeep {
		t.Fatalf("%d backups stored with maxBackups %d: %v", len(stored), outageKeep, framework.KeysOf(stored))
	}
	for _, o := range stored {
		check := backup.NewSnapshotCheck()
		if _, err := check.Write(download(t, srv, bucket, o.Key)); err != nil {
			t.Fatal(err)
		}
		if err := check.Verify(); err != nil {
			t.Errorf("s3://%s/%s is not a whole snapshot: %v", bucket, o.Key, err)
		}
	}
	t.Logf("%d whole snapshots stored by the periodic backup: %v", len(stored), framework.KeysOf(stored))

	// The restore's source is a backup of the cluster at rest (the checker is
	// done): a snapshot taken under writes holds a few more than its recorded
	// revision, and the restored cluster must hold exactly what the backup does.
	source := "oneshot/" + name + ".db"
	backUp(t, ns, name, srv, bucket, source, secret)
	wantKeys := countAllKeys(t, ns, name)
	t.Logf("restoring s3://%s/%s (%d keys)", bucket, source, wantKeys)

	pods, err := f.ClusterPods(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	uids := map[types.UID]bool{}
	for _, p := range pods {
		uids[p.UID] = true
	}
	restores := f.Etcd.EtcdV1beta2().EtcdRestores(ns)
	er := &api.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.RestoreSpec{
			BackupStorageType: api.BackupStorageTypeS3,
			RestoreSource: api.RestoreSource{S3: &api.S3RestoreSource{
				Path: bucket + "/" + source, AWSSecret: secret, Endpoint: srv.Endpoint, ForcePathStyle: true,
			}},
			EtcdCluster: api.EtcdClusterRef{Name: name},
		},
	}
	underLoad(t, ns, name, "s3-outage-during-restore", 60*time.Second, func(ctx context.Context) {
		srv.Stop()
		stopped := time.Now()
		created, err := restores.Create(ctx, er.DeepCopy(), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = framework.WaitFor(ctx, refusedTimeout, framework.Poll, "the restore to retry or fail while the store is away", func(ctx context.Context) (bool, string, error) {
			got, err := restores.Get(ctx, er.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			if got.Status.Phase == api.RestorePhaseFailed {
				return true, "", nil
			}
			for _, e := range restoreEvents(t, ns, created) {
				if e.Type == corev1.EventTypeWarning && e.Reason == restore.ReasonRetrying {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%+v", got.Status), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := restores.Get(ctx, er.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%.1fs into the outage the restore is %s: %q; retrying: %q", time.Since(stopped).Seconds(),
			got.Status.Phase, got.Status.Reason, eventMessage(t, ns, created, restore.ReasonRetrying))
		if got.Status.Phase == api.RestorePhaseRestoring || got.Status.Phase == api.RestorePhaseCompleted {
			t.Fatalf("the restore went ahead without its backup: %+v", got.Status)
		}
	})
	if t.Failed() {
		return
	}
	pods, err = f.ClusterPods(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range framework.LivePods(pods) {
		if !uids[p.UID] {
			t.Fatalf("the cluster was touched by a restore that could not read its backup: pod %s is new (%s)", p.Name, framework.DescribePods(pods))
		}
	}

	// The store comes back and the restore goes ahead (a new one, if the old one
	// gave up); the store goes again as soon as the hand-over starts.
	got, err := restores.Get(ctx, er.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase == api.RestorePhaseFailed {
		t.Logf("the restore failed while the store was away (%q); restoring again", got.Status.Reason)
		deleteRestore(t, ns, er.Name)
		if _, err := restores.Create(ctx, er.DeepCopy(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err = framework.WaitFor(ctx, restoreTimeout, 200*time.Millisecond, "the restore's hand-over to start", func(ctx context.Context) (bool, string, error) {
		got, err := restores.Get(ctx, er.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if got.Status.Phase == api.RestorePhaseFailed {
			return false, "", fmt.Errorf("the restore failed with the store back: %s", got.Status.Reason)
		}
		return got.Status.Phase == api.RestorePhaseRestoring || got.Status.Phase == api.RestorePhaseCompleted, fmt.Sprintf("%+v", got.Status), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	handover := time.Now()
	t.Log("stopped the store again at the start of the hand-over")
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(outageSeconds * time.Second):
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	st := waitRestore(t, ns, er.Name, restoreTimeout, api.RestorePhaseCompleted)
	waitReady(t, ns, name, 3, changeTimeout)
	t.Logf("restored %.1fs after the hand-over began with the store away for %ds: %+v", time.Since(handover).Seconds(), outageSeconds, st)
	if n := countKeys(t, ns, name, "/e2e/before/"); n != 1000 {
		t.Errorf("the restored cluster holds %d of the 1000 keys backed up under /e2e/before/", n)
	}
	if n := countAllKeys(t, ns, name); n != wantKeys {
		t.Errorf("the restored cluster holds %d keys; the backup held %d: a partial snapshot", n, wantKeys)
	}
}

// expectObjectEvent waits for an event of eventType and reason on the object
// (name, uid) that happened after since.
func expectObjectEvent(t *testing.T, ns, name string, uid types.UID, eventType, reason string, since time.Time) {
	t.Helper()
	err := framework.WaitFor(t.Context(), time.Minute, framework.Poll, fmt.Sprintf("a %s event %s on %s", eventType, reason, name),
		func(ctx context.Context) (bool, string, error) {
			evs, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
				"involvedObject.name": name, "involvedObject.uid": string(uid),
			}.String()})
			if err != nil {
				return false, err.Error(), nil
			}
			var seen []string
			for _, e := range evs.Items {
				last := e.LastTimestamp.Time
				if e.EventTime.After(last) {
					last = e.EventTime.Time
				}
				if e.Type == eventType && e.Reason == reason && !last.Before(since.Truncate(time.Second)) {
					t.Logf("%s event %s: %s", e.Type, e.Reason, e.Message)
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

// countAllKeys counts every key of the cluster with a linearizable read.
func countAllKeys(t *testing.T, ns, cluster string) int {
	t.Helper()
	return countKeys(t, ns, cluster, "")
}
