//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/absstore"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/gcsstore"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// storeKeys is how many keys the store tests back up and restore.
const storeKeys = 200

// storeUnderTest is one object store as the store round trip needs it: a server
// on the host that pods reach through the node's address, and the spec blocks
// that name a path in it.
type storeUnderTest struct {
	kind   api.BackupStorageType
	bucket string
	// store reads the server directly, from the host.
	store   backup.Store
	backup  func(path string) api.BackupSource
	restore func(path string) api.RestoreSource
	// secret is the Secret's data the blocks name, if any.
	secret map[string][]byte
}

// TestBackupStoreABS backs up to Azurite (hack/azurite.sh installs it from npm)
// and restores from it.
func TestBackupStoreABS(t *testing.T) {
	t.Parallel()
	const container = "e2e-abs"
	az, err := backuptest.StartAzuriteOn(t.Context(), f.Env.NodeIP, t.TempDir(), container)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(az.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("======== azurite output\n%s", lastLines(az.Output(), 60))
		}
	})
	store, err := absstore.New(az.StoreConfig(container))
	if err != nil {
		t.Fatal(err)
	}
	const secret = "abs"
	storeRoundTrip(t, storeUnderTest{
		kind: api.BackupStorageTypeABS, bucket: container, store: store,
		secret: backuptest.ABSSecretData(),
		backup: func(path string) api.BackupSource {
			return api.BackupSource{ABS: &api.ABSBackupSource{Path: container + "/" + path, ABSSecret: secret, Endpoint: az.URL}}
		},
		restore: func(path string) api.RestoreSource {
			return api.RestoreSource{ABS: &api.ABSRestoreSource{Path: container + "/" + path, ABSSecret: secret, Endpoint: az.URL}}
		},
	})
}

// TestBackupStoreGCS backs up to fake-gcs-server, which runs inside this test
// binary on the node's address, and restores from it.
func TestBackupStoreGCS(t *testing.T) {
	t.Parallel()
	const bucket = "e2e-gcs"
	srv, err := backuptest.StartGCSOn(f.Env.NodeIP, bucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	store, err := gcsstore.New(t.Context(), srv.StoreConfig(bucket))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	storeRoundTrip(t, storeUnderTest{
		kind: api.BackupStorageTypeGCS, bucket: bucket, store: store,
		backup: func(path string) api.BackupSource {
			return api.BackupSource{GCS: &api.GCSBackupSource{Path: bucket + "/" + path, Endpoint: srv.URL}}
		},
		restore: func(path string) api.RestoreSource {
			return api.RestoreSource{GCS: &api.GCSRestoreSource{Path: bucket + "/" + path, Endpoint: srv.URL}}
		},
	})
}

// storeRoundTrip runs, in a namespace of its own, the example backup and restore
// operators against s: a one-shot backup, verified (spec.verify), of a cluster
// with data; a periodic backup with maxBackups; then a restore of the cluster from
// the one-shot backup, which brings back the data as it was; then a restore
// to a time from the continuous archive (restoreToATime).
func storeRoundTrip(t *testing.T, s storeUnderTest) {
	ctx := t.Context()
	ns := newNamespace(t, "store-"+strings.ToLower(string(s.kind)))
	installOperator(t, ns, framework.Install{})
	t.Cleanup(func() { releaseRestores(t, ns) })
	if s.secret != nil {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "abs"}, Data: s.secret}
		if _, err := f.Kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deployExampleOperator(t, ns, f.Env.Path("example", "etcd-backup-operator", "deployment.yaml"))
	deployExampleOperator(t, ns, f.Env.Path("example", "etcd-restore-operator", "deployment.yaml"))

	name := framework.UniqueName("store")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 1, "3.5.21"))
	waitReady(t, ns, name, 1, bootstrapTimeout(1))
	putKeys(t, ns, name, "/e2e/before/", storeKeys)
	endpoints := []string{framework.ClientURL(name, false)}
	backups := f.Etcd.EtcdV1beta2().EtcdBackups(ns)
	create := func(eb *api.EtcdBackup) {
		t.Helper()
		if _, err := backups.Create(ctx, eb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Before the namespace goes: its deletion would wait for the periodic
		// finalizer, which only a running backup operator removes.
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = backups.Delete(ctx, eb.Name, metav1.DeleteOptions{})
			err := framework.WaitFor(ctx, 50*time.Second, framework.Poll, "EtcdBackup "+eb.Name+" to be deleted", func(ctx context.Context) (bool, string, error) {
				_, err := backups.Get(ctx, eb.Name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), fmt.Sprint(err), nil
			})
			if err != nil {
				t.Errorf("the backup operator did not release EtcdBackup %s: %v", eb.Name, err)
				_, _ = backups.Patch(ctx, eb.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			}
		})
	}

	oneShot := "oneshot/" + name + ".db"
	create(&api.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-once"},
		Spec: api.BackupSpec{EtcdEndpoints: endpoints, StorageType: s.kind, BackupSource: s.backup(oneShot),
			Verify: &api.BackupVerify{}},
	})
	var st api.BackupStatus
	err := framework.WaitFor(ctx, backupTimeout, framework.Poll, "the one-shot backup to "+string(s.kind), func(ctx context.Context) (bool, string, error) {
		got, err := backups.Get(ctx, name+"-once", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		st = got.Status
		if !st.Succeeded && st.Reason != "" {
			return false, "", fmt.Errorf("the backup failed: %s", st.Reason)
		}
		return st.Succeeded, fmt.Sprintf("%+v", st), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.store.Head(ctx, oneShot)
	if err != nil || info.Size != st.BackupSize {
		t.Fatalf("status %+v, but the store has %+v (%v)", st, info, err)
	}
	if v := st.Verified; v == nil || !v.Succeeded || v.Revision != st.EtcdRevision || v.SHA256 != st.SHA256 || v.TotalKeys < storeKeys {
		t.Fatalf("status.verified %+v of the backup %+v", v, st)
	}
	t.Logf("%s %s/%s: %d bytes, revision %d, verified with %d keys", s.kind, s.bucket, oneShot, st.BackupSize, st.EtcdRevision, st.Verified.TotalKeys)

	t.Run("periodic keeps the newest two", func(t *testing.T) {
		prefix := "periodic/" + name
		create(&api.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-periodic"},
			Spec: api.BackupSpec{EtcdEndpoints: endpoints, StorageType: s.kind, BackupSource: s.backup(prefix),
				BackupPolicy: &api.BackupPolicy{BackupIntervalInSecond: periodicSeconds, MaxBackups: periodicKeep}},
		})
		var seen []string
		list := func(ctx context.Context) ([]string, error) {
			objs, err := s.store.List(ctx, prefix)
			if err != nil {
				return nil, err
			}
			var keys []string
			for _, o := range objs {
				keys = append(keys, o.Key)
				if !slices.Contains(seen, o.Key) {
					seen = append(seen, o.Key)
				}
			}
			slices.Sort(keys)
			return keys, nil
		}
		err := framework.WaitFor(ctx, time.Duration(periodicRounds+4)*periodicSeconds*time.Second+backupTimeout, time.Second,
			fmt.Sprintf("%d periodic backups under %s/%s", periodicRounds, s.bucket, prefix),
			func(ctx context.Context) (bool, string, error) {
				keys, err := list(ctx)
				if err != nil {
					return false, err.Error(), nil
				}
				if len(keys) > periodicKeep+1 {
					return false, "", fmt.Errorf("%d objects stored at once with maxBackups %d: %v", len(keys), periodicKeep, keys)
				}
				return len(seen) >= periodicRounds, fmt.Sprintf("seen %v; now %v", seen, keys), nil
			})
		if err != nil {
			t.Fatal(err)
		}
		err = framework.WaitFor(ctx, time.Duration(periodicSeconds)*time.Second, 200*time.Millisecond, "exactly the newest two backups to remain",
			func(ctx context.Context) (bool, string, error) {
				keys, err := list(ctx)
				if err != nil {
					return false, err.Error(), nil
				}
				newest := slices.Clone(seen[len(seen)-periodicKeep:])
				slices.Sort(newest)
				return slices.Equal(keys, newest), fmt.Sprintf("stored %v, newest seen %v (all seen: %v)", keys, newest, seen), nil
			})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range seen {
			if !strings.HasPrefix(k, prefix+"_v") {
				t.Errorf("periodic backup %q is not named <path>_v<revision>_<time>", k)
			}
		}
		// Stop it before the restore replaces the cluster it backs up.
		if err := backups.Delete(ctx, name+"-periodic", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Logf("periodic backups seen: %v", seen)
	})
	if t.Failed() {
		return
	}

	putKeys(t, ns, name, "/e2e/after/", 10)
	er := &api.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.RestoreSpec{BackupStorageType: s.kind, RestoreSource: s.restore(oneShot),
			EtcdCluster: api.EtcdClusterRef{Name: name}},
	}
	if _, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Create(ctx, er, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitRestore(t, ns, name, restoreTimeout, api.RestorePhaseCompleted)
	waitReady(t, ns, name, 1, changeTimeout)
	t.Logf("restored %s from %s in %.1fs", name, s.kind, time.Since(start).Seconds())
	if n := countKeys(t, ns, name, "/e2e/before/"); n != storeKeys {
		t.Errorf("%d of the %d backed-up keys are back", n, storeKeys)
	}
	if n := countKeys(t, ns, name, "/e2e/after/"); n != 0 {
		t.Errorf("%d keys written after the backup are there; the cluster was not restored from it", n)
	}
	if t.Failed() {
		return
	}
	restoreToATime(t, s, ns, name, create)
}

// restoreToATime is the store round trip's point in time: a periodic
// EtcdBackup with the continuous archive on, keys written before a time
// and after it, and a restore to that time, as "the cluster as of
// 14:32:10" is asked for, which brings back every key written before it and
// none after.
func restoreToATime(t *testing.T, s storeUnderTest, ns, name string, create func(*api.EtcdBackup)) {
	ctx := t.Context()
	path := "pitr/" + name
	create(&api.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-archived"},
		Spec: api.BackupSpec{EtcdEndpoints: []string{framework.ClientURL(name, false)}, StorageType: s.kind, BackupSource: s.backup(path),
			BackupPolicy: &api.BackupPolicy{BackupIntervalInSecond: 3600, Archive: &api.BackupArchive{IntervalInSecond: 1}}},
	})
	archived := func(ctx context.Context) (*api.BackupArchiveStatus, string, error) {
		got, err := f.Etcd.EtcdV1beta2().EtcdBackups(ns).Get(ctx, name+"-archived", metav1.GetOptions{})
		if err != nil {
			return nil, err.Error(), nil
		}
		if got.Status.EtcdRevision == 0 || got.Status.Archive == nil {
			return nil, fmt.Sprintf("%+v", got.Status), nil
		}
		return got.Status.Archive, fmt.Sprintf("%+v", got.Status.Archive), nil
	}
	err := framework.WaitFor(ctx, backupTimeout, framework.Poll, "the first snapshot of the archived backup to "+string(s.kind), func(ctx context.Context) (bool, string, error) {
		a, said, err := archived(ctx)
		return a != nil, said, err
	})
	if err != nil {
		t.Fatal(err)
	}
	putKeys(t, ns, name, "/e2e/before-the-time/", 10)
	// A second on either side of the time, so that the archive received
	// every change clearly before it or after it.
	time.Sleep(2 * time.Second)
	point := time.Now().UTC().Truncate(time.Second)
	time.Sleep(2 * time.Second)
	putKeys(t, ns, name, "/e2e/after-the-time/", 10)
	last := currentRevision(t, ns, name)
	err = framework.WaitFor(ctx, backupTimeout, framework.Poll, fmt.Sprintf("the archive to hold revision %d", last), func(ctx context.Context) (bool, string, error) {
		a, said, err := archived(ctx)
		return a != nil && a.LastRevision >= last, said, err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Stopped before the restore replaces the cluster it backs up.
	if err := f.Etcd.EtcdV1beta2().EtcdBackups(ns).Delete(ctx, name+"-archived", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteRestore(t, ns, name)
	er := &api.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.RestoreSpec{BackupStorageType: s.kind, RestoreSource: s.restore(path),
			EtcdCluster: api.EtcdClusterRef{Name: name}, PointInTime: &api.RestorePointInTime{Time: point.Format(time.RFC3339)}},
	}
	if _, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Create(ctx, er, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	st := waitRestore(t, ns, name, restoreTimeout, api.RestorePhaseCompleted)
	waitReady(t, ns, name, 1, changeTimeout)
	t.Logf("restored %s from %s as of %s in %.1fs: %+v", name, s.kind, point.Format(time.RFC3339), time.Since(start).Seconds(), st.PointInTime)
	if pit := st.PointInTime; pit == nil || !pit.Replayed {
		t.Errorf("status.pointInTime %+v, want the archive replayed onto the snapshot", pit)
	}
	for prefix, want := range map[string]int{"/e2e/before/": storeKeys, "/e2e/before-the-time/": 10, "/e2e/after-the-time/": 0} {
		if n := countKeys(t, ns, name, prefix); n != want {
			t.Errorf("%d keys under %s after the restore as of %s, want %d", n, prefix, point.Format(time.RFC3339), want)
		}
	}
}
