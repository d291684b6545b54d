// Command backup measures the operator's backup path on a large database: the
// throughput of streaming a snapshot from etcd into S3, and the memory it takes.
//
// etcd runs in a child process (this binary with -role=etcd): its bbolt file is
// memory-mapped, and reading it for the snapshot would otherwise count in this
// process's RSS. The S3 server runs in this process on gofakes3 with a backend that
// drops the bytes (backuptest.DiscardBackend), so what this process holds at its
// peak is the backup path's own memory: the etcd client, the upload part buffers
// and the HTTP client.
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

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
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
	flag.Parse()

	var err error
	switch *role {
	case "etcd":
		err = serveEtcd(*dir, *sizeMiB, *valueKiB)
	case "bench":
		err = bench(*sizeMiB, *valueKiB, *partMiB, *concurrency, *runs)
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

func bench(sizeMiB, valueKiB, partMiB, concurrency, runs int) error {
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

	discard := backuptest.NewDiscardBackend()
	srv, err := backuptest.StartS3(discard, "bench")
	if err != nil {
		return err
	}
	defer srv.Close()
	cfg := srv.StoreConfig("bench")
	cfg.PartSize = int64(partMiB) << 20
	cfg.Concurrency = concurrency
	store, err := s3store.New(cfg)
	if err != nil {
		return err
	}

	runtime.GC()
	rssBefore := procStatus("VmRSS")
	fmt.Printf("database: %.1f MiB (Status RPC) at revision %d (etcd %s); upload parts of %d MiB, %d at once\n",
		float64(status.DbSize)/(1<<20), status.Header.Revision, status.Version, partMiB, concurrency)
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
		stored, _ := discard.Size("bench", "snap")
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
