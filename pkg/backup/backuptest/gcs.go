package backuptest

import (
	"fmt"
	"io"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/openetcd/etcd-operator/pkg/backup/gcsstore"
)

// GCS is fake-gcs-server running in this process on a loopback port.
type GCS struct {
	// URL is the endpoint to give gcsstore (or a GCSBackupSource).
	URL string
	srv *fakestorage.Server
}

// StartGCS serves an in-memory GCS on a loopback port and creates the given buckets.
func StartGCS(buckets ...string) (*GCS, error) {
	return StartGCSOn("127.0.0.1", buckets...)
}

// StartGCSOn is StartGCS listening on host, e.g. the address by which pods of a
// local cluster reach the machine the tests run on.
func StartGCSOn(host string, buckets ...string) (*GCS, error) {
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http",
		Host:   host,
		Writer: io.Discard,
	})
	if err != nil {
		return nil, fmt.Errorf("start fake-gcs-server: %w", err)
	}
	for _, b := range buckets {
		srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: b})
	}
	return &GCS{URL: srv.URL(), srv: srv}, nil
}

// StoreConfig is a gcsstore configuration for one bucket of this server.
func (g *GCS) StoreConfig(bucket string) gcsstore.Config {
	return gcsstore.Config{Bucket: bucket, Endpoint: g.URL}
}

// Close stops the server.
func (g *GCS) Close() { g.srv.Stop() }

// CreateBucket adds a bucket.
func (g *GCS) CreateBucket(name string) {
	g.srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
}
