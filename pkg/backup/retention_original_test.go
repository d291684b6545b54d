package backup

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Objects the original's backup operator wrote, named exactly as v0.9.4 named
// them: a one-shot EtcdBackup wrote spec.<store>.path as given; a periodic one
// appended "_v<revision>_<UTC time as 2006-01-02-15:04:05>" to it. This
// operator writes its periodic backups under the same names, so a periodic
// EtcdBackup moved from the original over to it keeps pruning the same set;
// without retention set, or under any other base, it deletes none of them.
func TestRetentionOfObjectsTheOriginalWrote(t *testing.T) {
	const base = "example-etcd-cluster"
	// In the bucket before this operator wrote anything there.
	original := []string{
		base, // a one-shot backup to the same path
		base + "_v9_2019-02-27-10:00:00",
		base + "_v10_2019-02-27-10:02:05",
		base + "_v11_2019-02-27-10:04:10",
		base + "_v12_2019-02-27-10:06:15",
		base + "-old_v5_2019-01-01-00:00:00",        // another periodic backup, its name beginning like base
		base + "_v2_v7_2019-01-01-00:00:00",         // the periodic backup of path "<base>_v2"
		"other/" + base + "_v3_2019-01-01-00:00:00", // the same name in another folder
		base + ".tar",
	}
	ours := []string{
		PeriodicKey(base, 13, time.Date(2019, 2, 27, 10, 8, 20, 0, time.UTC)),
		PeriodicKey(base, 14, time.Date(2019, 2, 27, 10, 10, 25, 0, time.UTC)),
	}
	for _, tc := range []struct {
		name      string
		base      string
		keys      []string
		retention Retention
		want      []string
	}{
		{
			name:      "without maxBackups or tiers nothing is deleted",
			base:      base,
			keys:      original,
			retention: Retention{},
		},
		{
			name:      "another base that the original's names begin with deletes none of them",
			base:      "example-etcd",
			keys:      original,
			retention: Retention{MaxBackups: 1},
		},
		{
			name:      "a base that begins like the original's names deletes none of them",
			base:      base + "_v1",
			keys:      original,
			retention: Retention{MaxBackups: 1},
		},
		{
			name:      "maxBackups counts the original's periodic backups of the same path, by revision, as the original counted them",
			base:      base,
			keys:      original,
			retention: Retention{MaxBackups: 2},
			// The original sorted names as strings and would have deleted
			// _v12_ and _v11_ while keeping _v9_ and _v10_.
			want: []string{base + "_v10_2019-02-27-10:02:05", base + "_v9_2019-02-27-10:00:00"},
		},
		{
			name:      "once this operator wrote its own, the original's oldest go first and its one-shot stays",
			base:      base,
			keys:      append(slices.Clone(original), ours...),
			retention: Retention{MaxBackups: 3},
			want: []string{base + "_v11_2019-02-27-10:04:10", base + "_v10_2019-02-27-10:02:05",
				base + "_v9_2019-02-27-10:00:00"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.retention.Expired(tc.base, tc.keys)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Expired(%q) (-want +got):\n%s", tc.base, diff)
			}
		})
	}
}

// Prune lists and deletes in a store holding the original's objects: what
// it deletes is exactly what Expired says, and nothing without retention.
func TestPruneOfObjectsTheOriginalWrote(t *testing.T) {
	const base = "example-etcd-cluster"
	keys := []string{
		base,
		base + "_v100_2019-02-27-10:00:00",
		base + "_v101_2019-02-27-10:02:05",
		base + "-old_v5_2019-01-01-00:00:00",
	}
	for _, tc := range []struct {
		name      string
		retention Retention
		deleted   []string
	}{
		{name: "no retention", retention: Retention{}},
		{name: "keep one", retention: Retention{MaxBackups: 1}, deleted: []string{base + "_v100_2019-02-27-10:00:00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newMemStore(keys...)
			deleted, err := Prune(context.Background(), store, base, tc.retention)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.deleted, deleted); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
			var left []string
			for _, k := range keys {
				if !slices.Contains(tc.deleted, k) {
					left = append(left, k)
				}
			}
			slices.Sort(left)
			if diff := cmp.Diff(left, store.keys()); diff != "" {
				t.Errorf("left in the store (-want +got):\n%s", diff)
			}
		})
	}
}
