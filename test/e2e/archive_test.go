//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestBackupArchiveShipsChangesToAnS3CompatibleStore: a periodic EtcdBackup
// with the continuous archive on, of a 3-member cluster written to all along,
// stores chunks under <path>.archive/ that follow its snapshot without a
// hole, and status.archive.lastRevision moves on with the writes, the
// recovery point with it.
func TestBackupArchiveShipsChangesToAnS3CompatibleStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bed := newBackupBed(t, "archive", false)
	ns, bucket, srv := bed.ns, bed.bucket, bed.srv

	name := framework.UniqueName("archive")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, ns, name, 3, bootstrapTimeout(3))
	keepWriting(t, ns, name, "/e2e/archive/")

	path := "archived/" + name
	b := bed.createBackup(t, name, path, &api.BackupPolicy{BackupIntervalInSecond: 3600, Archive: &api.BackupArchive{IntervalInSecond: 2}})

	status := func(ctx context.Context) (*api.EtcdBackup, error) {
		return f.Etcd.EtcdV1beta2().EtcdBackups(ns).Get(ctx, b.Name, metav1.GetOptions{})
	}
	var first int64
	err := framework.WaitFor(ctx, backupTimeout, framework.Poll, "status.archive.lastRevision of EtcdBackup "+b.Name, func(ctx context.Context) (bool, string, error) {
		got, err := status(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		if got.Status.Archive != nil {
			first = got.Status.Archive.LastRevision
		}
		return first > 0, fmt.Sprintf("%+v", got.Status), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// With no hole after the snapshot, the recovery point (kept by the real
	// apiserver's schema) is the archive's end, reached from that snapshot.
	err = framework.WaitFor(ctx, backupTimeout, framework.Poll, "status.archive.lastRevision to move on from "+fmt.Sprint(first)+" with the recovery point", func(ctx context.Context) (bool, string, error) {
		got, err := status(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		a := got.Status.Archive
		if a == nil || a.LastRevision <= first {
			return false, fmt.Sprintf("%+v", a), nil
		}
		rp := a.RecoveryPoint
		return rp != nil && rp.Revision == a.LastRevision && rp.SnapshotRevision == got.Status.EtcdRevision && rp.Time != nil,
			fmt.Sprintf("%+v, recovery point %+v, snapshot %d", a, rp, got.Status.EtcdRevision), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The chunks in the bucket follow the newest snapshot without a hole.
	prefix := path + api.ArchivePathSuffix
	var chunks []archive.Chunk
	err = framework.WaitFor(ctx, backupTimeout, time.Second, "chunks under s3://"+bucket+"/"+prefix, func(ctx context.Context) (bool, string, error) {
		objs, err := srv.List(ctx, bucket, prefix)
		if err != nil {
			return false, err.Error(), nil
		}
		chunks = chunks[:0]
		for _, o := range objs {
			if c, ok := archive.ParseChunkName(prefix, backup.ObjectInfo{Key: o.Key, Size: o.Size}); ok {
				chunks = append(chunks, c)
			}
		}
		slices.SortFunc(chunks, func(a, b archive.Chunk) int { return cmp.Compare(a.First, b.First) })
		got, err := status(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		_, cerr := archive.Covering(chunks, got.Status.EtcdRevision, 0)
		return len(chunks) >= 2 && cerr == nil, fmt.Sprintf("%d chunks %v after snapshot %d: %v", len(chunks), framework.KeysOf(objs), got.Status.EtcdRevision, cerr), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d chunks, revisions %d to %d", len(chunks), chunks[0].First, chunks[len(chunks)-1].Last)
}

// createBackup creates an EtcdBackup, named like the cluster, of the
// cluster's members into the bed's bucket under path, with policy.
func (b backupBed) createBackup(t *testing.T, cluster, path string, policy *api.BackupPolicy) *api.EtcdBackup {
	t.Helper()
	return createBackupIn(t, b.ns, &api.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: cluster},
		Spec: api.BackupSpec{
			EtcdEndpoints: []string{framework.ClientURL(cluster, false)},
			StorageType:   api.BackupStorageTypeS3,
			BackupSource: api.BackupSource{S3: &api.S3BackupSource{
				Path: b.bucket + "/" + path, AWSSecret: b.secret, Endpoint: b.srv.Endpoint, ForcePathStyle: true,
			}},
			BackupPolicy: policy,
		},
	})
}

// keepWriting writes to the cluster all along, one of 50 keys under prefix
// in turn every half second, until the test ends.
func keepWriting(t *testing.T, ns, name, prefix string) {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	var writes sync.WaitGroup
	writes.Add(1)
	go func() {
		defer writes.Done()
		for i := 0; ctx.Err() == nil; i++ {
			_ = f.PutAndGet(ctx, ns, name, false, fmt.Sprintf("%s%d", prefix, i%50), fmt.Sprint(i), dataTimeout)
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { stop(); writes.Wait() })
}

// TestBackupArchiveDrillRestoresTheRecoveryPointInTheBackupOperatorPod: a
// periodic EtcdBackup with the archive and a drill at each snapshot, of a
// 3-member cluster written to all along: the backup operator, in its pod
// and within its limits, restores the recovery point into a scratch etcd
// (the snapshot with etcd's own restore, the chunks after it replayed
// through etcd) and finds it is what the cluster held there; the status and
// a BackupArchiveDrilled event say so.
func TestBackupArchiveDrillRestoresTheRecoveryPointInTheBackupOperatorPod(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bed := newBackupBed(t, "drill", false)
	ns := bed.ns

	name := framework.UniqueName("drill")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, ns, name, 3, bootstrapTimeout(3))
	keepWriting(t, ns, name, "/e2e/drill/")

	b := bed.createBackup(t, name, "drilled/"+name, &api.BackupPolicy{
		BackupIntervalInSecond: 20,
		Archive:                &api.BackupArchive{IntervalInSecond: 2, Drill: &api.BackupArchiveDrillPolicy{IntervalInSecond: 20}},
	})
	var drill *api.BackupArchiveDrill
	err := framework.WaitFor(ctx, backupTimeout, framework.Poll, "a drill of EtcdBackup "+b.Name+" that replayed the archive", func(ctx context.Context) (bool, string, error) {
		got, err := f.Etcd.EtcdV1beta2().EtcdBackups(ns).Get(ctx, b.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if got.Status.Archive == nil || got.Status.Archive.Drill == nil {
			return false, fmt.Sprintf("%+v", got.Status), nil
		}
		drill = got.Status.Archive.Drill
		if drill.Result == api.BackupArchiveDrillFailed {
			t.Fatalf("the drill failed: %+v", drill)
		}
		return drill.Result == api.BackupArchiveDrillPassed && drill.Revisions > 0, fmt.Sprintf("%+v", drill), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if drill.Keys == 0 || drill.Revision <= drill.SnapshotRevision || drill.BackupPath == "" {
		t.Errorf("the drill compared %d keys at revision %d from snapshot %s at %d, want the keys written by then, past the snapshot", drill.Keys, drill.Revision, drill.BackupPath, drill.SnapshotRevision)
	}
	t.Logf("drill: %d keys at revision %d, %d revisions replayed onto snapshot %s at %d", drill.Keys, drill.Revision, drill.Revisions, drill.BackupPath, drill.SnapshotRevision)
	events, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + b.Name + ",reason=BackupArchiveDrilled"})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		t.Error("no BackupArchiveDrilled event on the EtcdBackup")
	}
}
