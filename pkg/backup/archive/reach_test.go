package archive

import (
	"slices"
	"testing"
	"time"
)

func TestReach(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC)
	at := func(rev int64) time.Time { return t0.Add(time.Duration(rev) * time.Second) }
	ch := func(first, last int64) Chunk {
		c := Chunk{First: first, Last: last, Time: at(last), SHA256: sum64}
		c.Key = ChunkName("a/", c)
		return c
	}
	snapshotAt := Point{Revision: 100, Time: t0.Add(-time.Hour)}
	for _, tc := range []struct {
		name     string
		snapshot Point
		chunks   []Chunk
		want     Point
		// hole is the Missing of the hole that stops it, 0 for none.
		hole int64
	}{
		{
			name:     "chunks that follow the snapshot carry it to the archive's end",
			snapshot: snapshotAt, chunks: []Chunk{ch(101, 150), ch(151, 200), ch(201, 230)},
			want: Point{Revision: 230, Time: at(230)},
		},
		{
			name:     "chunks before the snapshot are of no use and do not stop it",
			snapshot: snapshotAt, chunks: []Chunk{ch(1, 40), ch(61, 99), ch(100, 100), ch(101, 120)},
			want: Point{Revision: 120, Time: at(120)},
		},
		{
			name:     "a chunk holding the snapshot's revision carries it on from its middle",
			snapshot: snapshotAt, chunks: []Chunk{ch(51, 110), ch(111, 140)},
			want: Point{Revision: 140, Time: at(140)},
		},
		{
			name:     "a gap after the snapshot stops it at the gap",
			snapshot: snapshotAt, chunks: []Chunk{ch(101, 150), ch(181, 200), ch(201, 250)},
			want: Point{Revision: 150, Time: at(150)}, hole: 151,
		},
		{
			name:     "an archive that starts after the snapshot leaves it at the snapshot",
			snapshot: snapshotAt, chunks: []Chunk{ch(131, 200)},
			want: snapshotAt, hole: 101,
		},
		{
			name:     "a snapshot past the archive's end is the point itself",
			snapshot: Point{Revision: 300, Time: t0}, chunks: []Chunk{ch(101, 150), ch(151, 200)},
			want: Point{Revision: 300, Time: t0},
		},
		{
			name:     "without chunks the snapshot is the point",
			snapshot: snapshotAt,
			want:     snapshotAt,
		},
		{
			name:     "an archive started again after a gap continues the snapshot that filled it",
			snapshot: Point{Revision: 180, Time: t0}, chunks: []Chunk{ch(101, 150), ch(181, 200), ch(201, 250)},
			want: Point{Revision: 250, Time: at(250)},
		},
		{
			name:     "a chunk ending at the snapshot's revision is followed by the next one",
			snapshot: snapshotAt, chunks: []Chunk{ch(61, 100), ch(101, 130)},
			want: Point{Revision: 130, Time: at(130)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, hole := Reach(tc.snapshot, Spans(tc.chunks))
			if got.Revision != tc.want.Revision || !got.Time.Equal(tc.want.Time) {
				t.Errorf("reached revision %d at %s, want %d at %s", got.Revision, got.Time, tc.want.Revision, tc.want.Time)
			}
			switch {
			case tc.hole == 0 && hole != nil:
				t.Errorf("stopped by %v, want no hole", hole)
			case tc.hole != 0 && (hole == nil || hole.Missing != tc.hole):
				t.Errorf("stopped by %v, want a hole from revision %d", hole, tc.hole)
			}
			// A restore replays the same chunks up to the point without a hole.
			if got.Revision > tc.snapshot.Revision {
				if _, err := Covering(tc.chunks, tc.snapshot.Revision, got.Revision); err != nil {
					t.Errorf("a replay to the point reached fails: %v", err)
				}
			}
		})
	}
}

func TestSpans(t *testing.T) {
	ch := func(first, last int64) Chunk { return Chunk{First: first, Last: last} }
	for _, tc := range []struct {
		name   string
		chunks []Chunk
		want   [][2]int64
	}{
		{"chunks that follow each other are one span", []Chunk{ch(1, 5), ch(6, 9), ch(10, 20)}, [][2]int64{{1, 20}}},
		{"a hole starts a new span", []Chunk{ch(1, 5), ch(8, 9), ch(10, 20)}, [][2]int64{{1, 5}, {8, 20}}},
		{"a chunk inside a span leaves it as it is", []Chunk{ch(1, 10), ch(4, 6), ch(11, 12)}, [][2]int64{{1, 12}}},
		{"no chunk is no span", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [][2]int64
			for _, s := range Spans(tc.chunks) {
				got = append(got, [2]int64{s.First, s.Last})
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("spans %v, want %v", got, tc.want)
			}
		})
	}
}
