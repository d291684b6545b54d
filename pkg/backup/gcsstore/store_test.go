package gcsstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/gcsstore"
)

func startGCS(t *testing.T, buckets ...string) *backuptest.GCS {
	t.Helper()
	srv, err := backuptest.StartGCS(buckets...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func TestStoreAgainstFakeGCSServer(t *testing.T) {
	srv := startGCS(t)
	var n atomic.Int32
	// 256 KiB is the smallest chunk a resumable upload may use.
	const chunk = 256 << 10
	backuptest.TestStore(t, backuptest.StoreOptions{
		PartSize: chunk,
		Open: func(t *testing.T) backup.Store {
			name := fmt.Sprintf("bucket-%d", n.Add(1))
			srv.CreateBucket(name)
			cfg := srv.StoreConfig(name)
			cfg.ChunkSize = chunk
			s, err := gcsstore.New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	})
}

func TestMissingBucketIsNamed(t *testing.T) {
	ctx := context.Background()
	srv := startGCS(t)
	s, err := gcsstore.New(ctx, srv.StoreConfig("no-such-bucket"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, _, err := s.Put(ctx, "k", strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), `bucket "no-such-bucket" does not exist`) {
		t.Errorf("put into a missing bucket: %v", err)
	}
	if _, err := s.List(ctx, ""); err == nil || !strings.Contains(err.Error(), `bucket "no-such-bucket" does not exist`) {
		t.Errorf("list of a missing bucket: %v", err)
	}
}

func TestNewChecksCredentials(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		cfg     gcsstore.Config
		wantErr string
	}{
		{name: "an access token", cfg: gcsstore.Config{Bucket: "b", AccessToken: "ya29.x"}},
		{name: "no bucket", cfg: gcsstore.Config{AccessToken: "t"}, wantErr: "no bucket"},
		{name: "both kinds of credentials", cfg: gcsstore.Config{Bucket: "b", AccessToken: "t", CredentialsJSON: []byte(`{}`)}, wantErr: "not both"},
		{name: "credentials that are not JSON", cfg: gcsstore.Config{Bucket: "b", CredentialsJSON: []byte("secret-not-json")}, wantErr: "credentials.json is not JSON"},
		{name: "credentials without a type", cfg: gcsstore.Config{Bucket: "b", CredentialsJSON: []byte(`{"private_key":"k"}`)}, wantErr: `has no "type"`},
		{name: "an external account is refused", cfg: gcsstore.Config{Bucket: "b", CredentialsJSON: []byte(`{"type":"external_account"}`)}, wantErr: `of type "external_account"`},
		{name: "an endpoint that is no URL", cfg: gcsstore.Config{Bucket: "b", Endpoint: "fake-gcs:4443"}, wantErr: "is not an http(s) URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := gcsstore.New(ctx, tc.cfg)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				_ = s.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "secret-not-json") {
				t.Errorf("error %q repeats the credentials", err)
			}
		})
	}
}
