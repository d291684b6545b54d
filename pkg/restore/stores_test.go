package restore

import (
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
)

// One etcd, backed up to every store through the specs users write: a one-shot
// backup, periodic ones pruned to two, and each of them restorable as read back
// through the EtcdRestore's spec.
func TestBackupPruneAndRestoreOnEveryStore(t *testing.T) {
	ctx := context.Background()
	e, err := backuptest.StartEtcd(backuptest.EtcdOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)

	vgw, az, gcs := startStoreServers(ctx, t)

	secret := func(name string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: data}
	}
	kube := fake.NewSimpleClientset(
		secret("aws", backuptest.AWSSecretData()),
		secret("abs", backuptest.ABSSecretData()),
	)
	const path = "backups/c/snap"
	stores := []struct {
		name    string
		backup  api.BackupSpec
		restore func(path string) api.RestoreSpec
	}{
		{"S3 (versitygw)",
			api.BackupSpec{StorageType: api.BackupStorageTypeS3, BackupSource: api.BackupSource{
				S3: &api.S3BackupSource{Path: path, AWSSecret: "aws", Endpoint: vgw.URL, ForcePathStyle: true}}},
			func(p string) api.RestoreSpec {
				return api.RestoreSpec{BackupStorageType: api.BackupStorageTypeS3, RestoreSource: api.RestoreSource{
					S3: &api.S3RestoreSource{Path: p, AWSSecret: "aws", Endpoint: vgw.URL, ForcePathStyle: true}}}
			}},
		{"ABS (Azurite)",
			api.BackupSpec{StorageType: api.BackupStorageTypeABS, BackupSource: api.BackupSource{
				ABS: &api.ABSBackupSource{Path: path, ABSSecret: "abs", Endpoint: az.URL}}},
			func(p string) api.RestoreSpec {
				return api.RestoreSpec{BackupStorageType: api.BackupStorageTypeABS, RestoreSource: api.RestoreSource{
					ABS: &api.ABSRestoreSource{Path: p, ABSSecret: "abs", Endpoint: az.URL}}}
			}},
		{"GCS (fake-gcs-server)",
			api.BackupSpec{StorageType: api.BackupStorageTypeGCS, BackupSource: api.BackupSource{
				GCS: &api.GCSBackupSource{Path: path, Endpoint: gcs.URL}}},
			func(p string) api.RestoreSpec {
				return api.RestoreSpec{BackupStorageType: api.BackupStorageTypeGCS, RestoreSource: api.RestoreSource{
					GCS: &api.GCSRestoreSource{Path: p, Endpoint: gcs.URL}}}
			}},
	}
	src := backup.Source{Endpoints: []string{e.Endpoint}, DialTimeout: time.Second}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			store, loc, err := storage.ForBackup(ctx, kube.CoreV1(), storage.CloudIdentity{}, "ns", &st.backup)
			if err != nil {
				t.Fatal(err)
			}
			job := backup.Job{Source: src, Store: store, Bucket: loc.Bucket, Key: loc.Key}
			oneShot, err := backup.Run(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			paths := []string{oneShot.Path}
			clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var periodic []string
			for i := range 3 {
				if err := e.Fill(ctx, "/"+st.name+"/"+strconv.Itoa(i)+"/", 1, 10); err != nil {
					t.Fatal(err)
				}
				clock = clock.Add(time.Minute)
				at := clock
				job := job
				job.Periodic, job.MaxBackups, job.Now = true, 2, func() time.Time { return at }
				res, err := backup.Run(ctx, job)
				if err != nil {
					t.Fatal(err)
				}
				if res.PruneErr != nil {
					t.Fatal(res.PruneErr)
				}
				periodic = append(periodic, res.Path)
			}
			paths = append(paths, periodic[1:]...)

			left, err := store.List(ctx, "c/")
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 3 {
				t.Fatalf("after pruning to 2 the store holds %+v, want the one-shot and 2 periodic backups", left)
			}
			for _, p := range paths {
				spec := st.restore(p)
				rstore, rloc, err := storage.ForRestore(ctx, kube.CoreV1(), storage.CloudIdentity{}, "ns", &spec)
				if err != nil {
					t.Fatal(err)
				}
				vb, err := VerifySnapshot(ctx, rstore, rloc, nil)
				if err != nil {
					t.Fatalf("restore from %s: %v", p, err)
				}
				rc, _, err := rstore.Get(ctx, rloc.Key)
				if err != nil {
					t.Fatal(err)
				}
				data, err := io.ReadAll(rc)
				_ = rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := backuptest.CheckSnapshot(t.TempDir(), data); err != nil {
					t.Fatalf("%s (%d bytes, verified as %+v) is no etcd snapshot: %v", p, len(data), vb, err)
				}
			}
		})
	}
}

// startStoreServers starts the three real store servers the restore tests use,
// each with a bucket (or container) "backups"; they stop with the test.
func startStoreServers(ctx context.Context, t *testing.T) (*backuptest.VersityGW, *backuptest.Azurite, *backuptest.GCS) {
	t.Helper()
	vgw, err := backuptest.StartVersityGW(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vgw.Close)
	if err := vgw.CreateBucket(ctx, "backups"); err != nil {
		t.Fatal(err)
	}
	az, err := backuptest.StartAzurite(ctx, t.TempDir(), "backups")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(az.Close)
	gcs, err := backuptest.StartGCS("backups")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gcs.Close)
	return vgw, az, gcs
}
