package scratch

import (
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// snapshotOf writes keys into a new embedded member and saves its snapshot,
// trailer included, as a backup does; it returns the file.
func snapshotOf(t *testing.T, keys map[string]string) string {
	t.Helper()
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "source")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{loopback}, []url.URL{loopback}
	cfg.ListenPeerUrls = []url.URL{loopback}
	cfg.Logger, cfg.ZapLoggerBuilder = "zap", embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.MaxRequestBytes = 8 << 20
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(startTimeout):
		t.Fatal("the source etcd does not serve")
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + e.Clients[0].Addr().String()}, Logger: zap.NewNop(), MaxCallSendMsgSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	for k, v := range keys {
		if _, err := c.Put(t.Context(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	rc, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	path := filepath.Join(t.TempDir(), "snapshot.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAScratchMemberServesTheRestoredSnapshotOnLoopbackAndLeavesNothing(t *testing.T) {
	keys := map[string]string{"a": "1", "b": "2", "c/d": strings.Repeat("x", 3<<20)}
	file := snapshotOf(t, keys)
	dir := t.TempDir()

	m, err := Start(t.Context(), file, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range m.Client.Endpoints() {
		u, err := url.Parse(ep)
		if err != nil {
			t.Fatal(err)
		}
		if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
			t.Errorf("the scratch member serves on %s, not on the loopback interface", ep)
		}
	}
	resp, err := m.Client.Get(t.Context(), "\x00", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != len(keys) {
		t.Fatalf("the scratch member holds %d keys, the snapshot %d", len(resp.Kvs), len(keys))
	}
	for _, kv := range resp.Kvs {
		if keys[string(kv.Key)] != string(kv.Value) {
			t.Errorf("key %q holds %d bytes, not the snapshot's %d", kv.Key, len(kv.Value), len(keys[string(kv.Key)]))
		}
	}
	// A value larger than etcd's default request bound goes through, as a
	// replay of a cluster that raised it sends it.
	if _, err := m.Client.Put(t.Context(), "large", strings.Repeat("y", 4<<20)); err != nil {
		t.Fatalf("put a large value: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the closed member left %d entries in its directory", len(left))
	}
}

func TestAFileThatIsNotASnapshotFailsAndLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content func(t *testing.T) []byte
	}{
		{"not a database at all", func(*testing.T) []byte { return []byte(strings.Repeat("not a snapshot", 100)) }},
		{"a snapshot whose trailer does not match it", func(t *testing.T) []byte {
			data, err := os.ReadFile(snapshotOf(t, map[string]string{"a": "1"}))
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)-1] ^= 0xff
			return data
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "snapshot.db")
			if err := os.WriteFile(file, tc.content(t), 0o600); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
			defer cancel()
			if m, err := Start(ctx, file, Options{Dir: dir}); err == nil {
				_ = m.Close()
				t.Fatal("a file that is not a snapshot was restored")
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Fatalf("the failed restore left %d entries in its directory", len(left))
			}
		})
	}
}
