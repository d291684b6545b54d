package backup

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// Source is the etcd cluster a snapshot is taken from.
type Source struct {
	// Endpoints are client URLs of members of one cluster. Unreachable ones are
	// skipped; the snapshot comes from the reachable member with the highest revision.
	Endpoints []string
	// TLS is used for https endpoints; nil means plain http (or the system roots).
	TLS *tls.Config
	// DialTimeout bounds connecting to one endpoint (0 means etcdutil's default).
	DialTimeout time.Duration
}

func (s Source) clientConfig(endpoints ...string) etcdutil.ClientConfig {
	return etcdutil.ClientConfig{Endpoints: endpoints, TLS: s.TLS, DialTimeout: s.DialTimeout}
}

// Snapshot describes a snapshot that was stored.
type Snapshot struct {
	// Endpoint is the member it was taken from.
	Endpoint string
	// EtcdVersion is that member's server version, from the Status RPC.
	EtcdVersion string
	// Revision is the member's store revision just before the snapshot began.
	Revision int64
	// Key is where it was stored.
	Key string
	// Size and SHA256 describe the stored bytes; SnapshotSize is what etcd sent,
	// the same unless the job's Codec compressed or encrypted it.
	Size         int64
	SHA256       string
	SnapshotSize int64
	// Compression and KeyID say how the stored bytes were encoded: the codec's
	// compression, and the hex KeyID of its key ("" when not encrypted).
	Compression string
	KeyID       string
}

// SaveSnapshot streams a snapshot of the most up-to-date reachable member into store,
// under the key that name returns for that member's revision. Nothing is buffered
// beyond what the store needs for one upload part. The stored object is exactly what
// etcd sent, trailing sha256 included, so `etcdutl snapshot restore` can check it.
//
// A good backup is never replaced by a bad one: the trailer is verified as the
// stream ends, and a stream that fails it (or breaks) fails the upload before the
// store commits it, so whatever was stored under the key stays. The upload is only
// ever visible under its name once complete: S3's multipart upload, Azure's
// uncommitted blocks and GCS's resumable session are the temporary object, and
// committing them is the rename, without copying the snapshot a second time. The
// committed object's size is then read back and compared with what was sent.
func SaveSnapshot(ctx context.Context, src Source, store Store, name func(revision int64) string) (*Snapshot, error) {
	return SaveEncodedSnapshot(ctx, src, store, Codec{}, name)
}

// SaveEncodedSnapshot is SaveSnapshot through codec: etcd's bytes are checked
// against their trailer, then compressed and encrypted on the way to the store,
// and Size and SHA256 are those of the stored bytes. A damaged snapshot still
// fails the upload, since the codec passes the check's error on instead of EOF.
func SaveEncodedSnapshot(ctx context.Context, src Source, store Store, codec Codec, name func(revision int64) string) (*Snapshot, error) {
	if err := codec.Check(); err != nil {
		return nil, failure.Permanent(err)
	}
	if len(src.Endpoints) == 0 {
		return nil, failure.Permanent(errors.New("no etcd endpoints to take the snapshot from"))
	}
	endpoint, rev, err := etcdutil.MaxRevisionEndpoint(ctx, src.clientConfig(), src.Endpoints)
	if err != nil {
		return nil, fmt.Errorf("none of the etcd endpoints %v answered: %w", src.Endpoints, err)
	}
	client, err := etcdutil.NewClientContext(ctx, src.clientConfig(endpoint))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", endpoint, err)
	}
	defer func() { _ = client.Close() }()

	status, err := client.Status(ctx, endpoint)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", endpoint, err)
	}
	stream, err := client.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("open snapshot stream of %s: %w", endpoint, err)
	}
	defer func() { _ = stream.Close() }()

	key := name(rev)
	body := &checkedStream{r: stream, check: NewSnapshotCheck()}
	encoded := codec.Encode(body)
	var upload io.Reader = encoded
	if codec.IsIdentity() {
		// body hashes the whole stream for its trailer check anyway: the store
		// takes the stored bytes' sha256 from it instead of hashing them again.
		upload = body
	}
	size, sum, err := store.Put(ctx, key, upload)
	if err != nil {
		_ = stream.Close() // unblocks an encoder waiting on etcd
	}
	_ = encoded.Close() // the encoder has stopped reading body once this returns
	if body.damaged != nil {
		return nil, fmt.Errorf("snapshot of %s (revision %d) is damaged, so it was not stored and %q keeps what it held: %w",
			endpoint, rev, key, body.damaged)
	}
	if err != nil {
		return nil, fmt.Errorf("stream snapshot of %s (revision %d) to %q: %w", endpoint, rev, key, err)
	}
	info, err := store.Head(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s stored at %q cannot be read back: %w", endpoint, key, err)
	}
	if info.Size != size {
		return nil, fmt.Errorf("the store holds %d bytes at %q, but %d were sent", info.Size, key, size)
	}
	return &Snapshot{
		Endpoint:     endpoint,
		EtcdVersion:  status.Version,
		Revision:     rev,
		Key:          key,
		Size:         size,
		SHA256:       sum,
		SnapshotSize: body.n,
		Compression:  codec.Compression,
		KeyID:        codec.KeyIDHex(),
	}, nil
}

// errDamaged is what checkedStream's reader sees in place of io.EOF when the
// trailer does not match, so that the store abandons the upload.
var errDamaged = errors.New("snapshot failed its sha256 check")

// checkedStream passes the snapshot through its trailer check and, at the end,
// turns io.EOF into an error if the check fails: a Store commits an upload only
// when its reader ends with io.EOF.
type checkedStream struct {
	r       io.Reader
	check   *SnapshotCheck
	damaged error
	n       int64
}

func (c *checkedStream) Read(p []byte) (int, error) {
	if c.damaged != nil {
		return 0, fmt.Errorf("%w: %v", errDamaged, c.damaged)
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	_, _ = c.check.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if verr := c.check.Verify(); verr != nil {
			c.damaged = verr
			return n, fmt.Errorf("%w: %v", errDamaged, verr)
		}
	}
	return n, err
}

// Digest makes checkedStream a DigestReader: its trailer check has hashed
// every byte but the trailer, and adds the trailer once it has matched.
func (c *checkedStream) Digest() (int64, string) { return c.n, c.check.SHA256() }
