// Command backup measures the operator's backup path on a large database: the
// throughput of streaming a snapshot from etcd into each store (S3, ABS, GCS),
// next to `etcdctl snapshot save` to local disk, and the memory it takes.
//
// etcd runs in a child process (this binary with -role=etcd): its bbolt file is
// memory-mapped, and reading it for the snapshot would otherwise count in this
// process's RSS. The S3 server runs in this process on gofakes3 with a backend that
// drops the bytes (backuptest.DiscardBackend), so what this process holds at its
// peak is the backup path's own memory: the etcd client, the upload part buffers
// and the HTTP client (and gofakes3's request handling, which shares the CPU).
// ABS is an Azurite process (from hack/azurite.sh), GCS fake-gcs-server in a
// child process (this binary with -role=gcs), both keeping the bytes on disk
// under TMPDIR until each run's object is deleted.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/openetcd/etcd-operator/hack/bench/benchreport"
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
	randomPercent := flag.Int("random-percent", 50, "share of each value that is random bytes, the rest repeats one byte: how compressible the database is")
	dir := flag.String("dir", "", "data directory of the etcd child (default: a temporary directory)")
	partMiB := flag.Int("part-mib", s3store.DefaultPartSize>>20, "upload part size")
	concurrency := flag.Int("concurrency", s3store.DefaultConcurrency, "parts uploaded at once")
	runs := flag.Int("runs", 3, "backups to time; the first also warms up")
	storeKind := flag.String("store", "s3", "comma-separated stores to back up into, in turn: s3 (in-process, bytes dropped), abs (Azurite), gcs (fake-gcs-server)")
	codecs := flag.String("codecs", "none,gzip,zstd,aes,gzip+aes,zstd+aes", "comma-separated ways to store the snapshot: none, gzip, zstd, aes, gzip+aes, zstd+aes")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the backups (not of etcd, nor of etcdctl) to this file")
	etcdctl := flag.String("etcdctl", defaultEtcdctl(), "etcdctl to measure `etcdctl snapshot save` to local disk with, on the same database (default $ETCDCTL, or etcdctl in $ETCD_BIN_DIR_3_6); \"\" skips it")
	reportPath := flag.String("report", "", "also write the table as JSON to this file, for hack/gen-docs backup-restore (run.sh names it)")
	flag.Parse()

	var err error
	switch *role {
	case "etcd":
		err = serveEtcd(*dir, *sizeMiB, *valueKiB, *randomPercent)
	case "gcs":
		err = serveGCS(*dir)
	case "bench":
		err = bench(*storeKind, *sizeMiB, *valueKiB, *partMiB, *concurrency, *runs, *codecs, *etcdctl, *cpuProfile, *reportPath)
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
func serveEtcd(dir string, sizeMiB, valueKiB, randomPercent int) error {
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
	if err := fill(e, keys, valueSize, randomPercent); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "etcd: wrote %d keys of %d KiB in %v\n", keys, valueKiB, time.Since(start).Round(time.Millisecond))
	fmt.Printf("READY %s\n", e.Endpoint)
	return waitForEnd()
}

// fill writes keys values, each randomPercent random bytes and the rest one
// repeated byte: backuptest.Fill's values are all one byte, which any
// compressor shrinks to nothing and would flatter compression.
func fill(e *backuptest.Etcd, keys, valueSize, randomPercent int) error {
	c, err := e.Client()
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	rng := rand.NewChaCha8([32]byte{1})
	random := valueSize * randomPercent / 100
	for i := range keys {
		v := make([]byte, valueSize)
		_, _ = rng.Read(v[:random])
		for j := random; j < valueSize; j++ {
			v[j] = 'x'
		}
		if _, err := c.Put(context.Background(), fmt.Sprintf("/bench/%08d", i), string(v)); err != nil {
			return err
		}
	}
	return nil
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

func bench(storeKinds string, sizeMiB, valueKiB, partMiB, concurrency, runs int, codecList, etcdctl, cpuProfile, reportPath string) error {
	codecs, err := parseCodecs(codecList)
	if err != nil {
		return err
	}
	if etcdctl != "" {
		if _, err := os.Stat(etcdctl); err != nil {
			return fmt.Errorf("etcdctl %q: %w (run `ETCD_BIN_DIR_3_6=$(bash hack/etcd-binaries.sh)` first, or give -etcdctl=\"\" to skip the comparison)", etcdctl, err)
		}
	}
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

	runtime.GC()
	fmt.Printf("database: %.1f MiB (Status RPC) at revision %d (etcd %s); upload parts of %d MiB, %d at once\n",
		float64(status.DbSize)/(1<<20), status.Header.Revision, status.Version, partMiB, concurrency)
	fmt.Printf("RSS before the first backup: %.1f MiB\n", procStatus("VmRSS")/(1<<10))

	// The floor: etcd's own client saving the same snapshot to local disk, in
	// the same run, so that both rates share the machine's state.
	var floor float64
	if etcdctl != "" {
		if floor, err = benchEtcdctl(etcdctl, endpoint, runs); err != nil {
			return err
		}
	}

	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	var rows []row
	for _, kind := range strings.Split(storeKinds, ",") {
		r, err := benchStore(strings.TrimSpace(kind), endpoint, codecs, partMiB, concurrency, runs)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	fmt.Printf("\n%d MiB of values, a %.0f MiB database\n%-6s %-10s %10s %12s %11s %13s %14s\n", sizeMiB, float64(status.DbSize)/(1<<20),
		"store", "stored as", "best MiB/s", "of etcdctl", "stored MiB", "peak RSS MiB", "peak heap MiB")
	if floor > 0 {
		fmt.Printf("%-6s %-10s %10.0f %12s %11s %13s %14s\n", "disk", "etcdctl", floor, "100 %", "-", "-", "-")
	}
	for _, r := range rows {
		pct := "-"
		if floor > 0 {
			pct = fmt.Sprintf("%.0f %%", 100*r.best/floor)
		}
		fmt.Printf("%-6s %-10s %10.0f %12s %11.1f %13.1f %14.1f\n", r.store, r.name, r.best, pct, r.stored, r.rss, r.heap)
	}
	if reportPath == "" {
		return nil
	}
	rep := benchreport.Backups{SizeMiB: sizeMiB, DatabaseMiB: float64(status.DbSize) / (1 << 20), Runs: runs, EtcdVersion: status.Version, EtcdctlMiBPerSecond: floor}
	if etcdctl != "" {
		if rep.EtcdctlVersion, err = benchreport.ToolVersion(etcdctl, []string{"version"}, "etcdctl version: "); err != nil {
			return err
		}
	}
	for _, r := range rows {
		rr := benchreport.BackupRow{Store: r.store, Codec: r.name, MiBPerSecond: r.best, StoredMiB: r.stored, PeakRSSMiB: r.rss, PeakHeapMiB: r.heap}
		if floor > 0 {
			rr.OfEtcdctlPercent = 100 * r.best / floor
		}
		rep.Rows = append(rep.Rows, rr)
	}
	return benchreport.Write(reportPath, rep)
}

// row is one way of storing, on one store: its best rate over the runs, and the
// process's peak RSS and Go heap during them.
type row struct {
	store, name             string
	best, stored, rss, heap float64
}

// benchStore starts the store of kind and backs the database up runs times per
// codec into it.
func benchStore(kind, endpoint string, codecs []namedCodec, partMiB, concurrency, runs int) ([]row, error) {
	store, storedSize, stopStore, err := openStore(kind, partMiB, concurrency)
	if err != nil {
		return nil, err
	}
	defer stopStore()
	fmt.Printf("store: %s\n", kind)
	var rows []row
	for _, c := range codecs {
		resetPeakRSS()
		var best float64 // MiB/s of the snapshot etcd sent
		var peakHeap uint64
		var stored int64
		for i := range runs {
			sampler := startHeapSampler()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			res, err := backup.Run(context.Background(), backup.Job{
				Source: backup.Source{Endpoints: []string{endpoint}},
				Store:  store, Bucket: "bench", Key: "snap", Codec: c.codec,
			})
			elapsed := time.Since(start)
			heap := sampler.stop()
			if err != nil {
				return nil, err
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			got, err := storedSize("snap")
			if err != nil {
				return nil, err
			}
			if got != res.Size {
				return nil, fmt.Errorf("the store received %d bytes, the backup counted %d", got, res.Size)
			}
			// Azurite and fake-gcs-server keep what they are sent on disk.
			if err := store.Delete(context.Background(), "snap"); err != nil {
				return nil, err
			}
			mibs := float64(res.SnapshotSize) / (1 << 20) / elapsed.Seconds()
			fmt.Printf("%s %s run %d: %.1f MiB snapshot, %.1f MiB stored, in %v = %.0f MiB/s; peak Go heap %.1f MiB; allocated %.1f MiB in %d GCs; sha256 %s…\n",
				kind, c.name, i+1, float64(res.SnapshotSize)/(1<<20), float64(res.Size)/(1<<20), elapsed.Round(time.Millisecond), mibs,
				float64(heap)/(1<<20), float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), after.NumGC-before.NumGC, res.SHA256[:12])
			best = max(best, mibs)
			peakHeap = max(peakHeap, heap)
			stored = res.Size
		}
		rows = append(rows, row{kind, c.name, best, float64(stored) / (1 << 20), procStatus("VmHWM") / (1 << 10), float64(peakHeap) / (1 << 20)})
	}
	return rows, nil
}

type namedCodec struct {
	name  string
	codec backup.Codec
}

// parseCodecs reads -codecs; aes uses a fixed key, which costs what any key does.
func parseCodecs(list string) ([]namedCodec, error) {
	key := make([]byte, backup.KeySize)
	var out []namedCodec
	for _, name := range strings.Split(list, ",") {
		var c backup.Codec
		for _, part := range strings.Split(strings.TrimSpace(name), "+") {
			switch part {
			case "none":
			case "gzip", "zstd":
				c.Compression = part
			case "aes":
				c.Key = key
			default:
				return nil, fmt.Errorf("-codecs: unknown %q in %q: use none, gzip, zstd, aes and their sums", part, name)
			}
		}
		out = append(out, namedCodec{strings.TrimSpace(name), c})
	}
	return out, nil
}

func defaultEtcdctl() string {
	if p := os.Getenv("ETCDCTL"); p != "" {
		return p
	}
	if d := os.Getenv("ETCD_BIN_DIR_3_6"); d != "" {
		return d + "/etcdctl"
	}
	return ""
}

// benchEtcdctl times `etcdctl snapshot save` of the same database to a file in
// TMPDIR, runs times, and returns its best MiB/s.
func benchEtcdctl(etcdctl, endpoint string, runs int) (float64, error) {
	dir, err := os.MkdirTemp("", "backup-bench-etcdctl-")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	var best float64
	for i := range runs {
		out := fmt.Sprintf("%s/snap-%d.db", dir, i)
		cmd := exec.Command(etcdctl, "--endpoints="+endpoint, "snapshot", "save", out)
		cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
		start := time.Now()
		msg, err := cmd.CombinedOutput()
		elapsed := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("etcdctl snapshot save: %w: %s", err, msg)
		}
		info, err := os.Stat(out)
		if err != nil {
			return 0, err
		}
		_ = os.Remove(out)
		mibs := float64(info.Size()) / (1 << 20) / elapsed.Seconds()
		fmt.Printf("etcdctl snapshot save run %d: %.1f MiB to local disk in %v = %.0f MiB/s\n", i+1, float64(info.Size())/(1<<20), elapsed.Round(time.Millisecond), mibs)
		best = max(best, mibs)
	}
	return best, nil
}

// resetPeakRSS starts VmHWM over at the current RSS (Linux: "5" in clear_refs),
// so that each way of storing gets its own peak.
func resetPeakRSS() {
	runtime.GC()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0o200)
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
