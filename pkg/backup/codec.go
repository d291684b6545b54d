package backup

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression algorithms of a Codec; the empty one stores etcd's bytes as they are.
const (
	CompressionNone = ""
	CompressionGzip = "gzip"
	CompressionZstd = "zstd"
)

// KeySize is the size of an encryption key: AES-256.
const KeySize = 32

// Codec is how a snapshot is stored: optionally compressed, then optionally
// encrypted. The zero Codec stores exactly what etcd sent.
//
// An encrypted object is self-describing (a header, then framed chunks), and a
// compressed one starts with its format's magic number, while an etcd snapshot
// starts with bbolt's first page, whose id is 0: Decode therefore needs only the
// key, never the settings the backup was taken with, and a restore works whatever
// the EtcdBackup's spec says today.
type Codec struct {
	Compression string
	// Key, when set, encrypts with AES-256-GCM; it must be KeySize bytes.
	Key []byte
	// ChunkSize is the plaintext bytes per encrypted chunk; 0 means DefaultChunkSize.
	ChunkSize int
}

// IsIdentity tells whether objects are stored exactly as etcd sent them.
func (c Codec) IsIdentity() bool { return c.Compression == CompressionNone && c.Key == nil }

// KeyIDHex is the hex KeyID of the codec's key, as an encrypted object's header
// carries it; "" when the codec does not encrypt.
func (c Codec) KeyIDHex() string {
	if c.Key == nil {
		return ""
	}
	return hex.EncodeToString(KeyID(c.Key))
}

// Check refuses settings Encode cannot honour.
func (c Codec) Check() error {
	switch c.Compression {
	case CompressionNone, CompressionGzip, CompressionZstd:
	default:
		return fmt.Errorf("unknown compression %q: use gzip or zstd", c.Compression)
	}
	if c.Key != nil && len(c.Key) != KeySize {
		return fmt.Errorf("an encryption key must be %d bytes, not %d", KeySize, len(c.Key))
	}
	if c.ChunkSize < 0 || c.ChunkSize > MaxChunkSize {
		return fmt.Errorf("chunk size %d is not between 1 and %d", c.ChunkSize, MaxChunkSize)
	}
	return nil
}

// Encode streams r through the codec: the returned reader yields the bytes to
// store. Memory is bounded by the compressor's window and one chunk, whatever
// the size of r. An error from r (a snapshot failing its trailer check) is
// returned by the reader in place of io.EOF, so that a Store abandons the upload.
// Close stops the encoding goroutine; it must be called.
func (c Codec) Encode(r io.Reader) io.ReadCloser {
	if c.IsIdentity() {
		return io.NopCloser(r)
	}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = pw.CloseWithError(c.encodeTo(pw, r))
	}()
	return &encodeReader{pr: pr, done: done}
}

// encodeTo writes the encoded form of r to w; nil means r ended with io.EOF and
// everything, the final chunk included, was written.
func (c Codec) encodeTo(w io.Writer, r io.Reader) error {
	if err := c.Check(); err != nil {
		return err
	}
	var sink io.WriteCloser = nopWriteCloser{w}
	if c.Key != nil {
		enc, err := newEncryptWriter(w, c.Key, c.ChunkSize)
		if err != nil {
			return err
		}
		sink = enc
	}
	var comp io.WriteCloser
	switch c.Compression {
	case CompressionGzip:
		// klauspost's gzip is the standard format at several times the speed of
		// compress/gzip's; level 1 keeps a backup near the network's speed.
		gz, err := gzip.NewWriterLevel(sink, gzip.BestSpeed)
		if err != nil {
			return err
		}
		comp = gz
	case CompressionZstd:
		// One goroutine and zstd's default level: bounded memory (an 8 MiB window)
		// and a backup taking one core, not all of them.
		zw, err := zstd.NewWriter(sink, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			return err
		}
		comp = zw
	default:
		comp = nopWriteCloser{sink}
	}
	if _, err := io.Copy(comp, r); err != nil {
		return err
	}
	if err := comp.Close(); err != nil {
		return err
	}
	return sink.Close()
}

type encodeReader struct {
	pr   *io.PipeReader
	done chan struct{}
	once sync.Once
}

func (e *encodeReader) Read(p []byte) (int, error) { return e.pr.Read(p) }

// Close unblocks the encoder if the reader stopped early, and waits for it, so
// that no goroutine outlives the upload.
func (e *encodeReader) Close() error {
	e.once.Do(func() {
		_ = e.pr.CloseWithError(errors.New("the store stopped reading"))
		<-e.done
	})
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// The encrypted format, version 1:
//
//	header: magic "ETCDBKP\x00" | version 1 | algorithm 1 | chunk size (uint32 BE) |
//	        key id (8 bytes) | salt (32 bytes)                              = 54 bytes
//	chunks: AES-256-GCM(subkey, nonce, plaintext, aad = header), each of
//	        chunk size + 16 bytes but the last, which holds 0 to chunk size
//	        plaintext bytes.
//
// The subkey is HKDF-SHA256(key, salt, "etcd-operator backup v1"): a random salt
// per backup makes every backup's key its own, so the chunk counter can be the
// nonce without ever repeating a (key, nonce) pair across the many backups one
// Secret encrypts. The nonce is the chunk's index (11 bytes, big-endian) and a
// last byte that is 1 for the final chunk and 0 otherwise, so that chunks cannot
// be reordered, dropped or cut off at a chunk boundary without failing to open:
// a stream that ends on a chunk not sealed as final is truncated. The header is
// every chunk's associated data, so changing its chunk size or salt fails too.
// The key id lets a wrong key be named as such before anything is decrypted.
const (
	encMagic      = "ETCDBKP\x00"
	encVersion    = 1
	encAlgAESGCM  = 1
	encHeaderSize = len(encMagic) + 1 + 1 + 4 + 8 + 32
	encTagSize    = 16
	// DefaultChunkSize is the plaintext of one encrypted chunk: big enough that
	// the 16-byte tags cost nothing, small enough to hold two per stream.
	DefaultChunkSize = 1 << 20
	// MaxChunkSize bounds what a decoder allocates for a header's chunk size.
	MaxChunkSize = 16 << 20
)

var (
	// ErrKeyRequired: the object is encrypted and no key was given.
	ErrKeyRequired = errors.New("the backup is encrypted and no encryption key was given")
	// ErrWrongKey: the object was encrypted with another key.
	ErrWrongKey = errors.New("the backup was encrypted with a different key")
	// ErrNotEncrypted: a key was given, but the object is not encrypted. An
	// attacker who can write to the bucket could otherwise replace an encrypted
	// backup with a plain one of their own.
	ErrNotEncrypted = errors.New("an encryption key was given, but the backup is not encrypted")
	// ErrTampered: a chunk failed authentication: the object was damaged or altered.
	ErrTampered = errors.New("the encrypted backup fails authentication: it was damaged or altered")
	// ErrTruncated: the encrypted stream ends before its final chunk.
	ErrTruncated = errors.New("the encrypted backup is truncated: it ends before its final chunk")
)

// KeyID is the 8 bytes of the header that identify a key without revealing it.
func KeyID(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("etcd-operator backup key id"))
	return m.Sum(nil)[:8]
}

func chunkAEAD(key, salt []byte) (cipher.AEAD, error) {
	sub, err := hkdf.Key(sha256.New, key, salt, "etcd-operator backup v1", KeySize)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(sub)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func chunkNonce(n *[12]byte, index uint64, final bool) []byte {
	clear(n[:])
	binary.BigEndian.PutUint64(n[3:11], index)
	if final {
		n[11] = 1
	}
	return n[:]
}

// encryptWriter seals what is written to it in chunks. A full chunk is sealed as
// not final only once more data arrives; Close seals what is left as final.
type encryptWriter struct {
	w      io.Writer
	aead   cipher.AEAD
	header []byte
	buf    []byte // plaintext of the chunk being filled, cap = chunk size
	out    []byte
	index  uint64
	nonce  [12]byte
	closed bool
}

func newEncryptWriter(w io.Writer, key []byte, chunkSize int) (*encryptWriter, error) {
	if chunkSize == 0 {
		chunkSize = DefaultChunkSize
	}
	header := make([]byte, 0, encHeaderSize)
	header = append(header, encMagic...)
	header = append(header, encVersion, encAlgAESGCM)
	header = binary.BigEndian.AppendUint32(header, uint32(chunkSize))
	header = append(header, KeyID(key)...)
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	header = append(header, salt...)
	aead, err := chunkAEAD(key, salt)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(header); err != nil {
		return nil, err
	}
	return &encryptWriter{w: w, aead: aead, header: header,
		buf: make([]byte, 0, chunkSize), out: make([]byte, 0, chunkSize+encTagSize)}, nil
}

func (e *encryptWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		if len(e.buf) == cap(e.buf) {
			if err := e.seal(false); err != nil {
				return total - len(p), err
			}
		}
		n := copy(e.buf[len(e.buf):cap(e.buf)], p)
		e.buf = e.buf[:len(e.buf)+n]
		p = p[n:]
	}
	return total, nil
}

func (e *encryptWriter) seal(final bool) error {
	e.out = e.aead.Seal(e.out[:0], chunkNonce(&e.nonce, e.index, final), e.buf, e.header)
	e.index++
	e.buf = e.buf[:0]
	_, err := e.w.Write(e.out)
	return err
}

func (e *encryptWriter) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	return e.seal(true)
}

// decryptReader opens the chunks of an encrypted stream one at a time.
type decryptReader struct {
	r      *bufio.Reader
	aead   cipher.AEAD
	header []byte
	in     []byte // one sealed chunk
	out    []byte // its plaintext: GCM clears a failed Open's output, so not in place
	plain  []byte // opened, not yet read
	index  uint64
	nonce  [12]byte
	done   bool
	err    error
}

func newDecryptReader(r *bufio.Reader, key []byte) (*decryptReader, error) {
	header := make([]byte, encHeaderSize)
	if _, err := io.ReadFull(r, header); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w (its header is cut short)", ErrTruncated)
		}
		return nil, err
	}
	rest := header[len(encMagic):]
	if v := rest[0]; v != encVersion {
		return nil, fmt.Errorf("the encrypted backup has format version %d; this operator reads version %d", v, encVersion)
	}
	if a := rest[1]; a != encAlgAESGCM {
		return nil, fmt.Errorf("the encrypted backup uses unknown algorithm %d", a)
	}
	chunkSize := binary.BigEndian.Uint32(rest[2:6])
	if chunkSize == 0 || chunkSize > MaxChunkSize {
		return nil, fmt.Errorf("%w (its header names a chunk size of %d bytes)", ErrTampered, chunkSize)
	}
	if !hmac.Equal(rest[6:14], KeyID(key)) {
		// The ids are what EtcdBackup's status.encoding.keyID shows, so that
		// the right key can be found among several.
		return nil, fmt.Errorf("%w: the backup's key id is %x, the given key's %x", ErrWrongKey, rest[6:14], KeyID(key))
	}
	aead, err := chunkAEAD(key, rest[14:46])
	if err != nil {
		return nil, err
	}
	return &decryptReader{r: r, aead: aead, header: header, in: make([]byte, int(chunkSize)+encTagSize), out: make([]byte, 0, chunkSize)}, nil
}

func (d *decryptReader) Read(p []byte) (int, error) {
	for len(d.plain) == 0 {
		if d.err != nil {
			return 0, d.err
		}
		if d.done {
			// Anything after the final chunk was not written by Encode.
			if _, err := d.r.ReadByte(); err == nil {
				d.err = fmt.Errorf("%w (there are bytes after its final chunk)", ErrTampered)
				return 0, d.err
			}
			return 0, io.EOF
		}
		d.err = d.next()
	}
	n := copy(p, d.plain)
	d.plain = d.plain[n:]
	return n, nil
}

// next reads and opens one chunk. A full chunk followed by more bytes is not
// the final one; anything shorter, or a full chunk at the end, must be.
func (d *decryptReader) next() error {
	n, err := io.ReadFull(d.r, d.in)
	final := false
	switch {
	case err == nil:
		if _, perr := d.r.Peek(1); errors.Is(perr, io.EOF) {
			final = true
		} else if perr != nil {
			return perr
		}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		final = true
	default:
		return err
	}
	sealed := d.in[:n]
	if n < encTagSize {
		return ErrTruncated
	}
	plain, oerr := d.aead.Open(d.out[:0], chunkNonce(&d.nonce, d.index, final), sealed, d.header)
	if oerr != nil {
		if final && n == len(d.in) {
			// A full chunk that opens as not final: the stream was cut at a chunk boundary.
			if _, e := d.aead.Open(d.out[:0], chunkNonce(&d.nonce, d.index, false), sealed, d.header); e == nil {
				return ErrTruncated
			}
		}
		return fmt.Errorf("%w (chunk %d)", ErrTampered, d.index)
	}
	d.index++
	d.plain = plain
	d.done = final
	return nil
}

// Form is what Decode found an object to be.
type Form struct {
	Encrypted   bool
	Compression string
}

func (f Form) String() string {
	switch {
	case f.Encrypted && f.Compression != "":
		return f.Compression + "-compressed, encrypted"
	case f.Encrypted:
		return "encrypted"
	case f.Compression != "":
		return f.Compression + "-compressed"
	}
	return "plain"
}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// Decode returns the etcd snapshot an object stored with any Codec holds,
// recognizing its form by its first bytes. key may be nil; with a key, the
// object must be encrypted with it (ErrNotEncrypted, ErrWrongKey). Errors of
// the stored bytes (ErrTampered, ErrTruncated, a broken compressed stream) come
// from the returned reader; the caller closes it.
func Decode(r io.Reader, key []byte) (io.ReadCloser, Form, error) {
	var form Form
	if key != nil && len(key) != KeySize {
		return nil, form, fmt.Errorf("an encryption key must be %d bytes, not %d", KeySize, len(key))
	}
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(len(encMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, form, err
	}
	var plain io.Reader = br
	pbr := br
	if bytes.Equal(head, []byte(encMagic)) {
		form.Encrypted = true
		if key == nil {
			return nil, form, ErrKeyRequired
		}
		dr, err := newDecryptReader(br, key)
		if err != nil {
			return nil, form, err
		}
		pbr = bufio.NewReaderSize(dr, 64<<10)
		plain = pbr
		if head, err = pbr.Peek(len(zstdMagic)); err != nil && !errors.Is(err, io.EOF) {
			return nil, form, err
		}
	} else if key != nil {
		return nil, form, ErrNotEncrypted
	}
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		form.Compression = CompressionGzip
		gz, err := gzip.NewReader(pbr)
		if err != nil {
			return nil, form, fmt.Errorf("the gzip stream is damaged: %w", err)
		}
		// One snapshot is one gzip member; a second one is not what Encode wrote.
		gz.Multistream(false)
		return &trailingCheck{r: gz, rest: pbr, close: gz.Close}, form, nil
	case bytes.HasPrefix(head, zstdMagic):
		form.Compression = CompressionZstd
		zr, err := zstd.NewReader(pbr, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return nil, form, err
		}
		return &trailingCheck{r: zr, rest: nil, close: func() error { zr.Close(); return nil }}, form, nil
	}
	return io.NopCloser(plain), form, nil
}

// trailingCheck makes a decompressed stream fail when bytes follow the end of
// the compressed data, and closes the decompressor.
type trailingCheck struct {
	r     io.Reader
	rest  *bufio.Reader
	close func() error
}

func (t *trailingCheck) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if errors.Is(err, io.EOF) && t.rest != nil {
		if _, perr := t.rest.ReadByte(); perr == nil {
			return n, errors.New("the compressed backup has bytes after its end")
		} else if !errors.Is(perr, io.EOF) {
			return n, perr
		}
	}
	return n, err
}

func (t *trailingCheck) Close() error { return t.close() }
