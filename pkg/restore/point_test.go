package restore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
)

// day is the test's clock: hh:mm on one day.
func day(hhmm string) time.Time {
	t, err := time.Parse("2006-01-02 15:04:05", "2026-11-28 "+hhmm)
	if err != nil {
		panic(err)
	}
	return t
}

// testArchive is chunks with one event a revision, received a second apart
// from start.
type testArchive struct {
	chunks []archive.Chunk
	events map[string][]archive.Event
	reads  []string
}

func (a *testArchive) add(first, last int64, start time.Time) *testArchive {
	if a.events == nil {
		a.events = map[string][]archive.Event{}
	}
	var evs []archive.Event
	for r := first; r <= last; r++ {
		evs = append(evs, archive.Event{
			Event:    mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(fmt.Sprintf("k%d", r%7)), Value: []byte(fmt.Sprint(r)), ModRevision: r}},
			Received: start.Add(time.Duration(r-first) * time.Second),
		})
	}
	c := archive.Chunk{First: first, Last: last, Time: evs[len(evs)-1].Received}
	c.Key = archive.ChunkName("etcd/prod.archive/", archive.Chunk{First: first, Last: last, Time: c.Time, SHA256: strings.Repeat("a", 64)})
	a.chunks = append(a.chunks, c)
	a.events[c.Key] = evs
	return a
}

func (a *testArchive) read(_ context.Context, c archive.Chunk) ([]archive.Event, error) {
	a.reads = append(a.reads, fmt.Sprintf("%d-%d", c.First, c.Last))
	return a.events[c.Key], nil
}

func snapshots(revAt ...any) []periodicSnapshot {
	var objs []backup.ObjectInfo
	for i := 0; i < len(revAt); i += 2 {
		objs = append(objs, backup.ObjectInfo{Key: backup.PeriodicKey("etcd/prod", int64(revAt[i].(int)), day(revAt[i+1].(string)))})
	}
	// Neither a one-shot backup nor a chunk is a periodic snapshot.
	objs = append(objs, backup.ObjectInfo{Key: "etcd/prod"}, backup.ObjectInfo{Key: "etcd/prod_vX_2026"})
	return periodicSnapshots("etcd/prod", objs)
}

// The spec of a restore to a point: which snapshot, up to which revision, and
// which chunks, or why not, decided from the names of the snapshots and
// chunks, and the events of the one chunk a time falls in.
func TestPlanPointChoosesTheSnapshotAndChecksTheArchive(t *testing.T) {
	// Snapshots at revisions 100 (10:00) and 200 (11:00); chunks 101-150
	// (received 10:20:00 to 10:20:49), 151-200 (10:50:00 to 10:50:49),
	// 201-260 (11:30:00 to 11:30:59).
	full := func() *testArchive {
		return new(testArchive).add(101, 150, day("10:20:00")).add(151, 200, day("10:50:00")).add(201, 260, day("11:30:00"))
	}
	holed := func() *testArchive {
		return new(testArchive).add(101, 150, day("10:20:00")).add(171, 200, day("10:50:00")).add(201, 260, day("11:30:00"))
	}
	twoSnaps := snapshots(100, "10:00:00", 200, "11:00:00")
	type pointCase struct {
		name     string
		point    api.RestorePointInTime
		snaps    []periodicSnapshot
		archive  *testArchive
		snapshot int64
		revision int64
		chunks   string // First-Last of each chunk replayed
		reads    string // chunks read to find a time's revision
		err      string
	}
	tests := []pointCase{
		{name: "a revision between two snapshots starts from the older and replays up to it",
			point: api.RestorePointInTime{Revision: 180}, snaps: twoSnaps, archive: full(),
			snapshot: 100, revision: 180, chunks: "101-150 151-180"},
		{name: "a revision at a snapshot's own replays nothing",
			point: api.RestorePointInTime{Revision: 200}, snaps: twoSnaps, archive: full(),
			snapshot: 200, revision: 200},
		{name: "a revision after the newest snapshot replays from it",
			point: api.RestorePointInTime{Revision: 230}, snaps: twoSnaps, archive: full(),
			snapshot: 200, revision: 230, chunks: "201-230", reads: "201-260"},
		{name: "a revision inside the window of the snapshot at or before it starts from the snapshot before",
			point: api.RestorePointInTime{Revision: 165}, snaps: snapshots(100, "10:00:00", 160, "10:50:09"), archive: full(),
			snapshot: 100, revision: 165, chunks: "101-150 151-165"},
		{name: "a revision received well after the snapshot was named is past its window",
			point: api.RestorePointInTime{Revision: 165}, snaps: snapshots(100, "10:00:00", 160, "10:40:00"), archive: full(),
			snapshot: 160, revision: 165, chunks: "151-165", reads: "151-200"},
		{name: "a revision inside a snapshot's window the archive cannot reach from the snapshot before keeps the snapshot",
			point: api.RestorePointInTime{Revision: 185}, snaps: snapshots(100, "10:00:00", 180, "10:50:09"), archive: holed(),
			snapshot: 180, revision: 185, chunks: "171-185"},
		{name: "a time within the second a snapshot is named in is not taken to have reached its revision",
			point: api.RestorePointInTime{Time: "2026-11-28T10:50:19.5Z"}, snaps: snapshots(100, "10:00:00", 171, "10:50:19"), archive: full(),
			snapshot: 100, revision: 170, chunks: "101-150 151-170", reads: "151-200"},
		{name: "a revision before every snapshot is refused",
			point: api.RestorePointInTime{Revision: 50}, snaps: twoSnaps, archive: full(),
			err: "no periodic snapshot is at or before revision 50 (revision 50): the oldest is etcd/prod_v100_"},
		{name: "without snapshots nothing is restorable",
			point: api.RestorePointInTime{Revision: 50}, archive: full(),
			err: "there is none"},
		{name: "a hole between the snapshot and the point is refused",
			point: api.RestorePointInTime{Revision: 180}, snaps: twoSnaps, archive: holed(),
			err: "the archive lacks revisions 151 to 170"},
		{name: "a newer snapshot after a hole makes the points after it restorable",
			point: api.RestorePointInTime{Revision: 230}, snaps: twoSnaps, archive: holed(),
			snapshot: 200, revision: 230, chunks: "201-230"},
		{name: "a revision past the end of the archive is refused",
			point: api.RestorePointInTime{Revision: 300}, snaps: twoSnaps, archive: full(),
			err: "the archive ends before revision 261"},

		{name: "a time inside a chunk ends at the last change received by then",
			point: api.RestorePointInTime{Time: "2026-11-28T10:50:19.5Z"}, snaps: twoSnaps, archive: full(),
			snapshot: 100, revision: 170, chunks: "101-150 151-170", reads: "151-200"},
		{name: "a time between two chunks ends at the earlier one's last revision",
			point: api.RestorePointInTime{Time: "2026-11-28T10:30:00Z"}, snaps: twoSnaps, archive: full(),
			snapshot: 100, revision: 150, chunks: "101-150", reads: "151-200"},
		{name: "a time in another zone means the same instant",
			point: api.RestorePointInTime{Time: "2026-11-28T11:50:19.5+01:00"}, snaps: twoSnaps, archive: full(),
			snapshot: 100, revision: 170, chunks: "101-150 151-170", reads: "151-200"},
		{name: "a time after a snapshot and before the next change starts from that snapshot alone",
			point: api.RestorePointInTime{Time: "2026-11-28T11:10:00Z"}, snaps: twoSnaps, archive: full(),
			snapshot: 200, revision: 200, reads: "201-260"},
		{name: "a time just before the first change after a hole is refused: the hole may hold it",
			point: api.RestorePointInTime{Time: "2026-11-28T10:40:00Z"}, snaps: twoSnaps, archive: holed(),
			err: "the archive lacks revisions 151 to 170"},
		{name: "a time after the archive's last change is refused when nothing later proves the cluster idle",
			point: api.RestorePointInTime{Time: "2026-11-28T12:00:00Z"}, snaps: twoSnaps, archive: full(),
			err: "nothing shows what the cluster held at 2026-11-28T12:00:00Z: the archive's last change (revision 260) was received at 2026-11-28T11:30:59Z"},
		{name: "a time after the archive's last change is restorable when a later snapshot found no more",
			point: api.RestorePointInTime{Time: "2026-11-28T12:00:00Z"}, snaps: snapshots(100, "10:00:00", 260, "12:30:00"), archive: full(),
			snapshot: 260, revision: 260},
		{name: "a later snapshot that found more changes proves nothing about the time",
			point: api.RestorePointInTime{Time: "2026-11-28T12:00:00Z"}, snaps: snapshots(100, "10:00:00", 290, "12:30:00"), archive: full(),
			err: "nothing shows what the cluster held"},
		{name: "a time in a hole the archive was started again after is refused, though a later snapshot holds the next revision",
			point: api.RestorePointInTime{Time: "2026-11-28T10:40:00Z"}, snaps: twoSnaps,
			archive: new(testArchive).add(101, 150, day("10:20:00")).add(201, 260, day("11:30:00")),
			err:     "the archive lacks revisions 151 to 200, and 2026-11-28T10:40:00Z falls among them"},
		{name: "a time before every snapshot and change is refused",
			point: api.RestorePointInTime{Time: "2026-11-28T09:00:00Z"}, snaps: twoSnaps, archive: full(),
			err: "is before every snapshot and archived change"},
	}
	latest := api.RestorePointInTime{Latest: true}
	tests = append(tests, []pointCase{
		{name: "the latest change is the archive's last, replayed from the newest snapshot",
			point: latest, snaps: twoSnaps, archive: full(),
			snapshot: 200, revision: 260, chunks: "201-260"},
		{name: "the latest change is the newest snapshot's when the archive stopped before it",
			point: latest, snaps: snapshots(100, "10:00:00", 290, "12:30:00"), archive: full(),
			snapshot: 290, revision: 290},
		{name: "the latest change is the newest snapshot's without an archive",
			point: latest, snaps: twoSnaps, archive: new(testArchive),
			snapshot: 200, revision: 200},
		{name: "a hole before the newest snapshot does not keep the latest change from being restored",
			point: latest, snaps: twoSnaps, archive: holed(),
			snapshot: 200, revision: 260, chunks: "201-260"},
		{name: "a hole after the newest snapshot stops the latest change before it",
			point: latest, snaps: snapshots(100, "10:00:00"), archive: holed(),
			snapshot: 100, revision: 150, chunks: "101-150"},
		{name: "a hole right after the newest snapshot leaves the snapshot alone",
			point: latest, snaps: twoSnaps, archive: new(testArchive).add(101, 150, day("10:20:00")).add(231, 260, day("11:30:00")),
			snapshot: 200, revision: 200},
		{name: "without a snapshot the latest change cannot be restored",
			point: latest, archive: full(),
			err: "there is none"},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap, plan, chunks, err := planPoint(t.Context(), tc.point, tc.snaps, tc.archive.chunks, tc.archive.read)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if snap.Revision != tc.snapshot || plan.SnapshotRevision != tc.snapshot || plan.Revision != tc.revision {
				t.Errorf("snapshot %d (plan %d) up to revision %d, want snapshot %d up to %d", snap.Revision, plan.SnapshotRevision, plan.Revision, tc.snapshot, tc.revision)
			}
			var got []string
			for _, c := range chunks {
				got = append(got, fmt.Sprintf("%d-%d", c.First, min(c.Last, plan.Revision)))
			}
			if g := strings.Join(got, " "); g != tc.chunks {
				t.Errorf("replays chunks %q, want %q", g, tc.chunks)
			}
			if g := strings.Join(tc.archive.reads, " "); g != tc.reads {
				t.Errorf("read chunks %q to plan, want %q", g, tc.reads)
			}
			if plan.Replays() != (tc.revision > tc.snapshot) {
				t.Errorf("Replays() = %v", plan.Replays())
			}
			_, archived := newestRevision(tc.snaps, tc.archive.chunks)
			switch newest, _ := newestRevision(tc.snaps, tc.archive.chunks); {
			case !tc.point.Latest:
				if plan.Shortfall != "" || plan.ArchiveRevision != 0 {
					t.Errorf("a point that is not the latest says shortfall %q, archive revision %d", plan.Shortfall, plan.ArchiveRevision)
				}
			case plan.ArchiveRevision != archived:
				t.Errorf("archive revision %d, want %d", plan.ArchiveRevision, archived)
			case (plan.Revision < newest) != (plan.Shortfall != ""):
				t.Errorf("stops at revision %d of %d, saying %q", plan.Revision, newest, plan.Shortfall)
			}
		})
	}
}

// What the replay must leave is what the last change to each key in the
// range says; changes outside the range do not count.
func TestReplayEffectKeepsTheLastChangeOfEachKeyInTheRange(t *testing.T) {
	put := func(k, v string, rev int64) archive.Event {
		return archive.Event{Event: mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(k), Value: []byte(v), ModRevision: rev}}}
	}
	del := func(k string, rev int64) archive.Event {
		return archive.Event{Event: mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(k), ModRevision: rev}}}
	}
	eff := ReplayEffect{After: 10, Revision: 14}
	eff.Add([]archive.Event{put("before", "x", 10), put("a", "1", 11), put("b", "1", 12), put("c", "1", 12)})
	eff.Add([]archive.Event{del("b", 13), put("a", "2", 14), put("late", "x", 15)})
	if eff.Revisions != 4 || eff.Events != 5 || eff.Last() != 14 {
		t.Errorf("counted %d revisions and %d events up to %d, want 4, 5 and 14", eff.Revisions, eff.Events, eff.Last())
	}
	want := map[string]KeyState{"a": {Value: []byte("2")}, "b": {Deleted: true}, "c": {Value: []byte("1")}}
	if KeyDigest(eff.Keys) != KeyDigest(want) || len(eff.Keys) != 3 {
		t.Errorf("keys %v, want %v", eff.Keys, want)
	}
	// The digest tells a deleted key from an empty value, and keys apart.
	if KeyDigest(map[string]KeyState{"a": {Deleted: true}}) == KeyDigest(map[string]KeyState{"a": {}}) ||
		KeyDigest(map[string]KeyState{"ab": {}}) == KeyDigest(map[string]KeyState{"a": {Value: []byte("b")}}) {
		t.Error("different key states have one digest")
	}
}
