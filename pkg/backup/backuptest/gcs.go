package backuptest

import (
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/openetcd/etcd-operator/pkg/backup/gcsstore"
)

// GCS is fake-gcs-server running in this process.
type GCS struct {
	// URL is the endpoint to give gcsstore (or a GCSBackupSource).
	URL string
	srv *fakestorage.Server
}

// StartGCS serves an in-memory GCS on a loopback port and creates the given buckets.
func StartGCS(buckets ...string) (*GCS, error) {
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http",
		Host:   "127.0.0.1",
		Writer: io.Discard,
	})
	if err != nil {
		return nil, fmt.Errorf("start fake-gcs-server: %w", err)
	}
	return newGCS(srv, buckets), nil
}

// StartGCSOn is StartGCS listening on host, e.g. the address by which pods of a
// local cluster reach the machine the tests run on. fake-gcs-server binds its
// Host only with a port given, so a free one is picked first; a lost race for it
// is retried.
func StartGCSOn(host string, buckets ...string) (*GCS, error) {
	var lastErr error
	for range 5 {
		port, err := freePortOn(host)
		if err != nil {
			return nil, err
		}
		srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
			Scheme:      "http",
			Host:        host,
			Port:        port,
			ExternalURL: "http://" + net.JoinHostPort(host, strconv.Itoa(int(port))),
			Writer:      io.Discard,
		})
		if err == nil {
			return newGCS(srv, buckets), nil
		}
		lastErr = fmt.Errorf("start fake-gcs-server on %s: %w", host, err)
		if !isAddrInUse(err) {
			break
		}
	}
	return nil, lastErr
}

func newGCS(srv *fakestorage.Server, buckets []string) *GCS {
	for _, b := range buckets {
		srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: b})
	}
	return &GCS{URL: srv.URL(), srv: srv}
}

// freePortOn is a port nobody listened on at host a moment ago.
func freePortOn(host string) (uint16, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", host, err)
	}
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("not a TCP address: %s", l.Addr())
	}
	return uint16(addr.Port), nil
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
