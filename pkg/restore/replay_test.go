package restore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// The seed's replay step, end to end on this machine with the real etcd of
// each release, as the pod runs it: a cluster is snapshotted as a periodic
// backup, archived while it goes on, and restored to a revision between its
// writes. The restore operator's side plans the point from the store
// (choosePoint) and serves the archive (serveArchive); the snapshot is
// restored with the seed's own restore command into the replay directory, and
// the replay step brings it to the point. The member then holds exactly the
// source's keys at the point. A replay whose result does not match what the
// operator recorded fails and leaves no data directory; run again from a
// fresh restore, it succeeds.
func TestReplayStepBringsTheRestoredSnapshotToThePoint(t *testing.T) {
	releases := []struct {
		name, version string
		dir           func(testing.TB, string, ...string) string
		codec         backup.Codec
	}{
		{"etcd 3.5, plain archive", etcdtest.Version35, etcdtest.BinDir35, backup.Codec{}},
		{"etcd 3.6, plain archive", etcdtest.Version36, etcdtest.BinDir36, backup.Codec{}},
		{"etcd 3.7, encrypted and compressed archive", etcdtest.Version37, etcdtest.BinDir37,
			backup.Codec{Compression: backup.CompressionGzip, Key: bytes.Repeat([]byte{7}, backup.KeySize)}},
	}
	for _, rel := range releases {
		t.Run(rel.name, func(t *testing.T) {
			dir := rel.dir(t, "the replay step runs the real etcd and etcdutl "+rel.version, "etcd", "etcdutl")
			testReplayStep(t, dir, rel.version, rel.codec, 10)
		})
	}
	// A backup made as soon as a cluster is created snapshots an empty
	// keyspace: its name records revision 1, and etcd restores it at
	// revision 0.
	for _, rel := range releases[:2] {
		t.Run(rel.name+", a snapshot taken before anything was written", func(t *testing.T) {
			dir := rel.dir(t, "the replay step runs the real etcd and etcdutl "+rel.version, "etcd", "etcdutl")
			testReplayStep(t, dir, rel.version, rel.codec, 0)
		})
	}
}

func testReplayStep(t *testing.T, dir, version string, codec backup.Codec, keysBefore int) {
	ctx := t.Context()
	_, store := startS3(t)
	base := storage.Location{Bucket: testBucket, Key: "etcd/prod"}

	src := startEtcdProcess(t, filepath.Join(dir, "etcd"), "src", filepath.Join(t.TempDir(), "src"))
	cli := src.client(t)
	for i := range keysBefore {
		mustPut(t, cli, fmt.Sprintf("/k/before-%d", i), "v0")
	}
	// The periodic backup: its name records the revision read before the
	// snapshot, as backup.Run names it.
	head, err := cli.Get(ctx, "health")
	if err != nil {
		t.Fatal(err)
	}
	snapRev := head.Header.Revision
	snapKey := storeSnapshot(t, cli, store, base, snapRev, codec.Key)

	a, stopArchive := startArchive(t, cli, store, base, codec, snapRev)
	defer stopArchive()

	// Before the point: puts, a delete of a key the snapshot holds, a
	// transaction of several changes at one revision, and a key written twice.
	for i := range 20 {
		mustPut(t, cli, fmt.Sprintf("/k/a-%d", i), fmt.Sprintf("a%d", i))
	}
	if _, err := cli.Delete(ctx, "/k/before-3"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut("/k/txn-1", "t"), clientv3.OpPut("/k/txn-2", "t"), clientv3.OpDelete("/k/a-5")).Commit(); err != nil {
		t.Fatal(err)
	}
	point := mustPut(t, cli, "/k/a-7", "rewritten")
	// Changes the archiver receives together share their time: the point is
	// received before anything after it is written, so that its time names it.
	eventuallyTrue(t, "the archive holds the point", func() bool { return a.Progress().Revision >= point })
	// After the point: none of this may appear.
	for i := range 10 {
		mustPut(t, cli, fmt.Sprintf("/k/late-%d", i), "late")
	}
	mustPut(t, cli, "/k/a-1", "late")
	if _, err := cli.Delete(ctx, "/k/a-2"); err != nil {
		t.Fatal(err)
	}
	last := mustPut(t, cli, "/k/last", "late")
	eventuallyTrue(t, "the archive holds every write", func() bool { return a.Progress().Revision >= last })
	stopArchive()

	// The restore operator's side: plan the point.
	spec := &api.RestoreSpec{PointInTime: &api.RestorePointInTime{Revision: point}}
	loc, plan, err := choosePoint(ctx, spec, store, base, codec.Key)
	if err != nil {
		t.Fatal(err)
	}
	if loc.Key != snapKey || plan.SnapshotRevision != snapRev || plan.Revision != point || !plan.Replays() {
		t.Fatalf("planned snapshot %s (revision %d) up to revision %d, want %s (revision %d) up to %d", loc.Key, plan.SnapshotRevision, plan.Revision, snapKey, snapRev, point)
	}
	// The same point named by the time the archive received it plans the
	// same replay.
	at := plan.Time.Time
	if _, byTime, err := choosePoint(ctx, &api.RestoreSpec{PointInTime: &api.RestorePointInTime{Time: at.Format(time.RFC3339Nano)}}, store, base, codec.Key); err != nil ||
		byTime.Revision != point || byTime.KeysSHA256 != plan.KeysSHA256 || byTime.ChunksSHA256 != plan.ChunksSHA256 {
		t.Errorf("the point named by its time %s: %+v, %v; want the plan of revision %d", at.Format(time.RFC3339Nano), byTime, err, point)
	}
	// The seed's side, served the archive by the restore operator's backup
	// server: fetch-backup's work (the decoded snapshot in a file), then
	// restore-datadir into the replay directory, as NewSeedPod has it.
	seed := newSeedSide(t, dir, version, store, snapKey, codec.Key, plan)
	step := seed.step
	if err := step.Validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	runRestore := func() {
		t.Helper()
		out.Reset()
		if err := RestoreDataDir(ctx, seed.restore, &out); err != nil {
			t.Fatalf("restore-datadir: %v\n%s", err, out.String())
		}
	}

	// A replay whose result is not what the operator recorded fails, and the
	// member has no data directory to start on.
	runRestore()
	wrong := step
	wrong.KeysSHA256 = strings.Repeat("0", 64)
	if _, err := ReplayArchive(ctx, wrong, "", codec.Key, &out); err == nil || !strings.Contains(err.Error(), "restore operator found") {
		t.Fatalf("a replay checked against another digest: err %v, want it refused\n%s", err, out.String())
	}
	if done, _ := Restored(seed.dataDir); done {
		t.Fatal("a failed replay left a data directory for the member to start on")
	}

	// The pod again from scratch: restore-datadir replaces what the failed
	// replay left, and the replay succeeds.
	runRestore()
	out.Reset()
	res, err := ReplayArchive(ctx, step, "", codec.Key, &out)
	if err != nil {
		t.Fatalf("replay-archive: %v\n%s", err, out.String())
	}
	if res.Revision != point || res.Keys != int(plan.Keys) {
		t.Errorf("replayed up to revision %d checking %d keys, want %d and %d", res.Revision, res.Keys, point, plan.Keys)
	}
	if _, err := os.Stat(seed.restore.OutputDir); !os.IsNotExist(err) {
		t.Errorf("the replay directory is still there after the replay: %v", err)
	}

	// The member starts on what the replay left: the source's keys at the
	// point, with their values, and none of the later ones.
	seed.expectHolds(t, src, cli, fmt.Sprintf("the source's keys at revision %d", point), clientv3.WithRev(point))

	// Started again later, the step does nothing.
	out.Reset()
	if _, err := ReplayArchive(ctx, step, "", nil, &out); err != nil || !strings.Contains(out.String(), "nothing to do") {
		t.Errorf("the replay step run again after it succeeded: %v\n%s", err, out.String())
	}
}

func mustPut(t *testing.T, cli *clientv3.Client, key, value string) int64 {
	t.Helper()
	resp, err := cli.Put(t.Context(), key, value)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

func kvText(kvs []*mvccpb.KeyValue) string {
	var b strings.Builder
	for _, kv := range kvs {
		fmt.Fprintf(&b, "%s=%s\n", kv.Key, kv.Value)
	}
	return b.String()
}

func writeAll(t *testing.T, path string, r interface{ Read([]byte) (int, error) }) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

func eventuallyTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
