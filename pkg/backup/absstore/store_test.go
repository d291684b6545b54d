package absstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/absstore"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
)

// startAzurite runs one Azurite for the test; a machine without it fails the test
// with how to get it.
func startAzurite(t *testing.T, containers ...string) *backuptest.Azurite {
	t.Helper()
	az, err := backuptest.StartAzurite(context.Background(), t.TempDir(), containers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(az.Close)
	return az
}

func TestStoreAgainstAzurite(t *testing.T) {
	az := startAzurite(t)
	var n atomic.Int32
	const blockSize = 64 << 10
	backuptest.TestStore(t, backuptest.StoreOptions{
		PartSize: blockSize,
		Open: func(t *testing.T) backup.Store {
			name := fmt.Sprintf("container-%d", n.Add(1))
			if err := az.CreateContainers(context.Background(), name); err != nil {
				t.Fatal(err)
			}
			cfg := az.StoreConfig(name)
			cfg.BlockSize = blockSize
			cfg.ListPageSize = 2
			s, err := absstore.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}

func TestErrorsSayWhatIsWrong(t *testing.T) {
	ctx := context.Background()
	az := startAzurite(t, "backups")

	missing, err := absstore.New(az.StoreConfig("no-such-container"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := missing.Put(ctx, "k", strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), `container "no-such-container" does not exist`) {
		t.Errorf("put into a missing container: %v", err)
	}

	cfg := az.StoreConfig("backups")
	cfg.Key = "d3Jvbmcga2V5IGZvciB0aGUgdGVzdA=="
	wrongKey, err := absstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = wrongKey.Put(ctx, "k", strings.NewReader("x"))
	if err == nil || !strings.Contains(err.Error(), "the storage account or key is wrong") {
		t.Errorf("put with a wrong key: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), cfg.Key) {
		t.Errorf("error %q repeats the key", err)
	}
}

func TestServiceURL(t *testing.T) {
	tests := []struct {
		cfg     absstore.Config
		want    string
		wantErr string
	}{
		{cfg: absstore.Config{Account: "acct"}, want: "https://acct.blob.core.windows.net/"},
		{cfg: absstore.Config{Account: "acct", Cloud: "AzureChinaCloud"}, want: "https://acct.blob.core.chinacloudapi.cn/"},
		{cfg: absstore.Config{Account: "acct", Cloud: "AzureUSGovernmentCloud"}, want: "https://acct.blob.core.usgovcloudapi.net/"},
		{cfg: absstore.Config{Account: "acct", Endpoint: "http://127.0.0.1:10000/devstoreaccount1"}, want: "http://127.0.0.1:10000/devstoreaccount1/"},
		{cfg: absstore.Config{Account: "acct", Cloud: "Mars"}, wantErr: `unknown Azure cloud "Mars"`},
		{cfg: absstore.Config{Account: "acct", Endpoint: "azurite:10000"}, wantErr: "is not an http(s) URL"},
	}
	for _, tc := range tests {
		got, err := tc.cfg.ServiceURL()
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%+v: %q, %v; want %q", tc.cfg, got, err, tc.want)
		}
	}
}

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	for _, cfg := range []absstore.Config{
		{Account: "a", Key: "a2V5"},
		{Container: "c", Key: "a2V5"},
		{Container: "c", Account: "a"},
		{Container: "c", Account: "a", Key: "not base64!"},
	} {
		if _, err := absstore.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
