// Command backup measures the operator's backup path on a large database: the
// throughput of streaming a snapshot from etcd into a store (S3, ABS or GCS), and
// the memory it takes.
//
// etcd runs in a child process (this binary with -role=etcd): its bbolt file is
// memory-mapped, and reading it for the snapshot would otherwise count in this
// process's RSS. The S3 server runs in this process on gofakes3 with a backend that
// drops the bytes (backuptest.DiscardBackend), so what this process holds at its
// peak is the backup path's own memory: the etcd client, the upload part buffers
// and the HTTP client. With -store=abs the store is an Azurite process (from
// hack/azurite.sh), with -store=gcs fake-gcs-server in a child process (this
// binary with -role=gcs), both keeping the bytes on disk under TMPDIR.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/absstore"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/gcsstore"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

func main() {
	role := flag.String("role", "bench", "bench, or etcd (the child process)")
	sizeMiB := flag.Int("size-mib", 512, "data written to etcd before the backup")
	valueKiB := flag.Int("value-kib", 256, "size of each value")
	dir := flag.String("dir", "", "data directory of the etcd child (default: a temporary directory)")
	partMiB := flag.Int("part-mib", s3store.DefaultPartSize>>20, "upload part size")
	concurrency := flag.Int("concurrency", s3store.DefaultConcurrency, "parts uploaded at once")
	runs := flag.Int("runs", 3, "backups to time; the first also warms up")
	storeKind := flag.String("store", "s3", "s3 (in-process, bytes dropped), abs (Azurite) or gcs (fake-gcs-server)")
	flag.Parse()

	var err error
	switch *role {
	case "etcd":
		err = serveEtcd(*dir, *sizeMiB, *valueKiB)
	case "gcs":
		err = serveGCS(*dir)
	case "bench":
		err = bench(*storeKind, *sizeMiB, *valueKiB, *partMiB, *concurrency, *runs)
	default:
		err = fmt.Errorf("unknown -role %q", *role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// serveEtcd fills an embedded etcd, prints "READY <endpoint>" and serves until its
// stdin closes or it is signalled.
func serveEtcd(dir string, sizeMiB, valueKiB int) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "backup-bench-etcd-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(d) }()
		dir = d
	}
	// The quota is raised well above the data: etcd's 2 GiB default would be
	// close for the larger runs, and hitting it raises an alarm that refuses writes.
	quota := int64(sizeMiB)*3<<20 + 1<<30
	e, err := backuptest.StartEtcd(backuptest.EtcdOptions{Dir: dir, QuotaBytes: quota})
	if err != nil {
		return err
	}
	defer e.Close()
	valueSize := valueKiB << 10
	keys := sizeMiB << 20 / valueSize
	start := time.Now()
	if err := e.Fill(context.Background(), "/bench/", keys, valueSize); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "etcd: wrote %d keys of %d KiB in %v\n", keys, valueKiB, time.Since(start).Round(time.Millisecond))
	fmt.Printf("READY %s\n", e.Endpoint)
	return waitForEnd()
}

// serveGCS runs fake-gcs-server on disk under dir, prints "READY <url>" and
// serves until its stdin closes or it is signalled.
func serveGCS(dir string) error {
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", Host: "127.0.0.1", StorageRoot: dir, Writer: io.Discard,
	})
	if err != nil {
		return err
	}
	defer srv.Stop()
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "bench"})
	fmt.Printf("READY %s\n", srv.URL())
	return waitForEnd()
}

func waitForEnd() error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-sig:
	case <-eof:
	}
	return nil
}

// startChild runs this binary with args and returns what it printed after READY,
// and a function that ends it by its pid.
func startChild(args ...string) (string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	child := exec.Command(self, args...)
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := child.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		_ = stdin.Close()
		_ = child.Process.Signal(syscall.SIGTERM)
		_ = child.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("child %v: %w", args, err)
	}
	ready, ok := strings.CutPrefix(strings.TrimSpace(line), "READY ")
	if !ok {
		stop()
		return "", nil, fmt.Errorf("child %v said %q", args, line)
	}
	return ready, stop, nil
}

// openStore starts the store to back up into. storedSize says how many bytes the
// store holds under a key, to check each run against.
func openStore(kind string, partMiB, concurrency int) (store backup.Store, storedSize func(key string) (int64, error), stop func(), err error) {
	switch kind {
	case "s3":
		discard := backuptest.NewDiscardBackend()
		srv, err := backuptest.StartS3(discard, "bench")
		if err != nil {
			return nil, nil, nil, err
		}
		cfg := srv.StoreConfig("bench")
		cfg.PartSize = int64(partMiB) << 20
		cfg.Concurrency = concurrency
		s, err := s3store.New(cfg)
		if err != nil {
			srv.Close()
			return nil, nil, nil, err
		}
		size := func(key string) (int64, error) {
			n, _ := discard.Size("bench", key)
			return n, nil
		}
		return s, size, srv.Close, nil
	case "abs":
		dir, err := os.MkdirTemp("", "backup-bench-azurite-")
		if err != nil {
			return nil, nil, nil, err
		}
		az, err := backuptest.StartAzurite(context.Background(), dir, "bench")
		if err != nil {
			return nil, nil, nil, err
		}
		cfg := az.StoreConfig("bench")
		cfg.BlockSize = int64(partMiB) << 20
		cfg.Concurrency = concurrency
		s, err := absstore.New(cfg)
		if err != nil {
			az.Close()
			return nil, nil, nil, err
		}
		return s, headSize(s), func() { az.Close(); _ = os.RemoveAll(dir) }, nil
	case "gcs":
		dir, err := os.MkdirTemp("", "backup-bench-gcs-")
		if err != nil {
			return nil, nil, nil, err
		}
		url, stop, err := startChild("-role=gcs", "-dir="+dir)
		if err != nil {
			return nil, nil, nil, err
		}
		s, err := gcsstore.New(context.Background(), gcsstore.Config{Bucket: "bench", Endpoint: url})
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		return s, headSize(s), func() { _ = s.Close(); stop(); _ = os.RemoveAll(dir) }, nil
	}
	return nil, nil, nil, fmt.Errorf("unknown -store %q: use s3, abs or gcs", kind)
}

func headSize(s backup.Store) func(string) (int64, error) {
	return func(key string) (int64, error) {
		info, err := s.Head(context.Background(), key)
		return info.Size, err
	}
}

func bench(storeKind string, sizeMiB, valueKiB, partMiB, concurrency, runs int) error {
	// The etcd child, killed by its pid when the benchmark ends.
	self, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(self, "-role=etcd", "-size-mib="+strconv.Itoa(sizeMiB), "-value-kib="+strconv.Itoa(valueKiB))
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return err
	}
	defer func() {
		_ = stdin.Close()
		_ = child.Process.Signal(syscall.SIGTERM)
		_ = child.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return fmt.Errorf("etcd child: %w", err)
	}
	endpoint, ok := strings.CutPrefix(strings.TrimSpace(line), "READY ")
	if !ok {
		return fmt.Errorf("etcd child said %q", line)
	}
	status, err := etcdutil.EndpointStatus(context.Background(), etcdutil.ClientConfig{}, endpoint)
	if err != nil {
		return err
	}

	store, storedSize, stopStore, err := openStore(storeKind, partMiB, concurrency)
	if err != nil {
		return err
	}
	defer stopStore()

	runtime.GC()
	rssBefore := procStatus("VmRSS")
	fmt.Printf("store: %s; database: %.1f MiB (Status RPC) at revision %d (etcd %s); upload parts of %d MiB, %d at once\n",
		storeKind, float64(status.DbSize)/(1<<20), status.Header.Revision, status.Version, partMiB, concurrency)
	fmt.Printf("RSS before the first backup: %.1f MiB\n", rssBefore/(1<<10))

	var best float64 // MiB/s
	var peakHeap uint64
	for i := range runs {
		sampler := startHeapSampler()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		res, err := backup.Run(context.Background(), backup.Job{
			Source: backup.Source{Endpoints: []string{endpoint}},
			Store:  store, Bucket: "bench", Key: "snap",
		})
		elapsed := time.Since(start)
		heap := sampler.stop()
		if err != nil {
			return err
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		stored, err := storedSize("snap")
		if err != nil {
			return err
		}
		if stored != res.Size {
			return fmt.Errorf("the store received %d bytes, the backup counted %d", stored, res.Size)
		}
		mibs := float64(res.Size) / (1 << 20) / elapsed.Seconds()
		fmt.Printf("run %d: %.1f MiB in %v = %.0f MiB/s; peak Go heap %.1f MiB; allocated %.1f MiB in %d GCs; sha256 %s…\n",
			i+1, float64(res.Size)/(1<<20), elapsed.Round(time.Millisecond), mibs, float64(heap)/(1<<20),
			float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), after.NumGC-before.NumGC, res.SHA256[:12])
		best = max(best, mibs)
		peakHeap = max(peakHeap, heap)
	}
	fmt.Printf("best: %.0f MiB/s; peak RSS of the backup process (VmHWM): %.1f MiB; peak Go heap: %.1f MiB\n",
		best, procStatus("VmHWM")/(1<<10), float64(peakHeap)/(1<<20))
	return nil
}

// procStatus reads a "kB" field of /proc/self/status, in KiB.
func procStatus(field string) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			v, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return v
		}
	}
	return -1
}

// heapSampler records the largest live heap seen while a backup runs; the
// runtime keeps no high-water mark of its own.
type heapSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak uint64
}

func startHeapSampler() *heapSampler {
	s := &heapSampler{done: make(chan struct{})}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	s.wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			s.peak = max(s.peak, sample[0].Value.Uint64())
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	})
	return s
}

func (s *heapSampler) stop() uint64 {
	close(s.done)
	s.wg.Wait()
	return s.peak
}
