package archive

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// etcdProc is an etcd 3.6 member process that a test can kill and start
// again on the same data.
type etcdProc struct {
	t        testing.TB
	endpoint string
	args     []string
	cmd      *exec.Cmd
	out      *etcdtest.Output
	done     chan struct{}
}

func startEtcd(t testing.TB) *etcdProc { return startCluster(t, 1)[0] }

// etcdBin is the directory of etcd 3.6's etcd and etcdutl.
func etcdBin(t testing.TB) string {
	return etcdtest.BinDir36(t, "the archive is tested against a real etcd", "etcd", "etcdutl")
}

// startCluster starts an n-member cluster and waits until it serves.
func startCluster(t testing.TB, n int) []*etcdProc {
	t.Helper()
	var ms []*etcdProc
	var initial []string
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		m, peer := newMember(t, name, filepath.Join(t.TempDir(), name))
		ms = append(ms, m)
		initial = append(initial, name+"="+peer)
	}
	for _, m := range ms {
		m.args = append(m.args, "--initial-cluster="+strings.Join(initial, ","))
		t.Cleanup(m.kill)
		m.launch()
	}
	for _, m := range ms {
		m.waitServing()
	}
	return ms
}

// newMember is a member on free loopback ports, not yet started, and its peer URL.
func newMember(t testing.TB, name, dataDir string) (*etcdProc, string) {
	client, peer := "http://"+etcdtest.FreeAddr(t), "http://"+etcdtest.FreeAddr(t)
	return &etcdProc{t: t, endpoint: client, args: []string{filepath.Join(etcdBin(t), "etcd"), "--name=" + name, "--data-dir=" + dataDir,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--initial-cluster-state=new", "--log-level=warn", "--unsafe-no-fsync"}}, peer
}

// restoreEtcd starts a one-member cluster restored by etcdutl from the
// snapshot in file, as a restore seeds a cluster.
func restoreEtcd(t testing.TB, file string) *etcdProc {
	t.Helper()
	dataDir := filepath.Join(t.TempDir(), "restored")
	m, peer := newMember(t, "restored", dataDir)
	cmd := exec.Command(filepath.Join(etcdBin(t), "etcdutl"), "snapshot", "restore", file, "--data-dir="+dataDir,
		"--name=restored", "--initial-cluster=restored="+peer, "--initial-advertise-peer-urls="+peer)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("etcdutl snapshot restore: %v\n%s", err, out)
	}
	m.args = append(m.args, "--initial-cluster=restored="+peer)
	t.Cleanup(m.kill)
	m.start()
	return m
}

// start runs the member again and waits until it serves.
func (e *etcdProc) start() {
	e.t.Helper()
	e.launch()
	e.waitServing()
}

func (e *etcdProc) launch() {
	e.t.Helper()
	e.out = &etcdtest.Output{}
	e.cmd = exec.Command(e.args[0], e.args[1:]...)
	e.cmd.Stdout, e.cmd.Stderr = e.out, e.out
	if err := e.cmd.Start(); err != nil {
		e.t.Fatalf("start etcd: %v", err)
	}
	done := make(chan struct{})
	e.done = done
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(done) }(e.cmd)
}

func (e *etcdProc) waitServing() {
	e.t.Helper()
	c := newClient(e.t, e.endpoint)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(e.t.Context(), time.Second)
		_, err := c.Get(ctx, "health")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("etcd does not serve: %v\n%s", err, e.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *etcdProc) kill() {
	if e.cmd != nil && e.cmd.Process != nil {
		_ = e.cmd.Process.Kill()
		<-e.done
	}
}

// newClient is a client whose reconnects wait at most a couple of seconds,
// as the archiver's clients should (pkg/checker's newClient says why); it
// closes with the test.
func newClient(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// startStore is a bucket of a versitygw process, through the S3 store.
func startStore(t testing.TB) backup.Store {
	t.Helper()
	ctx := context.Background()
	vgw, err := backuptest.StartVersityGW(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vgw.Close)
	if err := vgw.CreateBucket(ctx, "archive"); err != nil {
		t.Fatal(err)
	}
	store, err := s3store.New(vgw.StoreConfig("archive"))
	if err != nil {
		t.Fatal(err)
	}
	return store
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLog(t testing.TB) *logrus.Entry {
	l := logrus.New()
	l.SetLevel(logrus.DebugLevel)
	l.SetOutput(testWriter{t})
	return logrus.NewEntry(l)
}

// running is an Archiver running in the background.
type running struct {
	a    *Archiver
	stop context.CancelFunc
	done chan error
}

func runArchiver(t testing.TB, cfg Config) *running {
	t.Helper()
	if cfg.Log == nil {
		cfg.Log = testLog(t)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &running{a: a, stop: stop, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	t.Cleanup(func() { r.stop(); <-r.done; r.done <- nil })
	return r
}

// stopped stops the archiver and returns what Run returned, nil when it
// stopped because it was told to.
func (r *running) stopped() error {
	r.stop()
	err := <-r.done
	r.done <- err
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// waitArchived waits until the archive holds revision rev.
func (r *running) waitArchived(t testing.TB, rev int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("the archive holds revision %d", rev), func() bool {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("the archiver stopped at revision %d before %d: %v", r.a.Progress().Revision, rev, err)
		default:
		}
		return r.a.Progress().Revision >= rev
	})
}

// finish writes a last batch, stops the archiver once it holds it, and checks
// that the archive holds exactly the events the cluster made after revision
// after. It returns the archive's chunks and the last revision.
func (r *running) finish(t testing.TB, c *clientv3.Client, after int64) ([]Chunk, int64) {
	t.Helper()
	last := write(t, c, "last", 100)
	r.waitArchived(t, last)
	mustOK(t, r.stopped())
	chunks, evs := archived(t, r.a.cfg.Store, r.a.cfg.Prefix, after, r.a.cfg.Codec.Key)
	sameEvents(t, evs, history(t, c, after, last))
	return chunks, last
}

// archiveOnce runs an archiver while n revisions are written, and stops it
// once it holds them; it returns the last one.
func archiveOnce(t testing.TB, cfg Config, n int) int64 {
	t.Helper()
	r := runArchiver(t, cfg)
	last := write(t, cfg.Client, "once", n)
	r.waitArchived(t, last)
	mustOK(t, r.stopped())
	return last
}

// eventually polls cond until it holds, for 30 s at most.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s, still not: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// write makes n revisions of every kind the archive must keep: puts, puts
// with a lease, multi-key transactions, deletes of one key and of a range.
// It returns the revision of the last one.
func write(t testing.TB, c *clientv3.Client, tag string, n int) int64 {
	t.Helper()
	ctx := context.Background()
	lease, err := c.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		k := fmt.Sprintf("%s/%03d", tag, i%40)
		var err error
		switch i % 5 {
		case 0, 1:
			_, err = c.Put(ctx, k, fmt.Sprintf("v%d", i))
		case 2:
			_, err = c.Put(ctx, k+"-leased", fmt.Sprintf("l%d", i), clientv3.WithLease(lease.ID))
		case 3:
			_, err = c.Txn(ctx).Then(clientv3.OpPut(k+"-a", "x"), clientv3.OpPut(k+"-b", "y"), clientv3.OpDelete(k)).Commit()
		case 4:
			_, err = c.Delete(ctx, fmt.Sprintf("%s/%02d", tag, (i/5)%4), clientv3.WithPrefix())
		}
		mustOK(t, err)
	}
	// The store's revision now: the last write's, since a delete of
	// nothing makes no revision.
	r, err := c.Get(ctx, "health")
	mustOK(t, err)
	return r.Header.Revision
}

func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// history is every event the cluster made after revision after, up to upTo,
// from a watch of its own.
func history(t testing.TB, c *clientv3.Client, after, upTo int64) []mvccpb.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []mvccpb.Event
	for resp := range c.Watch(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(after+1)) {
		mustOK(t, resp.Err())
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > upTo {
				return out
			}
			out = append(out, mvccpb.Event(*ev))
		}
		if len(out) > 0 && out[len(out)-1].Kv.ModRevision == upTo {
			return out
		}
	}
	t.Fatalf("the watch ended before revision %d", upTo)
	return nil
}

// archived is every event the archive holds after revision after, each
// chunk read and checked, and checks the chunks follow each other from
// after+1 and their names sort as their revisions.
func archived(t testing.TB, store backup.Store, prefix string, after int64, key []byte) ([]Chunk, []mvccpb.Event) {
	t.Helper()
	ctx := context.Background()
	all, err := List(ctx, store, prefix)
	mustOK(t, err)
	for i := 1; i < len(all); i++ {
		if all[i-1].Key >= all[i].Key {
			t.Fatalf("chunk names do not sort as their revisions: %s before %s", all[i-1].Key, all[i].Key)
		}
	}
	chunks, err := Covering(all, after, 0)
	mustOK(t, err)
	if len(chunks) > 0 && chunks[0].First != after+1 {
		t.Fatalf("the archive starts at %d, not %d", chunks[0].First, after+1)
	}
	var evs []mvccpb.Event
	for _, c := range chunks {
		got, err := ReadChunk(ctx, store, c, key)
		mustOK(t, err)
		for _, ev := range got {
			evs = append(evs, ev.Event)
		}
	}
	return chunks, evs
}

// sameEvents fails the test unless the archive's events are the cluster's.
func sameEvents(t testing.TB, got, want []mvccpb.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("the archive holds %d events, the cluster made %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Type != w.Type || string(g.Kv.Key) != string(w.Kv.Key) || string(g.Kv.Value) != string(w.Kv.Value) ||
			g.Kv.ModRevision != w.Kv.ModRevision || g.Kv.CreateRevision != w.Kv.CreateRevision ||
			g.Kv.Version != w.Kv.Version || g.Kv.Lease != w.Kv.Lease {
			t.Fatalf("event %d: the archive holds %v, the cluster made %v", i, g.String(), w.String())
		}
	}
}
