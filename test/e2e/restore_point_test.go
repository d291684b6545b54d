//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestRestoreToAPointInTimeFromTheArchive: a periodic EtcdBackup with the
// continuous archive on takes its snapshot; keys are written, the revision
// noted, more keys written and one of the first deleted; an EtcdRestore to
// the noted revision replaces the cluster with exactly the keys up to it:
// those of the snapshot and those written before the point, the deleted one
// still there, none written after. Its status says which snapshot it started
// from and that the archive was replayed up to the point.
func TestRestoreToAPointInTimeFromTheArchive(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bed := newBackupBed(t, "restore-point", true)
	ns, bucket, srv, secretName := bed.ns, bed.bucket, bed.srv, bed.secret

	name := framework.UniqueName("point")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	_, oldPods := waitReady(t, ns, name, 3, bootstrapTimeout(3))
	putKeys(t, ns, name, "/e2e/snapshot/", 20)

	path := "pitr/" + name
	b := bed.createBackup(t, name, path, &api.BackupPolicy{BackupIntervalInSecond: 3600, Archive: &api.BackupArchive{IntervalInSecond: 1}})
	backupStatus := func(ctx context.Context) (*api.EtcdBackup, error) {
		return f.Etcd.EtcdV1beta2().EtcdBackups(ns).Get(ctx, b.Name, metav1.GetOptions{})
	}
	var snapshotRevision int64
	err := framework.WaitFor(ctx, backupTimeout, framework.Poll, "the first snapshot of EtcdBackup "+b.Name+" and its archive", func(ctx context.Context) (bool, string, error) {
		got, err := backupStatus(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		snapshotRevision = got.Status.EtcdRevision
		return snapshotRevision > 0 && got.Status.Archive != nil, fmt.Sprintf("%+v", got.Status), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	putKeys(t, ns, name, "/e2e/upto/", 30)
	point := currentRevision(t, ns, name)
	putKeys(t, ns, name, "/e2e/after/", 30)
	if _, err := f.Etcdctl(ctx, ns, name, false, "del", "/e2e/snapshot/0001"); err != nil {
		t.Fatal(err)
	}
	last := currentRevision(t, ns, name)
	t.Logf("snapshot at revision %d, point at revision %d, last write at revision %d", snapshotRevision, point, last)
	err = framework.WaitFor(ctx, backupTimeout, framework.Poll, fmt.Sprintf("the archive to hold revision %d", last), func(ctx context.Context) (bool, string, error) {
		got, err := backupStatus(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return got.Status.Archive != nil && got.Status.Archive.LastRevision >= last, fmt.Sprintf("%+v", got.Status.Archive), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	er := newS3Restore(name, srv, bucket+"/"+path, secretName)
	er.Spec.PointInTime = &api.RestorePointInTime{Revision: point}
	er, err = f.Etcd.EtcdV1beta2().EtcdRestores(ns).Create(ctx, er, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := waitRestore(t, ns, name, restoreTimeout, api.RestorePhaseCompleted)
	pit := st.PointInTime
	if pit == nil || pit.SnapshotRevision != snapshotRevision || pit.Revision != point || !pit.Replayed || pit.Keys < 30 {
		t.Errorf("status.pointInTime %+v, want snapshot %d replayed to revision %d", pit, snapshotRevision, point)
	}
	expectEvent(t, ns, er, corev1.EventTypeNormal, "PointInTimeChosen")
	waitReady(t, ns, name, 3, changeTimeout, oldPods...)

	for prefix, want := range map[string]int{"/e2e/snapshot/": 20, "/e2e/upto/": 30, "/e2e/after/": 0} {
		if n := countKeys(t, ns, name, prefix); n != want {
			t.Errorf("%d keys under %s after the restore to revision %d, want %d", n, prefix, point, want)
		}
	}
}

var headerRevisionRE = regexp.MustCompile(`"Revision" : (\d+)`)

// currentRevision is the cluster's revision, from a linearizable read.
func currentRevision(t *testing.T, ns, cluster string) int64 {
	t.Helper()
	out, err := f.Etcdctl(t.Context(), ns, cluster, false, "get", "/e2e/", "--prefix", "--count-only", "-w", "fields")
	if err != nil {
		t.Fatal(err)
	}
	m := headerRevisionRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no revision in %q", out)
	}
	rev, _ := strconv.ParseInt(m[1], 10, 64)
	return rev
}
