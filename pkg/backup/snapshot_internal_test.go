package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// withTrailer is data followed by its sha256, as etcd's Snapshot RPC sends it.
func withTrailer(data []byte) []byte {
	sum := sha256.Sum256(data)
	return append(append([]byte{}, data...), sum[:]...)
}

// feed writes b to c in random chunks, including empty ones and ones smaller and
// larger than the trailer, so every branch of Write sees use: an S3 body
// arrives in chunks of any size, some shorter than the trailer.
func feed(c *SnapshotCheck, b []byte, rng *rand.Rand) {
	for len(b) > 0 {
		n := min(rng.IntN(80), len(b))
		_, _ = c.Write(b[:n])
		b = b[n:]
	}
}

func TestSnapshotCheckWhateverTheChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	for _, size := range []int{0, 1, 31, 32, 33, 64, 1000} {
		good := withTrailer(data[:size])
		for round := range 20 {
			c := NewSnapshotCheck()
			feed(c, good, rng)
			if err := c.Verify(); err != nil {
				t.Fatalf("size %d round %d: intact snapshot refused: %v", size, round, err)
			}
			// The store takes the stored bytes' sha256 from the check: the
			// whole stream, trailer included, however often EOF is seen.
			if err := c.Verify(); err != nil {
				t.Fatalf("size %d: a second verify refused: %v", size, err)
			}
			if want := sha256.Sum256(good); c.SHA256() != hex.EncodeToString(want[:]) || c.Size() != int64(len(good)) {
				t.Fatalf("size %d: %d bytes with sha256 %s, want the whole stream's %d and %x", size, c.Size(), c.SHA256(), len(good), want)
			}
		}
		for _, flip := range []int{0, len(good) / 2, len(good) - 1} {
			bad := append([]byte{}, good...)
			bad[flip] ^= 0x40
			c := NewSnapshotCheck()
			feed(c, bad, rng)
			if err := c.Verify(); err == nil || !strings.Contains(err.Error(), "does not match") {
				t.Fatalf("size %d, byte %d flipped: got %v, want a mismatch", size, flip, err)
			}
			if c.SHA256() != "" {
				t.Fatalf("size %d, byte %d flipped: a damaged stream has the sum %s", size, flip, c.SHA256())
			}
		}
	}
}

func TestSnapshotCheckRefusesDamage(t *testing.T) {
	good := withTrailer([]byte("hello, a database"))
	flipLast := bytes.Clone(good)
	flipLast[len(flipLast)-1] ^= 1
	tests := []struct {
		name    string
		data    []byte
		errHas  string
		wantErr bool
	}{
		{"an intact snapshot passes", good, "", false},
		{"any bytes followed by their sha256 pass", withTrailer(nil), "", false},
		{"a damaged trailer is refused", flipLast, "does not match", true},
		{"a truncated snapshot is refused", good[:len(good)-1], "does not match", true},
		{"a trailer alone is refused", good[len(good)-sha256.Size:], "does not match", true},
		{"a stream shorter than a trailer is refused with its length", good[:31], "31 bytes long", true},
		{"an empty stream is refused", nil, "0 bytes long", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewSnapshotCheck()
			_, _ = c.Write(tt.data)
			err := c.Verify()
			if (err != nil) != tt.wantErr || err != nil && !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("Verify() = %v, want error %v containing %q", err, tt.wantErr, tt.errHas)
			}
		})
	}
}

// commitOnEOF is a Store that, like the real ones, replaces an object only when
// the reader ends with io.EOF.
type commitOnEOF struct{ objects map[string][]byte }

func (s *commitOnEOF) Put(_ context.Context, key string, r io.Reader) (int64, string, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return 0, "", err
	}
	s.objects[key] = data
	return int64(len(data)), "", nil
}

func TestCheckedStreamFailsTheUploadOfADamagedSnapshot(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	db := make([]byte, 100000)
	for i := range db {
		db[i] = byte(rng.Uint32())
	}
	sum := sha256.Sum256(db)
	good := append(append([]byte{}, db...), sum[:]...)
	damaged := append([]byte{}, good...)
	damaged[5000] ^= 1

	for _, tc := range []struct {
		name    string
		stream  []byte
		wantErr bool
	}{
		{"a good snapshot is stored", good, false},
		{"a flipped bit keeps the old object", damaged, true},
		{"a truncated stream keeps the old object", good[:len(good)-10], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &commitOnEOF{objects: map[string][]byte{"k": []byte("previous backup")}}
			body := &checkedStream{r: bytes.NewReader(tc.stream), check: NewSnapshotCheck()}
			_, _, err := store.Put(context.Background(), "k", body)
			if tc.wantErr {
				if !errors.Is(err, errDamaged) || body.damaged == nil {
					t.Fatalf("Put = %v (damaged %v), want errDamaged", err, body.damaged)
				}
				if string(store.objects["k"]) != "previous backup" {
					t.Fatal("the previous backup was replaced")
				}
				return
			}
			if err != nil || body.damaged != nil || !bytes.Equal(store.objects["k"], good) {
				t.Fatalf("Put = %v, damaged %v", err, body.damaged)
			}
		})
	}
}
