package restore

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// seedSide is the seed pod's work on this machine, as NewSeedPod has it:
// fetch-backup's (the decoded snapshot in a file), restore-datadir into the
// replay directory, and replay-archive against the restore operator's backup
// server, which serves the plan's chunks.
type seedSide struct {
	dir, dataDir string
	restore      DataDirArgs
	step         ReplayArgs
}

func newSeedSide(t *testing.T, dir, version string, store backup.Store, snapKey string, key []byte, plan *PointPlan) *seedSide {
	t.Helper()
	h := &BackupHandler{Log: testLog(t)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, chunk, _ := parseArchivePath(strings.TrimPrefix(r.URL.Path, ArchivePathPrefix))
		h.serveArchive(w, r, h.Log, &Plan{Point: plan}, store, chunk)
	}))
	t.Cleanup(srv.Close)
	backupFile := filepath.Join(t.TempDir(), "latest.backup")
	rc, _, err := store.Get(t.Context(), snapKey)
	if err != nil {
		t.Fatal(err)
	}
	decoded, _, err := backup.Decode(rc, key)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, backupFile, decoded)
	_ = rc.Close()
	m := &etcdutil.Member{Name: "example-seed", Namespace: "ns", ClusterName: "example"}
	volume := t.TempDir()
	dataDir, staging, replaying := filepath.Join(volume, "data"), filepath.Join(volume, "data.restoring"), filepath.Join(volume, "data.replaying")
	tool, _ := restoreCommand(version, m, "token")
	for i, arg := range tool {
		switch {
		case i == 0:
			tool[i] = filepath.Join(dir, filepath.Base(arg))
		case arg == BackupFile:
			tool[i] = backupFile
		case arg == "--data-dir="+restoreStagingDir:
			tool[i] = "--data-dir=" + staging
		}
	}
	step := ReplayArgs{DataDir: dataDir, ReplayDir: replaying, URL: srv.URL + ArchivePathPrefix + "ns/example",
		Etcd: filepath.Join(dir, "etcd"), Name: m.Name, After: plan.SnapshotRevision, Revision: plan.Revision,
		ChunksSHA256: plan.ChunksSHA256, Keys: plan.Keys, KeysSHA256: plan.KeysSHA256, Newest: plan.Point.Latest, Timeout: 2 * time.Minute}
	if bumpsRevision(version) {
		step.RevisionBump = RevisionBump
	}
	return &seedSide{dir: dir, dataDir: dataDir, restore: DataDirArgs{DataDir: dataDir, StagingDir: staging, OutputDir: replaying, Tool: tool}, step: step}
}

// replay restores the snapshot into the replay directory, then runs step.
func (s *seedSide) replay(t *testing.T, step ReplayArgs) (ReplayResult, error) {
	t.Helper()
	var out bytes.Buffer
	if err := RestoreDataDir(t.Context(), s.restore, &out); err != nil {
		t.Fatalf("restore-datadir: %v\n%s", err, out.String())
	}
	res, err := ReplayArchive(t.Context(), step, "", nil, &out)
	if err != nil {
		t.Logf("replay-archive: %v\n%s", err, out.String())
	}
	return res, err
}

// member starts etcd on what the seed left.
func (s *seedSide) member(t *testing.T) *clientv3.Client {
	return startEtcdProcess(t, filepath.Join(s.dir, "etcd"), s.step.Name, s.dataDir).client(t)
}

// expectHolds stops the source and checks that a member started on what the
// seed left holds the source's keys under /k/, as cli reads them with opts;
// what says what those are.
func (s *seedSide) expectHolds(t *testing.T, src *etcdProcess, cli *clientv3.Client, what string, opts ...clientv3.OpOption) {
	t.Helper()
	want, err := cli.Get(t.Context(), "/k/", append([]clientv3.OpOption{clientv3.WithPrefix()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	src.stop()
	got, err := s.member(t).Get(t.Context(), "/k/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if g, w := kvText(got.Kvs), kvText(want.Kvs); g != w {
		t.Errorf("the restored member holds\n%s\nwant %s:\n%s", g, what, w)
	}
}

// startVersityGWStore is a store on a real S3 server (versitygw) with the
// test's bucket.
func startVersityGWStore(t *testing.T) backup.Store {
	t.Helper()
	vgw, err := backuptest.StartVersityGW(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vgw.Close)
	if err := vgw.CreateBucket(t.Context(), testBucket); err != nil {
		t.Fatal(err)
	}
	store, err := s3store.New(vgw.StoreConfig(testBucket))
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// storeSnapshot stores a snapshot of cli's etcd as a periodic backup named
// after revision rev (the revision read before it, as backup.Run names it),
// encrypted with key when there is one, and returns its key in the store.
func storeSnapshot(t *testing.T, cli *clientv3.Client, store backup.Store, base storage.Location, rev int64, key []byte) string {
	t.Helper()
	snap, err := cli.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = snap.Close() }()
	snapKey := backup.PeriodicKey(base.Key, rev, time.Now())
	if _, _, err := store.Put(t.Context(), snapKey, backup.Codec{Key: key}.Encode(snap)); err != nil {
		t.Fatal(err)
	}
	return snapKey
}

// startArchive archives cli's changes after revision after into base's
// archive, as the backup operator's archiver does. stop ends the archiver and
// waits for it; it may be called more than once.
func startArchive(t *testing.T, cli *clientv3.Client, store backup.Store, base storage.Location, codec backup.Codec, after int64) (a *archive.Archiver, stop func()) {
	t.Helper()
	a, err := archive.New(archive.Config{Client: cli, Store: store, Prefix: base.Key + api.ArchivePathSuffix, Codec: codec,
		After: after, Interval: 50 * time.Millisecond, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	archived := make(chan error, 1)
	go func() { archived <- a.Run(ctx) }()
	return a, sync.OnceFunc(func() { cancel(); <-archived })
}
