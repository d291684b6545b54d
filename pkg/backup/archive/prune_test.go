package archive

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

// chunkKey is the name of a chunk of first..last under "a/".
func chunkKey(first, last int64) string {
	return ChunkName("a/", Chunk{First: first, Last: last, Time: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC).Add(time.Duration(last) * time.Second), SHA256: sum64})
}

func objects(keys ...string) []backup.ObjectInfo {
	out := make([]backup.ObjectInfo, len(keys))
	for i, k := range keys {
		out[i] = backup.ObjectInfo{Key: k, Size: 10}
	}
	return out
}

func kept(revisions ...int64) []KeptSnapshot {
	var out []KeptSnapshot
	for _, r := range revisions {
		out = append(out, KeptSnapshot{Key: backup.PeriodicKey("c/snap", r, time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)), Revision: r})
	}
	return out
}

func TestExpired(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objects []backup.ObjectInfo
		kept    []KeptSnapshot
		// deleted are the keys that go; held, that nothing may.
		deleted []string
		held    bool
	}{
		{
			name:    "chunks ending before the oldest kept snapshot go, the rest stay",
			objects: objects(chunkKey(101, 150), chunkKey(151, 199), chunkKey(200, 260), chunkKey(261, 300)),
			kept:    kept(280, 200),
			deleted: []string{chunkKey(101, 150), chunkKey(151, 199)},
		},
		{
			name:    "a chunk straddling the oldest kept revision stays: a restore from it replays the rest of that chunk",
			objects: objects(chunkKey(101, 150), chunkKey(151, 210), chunkKey(211, 300)),
			kept:    kept(200),
			deleted: []string{chunkKey(101, 150)},
		},
		{
			name:    "a chunk ending at the oldest kept revision stays",
			objects: objects(chunkKey(101, 199), chunkKey(200, 200), chunkKey(201, 300)),
			kept:    kept(200),
			deleted: []string{chunkKey(101, 199)},
		},
		{
			name:    "the newest chunk stays even below the oldest kept snapshot: the archiver resumes after it",
			objects: objects(chunkKey(101, 150), chunkKey(151, 190)),
			kept:    kept(500),
			deleted: []string{chunkKey(101, 150)},
		},
		{
			name:    "nothing below the oldest kept snapshot: nothing goes",
			objects: objects(chunkKey(301, 350), chunkKey(351, 400)),
			kept:    kept(300, 400),
		},
		{
			name: "after a gap, the chunks before it go only once they end before the oldest kept snapshot",
			// The archive stopped at 150, the cluster compacted to 240, a
			// snapshot at 250 restarted it.
			objects: objects(chunkKey(101, 120), chunkKey(121, 150), chunkKey(251, 300), chunkKey(301, 320)),
			kept:    kept(250, 130),
			deleted: []string{chunkKey(101, 120)},
		},
		{
			name:    "after a gap, the chunks before it all go once the snapshot after it is the oldest kept",
			objects: objects(chunkKey(101, 120), chunkKey(121, 150), chunkKey(251, 300), chunkKey(301, 320)),
			kept:    kept(250, 310),
			deleted: []string{chunkKey(101, 120), chunkKey(121, 150)},
		},
		{
			name: "names this code does not read are never deleted, whatever they look like",
			objects: objects(
				"a/notes.txt",
				"a/0000000000000000001-0000000000000000002.chunk",
				"a/0000000000000000101-0000000000000000150-20261128T000000.000000000Z-abcd.chunk",
				strings.TrimSuffix(chunkKey(1, 2), ".chunk")+".chunk.tmp",
				"a/sub/"+strings.TrimPrefix(chunkKey(1, 2), "a/"),
				chunkKey(1, 50), chunkKey(51, 300)),
			kept:    kept(200),
			deleted: []string{chunkKey(1, 50)},
		},
		{
			name:    "a kept snapshot whose revision is unknown holds everything",
			objects: objects(chunkKey(101, 150), chunkKey(151, 300)),
			kept:    []KeptSnapshot{{Key: "c/snap_v200_2026-11-28-00:00:00", Revision: 200}, {Key: "c/snap_vlatest", Revision: 0}},
			held:    true,
		},
		{
			name:    "no kept snapshot holds everything: the chunks are all there is",
			objects: objects(chunkKey(101, 150), chunkKey(151, 300)),
			held:    true,
		},
		{
			name: "an empty archive deletes nothing",
			kept: kept(200),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Expired("a/", tc.objects, tc.kept)
			var got []string
			for _, c := range e.Delete {
				got = append(got, c.Key)
			}
			if !slices.Equal(got, tc.deleted) {
				t.Errorf("deleted %v, want %v", got, tc.deleted)
			}
			if e.Held != tc.held {
				t.Errorf("held %v, want %v (%s)", e.Held, tc.held, e.Reason)
			}
			if e.Reason == "" {
				t.Error("no reason given")
			}
		})
	}
}

// TestPruneDeletesWhatExpiredChoosesAndGoesOnPastAFailure: one chunk that
// cannot be deleted does not keep the others.
func TestPruneDeletesWhatExpiredChoosesAndGoesOnPastAFailure(t *testing.T) {
	ctx := context.Background()
	store := &deleteFailingStore{Store: startStore(t), fail: chunkKey(1, 50)}
	for _, k := range []string{chunkKey(1, 50), chunkKey(51, 100), chunkKey(101, 300), "a/notes.txt"} {
		if _, _, err := store.Put(ctx, k, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	e, deleted, err := Prune(ctx, store, "a/", kept(200))
	if err == nil || !strings.Contains(err.Error(), chunkKey(1, 50)) {
		t.Errorf("err = %v, want the failed deletion named", err)
	}
	if len(e.Delete) != 2 || !slices.Equal(deleted, []string{chunkKey(51, 100)}) {
		t.Errorf("chose %d, deleted %v", len(e.Delete), deleted)
	}
	objs, err := store.List(ctx, "a/")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, o := range objs {
		left = append(left, o.Key)
	}
	slices.Sort(left)
	if want := []string{chunkKey(1, 50), chunkKey(101, 300), "a/notes.txt"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}

type deleteFailingStore struct {
	backup.Store
	fail string
}

func (s *deleteFailingStore) Delete(ctx context.Context, key string) error {
	if key == s.fail {
		return errors.New("access denied")
	}
	return s.Store.Delete(ctx, key)
}
