package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

// Chunk describes one stored chunk, as its name tells it.
type Chunk struct {
	// Key is the object's key in the store.
	Key string
	// First and Last are the revisions it covers; it holds every event of them.
	First, Last int64
	// Time is when the event of Last was received.
	Time time.Time
	// SHA256 is the hex sha256 of the stored bytes.
	SHA256 string
	// Size is the stored size, from the store's listing.
	Size int64
}

// Event is one archived event.
type Event struct {
	mvccpb.Event
	// Received is when the archiver received it: what a restore to a time
	// compares with, since etcd keeps no time of its own.
	Received time.Time
}

// Revision is the revision that made the event.
func (e *Event) Revision() int64 { return e.Kv.ModRevision }

// timeLayout is fixed width and UTC, so that it sorts as a string too.
const timeLayout = "20060102T150405.000000000Z"

// revisionDigits is the width of an int64's largest value.
const revisionDigits = 19

var chunkNameRE = regexp.MustCompile(`^(\d{19})-(\d{19})-(\d{8}T\d{6}\.\d{9}Z)-([0-9a-f]{64})\.chunk$`)

// ChunkName is the key of a chunk under prefix:
//
//	<prefix><First>-<Last>-<time of Last, UTC>-<sha256>.chunk
//	archive/0000000000000000101-0000000000000000250-20261128T143210.123456789Z-9f86….chunk
//
// Names sort by revision; since events are received in revision order, they
// sort by time as well, and a restore to a time reads only the one chunk whose
// range holds the time.
func ChunkName(prefix string, c Chunk) string {
	return fmt.Sprintf("%s%0*d-%0*d-%s-%s.chunk", prefix, revisionDigits, c.First, revisionDigits, c.Last,
		c.Time.UTC().Format(timeLayout), c.SHA256)
}

// ParseChunkName reads a chunk's name; ok is false for any other key, so that
// other objects may share the prefix.
func ParseChunkName(prefix string, info backup.ObjectInfo) (c Chunk, ok bool) {
	if len(info.Key) < len(prefix) || info.Key[:len(prefix)] != prefix {
		return c, false
	}
	m := chunkNameRE.FindStringSubmatch(info.Key[len(prefix):])
	if m == nil {
		return c, false
	}
	first, err1 := strconv.ParseInt(m[1], 10, 64)
	last, err2 := strconv.ParseInt(m[2], 10, 64)
	t, err3 := time.Parse(timeLayout, m[3])
	if err1 != nil || err2 != nil || err3 != nil || first < 1 || last < first {
		return c, false
	}
	return Chunk{Key: info.Key, First: first, Last: last, Time: t, SHA256: m[4], Size: info.Size}, true
}

// List is every chunk under prefix, by revision.
func List(ctx context.Context, store backup.Store, prefix string) ([]Chunk, error) {
	objs, err := store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list archive %q: %w", prefix, err)
	}
	var chunks []Chunk
	for _, o := range objs {
		if c, ok := ParseChunkName(prefix, o); ok {
			chunks = append(chunks, c)
		}
	}
	sort.Slice(chunks, func(i, j int) bool { return chunks[i].First < chunks[j].First })
	return chunks, nil
}

// HoleError says the archive does not hold a revision a reader needs.
type HoleError struct {
	// Missing is the first revision no chunk holds.
	Missing int64
	// Next is the first revision of the chunk after the hole; 0 when none follows.
	Next int64
}

func (e *HoleError) Error() string {
	if e.Next == 0 {
		return fmt.Sprintf("the archive ends before revision %d", e.Missing)
	}
	return fmt.Sprintf("the archive lacks revisions %d to %d", e.Missing, e.Next-1)
}

// Covering is the chunks that hold revisions after..upTo (upTo 0: to the end
// of the archive), in order, checked to follow each other without overlap or
// hole. chunks is sorted by First, as List returns them.
func Covering(chunks []Chunk, after, upTo int64) ([]Chunk, error) {
	var out []Chunk
	next := after + 1
	for _, c := range chunks {
		if c.Last < next {
			continue
		}
		if upTo != 0 && next > upTo {
			break
		}
		if c.First > next {
			return nil, &HoleError{Missing: next, Next: c.First}
		}
		if len(out) > 0 && c.First != next {
			return nil, fmt.Errorf("chunks %s and %s overlap", out[len(out)-1].Key, c.Key)
		}
		out = append(out, c)
		next = c.Last + 1
	}
	if upTo != 0 && next <= upTo {
		return nil, &HoleError{Missing: next}
	}
	return out, nil
}

const magic = "ETCDARC\x01"

// trailerSize is the trailer after its leading zero length.
const trailerSize = 3*8 + sha256.Size

// chunkWriter builds the plain form of one chunk in memory.
type chunkWriter struct {
	buf         bytes.Buffer
	first, last int64
	count       int64
	lastTime    time.Time
	opened      time.Time // when its first event was received
}

func newChunkWriter() *chunkWriter {
	w := &chunkWriter{}
	w.buf.WriteString(magic)
	return w
}

func (w *chunkWriter) empty() bool { return w.count == 0 }

func (w *chunkWriter) add(ev *mvccpb.Event, received time.Time) error {
	body, err := ev.Marshal()
	if err != nil {
		return fmt.Errorf("encode the event of %q at revision %d: %w", ev.Kv.Key, ev.Kv.ModRevision, err)
	}
	w.buf.Write(binary.AppendUvarint(nil, uint64(8+len(body))))
	w.buf.Write(binary.BigEndian.AppendUint64(nil, uint64(received.UnixNano())))
	w.buf.Write(body)
	if w.count == 0 {
		w.opened = received
	}
	w.count++
	w.last = ev.Kv.ModRevision
	w.lastTime = received
	return nil
}

// seal ends the chunk with its trailer and returns its plain form; the chunk
// covers first..w.last, first being the revision after the previous chunk's.
func (w *chunkWriter) seal(first int64) []byte {
	w.first = first
	w.buf.WriteByte(0)
	var t [24]byte
	binary.BigEndian.PutUint64(t[0:], uint64(first))
	binary.BigEndian.PutUint64(t[8:], uint64(w.last))
	binary.BigEndian.PutUint64(t[16:], uint64(w.count))
	w.buf.Write(t[:])
	sum := sha256.Sum256(w.buf.Bytes())
	w.buf.Write(sum[:])
	return w.buf.Bytes()
}

// ErrDamaged is what reading a chunk whose bytes are not what the archiver
// stored returns (wrapped).
var ErrDamaged = errors.New("the archive chunk is damaged")

// maxPlainChunk bounds what reading one chunk allocates, whatever a damaged
// or hostile compressed object expands to.
const maxPlainChunk = 1 << 30

// ReadChunk reads and checks one chunk: the stored bytes against the sha256 in
// its name, then the plain form against its trailer and the revisions in its
// name. key decrypts an encrypted chunk (nil when not encrypted).
func ReadChunk(ctx context.Context, store backup.Store, c Chunk, key []byte) ([]Event, error) {
	rc, _, err := store.Get(ctx, c.Key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c.Key, err)
	}
	stored, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c.Key, err)
	}
	return DecodeStoredChunk(c, stored, key)
}

// DecodeStoredChunk checks and decodes the stored bytes of chunk c, however
// they were read, as ReadChunk does.
func DecodeStoredChunk(c Chunk, stored, key []byte) ([]Event, error) {
	if sum := sha256.Sum256(stored); hex.EncodeToString(sum[:]) != c.SHA256 {
		return nil, fmt.Errorf("%w: %s has sha256 %x, its name says %s", ErrDamaged, c.Key, sum, c.SHA256)
	}
	dr, _, err := backup.Decode(bytes.NewReader(stored), key)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", c.Key, err)
	}
	plain, err := io.ReadAll(io.LimitReader(dr, maxPlainChunk))
	_ = dr.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: decode %s: %w", ErrDamaged, c.Key, err)
	}
	evs, first, last, err := decodeChunk(plain)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrDamaged, c.Key, err)
	}
	if first != c.First || last != c.Last {
		return nil, fmt.Errorf("%w: %s holds revisions %d to %d, its name says %d to %d", ErrDamaged, c.Key, first, last, c.First, c.Last)
	}
	return evs, nil
}

// decodeChunk reads a chunk's plain form and checks its trailer.
func decodeChunk(plain []byte) (evs []Event, first, last int64, err error) {
	if !bytes.HasPrefix(plain, []byte(magic)) {
		return nil, 0, 0, errors.New("it does not start as an archive chunk")
	}
	rest := plain[len(magic):]
	for {
		n, l := binary.Uvarint(rest)
		if l <= 0 {
			return nil, 0, 0, errors.New("it is cut short (no trailer)")
		}
		rest = rest[l:]
		if n == 0 {
			break
		}
		if n < 8 || n > uint64(len(rest)) {
			return nil, 0, 0, errors.New("it is cut short inside an event")
		}
		ev := Event{Received: time.Unix(0, int64(binary.BigEndian.Uint64(rest))).UTC()}
		if err := ev.Unmarshal(rest[8:n]); err != nil || ev.Kv == nil {
			return nil, 0, 0, fmt.Errorf("event %d does not decode: %v", len(evs), err)
		}
		evs = append(evs, ev)
		rest = rest[n:]
	}
	if len(rest) != trailerSize {
		return nil, 0, 0, fmt.Errorf("its trailer has %d bytes, not %d", len(rest), trailerSize)
	}
	body := plain[:len(plain)-sha256.Size]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], plain[len(body):]) {
		return nil, 0, 0, errors.New("its content does not match the sha256 of its trailer")
	}
	first = int64(binary.BigEndian.Uint64(rest[0:]))
	last = int64(binary.BigEndian.Uint64(rest[8:]))
	if count := int64(binary.BigEndian.Uint64(rest[16:])); count != int64(len(evs)) {
		return nil, 0, 0, fmt.Errorf("it holds %d events, its trailer says %d", len(evs), count)
	}
	prev := first
	for i := range evs {
		r := evs[i].Revision()
		if r < prev || r > last {
			return nil, 0, 0, fmt.Errorf("event %d has revision %d, out of order or outside %d to %d", i, r, first, last)
		}
		prev = r
	}
	return evs, first, last, nil
}

// encodeChunk is the stored form of a plain chunk and its hex sha256.
func encodeChunk(codec backup.Codec, plain []byte) ([]byte, string, error) {
	enc := codec.Encode(bytes.NewReader(plain))
	stored, err := io.ReadAll(enc)
	_ = enc.Close()
	if err != nil {
		return nil, "", fmt.Errorf("encode chunk: %w", err)
	}
	sum := sha256.Sum256(stored)
	return stored, hex.EncodeToString(sum[:]), nil
}

// BuildChunk is the stored form of a chunk of evs (in revision order, every
// event of each revision, received as their Received say) covering revisions
// first to the last event's, and the Chunk that names it under prefix: what
// the Archiver stores, for tests and tools that make an archive without a
// cluster.
func BuildChunk(prefix string, codec backup.Codec, first int64, evs []Event) (Chunk, []byte, error) {
	if len(evs) == 0 {
		return Chunk{}, nil, errors.New("a chunk holds at least one event")
	}
	w := newChunkWriter()
	for i := range evs {
		if err := w.add(&evs[i].Event, evs[i].Received); err != nil {
			return Chunk{}, nil, err
		}
	}
	stored, sum, err := encodeChunk(codec, w.seal(first))
	if err != nil {
		return Chunk{}, nil, err
	}
	c := Chunk{First: first, Last: w.last, Time: w.lastTime, SHA256: sum, Size: int64(len(stored))}
	c.Key = ChunkName(prefix, c)
	return c, stored, nil
}
