package backuptest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

// Codecs are every combination of compression and encryption, with a fixed
// key, and a chunk size small enough that one upload part holds many chunks.
func Codecs() []backup.Codec {
	key := bytes.Repeat([]byte{0x5a}, backup.KeySize)
	var out []backup.Codec
	for _, comp := range []string{backup.CompressionNone, backup.CompressionGzip, backup.CompressionZstd} {
		out = append(out, backup.Codec{Compression: comp}, backup.Codec{Compression: comp, Key: key, ChunkSize: 64 << 10})
	}
	return out
}

// CodecName names a codec in subtests.
func CodecName(c backup.Codec) string {
	return backup.Form{Encrypted: c.Key != nil, Compression: c.Compression}.String()
}

// testCodecs checks that encoded uploads round trip through the real store:
// what Put reports is the sha256 of the stored bytes, Decode undoes the codec,
// and a source that fails mid-way still leaves the object it would replace.
func testCodecs(t *testing.T, opts StoreOptions) {
	ctx := t.Context()
	store := opts.Open(t)
	// Half random, half zeros: several parts even when compressed.
	data := append(RandomBytes(2*opts.PartSize+999), make([]byte, opts.PartSize)...)
	for i, c := range Codecs() {
		t.Run(CodecName(c), func(t *testing.T) {
			key := fmt.Sprintf("codec/%d", i)
			enc := c.Encode(bytes.NewReader(data))
			n, sum, err := store.Put(ctx, key, OnlyReader{enc})
			_ = enc.Close()
			if err != nil {
				t.Fatal(err)
			}
			stored := mustGet(t, store, key)
			if n != int64(len(stored)) || sum != SHA256Hex(stored) {
				t.Fatalf("Put reported %d bytes, sha256 %s; the store holds %d bytes, sha256 %s", n, sum, len(stored), SHA256Hex(stored))
			}
			if c.IsIdentity() != bytes.Equal(stored, data) {
				t.Fatalf("identity codec %v, but stored bytes equal to the source: %v", c.IsIdentity(), bytes.Equal(stored, data))
			}
			rc, _, err := backup.Decode(bytes.NewReader(stored), c.Key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			_ = rc.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("decode: %d bytes, %v; want the %d put", len(got), err, len(data))
			}

			broke := errors.New("snapshot failed its sha256 check")
			enc = c.Encode(&FailingReader{R: bytes.NewReader(RandomBytes(3 * opts.PartSize)), After: 2*opts.PartSize + 10, Err: broke})
			_, _, err = store.Put(ctx, key, enc)
			_ = enc.Close()
			if !errors.Is(err, broke) {
				t.Fatalf("an upload whose source failed returned %v, want the source's error", err)
			}
			if again := mustGet(t, store, key); !bytes.Equal(again, stored) {
				t.Fatal("an encoded upload that failed replaced the object")
			}
		})
	}
}
