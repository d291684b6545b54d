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
// larger than the trailer, so every branch of Write sees use.
func feed(c *trailerCheck, b []byte, rng *rand.Rand) {
	for len(b) > 0 {
		n := min(rng.IntN(80), len(b))
		_, _ = c.Write(b[:n])
		b = b[n:]
	}
}

func TestTrailerCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	for _, size := range []int{0, 1, 31, 32, 33, 64, 1000} {
		good := withTrailer(data[:size])
		for round := range 20 {
			c := newTrailerCheck()
			feed(c, good, rng)
			if err := c.verify(); err != nil {
				t.Fatalf("size %d round %d: intact snapshot refused: %v", size, round, err)
			}
			// The store takes the stored bytes' sha256 from the check: the
			// whole stream, trailer included, however often EOF is seen.
			if err := c.verify(); err != nil {
				t.Fatalf("size %d: a second verify refused: %v", size, err)
			}
			if want := sha256.Sum256(good); c.sum() != hex.EncodeToString(want[:]) {
				t.Fatalf("size %d: sum %s, want the sha256 of the whole stream %x", size, c.sum(), want)
			}
		}
		for _, flip := range []int{0, len(good) / 2, len(good) - 1} {
			bad := append([]byte{}, good...)
			bad[flip] ^= 0x40
			c := newTrailerCheck()
			feed(c, bad, rng)
			if err := c.verify(); err == nil || !strings.Contains(err.Error(), "does not match") {
				t.Fatalf("size %d, byte %d flipped: got %v, want a mismatch", size, flip, err)
			}
			if c.sum() != "" {
				t.Fatalf("size %d, byte %d flipped: a damaged stream has the sum %s", size, flip, c.sum())
			}
		}
	}
}

func TestTrailerCheckRefusesAShortStream(t *testing.T) {
	c := newTrailerCheck()
	_, _ = c.Write(make([]byte, 31))
	if err := c.verify(); err == nil || !strings.Contains(err.Error(), "31 bytes") {
		t.Fatalf("got %v", err)
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
			body := &checkedStream{r: bytes.NewReader(tc.stream), check: newTrailerCheck()}
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
