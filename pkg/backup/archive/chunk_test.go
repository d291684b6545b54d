package archive

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

var sum64 = strings.Repeat("ab", 32)

func TestChunkNames(t *testing.T) {
	at := time.Date(2026, 11, 28, 14, 32, 10, 123456789, time.FixedZone("CET", 3600))
	c := Chunk{First: 101, Last: 250, Time: at, SHA256: sum64}
	name := ChunkName("archive/", c)
	if want := "archive/0000000000000000101-0000000000000000250-20261128T133210.123456789Z-" + sum64 + ".chunk"; name != want {
		t.Fatalf("name %s, want %s", name, want)
	}
	got, ok := ParseChunkName("archive/", backup.ObjectInfo{Key: name, Size: 7})
	if !ok || got.First != 101 || got.Last != 250 || !got.Time.Equal(at) || got.SHA256 != sum64 || got.Size != 7 || got.Key != name {
		t.Fatalf("parsed %+v, %v", got, ok)
	}

	for _, tc := range []struct {
		name, key string
	}{
		{"a snapshot sharing the prefix is not a chunk", "archive/backup-0000000012-20261128.db"},
		{"another prefix is not this archive's", "other/" + name[len("archive/"):]},
		{"a chunk whose last revision is before its first is refused", "archive/0000000000000000250-0000000000000000101-20261128T133210.123456789Z-" + sum64 + ".chunk"},
		{"revision 0 is no revision", "archive/0000000000000000000-0000000000000000101-20261128T133210.123456789Z-" + sum64 + ".chunk"},
		{"a short checksum is refused", "archive/0000000000000000101-0000000000000000250-20261128T133210.123456789Z-abcd.chunk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c, ok := ParseChunkName("archive/", backup.ObjectInfo{Key: tc.key}); ok {
				t.Fatalf("parsed %q as %+v", tc.key, c)
			}
		})
	}
}

func TestChunkNamesSortByRevision(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var names []string
	for _, r := range [][2]int64{{1000, 1999}, {9, 99}, {100, 999}, {1, 8}} {
		names = append(names, ChunkName("p/", Chunk{First: r[0], Last: r[1], Time: at, SHA256: sum64}))
	}
	sort.Strings(names)
	for i, want := range []string{"p/0000000000000000001-", "p/0000000000000000009-", "p/0000000000000000100-", "p/0000000000000001000-"} {
		if !strings.HasPrefix(names[i], want) {
			t.Fatalf("sorted names %v: %d is not %s…", names, i, want)
		}
	}
}

func TestCovering(t *testing.T) {
	ch := func(first, last int64) Chunk {
		return Chunk{Key: ChunkName("", Chunk{First: first, Last: last, SHA256: sum64}), First: first, Last: last}
	}
	firsts := func(cs []Chunk) []int64 {
		var out []int64
		for _, c := range cs {
			out = append(out, c.First)
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		chunks      []Chunk
		after, upTo int64
		want        []int64
		hole        int64 // the HoleError's Missing, 0 when none
		overlap     bool
	}{
		{name: "chunks that follow each other are all read", chunks: []Chunk{ch(1, 5), ch(6, 9), ch(10, 20)}, want: []int64{1, 6, 10}},
		{name: "a chunk the snapshot already holds is skipped", chunks: []Chunk{ch(1, 5), ch(6, 9), ch(10, 20)}, after: 9, want: []int64{10}},
		{name: "the chunk holding the snapshot's revision is read from its middle", chunks: []Chunk{ch(1, 5), ch(6, 9)}, after: 7, want: []int64{6}},
		{name: "reading stops at the chunk holding the target", chunks: []Chunk{ch(1, 5), ch(6, 9), ch(10, 20)}, upTo: 7, want: []int64{1, 6}},
		{name: "a missing chunk is a hole", chunks: []Chunk{ch(1, 5), ch(10, 20)}, hole: 6},
		{name: "an archive that starts after the snapshot is a hole", chunks: []Chunk{ch(10, 20)}, after: 5, hole: 6},
		{name: "an archive that ends before the target is a hole", chunks: []Chunk{ch(1, 5)}, upTo: 9, hole: 6},
		{name: "an archive started again after a gap is read from the snapshot that filled it", chunks: []Chunk{ch(1, 5), ch(31, 40)}, after: 30, want: []int64{31}},
		{name: "overlapping chunks are refused", chunks: []Chunk{ch(1, 5), ch(4, 9)}, overlap: true},
		{name: "nothing after the snapshot is nothing to read", chunks: []Chunk{ch(1, 5)}, after: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Covering(tc.chunks, tc.after, tc.upTo)
			var hole *HoleError
			switch {
			case tc.hole != 0:
				if !errors.As(err, &hole) || hole.Missing != tc.hole {
					t.Fatalf("got %v, %v; want a hole at %d", firsts(got), err, tc.hole)
				}
			case tc.overlap:
				if err == nil || !strings.Contains(err.Error(), "overlap") {
					t.Fatalf("got %v, %v; want an overlap", firsts(got), err)
				}
			case err != nil:
				t.Fatal(err)
			case !equalInts(firsts(got), tc.want):
				t.Fatalf("got chunks from %v, want %v", firsts(got), tc.want)
			}
		})
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// plainChunk is the plain form of a chunk of three events over revisions 5 and 6.
func plainChunk(t *testing.T) []byte {
	w := newChunkWriter()
	at := time.Unix(1700000000, 0)
	for i, ev := range []mvccpb.Event{
		{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("a"), Value: []byte("1"), CreateRevision: 5, ModRevision: 5, Version: 1, Lease: 7}},
		{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("b"), Value: []byte("2"), CreateRevision: 5, ModRevision: 5, Version: 1}},
		{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("a"), ModRevision: 6}},
	} {
		if err := w.add(&ev, at.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	return append([]byte(nil), w.seal(4)...)
}

func TestChunkFormat(t *testing.T) {
	plain := plainChunk(t)
	evs, first, last, err := decodeChunk(plain)
	if err != nil {
		t.Fatal(err)
	}
	if first != 4 || last != 6 || len(evs) != 3 {
		t.Fatalf("revisions %d to %d, %d events", first, last, len(evs))
	}
	if e := evs[0]; string(e.Kv.Key) != "a" || e.Kv.Lease != 7 || e.Kv.Version != 1 || e.Kv.CreateRevision != 5 || !e.Received.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("first event %+v", e)
	}
	if e := evs[2]; e.Type != mvccpb.DELETE || e.Revision() != 6 {
		t.Fatalf("last event %+v", e)
	}

	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"a chunk cut in its trailer", func(b []byte) []byte { return b[:len(b)-5] }},
		{"a chunk cut before its trailer", func(b []byte) []byte { return b[:len(b)-trailerSize-1] }},
		{"a chunk cut inside an event", func(b []byte) []byte { return b[:len(magic)+10] }},
		{"a chunk with a value changed", func(b []byte) []byte { b[len(b)-trailerSize-10] ^= 1; return b }},
		{"a chunk with bytes after its trailer", func(b []byte) []byte { return append(b, 0) }},
		{"something that is no chunk", func([]byte) []byte { return []byte("hello") }},
	} {
		t.Run(tc.name+" fails to read", func(t *testing.T) {
			if _, _, _, err := decodeChunk(tc.damage(append([]byte(nil), plain...))); err == nil {
				t.Fatal("read without error")
			}
		})
	}
}

// A chunk built without a cluster reads back as the archiver's do.
func TestBuildChunkReadsBack(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	evs := []Event{
		{Event: mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("a"), Value: []byte("1"), ModRevision: 5}}, Received: at},
		{Event: mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("b"), ModRevision: 6}}, Received: at.Add(time.Second)},
	}
	for _, codec := range []backup.Codec{{}, {Compression: backup.CompressionGzip, Key: make([]byte, backup.KeySize)}} {
		c, stored, err := BuildChunk("p/", codec, 5, evs)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeStoredChunk(c, stored, codec.Key)
		if err != nil {
			t.Fatal(err)
		}
		if c.First != 5 || c.Last != 6 || !c.Time.Equal(at.Add(time.Second)) || len(got) != 2 || got[1].Type != mvccpb.DELETE {
			t.Errorf("chunk %+v read back as %+v", c, got)
		}
	}
}
