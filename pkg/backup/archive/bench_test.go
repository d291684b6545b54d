package archive

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

// BenchmarkArchiveUnderSteadyWrites writes b.N puts of 256 bytes with 8
// writers at once while the archive runs into versitygw with zstd, and
// reports the archive's lag behind the cluster, sampled all along, and how
// long it took to hold the last write once the writes stopped.
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
		mu                sync.Mutex
		maxLag            time.Duration
		maxLagRevs, lagN  int64
		lagSum            time.Duration
		stopSampling      = make(chan struct{})
		samplingDone      = make(chan struct{})
		value             = strings.Repeat("v", 256)
		ctx               = context.Background()
		writers           = 8
		errs              = make(chan error, writers)
		lastRev           int64
		lastMu            sync.Mutex
		start             = time.Now()
		samplingIntervals = 10 * time.Millisecond
	)
	go func() {
		defer close(samplingDone)
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(samplingIntervals):
			}
			p := r.a.Progress()
			mu.Lock()
			maxLag, maxLagRevs = max(maxLag, p.Lag), max(maxLagRevs, p.LagRevisions)
			lagSum += p.Lag
			lagN++
			mu.Unlock()
		}
	}()
	b.ResetTimer()
	for w := range writers {
		go func() {
			var rev int64
			for i := w; i < b.N; i += writers {
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
	b.StopTimer()
	close(stopSampling)
	<-samplingDone
	mustOK(b, r.stopped())

	b.ReportMetric(float64(b.N)/written.Sub(start).Seconds(), "writes/s")
	b.ReportMetric(float64(b.N)/drained.Sub(start).Seconds(), "archived-events/s")
	b.ReportMetric(maxLag.Seconds(), "max-lag-s")
	if lagN > 0 {
		b.ReportMetric((lagSum / time.Duration(lagN)).Seconds(), "mean-lag-s")
	}
	b.ReportMetric(float64(maxLagRevs), "max-lag-revisions")
	b.ReportMetric(drained.Sub(written).Seconds(), "last-write-stored-after-s")
	b.ReportMetric(interval.Seconds(), "interval-s")
}
