// Package backuptest starts what backup tests and benchmarks run against: an
// embedded etcd member and an in-process S3 server (gofakes3).
package backuptest

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
)

// Fake credentials and region of the in-process server; gofakes3 checks neither.
const (
	Region          = "us-east-1"
	AccessKeyID     = "AKIDBACKUPTEST"
	SecretAccessKey = "backup-test-secret"
)

// S3 is an in-process S3 server on a loopback port.
type S3 struct {
	// URL is the endpoint, for path-style addressing.
	URL     string
	Backend gofakes3.Backend
	srv     *httptest.Server
}

// StartS3 serves backend over HTTP and creates the given buckets. A nil backend is
// an in-memory one that keeps every object.
func StartS3(backend gofakes3.Backend, buckets ...string) (*S3, error) {
	if backend == nil {
		backend = s3mem.New()
	}
	for _, b := range buckets {
		if err := backend.CreateBucket(b); err != nil {
			return nil, fmt.Errorf("create bucket %s: %w", b, err)
		}
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	return &S3{URL: srv.URL, Backend: backend, srv: srv}, nil
}

// Close stops the server.
func (s *S3) Close() { s.srv.Close() }

// StoreConfig is an s3store configuration for one bucket of this server.
func (s *S3) StoreConfig(bucket string) s3store.Config {
	return s3store.Config{
		Bucket:         bucket,
		Region:         Region,
		Endpoint:       s.URL,
		ForcePathStyle: true,
		Credentials:    aws.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey},
	}
}

// AWSSecretData is the data of an AWS secret (the `credentials` and `config` files)
// that works with this server.
func AWSSecretData() map[string][]byte {
	return map[string][]byte{
		s3store.SecretCredentialsKey: []byte("[default]\naws_access_key_id = " + AccessKeyID + "\naws_secret_access_key = " + SecretAccessKey + "\n"),
		s3store.SecretConfigKey:      []byte("[default]\nregion = " + Region + "\n"),
	}
}

// DiscardBackend keeps objects' sizes but drops their bytes, including those of
// multipart uploads (gofakes3's own multipart support holds every part in memory
// and then copies them into one slice). A benchmark's memory then shows the
// operator's backup path, not the fake store.
type DiscardBackend struct {
	*s3mem.Backend

	mu      sync.Mutex
	sizes   map[string]int64
	uploads map[gofakes3.UploadID]*discardUpload
	nextID  int
}

type discardUpload struct {
	bucket, key string
	parts       map[int]int64
}

var _ gofakes3.MultipartBackend = (*DiscardBackend)(nil)

// NewDiscardBackend returns an empty DiscardBackend.
func NewDiscardBackend() *DiscardBackend {
	return &DiscardBackend{
		Backend: s3mem.New(),
		sizes:   map[string]int64{},
		uploads: map[gofakes3.UploadID]*discardUpload{},
	}
}

// Size is the number of bytes that were written to bucket/key.
func (b *DiscardBackend) Size(bucket, key string) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.sizes[bucket+"/"+key]
	return n, ok
}

// PutObject drains input and stores an empty object under the key.
func (b *DiscardBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, conditions *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	n, err := io.Copy(io.Discard, input)
	if err != nil {
		return gofakes3.PutObjectResult{}, err
	}
	res, err := b.Backend.PutObject(bucket, key, meta, strings.NewReader(""), 0, conditions)
	if err == nil {
		b.mu.Lock()
		b.sizes[bucket+"/"+key] = n
		b.mu.Unlock()
	}
	return res, err
}

// CreateMultipartUpload starts an upload that only counts bytes.
func (b *DiscardBackend) CreateMultipartUpload(bucket, key string, _ map[string]string) (gofakes3.UploadID, error) {
	if ok, err := b.BucketExists(bucket); err != nil || !ok {
		return "", gofakes3.BucketNotFound(bucket)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	id := gofakes3.UploadID(fmt.Sprintf("discard-%d", b.nextID))
	b.uploads[id] = &discardUpload{bucket: bucket, key: key, parts: map[int]int64{}}
	return id, nil
}

// UploadPart drains the part, returning its MD5 as the ETag as S3 does.
func (b *DiscardBackend) UploadPart(bucket, key string, id gofakes3.UploadID, partNumber int, contentLength int64, input io.Reader) (string, error) {
	var h hash.Hash = md5.New()
	n, err := io.Copy(h, input)
	if err != nil {
		return "", err
	}
	if n != contentLength {
		return "", gofakes3.ErrIncompleteBody
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	up, ok := b.uploads[id]
	if !ok || up.bucket != bucket || up.key != key {
		return "", gofakes3.ErrNoSuchUpload
	}
	up.parts[partNumber] = n
	return `"` + hex.EncodeToString(h.Sum(nil)) + `"`, nil
}

// ListMultipartUploads is not needed by the operator.
func (b *DiscardBackend) ListMultipartUploads(string, *gofakes3.UploadListMarker, gofakes3.Prefix, int64) (*gofakes3.ListMultipartUploadsResult, error) {
	return nil, gofakes3.ErrNotImplemented
}

// ListParts is not needed by the operator.
func (b *DiscardBackend) ListParts(string, string, gofakes3.UploadID, int, int64) (*gofakes3.ListMultipartUploadPartsResult, error) {
	return nil, gofakes3.ErrNotImplemented
}

// AbortMultipartUpload forgets an upload.
func (b *DiscardBackend) AbortMultipartUpload(_, _ string, id gofakes3.UploadID) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.uploads[id]; !ok {
		return gofakes3.ErrNoSuchUpload
	}
	delete(b.uploads, id)
	return nil
}

// CompleteMultipartUpload records the sum of the listed parts as the object's size.
func (b *DiscardBackend) CompleteMultipartUpload(bucket, key string, id gofakes3.UploadID, in *gofakes3.CompleteMultipartUploadRequest) (gofakes3.VersionID, string, error) {
	b.mu.Lock()
	up, ok := b.uploads[id]
	if !ok || up.bucket != bucket || up.key != key {
		b.mu.Unlock()
		return "", "", gofakes3.ErrNoSuchUpload
	}
	var size int64
	for _, p := range in.Parts {
		n, ok := up.parts[p.PartNumber]
		if !ok {
			b.mu.Unlock()
			return "", "", gofakes3.ErrInvalidPart
		}
		size += n
	}
	delete(b.uploads, id)
	b.mu.Unlock()

	// Not nil metadata: s3mem merges it into that of an object already under the key.
	res, err := b.Backend.PutObject(bucket, key, map[string]string{}, strings.NewReader(""), 0, nil)
	if err != nil {
		return "", "", err
	}
	b.mu.Lock()
	b.sizes[bucket+"/"+key] = size
	b.mu.Unlock()
	return res.VersionID, fmt.Sprintf(`"discard-%d"`, len(in.Parts)), nil
}

// HeadObject reports the size of the bytes that were dropped, as a store that
// kept them would: the backup reads the size back after each upload.
func (b *DiscardBackend) HeadObject(bucket, key string) (*gofakes3.Object, error) {
	obj, err := b.Backend.HeadObject(bucket, key)
	if err != nil {
		return nil, err
	}
	if n, ok := b.Size(bucket, key); ok {
		obj.Size = n
	}
	return obj, nil
}
