// Package etcdtest finds the real etcd binaries the tests run and holds the
// small pieces every test that starts etcd processes needs.
package etcdtest

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Version36 is the etcd 3.6 release hack/etcd-binaries.sh builds: the local
// cluster's (hack/local-cluster/lib.sh, ETCD_BUILT_VERSIONS).
const Version36 = "3.6.6"

// BinDir36 is the directory holding etcd 3.6's tools: $ETCD_BIN_DIR_3_6 (make
// unit and the local cluster's env file set it), else the local cluster's
// binary cache. A tool missing there fails the test, saying what needed it
// (why) and how to get it.
func BinDir36(t testing.TB, why string, tools ...string) string {
	t.Helper()
	dir := os.Getenv("ETCD_BIN_DIR_3_6")
	if dir == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(cache, "etcd-operator-local", "bin", "etcd-v"+Version36)
	}
	for _, tool := range tools {
		if _, err := os.Stat(filepath.Join(dir, tool)); err != nil {
			t.Fatalf("%s, and %s is missing: run `bash hack/etcd-binaries.sh` (make unit does) or set ETCD_BIN_DIR_3_6",
				why, filepath.Join(dir, tool))
		}
	}
	return dir
}

// FreeAddr is a loopback address with a port nothing listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// Output collects a process's output, written from its own goroutines, for a
// failure message.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Tail is the last n bytes written.
func (o *Output) Tail(n int) string {
	s := o.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
