package archive

import "time"

// Span is a run of revisions the archive holds without a hole: every
// revision from First to Last, the last one received at Time.
type Span struct {
	First, Last int64
	Time        time.Time
}

// Spans are the runs of revisions chunks hold without a hole, oldest first.
// chunks is sorted by First, as List returns them. Chunks that overlap are
// merged here; Covering is what refuses them, when a replay reads them.
func Spans(chunks []Chunk) []Span {
	var spans []Span
	for _, c := range chunks {
		spans = addChunk(spans, c)
	}
	return spans
}

// addChunk adds c, which starts at or after the First of every span, to
// spans: it lengthens the last span when it follows it without a hole, and
// starts a new one otherwise.
func addChunk(spans []Span, c Chunk) []Span {
	if n := len(spans); n > 0 && c.First <= spans[n-1].Last+1 {
		if c.Last > spans[n-1].Last {
			spans[n-1].Last, spans[n-1].Time = c.Last, c.Time
		}
		return spans
	}
	return append(spans, Span{First: c.First, Last: c.Last, Time: c.Time})
}

// Point is a revision of the source cluster and when it was reached: for a
// chunk's last revision, when the archiver received it; for a snapshot, when
// its revision was read.
type Point struct {
	Revision int64
	Time     time.Time
}

// Reach is the newest point a restore to the latest change reaches from the
// newest full snapshot: the snapshot's revision, carried on by the chunks
// that follow it without a hole, as far as they go. A restore replays the
// chunks from snapshot.Revision+1 on and cannot jump a hole, so the chunks
// after one are of no use to it; hole is the first such hole, nil when the
// chunks after the snapshot have none (or there are none after it). A
// snapshot past the archive's end is the point itself.
//
// The restore operator plans a restore to the latest change with it, and the
// backup operator reports it as status.archive.recoveryPoint, so that the
// two agree on what "latest" reaches.
func Reach(snapshot Point, spans []Span) (reached Point, hole *HoleError) {
	reached = snapshot
	next := snapshot.Revision + 1
	for _, s := range spans {
		switch {
		case s.Last < next:
			continue
		case s.First > next:
			return reached, &HoleError{Missing: next, Next: s.First}
		}
		reached = Point{Revision: s.Last, Time: s.Time}
		next = s.Last + 1
	}
	return reached, nil
}
