package backup_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strings"
	"testing"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

// snapshotLike is compressible but not trivially so: runs of zeros (free bbolt
// pages) between random bytes.
func snapshotLike(n int, seed uint64) []byte {
	r := mrand.New(mrand.NewPCG(seed, seed))
	out := make([]byte, n)
	for i := 0; i < n; {
		run := r.IntN(512) + 1
		if r.IntN(2) == 0 {
			for j := 0; j < run && i+j < n; j++ {
				out[i+j] = byte(r.Uint32())
			}
		}
		i += run
	}
	return out
}

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, backup.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func encode(t *testing.T, c backup.Codec, data []byte) []byte {
	t.Helper()
	rc := c.Encode(bytes.NewReader(data))
	defer func() { _ = rc.Close() }()
	out, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return out
}

func decode(stored, key []byte) ([]byte, backup.Form, error) {
	rc, form, err := backup.Decode(bytes.NewReader(stored), key)
	if err != nil {
		return nil, form, err
	}
	defer func() { _ = rc.Close() }()
	out, err := io.ReadAll(rc)
	return out, form, err
}

func TestCodecRoundTripsEveryCombination(t *testing.T) {
	key := newKey(t)
	const chunk = 4096
	sizes := []int{0, 1, 31, chunk - 1, chunk, chunk + 1, 3 * chunk, 3*chunk + 17, 200_000}
	for _, comp := range []string{backup.CompressionNone, backup.CompressionGzip, backup.CompressionZstd} {
		for _, encrypted := range []bool{false, true} {
			c := backup.Codec{Compression: comp, ChunkSize: chunk}
			var k []byte
			if encrypted {
				c.Key, k = key, key
			}
			want := backup.Form{Encrypted: encrypted, Compression: comp}
			for _, n := range sizes {
				t.Run(fmt.Sprintf("%s/%d bytes", want, n), func(t *testing.T) {
					data := snapshotLike(n, uint64(n))
					stored := encode(t, c, data)
					if c.IsIdentity() && !bytes.Equal(stored, data) {
						t.Fatal("without compression and encryption the stored bytes must be etcd's, unchanged")
					}
					got, form, err := decode(stored, k)
					if err != nil {
						t.Fatalf("decode: %v", err)
					}
					if form != want {
						t.Errorf("Decode found %v, want %v", form, want)
					}
					if !bytes.Equal(got, data) {
						t.Fatalf("round trip changed the data: %d bytes in, %d out", len(data), len(got))
					}
				})
			}
		}
	}
}

func TestCodecCompressesSnapshots(t *testing.T) {
	data := snapshotLike(1<<20, 7)
	for _, comp := range []string{backup.CompressionGzip, backup.CompressionZstd} {
		if n := len(encode(t, backup.Codec{Compression: comp}, data)); n >= len(data)*3/4 {
			t.Errorf("%s stored %d of %d bytes", comp, n, len(data))
		}
	}
}

func TestEncryptionTwiceGivesDifferentBytes(t *testing.T) {
	key := newKey(t)
	data := snapshotLike(10_000, 1)
	a := encode(t, backup.Codec{Key: key}, data)
	b := encode(t, backup.Codec{Key: key}, data)
	if bytes.Equal(a, b) {
		t.Fatal("two encryptions of one snapshot are identical: the per-backup salt is missing")
	}
	if bytes.Contains(a, data[:64]) {
		t.Fatal("the plaintext shows through")
	}
}

func TestDecodeDetectsTruncation(t *testing.T) {
	key := newKey(t)
	const chunk = 1024
	data := snapshotLike(5*chunk+100, 3)
	for _, comp := range []string{backup.CompressionNone, backup.CompressionZstd} {
		stored := encode(t, backup.Codec{Compression: comp, Key: key, ChunkSize: chunk}, data)
		sealed := chunk + 16
		header := 54
		cuts := map[string]int{
			"in the header":            20,
			"right after the header":   header,
			"in the first chunk":       header + 100,
			"at a chunk boundary":      header + sealed,
			"at the last boundary":     len(stored) - (len(stored)-header)%sealed,
			"one byte before the end":  len(stored) - 1,
			"inside the final tag":     len(stored) - 10,
			"after two chunks exactly": header + 2*sealed,
		}
		for name, at := range cuts {
			if at >= len(stored) {
				t.Fatalf("%s: cut %d is past the stream's %d bytes; make the test data longer", name, at, len(stored))
			}
			t.Run(comp+"/"+name, func(t *testing.T) {
				_, _, err := decode(stored[:at], key)
				if err == nil {
					t.Fatalf("a backup cut at %d of %d bytes decoded without error", at, len(stored))
				}
				if comp == backup.CompressionNone && !errors.Is(err, backup.ErrTruncated) && !errors.Is(err, backup.ErrTampered) {
					t.Fatalf("error %v is neither ErrTruncated nor ErrTampered", err)
				}
			})
		}
	}
	// A cut at a chunk boundary is named as truncation, not as damage.
	stored := encode(t, backup.Codec{Key: key, ChunkSize: chunk}, data)
	if _, _, err := decode(stored[:54+2*(chunk+16)], key); !errors.Is(err, backup.ErrTruncated) {
		t.Fatalf("cut at a chunk boundary: %v, want ErrTruncated", err)
	}
}

func TestDecodeDetectsTampering(t *testing.T) {
	key := newKey(t)
	const chunk = 1024
	data := snapshotLike(3*chunk+5, 4)
	stored := encode(t, backup.Codec{Key: key, ChunkSize: chunk}, data)
	sealed := chunk + 16
	for name, at := range map[string]int{
		"chunk size in the header": 12,
		"salt in the header":       30,
		"first ciphertext byte":    54,
		"tag of the first chunk":   54 + sealed - 1,
		"middle of a chunk":        54 + sealed + 500,
		"final chunk":              len(stored) - 3,
	} {
		t.Run(name, func(t *testing.T) {
			bad := bytes.Clone(stored)
			bad[at] ^= 0x01
			if _, _, err := decode(bad, key); !errors.Is(err, backup.ErrTampered) {
				t.Fatalf("flipped bit at %d: %v, want ErrTampered", at, err)
			}
		})
	}
	t.Run("chunks swapped", func(t *testing.T) {
		bad := bytes.Clone(stored)
		first, second := bad[54:54+sealed], bad[54+sealed:54+2*sealed]
		tmp := bytes.Clone(first)
		copy(first, second)
		copy(second, tmp)
		if _, _, err := decode(bad, key); !errors.Is(err, backup.ErrTampered) {
			t.Fatalf("%v, want ErrTampered", err)
		}
	})
	t.Run("bytes after the final chunk", func(t *testing.T) {
		if _, _, err := decode(append(bytes.Clone(stored), 0), key); !errors.Is(err, backup.ErrTampered) {
			t.Fatalf("%v, want ErrTampered", err)
		}
	})
	t.Run("format version", func(t *testing.T) {
		bad := bytes.Clone(stored)
		bad[8] = 9
		if _, _, err := decode(bad, key); err == nil || !strings.Contains(err.Error(), "format version 9") {
			t.Fatalf("%v, want a version error", err)
		}
	})
}

func TestDecodeKeys(t *testing.T) {
	key, other := newKey(t), newKey(t)
	data := snapshotLike(5000, 5)
	encrypted := encode(t, backup.Codec{Key: key, Compression: backup.CompressionGzip}, data)
	plain := encode(t, backup.Codec{Compression: backup.CompressionGzip}, data)
	for _, tc := range []struct {
		name   string
		stored []byte
		key    []byte
		want   error
	}{
		{"the wrong key is named as such", encrypted, other, backup.ErrWrongKey},
		{"an encrypted backup needs a key", encrypted, nil, backup.ErrKeyRequired},
		{"a key refuses a backup that is not encrypted", plain, key, backup.ErrNotEncrypted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := decode(tc.stored, tc.key); !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
	if _, _, err := decode(encrypted, key[:16]); err == nil {
		t.Fatal("a 16-byte key was accepted")
	}
	// The wrong-key error names both key ids, as status.encoding.keyID shows them.
	_, _, err := decode(encrypted, other)
	ids := []string{backup.Codec{Key: key}.KeyIDHex(), backup.Codec{Key: other}.KeyIDHex()}
	if err == nil || !strings.Contains(err.Error(), "key id is "+ids[0]) || !strings.Contains(err.Error(), ids[1]) {
		t.Fatalf("wrong key: %v, want the backup's key id %s and the given key's %s", err, ids[0], ids[1])
	}
}

func TestDecodeDetectsDamagedCompression(t *testing.T) {
	data := snapshotLike(100_000, 6)
	for _, comp := range []string{backup.CompressionGzip, backup.CompressionZstd} {
		stored := encode(t, backup.Codec{Compression: comp}, data)
		if _, _, err := decode(stored[:len(stored)-5], nil); err == nil {
			t.Errorf("%s: a truncated stream decoded without error", comp)
		}
		bad := bytes.Clone(stored)
		bad[len(bad)/2] ^= 0xff
		if got, _, err := decode(bad, nil); err == nil && bytes.Equal(got, data) {
			t.Errorf("%s: a damaged stream decoded to the original", comp)
		}
	}
}

// A source that fails (a snapshot failing its trailer check) must fail the
// encoded stream in place of io.EOF, or a store would commit the upload.
func TestEncodePassesSourceErrorsOn(t *testing.T) {
	boom := errors.New("snapshot failed its sha256 check")
	for _, c := range []backup.Codec{
		{Compression: backup.CompressionGzip},
		{Compression: backup.CompressionZstd, Key: newKey(t)},
		{Key: newKey(t), ChunkSize: 64},
	} {
		src := io.MultiReader(bytes.NewReader(snapshotLike(10_000, 8)), iotestErr{boom})
		rc := c.Encode(src)
		_, err := io.ReadAll(rc)
		_ = rc.Close()
		if !errors.Is(err, boom) {
			t.Errorf("%+v: %v, want the source's error", c.Compression, err)
		}
	}
}

// Closing before the end stops the encoder (no goroutine is left behind).
func TestEncodeCloseEarly(t *testing.T) {
	rc := backup.Codec{Compression: backup.CompressionZstd}.Encode(bytes.NewReader(snapshotLike(1<<20, 9)))
	buf := make([]byte, 10)
	if _, err := rc.Read(buf); err != nil {
		t.Fatal(err)
	}
	_ = rc.Close() // would block forever if the encoder were not unblocked
}

func TestCodecCheck(t *testing.T) {
	if err := (backup.Codec{Compression: "lz4"}).Check(); err == nil {
		t.Error("lz4 accepted")
	}
	if err := (backup.Codec{Key: make([]byte, 16)}).Check(); err == nil {
		t.Error("a 16-byte key accepted")
	}
	rc := backup.Codec{Compression: "lz4"}.Encode(bytes.NewReader([]byte("x")))
	if _, err := io.ReadAll(rc); err == nil {
		t.Error("Encode with an unknown compression produced a stream")
	}
	_ = rc.Close()
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }
