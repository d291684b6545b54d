package restore

import (
	"fmt"
	"path/filepath"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// A point inside a snapshot's window, against a real etcd: a periodic
// snapshot is named after the revision read before it is taken, and holds
// the writes made while it was being taken too. A point after its named
// revision but before the revision it holds cannot start from it (the seed
// refuses a snapshot past the point); it starts from the snapshot before,
// which the archive brings to the point.
func TestAPointInsideASnapshotsWindowStartsFromTheSnapshotBefore(t *testing.T) {
	dir := etcdtest.BinDir36(t, "the replay step runs the real etcd and etcdutl "+etcdtest.Version36, "etcd", "etcdutl")
	ctx := t.Context()
	store := startVersityGWStore(t)
	base := storage.Location{Bucket: testBucket, Key: "etcd/prod"}
	src := startEtcdProcess(t, filepath.Join(dir, "etcd"), "src", filepath.Join(t.TempDir(), "src"))
	cli := src.client(t)
	for i := range 5 {
		mustPut(t, cli, fmt.Sprintf("/k/before-%d", i), "v0")
	}
	older := mustPut(t, cli, "/k/older", "v0")
	olderKey := storeSnapshot(t, cli, store, base, older, nil)
	a, stopArchive := startArchive(t, cli, store, base, backup.Codec{}, older)
	defer stopArchive()
	for i := range 5 {
		mustPut(t, cli, fmt.Sprintf("/k/a-%d", i), "a")
	}
	// The newer snapshot's revision is read, writes go on while it is
	// being taken, and it holds them.
	named := mustPut(t, cli, "/k/named", "n")
	mustPut(t, cli, "/k/window-0", "w")
	point := mustPut(t, cli, "/k/window-1", "w")
	mustPut(t, cli, "/k/window-2", "w")
	storeSnapshot(t, cli, store, base, named, nil)
	last := mustPut(t, cli, "/k/after", "late")
	eventuallyTrue(t, "the archive holds every write", func() bool { return a.Progress().Revision >= last })

	loc, plan, err := choosePoint(ctx, &api.RestoreSpec{PointInTime: &api.RestorePointInTime{Revision: point}}, store, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	if loc.Key != olderKey || plan.SnapshotRevision != older || plan.Revision != point {
		t.Fatalf("planned %s (revision %d) up to %d, want the snapshot before, %s (revision %d), up to %d",
			loc.Key, plan.SnapshotRevision, plan.Revision, olderKey, older, point)
	}
	seed := newSeedSide(t, dir, etcdtest.Version36, store, loc.Key, nil, plan)
	if _, err := seed.replay(t, seed.step); err != nil {
		t.Fatalf("replay to revision %d: %v", point, err)
	}
	seed.expectHolds(t, src, cli, fmt.Sprintf("the source's keys at revision %d", point), clientv3.WithRev(point))
}
