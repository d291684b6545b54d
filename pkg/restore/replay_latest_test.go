package restore

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
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
	a, stopArchive := startArchive(t, cli, store, base, backup.Codec{}, named)
	defer stopArchive()
	var last int64
	for i := range 5 {
		last = mustPut(t, cli, fmt.Sprintf("/k/archived-%d", i), "a")
	}
	eventuallyTrue(t, "the archive holds every write", func() bool { return a.Progress().Revision >= last })
	stopArchive()
	// Written after the archiver stopped; the snapshot, named after the
	// revision read before it, holds them.
	for i := range 3 {
		mustPut(t, cli, fmt.Sprintf("/k/unarchived-%d", i), "u")
	}
	snapKey := storeSnapshot(t, cli, store, base, named, nil)

	spec := &api.RestoreSpec{PointInTime: &api.RestorePointInTime{Latest: true}}
	loc, plan, err := choosePoint(ctx, spec, store, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	if loc.Key != snapKey || plan.SnapshotRevision != named || plan.Revision != last || plan.ArchiveRevision != last || plan.Shortfall != "" {
		t.Fatalf("planned %s from revision %d to %d (archive %d, shortfall %q), want %s from %d to the archive's last change %d",
			loc.Key, plan.SnapshotRevision, plan.Revision, plan.ArchiveRevision, plan.Shortfall, snapKey, named, last)
	}
	seed := newSeedSide(t, dir, etcdtest.Version36, store, snapKey, nil, plan)
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
	seed.expectHolds(t, src, cli, "everything the source held")
}
