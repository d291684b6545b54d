package s3store_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
)

// S3's smallest part; the tests cross part boundaries with it.
const partSize = 5 << 20

func TestStoreAgainstGofakes3(t *testing.T) {
	var n atomic.Int32
	backuptest.TestStore(t, backuptest.StoreOptions{
		PartSize: partSize,
		Open: func(t *testing.T) backup.Store {
			store, _ := newStore(t, func(c *s3store.Config) {
				c.PartSize = partSize
				c.ListPageSize = 2
				c.Bucket = "bucket"
				_ = n.Add(1)
			})
			return store
		},
	})
}

func startVersityGW(t *testing.T) *backuptest.VersityGW {
	t.Helper()
	v, err := backuptest.StartVersityGW(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

// openOn returns a TestStore opener on fresh buckets of v, reached at endpoint.
func openOn(v *backuptest.VersityGW, endpoint string) func(t *testing.T) backup.Store {
	var n atomic.Int32
	return func(t *testing.T) backup.Store {
		name := fmt.Sprintf("bucket-%d", n.Add(1))
		if err := v.CreateBucket(context.Background(), name); err != nil {
			t.Fatal(err)
		}
		cfg := v.StoreConfig(name)
		cfg.Endpoint = endpoint
		cfg.PartSize = partSize
		cfg.ListPageSize = 2
		s, err := s3store.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func TestStoreAgainstVersityGW(t *testing.T) {
	v := startVersityGW(t)
	backuptest.TestStore(t, backuptest.StoreOptions{PartSize: partSize, Open: openOn(v, v.URL)})
}

// A store that refuses the SDK's default checksums, as Ceph RGW and older MinIO
// do, still takes backups: the store sends checksums only where S3 requires them.
func TestStoreAgainstAServerThatRefusesChecksums(t *testing.T) {
	ctx := context.Background()
	v := startVersityGW(t)
	proxy, err := backuptest.StartNoChecksumsProxy(v.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	// First prove the proxy refuses what the SDK sends when asked for checksums
	// wherever supported, the default of clients made by config.LoadDefaultConfig.
	if err := v.CreateBucket(ctx, "control"); err != nil {
		t.Fatal(err)
	}
	plain := s3.New(s3.Options{
		Region:       backuptest.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(backuptest.AccessKeyID, backuptest.SecretAccessKey, ""),
		BaseEndpoint: aws.String(proxy.URL),
		UsePathStyle: true,

		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
	})
	_, err = plain.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("control"), Key: aws.String("k"), Body: strings.NewReader("x")})
	if err == nil || !strings.Contains(err.Error(), "InvalidArgument") {
		t.Fatalf("the SDK's default PutObject through the proxy: %v, want it refused", err)
	}

	backuptest.TestStore(t, backuptest.StoreOptions{PartSize: partSize, Open: openOn(v, proxy.URL)})
	if n := proxy.Refused(); n != 1 {
		t.Errorf("the proxy refused %d requests, want only the control's", n)
	}
}
