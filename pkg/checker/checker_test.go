package checker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// record runs a short workload against a fresh 3-member etcd; during is called
// while it runs.
func record(t *testing.T, d time.Duration, during func(c *etcdCluster)) *History {
	t.Helper()
	c := startEtcd(t, 3)
	// Under a fault an operation gives up after a second, so that the
	// workload sees the fault. A healthy cluster answers every operation,
	// which on a machine busy with other tests may take seconds: those
	// tests judge errors and histories, not speed.
	opTimeout := time.Second
	if during == nil {
		opTimeout = 10 * time.Second
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if during != nil {
			during(c)
		}
	}()
	h, err := Run(t.Context(), Config{
		Endpoints: c.endpoints(), Clients: 4, Keys: 4, Duration: d, Rate: 100,
		OpTimeout: opTimeout, Settle: 30 * time.Second, Seed: 1,
		Log: logrus.NewEntry(logrus.StandardLogger()),
	})
	<-done
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func check(t *testing.T, h *History) Result {
	t.Helper()
	viz := filepath.Join(t.TempDir(), "history.html")
	r, err := Check(h, CheckOptions{Timeout: time.Minute, VisualizationPath: viz})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (porcupine %.2fs)", r, r.CheckSeconds)
	if r.Linearizable == "no" {
		if st, err := os.Stat(viz); err != nil || st.Size() == 0 {
			t.Errorf("a non-linearizable history left no visualization at %s: %v", viz, err)
		}
	}
	return r
}

func TestCleanHistoryPasses(t *testing.T) {
	t.Parallel()
	h := record(t, 3*time.Second, nil)
	r := check(t, h)
	if !r.Passed() {
		t.Fatalf("a history of a healthy cluster failed: %+v", r)
	}
	if r.Acked < 200 || len(h.Appended) == 0 || r.Indeterminate != 0 {
		t.Errorf("the workload did too little, or saw errors on a healthy cluster: %+v, %d appends", r, len(h.Appended))
	}
	var cas, casOK int
	for _, op := range h.Ops {
		if op.Kind == CAS {
			cas++
			if op.OK {
				casOK++
			}
		}
	}
	if cas == 0 || casOK == 0 {
		t.Errorf("%d compare-and-sets, %d succeeded: the mix must exercise both outcomes", cas, casOK)
	}
}

// A second run under the prefix of a first would start from registers its model
// takes for never written: it is refused with the reason, not judged.
func TestRunRefusesAUsedPrefix(t *testing.T) {
	t.Parallel()
	c := startEtcd(t, 1)
	cfg := Config{Endpoints: c.endpoints(), Clients: 1, Keys: 2, Duration: 200 * time.Millisecond, Rate: 20,
		OpTimeout: time.Second, Settle: 10 * time.Second, Seed: 1, Log: logrus.NewEntry(logrus.StandardLogger())}
	if _, err := Run(t.Context(), cfg); err != nil {
		t.Fatalf("the first run: %v", err)
	}
	_, err := Run(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Fatalf("a second run under the same prefix: %v, want a refusal", err)
	}
	cfg.Prefix = "/etcd-checker/second/"
	if _, err := Run(t.Context(), cfg); err != nil {
		t.Errorf("a second run under a prefix of its own: %v", err)
	}
}

// A killed leader makes some writes' outcome unknown; the history must still be
// linearizable with them taken as possibly applied, and nothing acknowledged lost.
func TestHistoryAcrossALeaderKillPasses(t *testing.T) {
	t.Parallel()
	h := record(t, 5*time.Second, func(c *etcdCluster) {
		time.Sleep(2 * time.Second)
		l := c.leader(t)
		t.Logf("killing the leader %s", l.name)
		l.kill()
	})
	r := check(t, h)
	if !r.Passed() {
		t.Fatalf("the history across a leader kill failed: %+v", r)
	}
}

// stale finds, for the get at index g, the value of a write W0 that returned
// before another write W of the same key was called, W having returned before
// the get was called: reading W0's value then is a stale read, whatever else ran.
func stale(ops []Op, g int) (string, bool) {
	get := ops[g]
	isWrite := func(op Op) bool {
		return op.Key == get.Key && op.Result == OK && (op.Kind == Put || op.Kind == CAS && op.OK)
	}
	for _, w := range ops {
		if !isWrite(w) || w.Return >= get.Call || w.Value == get.Value {
			continue
		}
		for _, w0 := range ops {
			if isWrite(w0) && w0.Return < w.Call && w0.Value != get.Value && w0.Value != w.Value {
				return w0.Value, true
			}
		}
	}
	return "", false
}

func TestStaleReadFails(t *testing.T) {
	t.Parallel()
	h := record(t, 3*time.Second, nil)
	if r := check(t, h); !r.Passed() {
		t.Fatalf("the untampered history failed: %+v", r)
	}
	tampered := false
	for i, op := range h.Ops {
		if op.Kind == Get && op.Result == OK && op.Found && op.Call < h.End/2 && op.Call > h.End/4 {
			if v, ok := stale(h.Ops, i); ok {
				t.Logf("tampering: %s read %q at %v, now reads the overwritten %q", op.Key, op.Value, time.Duration(op.Call), v)
				h.Ops[i].Value = v
				tampered = true
				break
			}
		}
	}
	if !tampered {
		t.Fatal("found no read to make stale in the history")
	}
	r := check(t, h)
	if r.Linearizable != "no" || r.Passed() {
		t.Fatalf("a stale read passed the check: %+v", r)
	}

	// The visualisation of the failing history is written, and survives the trip
	// through the checker pod's log that brings it to the e2e suite.
	html, err := os.ReadFile(r.Visualization)
	if err != nil || len(html) == 0 {
		t.Fatalf("no visualization of the failing history at %q (%d bytes): %v", r.Visualization, len(html), err)
	}
	if !strings.Contains(string(html), "<html") {
		t.Errorf("the visualization is not HTML: %.200q", html)
	}
	var log bytes.Buffer
	log.WriteString("level=info msg=\"workload done\"\n")
	if err := WriteArtifact(&log, "history.html", html); err != nil {
		t.Fatal(err)
	}
	log.WriteString("RESULT {}\n")
	got, err := ReadArtifact(log.String(), "history.html")
	if err != nil || !bytes.Equal(got, html) {
		t.Fatalf("the visualization read back from the log differs (%d bytes of %d): %v", len(got), len(html), err)
	}
	t.Logf("visualization: %d bytes of HTML, %d bytes of log", len(html), log.Len())
}

func TestArtifactInALog(t *testing.T) {
	data := bytes.Repeat([]byte("<div>a long line of porcupine's HTML</div>"), 5000)
	var log bytes.Buffer
	log.WriteString("some line\n")
	if err := WriteArtifact(&log, "other", []byte("not this one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteArtifact(&log, "history.html", data); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(log.String(), "\n") {
		if len(line) > 16<<10 {
			t.Fatalf("a line of %d bytes: a container runtime would split it", len(line))
		}
	}
	got, err := ReadArtifact(log.String(), "history.html")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes of %d: %v", len(got), len(data), err)
	}
	if got, err := ReadArtifact(log.String(), "other"); err != nil || string(got) != "not this one" {
		t.Errorf("the other artifact: %q, %v", got, err)
	}
	if _, err := ReadArtifact("RESULT {}\n", "history.html"); !errors.Is(err, ErrNoArtifact) {
		t.Errorf("a log without an artifact: %v, want ErrNoArtifact", err)
	}
}

func TestLostAcknowledgedWriteFails(t *testing.T) {
	t.Parallel()
	h := record(t, 3*time.Second, nil)

	// A register: the final read no longer sees the last acknowledged write.
	tampered := false
	for i, op := range h.Ops {
		if op.Kind == Get && op.Call > h.End && op.Found {
			if v, ok := stale(h.Ops, i); ok {
				t.Logf("tampering: the final read of %s saw %q, now sees the older %q", op.Key, op.Value, v)
				h.Ops[i].Value = v
				tampered = true
				break
			}
		}
	}
	if !tampered {
		t.Fatal("found no final read to tamper with")
	}
	r := check(t, h)
	if r.Linearizable != "no" || r.Passed() {
		t.Fatalf("a lost acknowledged put passed the check: %+v", r)
	}

	// An append: an acknowledged unique key missing at the end.
	h.Present = h.Present[1:]
	if r := check(t, h); r.AckedLost != 1 {
		t.Fatalf("an acknowledged append missing at the end gave ackedLost=%d, want 1", r.AckedLost)
	}
}

// The model on small histories written by hand: what a write of unknown outcome
// may and may not explain.
func TestModel(t *testing.T) {
	s := int64(time.Second)
	put := func(c int, v string, call, ret int64, res Outcome) Op {
		return Op{Client: c, Kind: Put, Key: "k", Value: v, Call: call, Return: ret, Result: res}
	}
	get := func(c int, v string, call, ret int64) Op {
		return Op{Client: c, Kind: Get, Key: "k", Value: v, Found: v != "", Call: call, Return: ret, Result: OK}
	}
	cas := func(c int, expect, v string, ok bool, call, ret int64, res Outcome) Op {
		return Op{Client: c, Kind: CAS, Key: "k", Value: v, Expect: expect, OK: ok, Call: call, Return: ret, Result: res}
	}
	for _, tc := range []struct {
		name string
		ops  []Op
		want string
	}{
		{"a read sees the acknowledged write", []Op{put(0, "a", 0, s, OK), get(1, "a", 2*s, 3*s)}, "yes"},
		{"a read before any write sees nothing", []Op{get(1, "", 0, s), put(0, "a", 2*s, 3*s, OK)}, "yes"},
		{"a read after an acknowledged write must see it", []Op{put(0, "a", 0, s, OK), get(1, "", 2*s, 3*s)}, "no"},
		{"a stale read is caught", []Op{put(0, "a", 0, s, OK), put(0, "b", 2*s, 3*s, OK), get(1, "a", 4*s, 5*s)}, "no"},
		{"concurrent writes may be read in either order", []Op{put(0, "a", 0, 3*s, OK), put(1, "b", s, 2*s, OK), get(2, "a", 4*s, 5*s)}, "yes"},
		{"a write of unknown outcome may have been applied", []Op{put(0, "a", 0, s, Unknown), get(1, "a", 2*s, 3*s)}, "yes"},
		{"a write of unknown outcome may never have been applied", []Op{put(0, "a", 0, s, Unknown), get(1, "", 2*s, 3*s)}, "yes"},
		{"a write of unknown outcome may be applied after its error", []Op{put(0, "a", 0, s, Unknown), put(1, "b", 2*s, 3*s, OK), get(2, "a", 4*s, 5*s)}, "yes"},
		{"a write of unknown outcome cannot be applied before its call", []Op{get(1, "a", 0, s), put(0, "a", 2*s, 3*s, Unknown)}, "no"},
		{"a failed read changes nothing", []Op{put(0, "a", 0, s, OK), {Client: 1, Kind: Get, Key: "k", Call: 2 * s, Return: 3 * s, Result: Failed}}, "yes"},
		{"a compare-and-set that held", []Op{put(0, "a", 0, s, OK), cas(1, "a", "b", true, 2*s, 3*s, OK), get(2, "b", 4*s, 5*s)}, "yes"},
		{"a compare-and-set cannot fail when its comparison holds", []Op{put(0, "a", 0, s, OK), cas(1, "a", "b", false, 2*s, 3*s, OK)}, "no"},
		{"a compare-and-set cannot succeed when its comparison fails", []Op{put(0, "a", 0, s, OK), cas(1, "x", "b", true, 2*s, 3*s, OK)}, "no"},
		{"a compare-and-set of unknown outcome whose comparison held may show", []Op{put(0, "a", 0, s, OK), cas(1, "a", "b", false, 2*s, 3*s, Unknown), get(2, "b", 4*s, 5*s)}, "yes"},
		{"a compare-and-set of unknown outcome whose comparison failed cannot show", []Op{put(0, "a", 0, s, OK), cas(1, "x", "b", false, 2*s, 3*s, Unknown), get(2, "b", 4*s, 5*s)}, "no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Check(&History{Ops: tc.ops, End: 10 * s}, CheckOptions{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if r.Linearizable != tc.want {
				t.Errorf("linearizable = %s, want %s", r.Linearizable, tc.want)
			}
		})
	}
}

// Only a refusal etcd guarantees (NOSPACE: the write is never applied) makes a
// write's outcome certain; any other error leaves it unknown.
func TestWriteFailed(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Outcome
	}{
		{"NOSPACE as the client returns it", rpctypes.ErrNoSpace, Failed},
		{"NOSPACE as the server sends it", rpctypes.ErrGRPCNoSpace, Failed},
		{"NOSPACE wrapped", fmt.Errorf("put: %w", rpctypes.ErrNoSpace), Failed},
		{"a timeout may have been applied", context.DeadlineExceeded, Unknown},
		{"a server-side timeout may have been applied", rpctypes.ErrTimeout, Unknown},
		{"a lost leader may have been applied", rpctypes.ErrNoLeader, Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := writeFailed(tc.err); got != tc.want {
				t.Errorf("writeFailed(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
}

// The result names what the clients were told when they were not served, the
// most frequent first, one line per message whatever the error's wrapping.
func TestResultCountsErrorsByMessage(t *testing.T) {
	w := worker{id: 0, cfg: &Config{Clients: 1}}
	for _, err := range []error{rpctypes.ErrGRPCNoLeader, rpctypes.ErrNoLeader, context.DeadlineExceeded, nil} {
		w.noteErr(err)
	}
	readBack := worker{id: 1, cfg: &Config{Clients: 1}}
	readBack.noteErr(rpctypes.ErrGRPCNoLeader)
	if readBack.errs != nil {
		t.Errorf("the read-back's retries were counted: %v", readBack.errs)
	}
	r, err := Check(&History{Errors: w.errs}, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []ErrorCount{{Message: "etcdserver: no leader", Count: 2}, {Message: "context deadline exceeded", Count: 1}}
	if fmt.Sprint(r.Errors) != fmt.Sprint(want) {
		t.Errorf("errors %v, want %v", r.Errors, want)
	}
	if !strings.Contains(r.String(), `error["etcdserver: no leader"]=2`) {
		t.Errorf("the result line %q does not name the errors", r.String())
	}
	many := map[string]int{}
	for i := range 2 * maxErrors {
		many[fmt.Sprintf("e%d", i)] = i + 1
	}
	if got := topErrors(many); len(got) != maxErrors || got[0].Count != 2*maxErrors {
		t.Errorf("top errors of %d messages: %v, want the %d most frequent", len(many), got, maxErrors)
	}
}

func TestLongestGap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		returns []int64
		want    time.Duration
	}{
		{"nothing succeeded: the whole run", nil, 10},
		{"a gap in the middle", []int64{1, 2, 8, 9}, 6},
		{"a gap at the start", []int64{5, 6, 7, 8, 9, 10}, 5},
		{"a gap at the end", []int64{1, 2, 3}, 7},
		{"returns out of order", []int64{9, 1, 3, 2}, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := longestGap(tc.returns, 0, 10); got != tc.want {
				t.Errorf("longestGap = %d, want %d", got, tc.want)
			}
		})
	}
}

// The watch check counts an acknowledged key its watch never delivered.
func TestWatchCountsAMissedKey(t *testing.T) {
	t.Parallel()
	c := startEtcd(t, 1)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(t.Context(), "/w/a/before", "1"); err != nil {
		t.Fatal(err)
	}
	w := newWatcher(t.Context(), cli, "/w/a/", nil, nil)
	for _, k := range []string{"/w/a/1", "/w/a/2"} {
		if _, err := cli.Put(t.Context(), k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	missed, outOfOrder, compacted := w.finish([]string{"/w/a/1", "/w/a/2", "/w/a/never-written"}, nil, 2*time.Second)
	if missed != 1 || outOfOrder != 0 || compacted != 0 {
		t.Errorf("missed %d, out of order %d, compacted %d; want 1, 0 and 0", missed, outOfOrder, compacted)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen["/w/a/before"] {
		t.Error("the watch delivered a key written before it started")
	}
}

// A watch is made again only when it has delivered nothing for a while and an
// acknowledged append above its last event waits: a quiet time, or appends it
// has all delivered, are no stall.
func TestAWatchStallsOnlyBehindAnAcknowledgedAppend(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name              string
		lastRev, ackedRev int64
		silentFor         time.Duration
		want              bool
	}{
		{name: "behind and silent", lastRev: 10, ackedRev: 12, silentFor: watchStallAfter, want: true},
		{name: "behind, an event a moment ago", lastRev: 10, ackedRev: 12, silentFor: watchStallAfter - time.Second},
		{name: "silent, every acknowledged append delivered", lastRev: 12, ackedRev: 12, silentFor: time.Hour},
		{name: "silent, past the newest acknowledged append", lastRev: 14, ackedRev: 12, silentFor: time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watcher{lastRev: tc.lastRev, ackedRev: tc.ackedRev, lastEvent: now.Add(-tc.silentFor)}
			if got := w.stalled(now); got != tc.want {
				t.Errorf("stalled = %v, want %v", got, tc.want)
			}
		})
	}
}

// A watch that must resume below a compaction (the operator compacts to recover
// from NOSPACE) goes on from the compaction instead of retrying for ever; the
// keys below it are counted apart, not as missed, and the ones after are seen.
func TestWatchResumesPastACompaction(t *testing.T) {
	t.Parallel()
	c := startEtcd(t, 1)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	put := func(k string) int64 {
		resp, err := cli.Put(t.Context(), k, "1")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	r1, r2 := put("/w/a/1"), put("/w/a/2")
	if _, err := cli.Compact(t.Context(), r2); err != nil {
		t.Fatal(err)
	}
	r3 := put("/w/a/3")
	// A watcher whose last event was before all three, as after a lost
	// connection: its resume point is compacted.
	ctx, cancel := context.WithCancel(t.Context())
	w := &watcher{seen: map[string]bool{}, done: make(chan struct{}), cancel: cancel, lastRev: r1 - 1}
	go w.run(ctx, cli, "/w/a/")
	missed, outOfOrder, compacted := w.finish([]string{"/w/a/1", "/w/a/2", "/w/a/3"}, []int64{r1, r2, r3}, 5*time.Second)
	if missed != 0 || outOfOrder != 0 || compacted != 1 {
		t.Errorf("missed %d, out of order %d, compacted %d; want 0, 0 and 1 (/w/a/1 below the compaction at %d)", missed, outOfOrder, compacted, r2)
	}
}

// Two of three members killed: no quorum, every write's outcome unknown, until
// they come back on their data; nothing acknowledged may be lost.
func TestHistoryAcrossAQuorumLossPasses(t *testing.T) {
	t.Parallel()
	h := record(t, 8*time.Second, func(c *etcdCluster) {
		time.Sleep(2 * time.Second)
		for _, m := range c.members[:2] {
			m.kill()
		}
		t.Log("killed 2 of 3 members")
		time.Sleep(3 * time.Second)
		for _, m := range c.members[:2] {
			m.start(t)
		}
		t.Log("restarted them on their data")
	})
	r := check(t, h)
	if !r.Passed() {
		t.Fatalf("the history across a quorum loss failed: %+v", r)
	}
	if r.Failed+r.Indeterminate == 0 {
		t.Errorf("no operation failed or timed out: the workload never met the quorum loss (%+v)", r)
	}
}

func TestTheWatchIsHeldOnlyToKeysTheReadBackFound(t *testing.T) {
	for _, tc := range []struct {
		name          string
		h             History
		wantKeys      []string
		wantRevisions []int64
	}{
		{
			name:          "a key lost by a restore to an older revision is not waited for",
			h:             History{Appended: []string{"a", "b", "c"}, AppendedRevisions: []int64{5, 6, 7}, Present: []string{"a", "c"}},
			wantKeys:      []string{"a", "c"},
			wantRevisions: []int64{5, 7},
		},
		{
			name:          "every key present is every key waited for",
			h:             History{Appended: []string{"a", "b"}, AppendedRevisions: []int64{5, 6}, Present: []string{"b", "a", "x"}},
			wantKeys:      []string{"a", "b"},
			wantRevisions: []int64{5, 6},
		},
		{
			name:          "without a read-back every acknowledged key is waited for",
			h:             History{Appended: []string{"a", "b"}, AppendedRevisions: []int64{5, 6}, ReadBackErr: "no answer"},
			wantKeys:      []string{"a", "b"},
			wantRevisions: []int64{5, 6},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, revisions := stillPresent(&tc.h)
			if !slices.Equal(keys, tc.wantKeys) || !slices.Equal(revisions, tc.wantRevisions) {
				t.Fatalf("stillPresent = %v %v, want %v %v", keys, revisions, tc.wantKeys, tc.wantRevisions)
			}
		})
	}
}
