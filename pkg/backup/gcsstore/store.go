// Package gcsstore keeps backups in Google Cloud Storage.
package gcsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"cloud.google.com/go/storage"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

// DefaultChunkSize is the size of one request of a resumable upload. The client
// holds one chunk to resend it on a retry, so memory does not grow with the
// database; 16 MiB is the client's own default.
const DefaultChunkSize = 16 << 20

// Config says which bucket to use and how to reach it.
type Config struct {
	Bucket string
	// AccessToken is a static OAuth2 token; CredentialsJSON a service account's
	// (or another credential's) JSON key. With neither, the client uses the
	// workload's application default credentials, as the original did.
	AccessToken     string
	CredentialsJSON []byte
	// Endpoint is the URL of a GCS emulator such as fake-gcs-server
	// ("http://host:4443"); it is reached without credentials unless
	// DefaultCredentials is set. Empty means Google.
	Endpoint string
	// DefaultCredentials are the operator's own application default
	// credentials (GKE Workload Identity's metadata server,
	// GOOGLE_APPLICATION_CREDENTIALS), found by DefaultCredentials; they are
	// used with an Endpoint too.
	DefaultCredentials *google.Credentials
	// ChunkSize defaults to DefaultChunkSize; tests shrink it to make many chunks.
	ChunkSize int
}

// Store is a backup.Store on one bucket.
type Store struct {
	client    *storage.Client
	bucket    *storage.BucketHandle
	name      string
	chunkSize int
}

var _ backup.Store = (*Store)(nil)

// New builds a store. It makes no request, except that finding application
// default credentials may read the metadata server.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("gcs store: no bucket")
	}
	opts, err := clientOptions(cfg)
	if err != nil {
		return nil, err
	}
	client, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcs client: %w", err)
	}
	chunk := cfg.ChunkSize
	if chunk <= 0 {
		chunk = DefaultChunkSize
	}
	return &Store{client: client, bucket: client.Bucket(cfg.Bucket), name: cfg.Bucket, chunkSize: chunk}, nil
}

func clientOptions(cfg Config) ([]option.ClientOption, error) {
	if cfg.AccessToken != "" && len(cfg.CredentialsJSON) > 0 {
		return nil, errors.New("gcs store: give an access token or a credentials JSON, not both")
	}
	var opts []option.ClientOption
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("GCS endpoint %q is not an http(s) URL", cfg.Endpoint)
		}
		// The JSON API lives under /storage/v1/; uploads go to /upload/storage/v1/
		// on the same host, which the client derives from this.
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(cfg.Endpoint, "/")+"/storage/v1/"),
			// Reads default to the XML API on storage.googleapis.com's host layout,
			// which an emulator on one address need not serve.
			storage.WithJSONReads())
		if cfg.AccessToken == "" && len(cfg.CredentialsJSON) == 0 && cfg.DefaultCredentials == nil {
			opts = append(opts, option.WithoutAuthentication())
		}
	}
	if cfg.DefaultCredentials != nil && (cfg.AccessToken != "" || len(cfg.CredentialsJSON) > 0) {
		return nil, errors.New("gcs store: give the operator's default credentials or a secret's, not both")
	}
	switch {
	case cfg.DefaultCredentials != nil:
		opts = append(opts, option.WithCredentials(cfg.DefaultCredentials))
	case cfg.AccessToken != "":
		opts = append(opts, option.WithTokenSource(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: cfg.AccessToken})))
	case len(cfg.CredentialsJSON) > 0:
		if err := checkCredentialsType(cfg.CredentialsJSON); err != nil {
			return nil, err
		}
		opts = append(opts, option.WithCredentialsJSON(cfg.CredentialsJSON))
	}
	return opts, nil
}

// DefaultCredentials are the process's application default credentials, as
// the client library finds them: GOOGLE_APPLICATION_CREDENTIALS, gcloud's file,
// or the metadata server, which on GKE with Workload Identity answers for the
// Google service account the pod's ServiceAccount is bound to. A token is
// fetched once here, so that an identity the pod does not have is reported
// when the store is opened, not as a failed upload later. Unlike a secret's
// credentials.json, a file of any type is taken here (an external account's
// too): the pod's environment is its administrator's, not a namespace user's.
func DefaultCredentials(ctx context.Context) (*google.Credentials, error) {
	creds, err := google.FindDefaultCredentials(ctx, storage.ScopeReadWrite)
	if err != nil {
		return nil, fmt.Errorf("the operator's Google identity: no application default credentials: %w", err)
	}
	if _, err := creds.TokenSource.Token(); err != nil {
		return nil, fmt.Errorf("the operator's Google identity: a token from its application default credentials: %w", err)
	}
	return creds, nil
}

// checkCredentialsType reads the "type" of a Google credentials JSON. Only types
// that carry their own secret are taken: an external or impersonated account's
// JSON names URLs and programs the operator would call, and whoever can write a
// secret is not to be trusted that far.
func checkCredentialsType(data []byte) error {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("credentials.json is not JSON: %v", err)
	}
	switch head.Type {
	case "service_account", "authorized_user":
		return nil
	case "":
		return errors.New(`credentials.json has no "type"; a service account key has "type": "service_account"`)
	}
	return fmt.Errorf("credentials.json is of type %q; use a service account key (service_account) or an access-token", head.Type)
}

// Bucket is the bucket the store writes to.
func (s *Store) Bucket() string { return s.name }

// Close releases the client's connections.
func (s *Store) Close() error { return s.client.Close() }

// Put streams r as a resumable upload. The object is created only when the
// upload is finalized after r has ended cleanly: if r fails, the upload is
// cancelled and an existing object keeps its content.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (int64, string, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := s.bucket.Object(key).NewWriter(wctx)
	w.ChunkSize = s.chunkSize
	w.ContentType = "application/octet-stream"
	d := backup.Digesting(r)
	if _, err := io.Copy(w, d); err != nil {
		// Cancelling before Close abandons the upload instead of finalizing what
		// was written so far.
		cancel()
		_ = w.Close()
		return 0, "", s.describe("put", key, err)
	}
	if err := w.Close(); err != nil {
		return 0, "", s.describe("put", key, err)
	}
	n, sum := d.Digest()
	return n, sum, nil
}

// Get opens an object.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	rd, err := s.bucket.Object(key).NewReader(ctx)
	if err != nil {
		return nil, 0, s.describe("get", key, err)
	}
	return rd, rd.Attrs.Size, nil
}

// Head describes an object.
func (s *Store) Head(ctx context.Context, key string) (backup.ObjectInfo, error) {
	a, err := s.bucket.Object(key).Attrs(ctx)
	if err != nil {
		return backup.ObjectInfo{}, s.describe("head", key, err)
	}
	return backup.ObjectInfo{Key: key, Size: a.Size, LastModified: a.Updated}, nil
}

// List follows the iterator through every page.
func (s *Store) List(ctx context.Context, prefix string) ([]backup.ObjectInfo, error) {
	q := &storage.Query{Prefix: prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return nil, err
	}
	it := s.bucket.Objects(ctx, q)
	var out []backup.ObjectInfo
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, s.describe("list", prefix+"*", err)
		}
		out = append(out, backup.ObjectInfo{Key: a.Name, Size: a.Size, LastModified: a.Updated})
	}
}

// Delete removes an object; a missing object is not an error, as in S3.
func (s *Store) Delete(ctx context.Context, key string) error {
	err := s.bucket.Object(key).Delete(ctx)
	if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return s.describe("delete", key, err)
	}
	return nil
}

// describe turns the client's errors into ones a user can act on, keeping the
// original for errors.Is/As.
func (s *Store) describe(op, key string, err error) error {
	where := fmt.Sprintf("%s gs://%s/%s", op, s.name, key)
	var gerr *googleapi.Error
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
		return fmt.Errorf("%s: bucket %q does not exist: %w", where, s.name, err)
	case errors.Is(err, storage.ErrObjectNotExist):
		return fmt.Errorf("%s: %w (%v)", where, backup.ErrNotFound, err)
	case errors.As(err, &gerr) && gerr.Code == http.StatusNotFound && op == "put":
		// An upload into a missing bucket answers a plain 404.
		return fmt.Errorf("%s: bucket %q does not exist: %w", where, s.name, err)
	case errors.As(err, &gerr) && (gerr.Code == http.StatusUnauthorized || gerr.Code == http.StatusForbidden):
		return fmt.Errorf("%s: the credentials are refused: %w", where, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}
