package restore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// A restore to a point (spec.pointInTime) starts from the newest periodic
// snapshot at or before the point and replays the continuous archive onto it
// up to the point. Everything about the point is decided here, while nothing
// is touched: which snapshot, which revision a time means, that the archive
// holds every revision in between, and what the keys the replay writes must
// hold afterwards. The seed replays (replay.go) and checks its result against
// that.

// PointPlan is what a restore to a point decided before the hand-over; it is
// part of the Plan.
type PointPlan struct {
	// Point is spec.pointInTime as it was.
	Point api.RestorePointInTime `json:"point"`
	// SnapshotRevision is the revision the chosen snapshot's name records
	// (Plan.Backup is the snapshot).
	SnapshotRevision int64 `json:"snapshotRevision"`
	// Prefix is the key, in the snapshot's bucket, the chunks are stored under.
	Prefix string `json:"prefix"`
	// Revision is the last revision to replay; Time when the archiver
	// received it (nil when it is the snapshot's).
	Revision int64        `json:"revision"`
	Time     *metav1.Time `json:"time,omitempty"`
	// ChunksSHA256 is the digest of the names of the chunks that hold the
	// revisions after SnapshotRevision up to Revision (ChunkListDigest): the
	// backup server serves these and no other, and the seed checks it got them.
	ChunksSHA256 string `json:"chunksSHA256,omitempty"`
	// Revisions and Events count what the replay applies.
	Revisions int64 `json:"revisions,omitempty"`
	Events    int64 `json:"events,omitempty"`
	// Keys is how many keys those events write or delete, and KeysSHA256 the
	// digest of what each holds at Revision (KeyDigest): the seed reads them
	// back after the replay and compares.
	Keys       int64  `json:"keys,omitempty"`
	KeysSHA256 string `json:"keysSHA256,omitempty"`
	// ArchiveRevision is, for latest, the newest revision the chunks hold;
	// Shortfall why Revision stops before the newest the backup holds.
	ArchiveRevision int64  `json:"archiveRevision,omitempty"`
	Shortfall       string `json:"shortfall,omitempty"`
}

// Replays says whether the seed replays anything: a point at the snapshot's
// own revision is a restore of the snapshot.
func (p *PointPlan) Replays() bool { return p != nil && p.Revision > p.SnapshotRevision }

// Status is what the EtcdRestore's status says of the plan.
func (p *PointPlan) Status(snapshot string) *api.RestorePointInTimeStatus {
	return &api.RestorePointInTimeStatus{
		Snapshot: snapshot, SnapshotRevision: p.SnapshotRevision,
		Revision: p.Revision, Time: p.Time,
		Revisions: p.Revisions, Events: p.Events, Keys: p.Keys,
		ArchiveRevision: p.ArchiveRevision, Shortfall: p.Shortfall,
	}
}

// periodicSnapshot is a periodic backup as its name tells it:
// "<base>_v<revision>_<UTC time>" (backup.PeriodicKey). The time is when the
// revision was read, truncated to the second.
type periodicSnapshot struct {
	Key      string
	Revision int64
	Time     time.Time
}

// periodicSnapshots are the periodic backups of base among objs, oldest
// revision first. Other keys (one-shot backups, chunks) are left out.
func periodicSnapshots(base string, objs []backup.ObjectInfo) []periodicSnapshot {
	var out []periodicSnapshot
	for _, o := range objs {
		rest, ok := strings.CutPrefix(o.Key, base+"_v")
		if !ok {
			continue
		}
		revText, timeText, ok := strings.Cut(rest, "_")
		if !ok || revText == "" || strings.TrimLeft(revText, "0123456789") != "" {
			continue
		}
		rev, err := strconv.ParseInt(revText, 10, 64)
		if err != nil || rev < 1 {
			continue
		}
		at, err := time.Parse(backup.PeriodicTimeLayout, timeText)
		if err != nil {
			continue
		}
		out = append(out, periodicSnapshot{Key: o.Key, Revision: rev, Time: at})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Revision != out[j].Revision {
			return out[i].Revision < out[j].Revision
		}
		return out[i].Time.Before(out[j].Time)
	})
	return out
}

// chooseSnapshot is the newest snapshot whose revision is at or before
// revision; with several of one revision, the latest taken.
func chooseSnapshot(snaps []periodicSnapshot, revision int64) (periodicSnapshot, bool) {
	for i := len(snaps) - 1; i >= 0; i-- {
		if snaps[i].Revision <= revision {
			return snaps[i], true
		}
	}
	return periodicSnapshot{}, false
}

// A periodic snapshot is named after the revision read just before it is
// taken, and its name's time is when it was named, truncated to the second;
// the snapshot itself holds the changes made until its stream opened, a
// little after that revision. A point after the revision its name records
// but before the one it holds falls inside its window: the seed refuses to
// replay onto a snapshot past the point.
const (
	// nameResolution is how much later than its name's time a snapshot's
	// revision may have been read.
	nameResolution = time.Second
	// windowSlack is how long after a change is made the archiver is taken
	// to have received it, for telling a point past a snapshot's window from
	// one that may be inside it; a point taken to be past it wrongly is still
	// refused by the seed, never replayed wrongly.
	windowSlack = time.Minute
)

// outsideWindow is the snapshot a replay to revision starts from, snap being
// the newest at or before it: snap, unless revision may fall inside snap's
// window and the archive brings the snapshot before snap to it. A point may
// be inside the window when the change after it (or the point's own, when
// none is archived yet) was received before the window's end.
func outsideWindow(ctx context.Context, snaps []periodicSnapshot, snap periodicSnapshot, revision int64, chunks []archive.Chunk, read ReadEvents) (periodicSnapshot, error) {
	before, ok := chooseSnapshot(snaps, snap.Revision-1)
	if !ok {
		return snap, nil
	}
	if _, err := archive.Covering(chunks, before.Revision, revision); err != nil {
		return snap, nil
	}
	end := snap.Time.Add(nameResolution + windowSlack)
	for _, rev := range []int64{revision + 1, revision} {
		for _, c := range chunks {
			if rev < c.First || rev > c.Last {
				continue
			}
			if !c.Time.After(end) {
				return before, nil
			}
			evs, err := read(ctx, c)
			if err != nil {
				return snap, err
			}
			for i := range evs {
				if evs[i].Revision() == rev {
					if evs[i].Received.After(end) {
						return snap, nil
					}
					return before, nil
				}
			}
		}
	}
	return snap, nil
}

// ReadEvents reads a chunk's events, checked (archive.ReadChunk).
type ReadEvents func(ctx context.Context, c archive.Chunk) ([]archive.Event, error)

// revisionAt is the revision the source cluster was at at time at: that of
// the last archived change received at or before it. It reads the first chunk
// that ends after at, which holds the answer, and nothing else. Without such
// a chunk nothing in the archive proves that no change was made between its
// last one and at (the archiver may have lagged, or stopped), unless a
// snapshot read after at found the cluster at that last revision still. A
// time before every change and snapshot is refused.
func revisionAt(ctx context.Context, snaps []periodicSnapshot, chunks []archive.Chunk, at time.Time, read ReadEvents) (int64, *time.Time, error) {
	// The newest revision known to have been reached by at: from a snapshot
	// named at or before it, or an archived change received by then.
	known, knownAt := int64(0), (*time.Time)(nil)
	for _, s := range snaps {
		// Its revision was read within the second its name's time names.
		if !s.Time.Add(nameResolution).After(at) && s.Revision > known {
			known = s.Revision
		}
	}
	for _, c := range chunks {
		if !c.Time.After(at) {
			if c.Last > known {
				t := c.Time
				known, knownAt = c.Last, &t
			}
			continue
		}
		// The first chunk that ends after at: its changes received by at,
		// if any, are the last ones.
		evs, err := read(ctx, c)
		if err != nil {
			return 0, nil, err
		}
		rev, when := int64(0), (*time.Time)(nil)
		for i := range evs {
			if evs[i].Received.After(at) {
				break
			}
			t := evs[i].Received
			rev, when = evs[i].Revision(), &t
		}
		switch {
		case rev > known:
			known, knownAt = rev, when
		case rev != 0:
		case known == 0:
			return 0, nil, failure.Permanent(fmt.Errorf("%s is before every snapshot and archived change", at.Format(time.RFC3339Nano)))
		case c.First-1 > known:
			// The revisions before this chunk's may have been made before
			// at or after it: nothing tells.
			hole := &archive.HoleError{Missing: known + 1, Next: c.First}
			return 0, nil, failure.Permanent(fmt.Errorf("%v, and %s falls among them: nothing tells which of them were made by then", hole, at.Format(time.RFC3339Nano)))
		}
		return known, knownAt, nil
	}
	if known == 0 {
		return 0, nil, failure.Permanent(fmt.Errorf("%s is before every snapshot and archived change", at.Format(time.RFC3339Nano)))
	}
	// Nothing archived after at: a snapshot read after it must show that the
	// cluster had not moved past what is known.
	for _, s := range snaps {
		if s.Time.After(at) && s.Revision <= known {
			return known, knownAt, nil
		}
	}
	last := "no change is archived"
	if n := len(chunks); n > 0 {
		last = fmt.Sprintf("the archive's last change (revision %d) was received at %s", chunks[n-1].Last, chunks[n-1].Time.Format(time.RFC3339Nano))
	}
	return 0, nil, failure.Permanent(fmt.Errorf("nothing shows what the cluster held at %s: %s, and no change or snapshot after that time proves none was made since (the archive stores changes, not idle time); restore to a time up to the last archived change, or wait until a later change or snapshot is stored",
		at.Format(time.RFC3339Nano), last))
}

// planPoint decides a restore to point from the periodic snapshots and the
// chunks (sorted by revision, archive.List) of a backup: the snapshot, the
// last revision, and the chunks in between, checked to hold every revision.
// It reads no chunk but the one a time needs (revisionAt).
func planPoint(ctx context.Context, point api.RestorePointInTime, snaps []periodicSnapshot, chunks []archive.Chunk, read ReadEvents) (periodicSnapshot, *PointPlan, []archive.Chunk, error) {
	p := &PointPlan{Point: point, Revision: point.Revision}
	at, err := point.ParsedTime()
	if err != nil {
		return periodicSnapshot{}, nil, nil, failure.Permanent(fmt.Errorf("spec.pointInTime.time: %w", err))
	}
	if point.Latest {
		p.Revision, p.ArchiveRevision = newestRevision(snaps, chunks)
	}
	if !at.IsZero() {
		rev, when, err := revisionAt(ctx, snaps, chunks, at, read)
		if err != nil {
			return periodicSnapshot{}, nil, nil, err
		}
		p.Revision = rev
		if when != nil {
			p.Time = &metav1.Time{Time: *when}
		}
	}
	snap, ok := chooseSnapshot(snaps, p.Revision)
	if !ok {
		oldest := "there is none named <path>_v<revision>_<time>: with pointInTime the path is that of a periodic EtcdBackup with backupPolicy.archive, not a snapshot's"
		if len(snaps) > 0 {
			oldest = fmt.Sprintf("the oldest is %s at revision %d", snaps[0].Key, snaps[0].Revision)
		}
		return periodicSnapshot{}, nil, nil, failure.Permanent(fmt.Errorf("no periodic snapshot is at or before %s (revision %d): %s", point.String(), p.Revision, oldest))
	}
	if !point.Latest && p.Revision > snap.Revision {
		if snap, err = outsideWindow(ctx, snaps, snap, p.Revision, chunks, read); err != nil {
			return periodicSnapshot{}, nil, nil, err
		}
	}
	p.SnapshotRevision = snap.Revision
	if !p.Replays() {
		p.Time = nil
		return snap, p, nil, nil
	}
	if point.Latest {
		// What the backup operator reports as status.archive.recoveryPoint.
		reached, hole := archive.Reach(archive.Point{Revision: snap.Revision}, archive.Spans(chunks))
		if hole != nil {
			// The changes after the hole cannot be put onto any snapshot: the
			// newest is before it. Those before it can.
			p.Shortfall = fmt.Sprintf("%v after snapshot %s (revision %d), so the archive's changes up to revision %d cannot be replayed onto it; the restore stops at revision %d",
				hole, snap.Key, snap.Revision, p.ArchiveRevision, reached.Revision)
			p.Revision = reached.Revision
			if !p.Replays() {
				return snap, p, nil, nil
			}
		}
	}
	covering, err := archive.Covering(chunks, snap.Revision, p.Revision)
	var hole *archive.HoleError
	if err != nil {
		if errors.As(err, &hole) {
			return periodicSnapshot{}, nil, nil, failure.Permanent(fmt.Errorf("the archive cannot bring snapshot %s (revision %d) to revision %d: %v (compacted away before the archiver stored them, or deleted); choose a point the archive covers",
				snap.Key, snap.Revision, p.Revision, hole))
		}
		return periodicSnapshot{}, nil, nil, failure.Permanent(fmt.Errorf("the archive: %w", err))
	}
	p.ChunksSHA256 = ChunkListDigest(covering)
	return snap, p, covering, nil
}

// newestRevision is the newest revision a backup holds, for a restore to
// its latest change: the end of the archive's chunks, or the newest
// snapshot's revision when it is later (an archive that lagged or stopped).
// archived is where the chunks end, 0 without any.
func newestRevision(snaps []periodicSnapshot, chunks []archive.Chunk) (newest, archived int64) {
	for _, c := range chunks {
		archived = max(archived, c.Last)
	}
	newest = archived
	for _, s := range snaps {
		newest = max(newest, s.Revision)
	}
	return newest, archived
}

// ChunkListDigest is the hex sha256 of the chunks' names, in order: the names
// carry each chunk's revisions and the sha256 of its bytes.
func ChunkListDigest(chunks []archive.Chunk) string {
	h := sha256.New()
	for _, c := range chunks {
		name := c.Key[strings.LastIndexByte(c.Key, '/')+1:]
		_, _ = fmt.Fprintf(h, "%s\n", name)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// KeyState is what a key holds after a replay: its value, or nothing.
type KeyState struct {
	Value   []byte
	Deleted bool
}

// ReplayEffect collects what the events of revisions after After up to
// Revision do: how many, and what each key they touch holds at Revision.
type ReplayEffect struct {
	After, Revision int64
	Revisions       int64
	Events          int64
	Keys            map[string]KeyState
	// LastTime is when the last revision added was received.
	LastTime time.Time
	last     int64
}

// Add takes the events of one chunk, in order.
func (e *ReplayEffect) Add(evs []archive.Event) {
	if e.Keys == nil {
		e.Keys = map[string]KeyState{}
	}
	for i := range evs {
		ev := &evs[i]
		r := ev.Revision()
		if r <= e.After || r > e.Revision {
			continue
		}
		if r != e.last {
			e.Revisions++
			e.last = r
		}
		e.LastTime = ev.Received
		e.Events++
		e.Keys[string(ev.Kv.Key)] = KeyState{Value: ev.Kv.Value, Deleted: ev.Type == mvccpb.DELETE}
	}
}

// Last is the last revision added; After when none was.
func (e *ReplayEffect) Last() int64 { return max(e.last, e.After) }

// KeyDigest is the hex sha256 of keys and what each holds, in key order:
// for each, its length and bytes, whether it exists, and its value's length
// and bytes.
func KeyDigest(keys map[string]KeyState) string {
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	h := sha256.New()
	var b bytes.Buffer
	for _, k := range names {
		b.Reset()
		st := keys[k]
		b.Write(binary.AppendUvarint(nil, uint64(len(k))))
		b.WriteString(k)
		if st.Deleted {
			b.WriteByte(0)
		} else {
			b.WriteByte(1)
			b.Write(binary.AppendUvarint(nil, uint64(len(st.Value))))
			b.Write(st.Value)
		}
		_, _ = h.Write(b.Bytes())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// choosePoint plans a restore to spec.pointInTime from the store of the
// backup whose path base names: it lists the snapshots and the chunks, plans
// (planPoint), then reads every chunk of the replay through once, checked, and
// records what the replay must leave. It returns where the chosen snapshot is.
func choosePoint(ctx context.Context, spec *api.RestoreSpec, store backup.Store, base storage.Location, key []byte) (storage.Location, *PointPlan, error) {
	objs, err := store.List(ctx, base.Key+"_v")
	if err != nil {
		return storage.Location{}, nil, fmt.Errorf("list the snapshots of %s: %w", base.Path(), err)
	}
	snaps := periodicSnapshots(base.Key, objs)
	prefix := base.Key + api.ArchivePathSuffix
	chunks, err := archive.List(ctx, store, prefix)
	if err != nil {
		return storage.Location{}, nil, err
	}
	read := func(ctx context.Context, c archive.Chunk) ([]archive.Event, error) {
		evs, err := archive.ReadChunk(ctx, store, c, key)
		if errors.Is(err, archive.ErrDamaged) || errors.Is(err, backup.ErrKeyRequired) || errors.Is(err, backup.ErrWrongKey) {
			err = failure.Permanent(err)
		}
		return evs, err
	}
	snap, plan, covering, err := planPoint(ctx, *spec.PointInTime, snaps, chunks, read)
	if err != nil {
		return storage.Location{}, nil, err
	}
	plan.Prefix = prefix
	if !plan.Replays() {
		return storage.Location{Bucket: base.Bucket, Key: snap.Key}, plan, nil
	}
	eff := ReplayEffect{After: plan.SnapshotRevision, Revision: plan.Revision}
	for i, c := range covering {
		evs, err := read(ctx, c)
		if err != nil && plan.Point.Latest && failure.IsPermanent(err) {
			// What cannot be read now cannot be replayed later either; the
			// chunks before it can, and what they added is all before it.
			stopBefore(plan, covering[:i], c, err)
			eff.Revision = plan.Revision
			break
		}
		if err != nil {
			return storage.Location{}, nil, err
		}
		eff.Add(evs)
	}
	if plan.Replays() {
		if eff.Last() != plan.Revision {
			return storage.Location{}, nil, failure.Permanent(fmt.Errorf("the archive's chunks up to revision %d hold changes up to revision %d only", plan.Revision, eff.Last()))
		}
		plan.Revisions, plan.Events, plan.Keys = eff.Revisions, eff.Events, int64(len(eff.Keys))
		if plan.Time == nil {
			plan.Time = &metav1.Time{Time: eff.LastTime}
		}
		plan.KeysSHA256 = KeyDigest(eff.Keys)
	}
	return storage.Location{Bucket: base.Bucket, Key: snap.Key}, plan, nil
}

// stopBefore ends a restore to the latest change before c, a chunk that
// cannot be read, kept being the chunks before it, and says so in the plan.
func stopBefore(plan *PointPlan, kept []archive.Chunk, c archive.Chunk, err error) {
	plan.Revision = max(c.First-1, plan.SnapshotRevision)
	plan.Time = nil
	plan.Shortfall = fmt.Sprintf("chunk %s (revisions %d to %d) cannot be read (%v), so the archive's changes up to revision %d cannot be replayed; the restore stops at revision %d",
		c.Key, c.First, c.Last, err, plan.ArchiveRevision, plan.Revision)
	plan.ChunksSHA256 = ""
	if plan.Replays() {
		plan.ChunksSHA256 = ChunkListDigest(kept)
	}
}
