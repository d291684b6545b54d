package backupcontroller

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	kubefake "k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
)

// TestAnArchivedBackupIntoARealStoreCoversEveryRevisionAfterItsSnapshot runs
// the controller with the real Backuper over a real etcd and versitygw: the
// snapshot and the chunks after it hold every change written, with the
// snapshots' compression, and the status follows the archive.
func TestAnArchivedBackupIntoARealStoreCoversEveryRevisionAfterItsSnapshot(t *testing.T) {
	ctx := context.Background()
	e := startEtcd(t)
	vgw, store := startVersityGW(t)
	client, err := e.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })

	kube := kubefake.NewSimpleClientset(awsSecret("aws", backuptest.AWSSecretData()))
	backuper := &Backuper{Secrets: kube.CoreV1(), DialTimeout: time.Second}
	eb := newBackup("live", 3600)
	eb.Spec.EtcdEndpoints = []string{e.Endpoint}
	eb.Spec.S3 = &api.S3BackupSource{Path: "backups/clusters/live", AWSSecret: "aws", Endpoint: vgw.URL, ForcePathStyle: true}
	eb.Spec.Compression = api.BackupCompressionGzip
	eb.Spec.BackupPolicy.Archive = &api.BackupArchive{IntervalInSecond: 1}
	f := newFixture(t, []*api.EtcdBackup{eb}, func(f *fixture, c *Config) {
		backuper.Now = f.clock.Now
		c.Backup = backuper.Backup
		c.Archive = backuper.Archive
	})
	st := f.waitStatus("live", "the first snapshot", func(s api.BackupStatus) bool { return s.Succeeded || s.Reason != "" })
	if !st.Succeeded {
		t.Fatalf("the snapshot failed: %s", st.Reason)
	}

	// Writes after the snapshot, some in one transaction, some deleted.
	var head int64
	for i := range 30 {
		key := fmt.Sprintf("/registry/k%02d", i%10)
		switch i % 3 {
		case 0:
			resp, err := client.Put(ctx, key, strings.Repeat("v", i))
			if err != nil {
				t.Fatal(err)
			}
			head = resp.Header.Revision
		case 1:
			resp, err := client.Txn(ctx).Then(clientv3.OpPut(key, "a"), clientv3.OpPut(key+"-b", "b")).Commit()
			if err != nil {
				t.Fatal(err)
			}
			head = resp.Header.Revision
		default:
			resp, err := client.Delete(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			head = max(head, resp.Header.Revision)
		}
	}

	const prefix = "clusters/live" + api.ArchivePathSuffix
	var chunks []archive.Chunk
	eventually(t, fmt.Sprintf("chunks up to revision %d", head), func() bool {
		all, err := archive.List(ctx, store, prefix)
		if err != nil {
			t.Fatal(err)
		}
		chunks, err = archive.Covering(all, f.get("live").Status.EtcdRevision, head)
		return err == nil
	})
	// Every revision after the snapshot is in exactly one chunk, stored as
	// the snapshots are: gzip.
	seen := map[int64]bool{}
	for _, c := range chunks {
		rc, _, err := store.Get(ctx, c.Key)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(rc)
		_ = rc.Close()
		if !bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
			t.Errorf("chunk %s is not gzip, as the snapshots are", c.Key)
		}
		events, err := archive.ReadChunk(ctx, store, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			seen[ev.Revision()] = true
		}
	}
	for rev := f.get("live").Status.EtcdRevision + 1; rev <= head; rev++ {
		if !seen[rev] {
			t.Errorf("revision %d is in no chunk", rev)
		}
	}

	// The status follows within one status period.
	f.clock.Step(archiveStatusEvery)
	st = f.waitStatus("live", "the archive's progress", func(s api.BackupStatus) bool {
		return s.Archive != nil && s.Archive.LastRevision >= head
	})
	if st.Archive.Prefix != "backups/"+prefix || st.Archive.LastTime == nil {
		t.Errorf("status.archive = %+v", st.Archive)
	}
}
