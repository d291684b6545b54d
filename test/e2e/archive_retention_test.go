//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestBackupArchiveChunksArePrunedWithTheSnapshots: a periodic EtcdBackup
// every 15 s with maxBackups 2 and the continuous archive on, of a cluster
// written to all along. Once its first snapshot is pruned, the chunks ending
// before the oldest snapshot left are gone too, and the chunks left follow
// that snapshot without a hole, so a restore from it can still reach the
// newest write.
func TestBackupArchiveChunksArePrunedWithTheSnapshots(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bed := newBackupBed(t, "archive-retention", false)
	ns, bucket, srv := bed.ns, bed.bucket, bed.srv

	name := framework.UniqueName("archret")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 1, "3.5.21"))
	waitReady(t, ns, name, 1, bootstrapTimeout(1))
	keepWriting(t, ns, name, "/e2e/archive-retention/")

	path := "pruned/" + name
	bed.createBackup(t, name, path, &api.BackupPolicy{BackupIntervalInSecond: 15, MaxBackups: 2, Archive: &api.BackupArchive{IntervalInSecond: 1}})

	// snapshots are the revisions of the snapshots in the bucket, oldest first.
	snapshots := func(ctx context.Context) ([]int64, error) {
		objs, err := srv.List(ctx, bucket, path+"_v")
		if err != nil {
			return nil, err
		}
		var revs []int64
		for _, o := range objs {
			rest, _ := strings.CutPrefix(o.Key, path+"_v")
			revText, _, _ := strings.Cut(rest, "_")
			rev, err := strconv.ParseInt(revText, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("snapshot %s: %w", o.Key, err)
			}
			revs = append(revs, rev)
		}
		slices.Sort(revs)
		return revs, nil
	}
	prefix := path + api.ArchivePathSuffix
	chunksIn := func(ctx context.Context) ([]archive.Chunk, error) {
		objs, err := srv.List(ctx, bucket, prefix)
		if err != nil {
			return nil, err
		}
		var chunks []archive.Chunk
		for _, o := range objs {
			if c, ok := archive.ParseChunkName(prefix, backup.ObjectInfo{Key: o.Key, Size: o.Size}); ok {
				chunks = append(chunks, c)
			}
		}
		slices.SortFunc(chunks, func(a, b archive.Chunk) int { return cmp.Compare(a.First, b.First) })
		return chunks, nil
	}

	// The first snapshot, and the chunks after it.
	var first int64
	err := framework.WaitFor(ctx, backupTimeout, time.Second, "the first snapshot and chunks after it", func(ctx context.Context) (bool, string, error) {
		revs, err := snapshots(ctx)
		if err != nil || len(revs) == 0 {
			return false, fmt.Sprint(revs, err), nil
		}
		first = revs[0]
		chunks, err := chunksIn(ctx)
		return err == nil && len(chunks) > 0, fmt.Sprintf("snapshots %v, %d chunks: %v", revs, len(chunks), err), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Two periods later the first snapshot is pruned, and the chunks before
	// the oldest one left go with it.
	var kept []int64
	var chunks []archive.Chunk
	err = framework.WaitFor(ctx, backupTimeout, time.Second, fmt.Sprintf("the snapshot at %d and its chunks pruned", first), func(ctx context.Context) (bool, string, error) {
		var err error
		if kept, err = snapshots(ctx); err != nil || len(kept) == 0 || kept[0] == first {
			return false, fmt.Sprint(kept, err), nil
		}
		if chunks, err = chunksIn(ctx); err != nil || len(chunks) == 0 {
			return false, fmt.Sprint(err), nil
		}
		return chunks[0].Last >= kept[0], fmt.Sprintf("snapshots %v, first chunk %s", kept, chunks[0].Key), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) > 2 {
		t.Errorf("%d snapshots with maxBackups 2: %v", len(kept), kept)
	}
	if chunks[0].First > kept[0]+1 {
		t.Errorf("the first chunk left, %s, starts after revision %d: a restore from the oldest snapshot lacks the revisions before it", chunks[0].Key, kept[0]+1)
	}
	if _, err := archive.Covering(chunks, kept[0], 0); err != nil {
		t.Errorf("the chunks left do not follow the oldest snapshot at %d: %v", kept[0], err)
	}
	t.Logf("snapshots %v; %d chunks, revisions %d to %d", kept, len(chunks), chunks[0].First, chunks[len(chunks)-1].Last)
}
