package backup

import (
	"crypto/sha256"
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
		}
		for _, flip := range []int{0, len(good) / 2, len(good) - 1} {
			bad := append([]byte{}, good...)
			bad[flip] ^= 0x40
			c := newTrailerCheck()
			feed(c, bad, rng)
			if err := c.verify(); err == nil || !strings.Contains(err.Error(), "does not match") {
				t.Fatalf("size %d, byte %d flipped: got %v, want a mismatch", size, flip, err)
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
