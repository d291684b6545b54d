package restore

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
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
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// A restore to the latest change, against a real etcd: the restore operator
// plans up to the archive's last change, found in the chunks; the seed
// replays it. When the newest snapshot was taken after the archiver stopped
// (its content newer than the archive's end), the snapshot is the newest
// state there is and is kept as it is, where a restore to that revision
// refuses it.
func TestReplayToTheLatestChangeKeepsASnapshotNewerThanTheArchive(t *testing.T) {
	dir := etcdtest.BinDir36(t, "the replay step runs the real etcd and etcdutl "+etcdtest.Version36, "etcd", "etcdutl")
	ctx := t.Context()
	store := startVersityGWStore(t)
	base := storage.Location{Bucket: testBucket, Key: "etcd/prod"}
	src := startEtcdProcess(t, filepath.Join(dir, "etcd"), "src", filepath.Join(t.TempDir(), "src"))
	cli := src.client(t)
	for i := range 5 {
		mustPut(t, cli, fmt.Sprintf("/k/before-%d", i), "v0")
	}
	named := mustPut(t, cli, "/k/named", "v0")

	// The archive runs from the named revision and stops after a few writes.
	a, err := archive.New(archive.Config{Client: cli, Store: store, Prefix: base.Key + api.ArchivePathSuffix,
		After: named, Interval: 50 * time.Millisecond, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	actx, stopArchive := context.WithCancel(ctx)
	archived := make(chan error, 1)
	go func() { archived <- a.Run(actx) }()
	var last int64
	for i := range 5 {
		last = mustPut(t, cli, fmt.Sprintf("/k/archived-%d", i), "a")
	}
	eventuallyTrue(t, "the archive holds every write", func() bool { return a.Progress().Revision >= last })
	stopArchive()
	<-archived
	// Written after the archiver stopped; the snapshot, named after the
	// revision read before it, holds them.
	for i := range 3 {
		mustPut(t, cli, fmt.Sprintf("/k/unarchived-%d", i), "u")
	}
	snap, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snapKey := backup.PeriodicKey(base.Key, named, time.Now())
	if _, _, err := store.Put(ctx, snapKey, snap); err != nil {
		t.Fatal(err)
	}
	_ = snap.Close()

	spec := &api.RestoreSpec{PointInTime: &api.RestorePointInTime{Latest: true}}
	loc, plan, err := choosePoint(ctx, spec, store, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	if loc.Key != snapKey || plan.SnapshotRevision != named || plan.Revision != last || plan.ArchiveRevision != last || plan.Shortfall != "" {
		t.Fatalf("planned %s from revision %d to %d (archive %d, shortfall %q), want %s from %d to the archive's last change %d",
			loc.Key, plan.SnapshotRevision, plan.Revision, plan.ArchiveRevision, plan.Shortfall, snapKey, named, last)
	}
	seed := newSeedSide(t, dir, etcdtest.Version36, store, snapKey, plan)
	step := seed.step
	// Not the newest: a snapshot past the point is refused.
	step.Newest = false
	if _, err := seed.replay(t, step); err == nil || !strings.Contains(err.Error(), "past the point") {
		t.Fatalf("a replay to revision %d onto a newer snapshot: %v, want it refused", last, err)
	}
	// The newest: the snapshot is kept, with what it holds beyond the archive.
	step.Newest = true
	if !strings.Contains(strings.Join(step.Args(), " "), "--newest") {
		t.Errorf("the step's command line %q does not say the point is the newest", step.Args())
	}
	res, err := seed.replay(t, step)
	if err != nil || !res.SnapshotIsNewest || res.SnapshotRevision <= last {
		t.Fatalf("replay to the newest change: %+v, %v; want the snapshot kept", res, err)
	}
	want, err := cli.Get(ctx, "/k/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	src.stop()
	got, err := seed.member(t).Get(ctx, "/k/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if g, w := kvText(got.Kvs), kvText(want.Kvs); g != w {
		t.Errorf("the restored member holds\n%s\nwant everything the source held:\n%s", g, w)
	}
}

// seedSide is the seed pod's work on this machine, as NewSeedPod has it:
// fetch-backup's (the snapshot in a file), restore-datadir into the replay
// directory, and replay-archive against the restore operator's backup
// server, which serves the plan's chunks.
type seedSide struct {
	dir, dataDir string
	restore      DataDirArgs
	step         ReplayArgs
}

func newSeedSide(t *testing.T, dir, version string, store backup.Store, snapKey string, plan *PointPlan) *seedSide {
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
	writeAll(t, backupFile, rc)
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
