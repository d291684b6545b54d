package archive

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

// steadyWrites is how many puts one run of BenchmarkArchiveUnderSteadyWrites
// makes: enough for the archive's lag, sampled all along, to settle over many
// of its intervals.
const steadyWrites = 100000

// BenchmarkArchiveUnderSteadyWrites writes steadyWrites puts of 256 bytes
// with 8 writers at once, each op one such run, while the archive runs into
// versitygw with zstd, and reports the archive's lag behind the cluster,
// sampled all along, and how long it took to hold the last write once the
// writes stopped.
func BenchmarkArchiveUnderSteadyWrites(b *testing.B) {
	e := startEtcd(b)
	c := newClient(b, e.endpoint)
	store := startStore(b)
	log := testLog(b)
	log.Logger.SetLevel(logrus.WarnLevel)
	const interval = time.Second
	r := runArchiver(b, Config{Client: c, Store: store, Prefix: "bench/", Codec: backup.Codec{Compression: backup.CompressionZstd},
		Interval: interval, Log: log})

	var (
		mu               sync.Mutex
		maxLag           time.Duration
		maxLagRevs, lagN int64
		lagSum           time.Duration
		value            = strings.Repeat("v", 256)
		ctx              = context.Background()
		writers          = 8
		writing, storing time.Duration
		storedAfter      time.Duration
	)
	sample := func(stop <-chan struct{}, done chan<- struct{}) {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			p := r.a.Progress()
			mu.Lock()
			maxLag, maxLagRevs = max(maxLag, p.Lag), max(maxLagRevs, p.LagRevisions)
			lagSum += p.Lag
			lagN++
			mu.Unlock()
		}
	}
	b.ResetTimer()
	for range b.N {
		stopSampling, samplingDone := make(chan struct{}), make(chan struct{})
		go sample(stopSampling, samplingDone)
		errs := make(chan error, writers)
		var lastRev int64
		var lastMu sync.Mutex
		start := time.Now()
		for w := range writers {
			go func() {
				var rev int64
				for i := w; i < steadyWrites; i += writers {
					resp, err := c.Put(ctx, fmt.Sprintf("k/%08d", i%10000), value)
					if err != nil {
						errs <- err
						return
					}
					rev = resp.Header.Revision
				}
				lastMu.Lock()
				lastRev = max(lastRev, rev)
				lastMu.Unlock()
				errs <- nil
			}()
		}
		for range writers {
			mustOK(b, <-errs)
		}
		written := time.Now()
		r.waitArchived(b, lastRev)
		drained := time.Now()
		close(stopSampling)
		<-samplingDone
		writing += written.Sub(start)
		storing += drained.Sub(start)
		storedAfter += drained.Sub(written)
	}
	b.StopTimer()
	mustOK(b, r.stopped())

	n := float64(b.N)
	b.ReportMetric(steadyWrites*n/writing.Seconds(), "writes/s")
	b.ReportMetric(steadyWrites*n/storing.Seconds(), "archived-events/s")
	b.ReportMetric(maxLag.Seconds(), "max-lag-s")
	if lagN > 0 {
		b.ReportMetric((lagSum / time.Duration(lagN)).Seconds(), "mean-lag-s")
	}
	b.ReportMetric(float64(maxLagRevs), "max-lag-revisions")
	b.ReportMetric(storedAfter.Seconds()/n, "last-write-stored-after-s")
	b.ReportMetric(interval.Seconds(), "interval-s")
}

// hourOfWritesPerSecond is the write rate of the hour of changes
// BenchmarkReplayAnHourOfChanges replays: a cluster that takes a write every
// 100 ms on average (a small Kubernetes control plane's steady rate).
const hourOfWritesPerSecond = 10

// BenchmarkReplayAnHourOfChanges replays, onto a real etcd, an archive of an
// hour of writes at hourOfWritesPerSecond: puts of 256 bytes over 10 000 keys,
// one revision each, in chunks of a second compressed with zstd, decoded and
// checked as a restore's seed does (DecodeStoredChunk) and applied with
// ApplyChunks, one transaction per revision as a restore to a point does.
// What a restore to a point adds to restoring its snapshot is this replay:
// it reports the seconds an hour of changes takes and the revisions applied
// per second, from which any other rate's hour follows.
func BenchmarkReplayAnHourOfChanges(b *testing.B) {
	const revisions = 3600 * hourOfWritesPerSecond
	value := []byte(strings.Repeat("v", 256))
	codec := backup.Codec{Compression: backup.CompressionZstd}
	begin := time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC)
	var chunks []Chunk
	stored := map[string][]byte{}
	var evs []Event
	for i := range revisions {
		rev := int64(i) + 2 // revision 1 is an empty keyspace's
		key := []byte(fmt.Sprintf("k/%08d", i%10000))
		evs = append(evs, Event{
			Event:    mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: key, Value: value, ModRevision: rev, CreateRevision: rev, Version: 1}},
			Received: begin.Add(time.Duration(i) * time.Second / hourOfWritesPerSecond),
		})
		if len(evs) == hourOfWritesPerSecond || i == revisions-1 {
			c, data, err := BuildChunk("bench/", codec, evs[0].Revision(), evs)
			mustOK(b, err)
			chunks = append(chunks, c)
			stored[c.Key] = data
			evs = nil
		}
	}
	read := func(_ context.Context, c Chunk) ([]Event, error) { return DecodeStoredChunk(c, stored[c.Key], nil) }
	log := testLog(b)
	log.Logger.SetLevel(logrus.WarnLevel)

	var took time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		e := startEtcd(b)
		c := newClient(b, e.endpoint)
		b.StartTimer()
		start := time.Now()
		done, err := ApplyChunks(context.Background(), c, ReplayOptions{After: 1, Log: log}, chunks, read)
		took += time.Since(start)
		mustOK(b, err)
		if done.Revisions != revisions {
			b.Fatalf("replayed %d revisions, want %d", done.Revisions, revisions)
		}
		b.StopTimer()
		e.kill()
		b.StartTimer()
	}
	b.ReportMetric(took.Seconds()/float64(b.N), "seconds-per-hour")
	b.ReportMetric(float64(revisions)*float64(b.N)/took.Seconds(), "revisions/s")
	b.ReportMetric(hourOfWritesPerSecond, "writes/s-in-the-hour")
}
