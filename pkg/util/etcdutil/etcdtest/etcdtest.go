// Package etcdtest finds the real etcd binaries the tests run and holds the
// small pieces every test that starts etcd processes needs.
package etcdtest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Version36 is the etcd 3.6 release hack/etcd-binaries.sh builds: the local
// cluster's (hack/local-cluster/lib.sh, ETCD_BUILT_VERSIONS).
const Version36 = "3.6.6"

// Version35 is the etcd 3.5 release the operator's clusters run in the e2e
// suite, which `make unit` builds too (hack/etcd-binaries.sh 3.5.21) for the
// tests that need a 3.5 server as a process, one they can kill and start again.
const Version35 = "3.5.21"

// Version37 is the etcd 3.7 release the local cluster builds (ETCD_LATEST_37
// of hack/local-cluster/lib.sh), for the tests that show what every
// supported minor version does.
const Version37 = "3.7.3"

// VersionLatest36 is the newest etcd 3.6 release the local cluster builds
// (ETCD_LATEST_36 of hack/local-cluster/lib.sh), the one a new cluster gets
// by default: the benchmarks that set 3.6 beside 3.7 run it.
const VersionLatest36 = "3.6.16"

// BinDir36 is the directory holding etcd 3.6's tools: $ETCD_BIN_DIR_3_6 (make
// unit and the local cluster's env file set it), else the local cluster's
// binary cache. A tool missing there fails the test, saying what needed it
// (why) and how to get it.
func BinDir36(t testing.TB, why string, tools ...string) string {
	t.Helper()
	return binDir(t, "ETCD_BIN_DIR_3_6", Version36, why, tools)
}

// BinDir35 is BinDir36 for etcd 3.5: $ETCD_BIN_DIR_3_5, else the cache.
func BinDir35(t testing.TB, why string, tools ...string) string {
	t.Helper()
	return binDir(t, "ETCD_BIN_DIR_3_5", Version35, why, tools)
}

// BinDir37 is BinDir36 for etcd 3.7: $ETCD_BIN_DIR_3_7, else the cache.
func BinDir37(t testing.TB, why string, tools ...string) string {
	t.Helper()
	return binDir(t, "ETCD_BIN_DIR_3_7", Version37, why, tools)
}

// BinDirLatest36 is BinDir36 for VersionLatest36: $ETCD_BIN_DIR_LATEST_3_6,
// else the cache.
func BinDirLatest36(t testing.TB, why string, tools ...string) string {
	t.Helper()
	return binDir(t, "ETCD_BIN_DIR_LATEST_3_6", VersionLatest36, why, tools)
}

func binDir(t testing.TB, env, version, why string, tools []string) string {
	t.Helper()
	dir := os.Getenv(env)
	if dir == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(cache, "etcd-operator-local", "bin", "etcd-v"+version)
	}
	for _, tool := range tools {
		if _, err := os.Stat(filepath.Join(dir, tool)); err != nil {
			t.Fatalf("%s, and %s is missing: run `bash hack/etcd-binaries.sh %s` (make unit does) or set %s",
				why, filepath.Join(dir, tool), version, env)
		}
	}
	return dir
}

// FreeAddr is a loopback address with a port nothing listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePorts(t, 1)[0])
}

// FreePorts are n distinct loopback ports nothing listens on now; a failure
// to find them fails the test.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := Ports(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// Ports are n distinct loopback ports nothing listens on now, for servers
// that bind them a moment later. They are taken below the kernel's
// ephemeral range: a port found by listening on port 0 comes from that
// range, where the kernel also picks the local port of every outgoing
// connection (each etcd client's, in every test process at once), and one of
// those may take it before the server binds it ("address already in use").
func Ports(n int) ([]int, error) {
	low, high := portsBelowEphemeral()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 10000 {
			return nil, fmt.Errorf("no free loopback port in %d-%d after %d tries", low, high, tries)
		}
		port := low + rand.IntN(high-low)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use
		}
		ls = append(ls, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// portsBelowEphemeral is the range Ports picks from: the 12 000 ports below
// the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768 by
// default), above the well-known ones.
func portsBelowEphemeral() (low, high int) {
	high = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 2048 {
				high = v
			}
		}
	}
	return max(1024, high-12000), high
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

// Release is an etcd release the tests run as processes: its version and
// where its tools are.
type Release struct {
	Version string
	BinDir  func(t testing.TB, why string, tools ...string) string
}

// SupportedReleases are one release of each supported minor version, for
// the tests that show what etcd itself does on every one of them.
var SupportedReleases = []Release{
	{Version35, BinDir35},
	{Version36, BinDir36},
	{Version37, BinDir37},
}
