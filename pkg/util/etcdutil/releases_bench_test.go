package etcdutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// These benchmarks set etcd 3.7 beside the 3.6 a new cluster gets by
// default, on real processes of both, for what 3.7 changes that the
// operator or its users' clients could feel (docs/user-guide/versions.md):
// how soon a new member's learner is promoted, and how long a lease
// keep-alive takes while the cluster is busy writing (3.7's
// FastLeaseKeepAlive, on by default, lets the leader renew a lease it knows
// without first waiting for its apply loop to reach the commit index). The
// members sync their writes to disk, as in production: both figures depend
// on how far apply trails commit, which fsync sets. They report figures and
// assert none; `make bench-go` publishes them on
// docs/results/backup-restore.md.

// benchedRelease is an etcd release the benchmarks run.
type benchedRelease struct {
	version string
	binDir  func(t testing.TB, why string, tools ...string) string
}

var benchedReleases = []benchedRelease{
	{etcdtest.VersionLatest36, etcdtest.BinDirLatest36},
	{etcdtest.Version37, etcdtest.BinDir37},
}

func (r benchedRelease) etcd(b *testing.B) string {
	b.Helper()
	dir := r.binDir(b, "etcd "+r.version+" is needed to set it beside the other minor versions", "etcd")
	return filepath.Join(dir, "etcd")
}

// startDurableCluster starts n members of bin that sync their writes.
func startDurableCluster(b *testing.B, bin string, n int) *processCluster {
	b.Helper()
	return (&processCluster{t: b, bin: bin, fsync: true}).startAll(n)
}

// benchClient is a client of endpoints for the benchmark's life.
func benchClient(b *testing.B, endpoints ...string) *clientv3.Client {
	b.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	return cli
}

// fill writes count values of size bytes under prefix, concurrently.
func fill(b *testing.B, cli *clientv3.Client, prefix string, count, size int) {
	b.Helper()
	value := strings.Repeat("v", size)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 32 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(count) {
					return
				}
				ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
				_, err := cli.Put(ctx, fmt.Sprintf("%s/%08d", prefix, i), value)
				cancel()
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatalf("fill %s: %v", prefix, err)
	default:
	}
}

// promotionData is what the cluster holds when a learner joins: 12 000
// values of 4 KiB, about 47 MiB. The learner gets it as a snapshot from the
// leader, as every new member of 3.6 and 3.7 does: both compact their raft
// log in memory every hundred entries applied, so a member that starts empty
// cannot catch up from the log alone. The benchmark checks that the
// snapshots were sent.
const (
	promotionValues    = 12000
	promotionValueSize = 4 << 10
)

// promotePoll is how often the benchmark asks etcd to promote the learner:
// finer than the operator's passes, so the figure is when etcd first
// accepts, not when a pass happens to ask.
const promotePoll = 50 * time.Millisecond

// BenchmarkLearnerPromotion is the time from etcd accepting a new member as
// a learner into a three-member cluster holding promotionData until it
// accepts the learner's promotion: the member's start, its snapshot from the
// leader, and its catching up, asked as the operator does, again while etcd
// says the learner is not ready. Between operations the member is removed
// again.
func BenchmarkLearnerPromotion(b *testing.B) {
	for _, r := range benchedReleases {
		b.Run("etcd-"+r.version, func(b *testing.B) {
			c := startDurableCluster(b, r.etcd(b), 3)
			voters := slices.Clone(c.members)
			cli := benchClient(b, c.endpoints()...)
			fill(b, cli, "data", promotionValues, promotionValueSize)
			cfg := ClientConfig{Endpoints: c.endpoints()}
			refusals, promotions := 0, 0
			for b.Loop() {
				i := promotions
				promotions++
				b.StopTimer()
				l := c.newMember(fmt.Sprintf("learner%d", i))
				m := addLearnerWhenHealthy(b, cfg, l.peerURL)
				b.StartTimer()
				c.start(l, initialCluster(append(slices.Clone(voters), l)...), "existing")
				refusals += promoteAsked(b, cfg, l, m.ID)
				b.StopTimer()
				requireCaughtUp(b, l)
				if err := RemoveMember(b.Context(), cfg, m.ID); err != nil {
					b.Fatalf("remove %s: %v", l.name, err)
				}
				c.stop(l)
				c.members = slices.DeleteFunc(c.members, func(o *processMember) bool { return o == l })
				b.StartTimer()
			}
			b.ReportMetric(float64(refusals)/float64(promotions), "refusals/op")
			if sent := snapshotsSent(b, voters); sent < promotions {
				b.Fatalf("the voters sent %d snapshots to %d learners: a learner caught up from the log, which is not what this measures", sent, promotions)
			}
		})
	}
}

// addLearnerWhenHealthy adds a learner, asking again while etcd refuses for
// a membership change just made (its health interval).
func addLearnerWhenHealthy(b *testing.B, cfg ClientConfig, peerURL string) *etcdserverpb.Member {
	b.Helper()
	var added *etcdserverpb.Member
	poll(b, 30*time.Second, "etcd adds a learner at "+peerURL, func() (bool, string) {
		m, err := AddLearner(b.Context(), cfg, peerURL)
		if err == nil {
			added = m
			return true, ""
		}
		if errors.Is(err, rpctypes.ErrUnhealthy) || errors.Is(err, rpctypes.ErrMemberNotEnoughStarted) {
			return false, err.Error()
		}
		b.Fatalf("add learner %s: %v", peerURL, err)
		return false, ""
	})
	return added
}

// requireCaughtUp fails the benchmark when the promoted member l does not
// hold the data, which would mean the figure measured something else. Its
// client listener may open a moment after etcd accepts the promotion.
func requireCaughtUp(b *testing.B, l *processMember) {
	b.Helper()
	poll(b, startTimeout, l.name+" holds the data", func() (bool, string) {
		st, err := EndpointStatus(b.Context(), ClientConfig{DialTimeout: shortDial, RequestTimeout: shortRequest}, l.clientURL)
		if err != nil {
			return false, err.Error()
		}
		if st.DbSize < promotionValues*promotionValueSize {
			b.Fatalf("%s was promoted holding %d bytes, less than the %d written", l.name, st.DbSize, promotionValues*promotionValueSize)
		}
		return true, ""
	})
}

// snapshotsSent is how many snapshots the members ms have sent to other
// members, from their metrics (etcd_network_snapshot_send_success, by
// receiver).
func snapshotsSent(b *testing.B, ms []*processMember) int {
	b.Helper()
	sent := 0
	for _, m := range ms {
		resp, err := http.Get(m.clientURL + "/metrics")
		if err != nil {
			b.Fatalf("metrics of %s: %v", m.name, err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			b.Fatalf("metrics of %s: %v", m.name, err)
		}
		for line := range strings.Lines(string(body)) {
			if !strings.HasPrefix(line, "etcd_network_snapshot_send_success{") {
				continue
			}
			f := strings.Fields(line)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				sent += int(v)
			}
		}
	}
	return sent
}

// promoteAsked promotes the learner l, asking again every promotePoll while
// etcd says it is not ready; it returns how many times etcd refused.
func promoteAsked(b *testing.B, cfg ClientConfig, l *processMember, id uint64) int {
	b.Helper()
	refusals := 0
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := PromoteMember(b.Context(), cfg, id)
		if err == nil {
			return refusals
		}
		if !errors.Is(err, rpctypes.ErrMemberLearnerNotReady) && !errors.Is(err, rpctypes.ErrMemberNotEnoughStarted) && !errors.Is(err, rpctypes.ErrUnhealthy) {
			b.Fatalf("promote %s: %v", l.name, err)
		}
		select {
		case <-l.done:
			b.Fatalf("%s exited: %s", l.name, l.log.Tail(2000))
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("etcd still refuses to promote %s: %v", l.name, err)
		}
		refusals++
		time.Sleep(promotePoll)
	}
}

// writeLoads are the write loads the keep-alives are timed under, 1 KiB
// values from up to keepAliveWriters requests in flight: a steady rate
// offered, about what a three-member cluster that syncs its writes takes on
// two shared cores (the writes/s figure says what it took), and as many
// writes as it takes, where its apply loop trails its commits most.
var writeLoads = []struct {
	name      string
	perSecond int // 0: as many as the cluster takes
}{
	{"steady-500-writes-per-s", 500},
	{"saturating", 0},
}

const keepAliveWriters = 64

// BenchmarkLeaseKeepAliveUnderWrites is one lease keep-alive's round trip
// under each of writeLoads, sent to the leader (where 3.7 renews a lease
// without waiting for apply) and to a follower (which forwards it to the
// leader, whose lease handler waits for apply on both releases). It
// reports the median and the 99th percentile of the round trips, and the
// writes the cluster took meanwhile.
func BenchmarkLeaseKeepAliveUnderWrites(b *testing.B) {
	for _, r := range benchedReleases {
		b.Run("etcd-"+r.version, func(b *testing.B) {
			c := startDurableCluster(b, r.etcd(b), 3)
			leader, follower := leaderAndFollower(b, c)
			writer := benchClient(b, c.endpoints()...)
			for _, load := range writeLoads {
				for _, to := range []struct {
					name string
					m    *processMember
				}{{"to-leader", leader}, {"to-follower", follower}} {
					b.Run(load.name+"/"+to.name, func(b *testing.B) {
						keepAliveUnder(b, writer, leader, to.m, load.perSecond)
					})
				}
			}
		})
	}
}

// keepAliveUnder times keep-alives of a lease sent to m while writer loads
// the cluster with perSecond writes a second (0: as many as it takes), and
// samples how far the leader's apply trails its commits meanwhile: the wait
// 3.7 skips on the leader.
func keepAliveUnder(b *testing.B, writer *clientv3.Client, leader, m *processMember, perSecond int) {
	cli := benchClient(b, m.clientURL)
	lease, err := cli.Grant(b.Context(), 600)
	if err != nil {
		b.Fatal(err)
	}
	stop, written := writeLoad(b, writer, perSecond)
	stopLag, maxLag := applyLag(b, leader)
	start, before := time.Now(), written.Load()
	var rtts []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := cli.KeepAliveOnce(b.Context(), lease.ID); err != nil {
			b.Fatalf("keep-alive to %s: %v", m.name, err)
		}
		rtts = append(rtts, time.Since(t0))
	}
	b.StopTimer()
	took, writes := time.Since(start), written.Load()-before
	stopLag()
	stop()
	slices.Sort(rtts)
	b.ReportMetric(percentileMs(rtts, 0.50), "p50-ms")
	b.ReportMetric(percentileMs(rtts, 0.99), "p99-ms")
	b.ReportMetric(float64(writes)/took.Seconds(), "writes/s")
	b.ReportMetric(float64(maxLag.Load()), "max-apply-lag-entries")
}

// applyLag samples the leader's committed and applied raft indexes until
// stop is called; max is the largest gap seen.
func applyLag(b *testing.B, leader *processMember) (stop func(), max *atomic.Uint64) {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	max = &atomic.Uint64{}
	cli := benchClient(b, leader.clientURL)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			st, err := cli.Status(ctx, leader.clientURL)
			if err == nil && st.RaftIndex > st.RaftAppliedIndex && st.RaftIndex-st.RaftAppliedIndex > max.Load() {
				max.Store(st.RaftIndex - st.RaftAppliedIndex)
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	return func() { cancel(); wg.Wait() }, max
}

// leaderAndFollower are c's leader and one of its followers, once every
// member agrees on the leader.
func leaderAndFollower(b *testing.B, c *processCluster) (leader, follower *processMember) {
	b.Helper()
	poll(b, startTimeout, "the members agree on a leader", func() (bool, string) {
		leader, follower = nil, nil
		var lead uint64
		for _, m := range c.members {
			st, err := EndpointStatus(b.Context(), ClientConfig{DialTimeout: shortDial, RequestTimeout: shortRequest}, m.clientURL)
			if err != nil {
				return false, err.Error()
			}
			if lead != 0 && st.Leader != lead || st.Leader == 0 {
				return false, fmt.Sprintf("%s follows %x", m.name, st.Leader)
			}
			lead = st.Leader
			if st.Header.MemberId == st.Leader {
				leader = m
			} else {
				follower = m
			}
		}
		return leader != nil && follower != nil, "no leader among the members"
	})
	return leader, follower
}

// writeLoad writes 1 KiB values over 1 000 keys from keepAliveWriters
// goroutines, perSecond a second or, when 0, as fast as the cluster takes
// them, until stop is called; written counts the writes etcd took. A paced
// write no writer is free for is skipped, so a cluster that falls behind
// shows in the count, not in a backlog.
func writeLoad(b *testing.B, cli *clientv3.Client, perSecond int) (stop func(), written *atomic.Int64) {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	written = &atomic.Int64{}
	value := strings.Repeat("w", 1<<10)
	due := make(chan int, keepAliveWriters)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(due)
		var tick <-chan time.Time
		if perSecond > 0 {
			t := time.NewTicker(time.Second / time.Duration(perSecond))
			defer t.Stop()
			tick = t.C
		}
		for i := 0; ; i++ {
			if tick == nil {
				select {
				case <-ctx.Done():
					return
				case due <- i:
				}
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-tick:
			}
			select {
			case due <- i:
			default:
			}
		}
	})
	for range keepAliveWriters {
		wg.Go(func() {
			for i := range due {
				if _, err := cli.Put(ctx, fmt.Sprintf("load/%03d", i%1000), value); err == nil {
					written.Add(1)
				}
			}
		})
	}
	return func() { cancel(); wg.Wait() }, written
}

// percentileMs is the q-th quantile of sorted, in milliseconds.
func percentileMs(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, int(q*float64(len(sorted))))
	return float64(sorted[i]) / float64(time.Millisecond)
}
