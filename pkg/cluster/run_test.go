package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.etcd.io/etcd/api/v3/etcdserverpb"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// waitFor polls cond until it holds or the deadline passes: the goroutine
// under test runs on its own, and no test sleeps a fixed time to wait for it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func passCount(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "etcd_operator_cluster_reconcile_duration" {
			var n uint64
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
			return n
		}
	}
	return 0
}

func (f *fakeEtcd) set(fn func(*fakeEtcd)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func TestUpdateAndPokeNeverBlock(t *testing.T) {
	f := newFixture(t, newTestCluster())
	c := f.c // no goroutine reads its channels
	done := make(chan struct{})
	var last *api.EtcdCluster
	go func() {
		defer close(done)
		for i := range 1000 {
			cl := f.cl.DeepCopy()
			cl.ResourceVersion = fmt.Sprint(i)
			c.Update(cl)
			c.Poke()
			last = cl
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Update or Poke blocked")
	}
	if got := <-c.updates; got != last {
		t.Errorf("the update waiting is version %s, want the latest %s", got.ResourceVersion, last.ResourceVersion)
	}
	if len(c.pokes) != 1 {
		t.Errorf("%d pokes queued, want 1", len(c.pokes))
	}
}

// TestGoroutine runs a cluster's goroutine: its first pass, a pass triggered
// by a pod event long before the tick, an update, and Delete.
func TestGoroutine(t *testing.T) {
	seed := "example-seed"
	f := newFixture(t, newTestCluster(withSize(2)))
	f.pod(seed, pendingFor(time.Second)) // membership unknown, seed starting: the first pass waits
	reg := prometheus.NewRegistry()
	cfg := f.c.cfg
	cfg.Metrics = NewMetrics(reg)
	cfg.ReconcileInterval = time.Hour // only events can trigger passes here
	c := New(t.Context(), cfg, f.cl)
	t.Cleanup(c.Stop)

	waitFor(t, "the first pass", func() bool { return passCount(t, reg) == 1 })
	if w := f.etcd.Calls(true); len(w) != 0 {
		t.Fatalf("first pass changed etcd: %v", w)
	}

	// The seed runs and is Ready: the informer's event pokes the cluster.
	f.etcd.set(func(e *fakeEtcd) {
		m := f.member(seed)
		e.members = []*etcdserverpb.Member{{ID: m.ID, Name: seed, PeerURLs: []string{m.PeerURL()}, ClientURLs: []string{m.ClientURL()}}}
		e.leader = m.ID
	})
	f.setReady(seed, true)
	c.Poke()
	waitFor(t, "a joining pod is made after the pod event", func() bool {
		for _, a := range f.kube.Actions() {
			if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
				return true
			}
		}
		return false
	})

	paused := f.cl.DeepCopy()
	paused.Generation, paused.ResourceVersion = 2, "2"
	paused.Spec.Paused = true
	c.Update(paused)
	waitFor(t, "the update is reflected in status", func() bool {
		s := f.writtenStatus()
		return s != nil && s.ControlPaused && s.ObservedGeneration == 2
	})

	c.Stop()
	c.Stop() // twice is fine
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done did not close after Delete")
	}
	if n := testutil.CollectAndCount(reg); n != 0 {
		t.Errorf("%d series left after the goroutine stopped", n)
	}
}

// blockingEtcd hangs in ClusterHealth until its context ends.
type blockingEtcd struct {
	*fakeEtcd
	entered chan struct{}
}

func (b blockingEtcd) ClusterHealth(ctx context.Context, cc etcdutil.ClientConfig) (etcdutil.Health, error) {
	close(b.entered)
	<-ctx.Done()
	return etcdutil.Health{}, ctx.Err()
}

func TestDeleteCancelsAPassInFlight(t *testing.T) {
	f := newFixture(t, newTestCluster())
	f.pod(memberA)
	cfg := f.c.cfg
	b := blockingEtcd{fakeEtcd: f.etcd, entered: make(chan struct{})}
	cfg.Etcd = b
	c := New(t.Context(), cfg, f.cl)
	select {
	case <-b.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the pass never asked etcd")
	}
	c.Stop()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Delete did not interrupt the etcd call")
	}
}

func TestTickSlowsDownAtRestAndComesBackOnAnyEvent(t *testing.T) {
	cfg := Config{ReconcileInterval: 8 * time.Second, MaxIdleInterval: 30 * time.Second}
	tests := []struct {
		name   string
		cur    time.Duration
		atRest bool
		want   time.Duration
	}{
		{name: "a pass at rest doubles the tick", cur: 8 * time.Second, atRest: true, want: 16 * time.Second},
		{name: "the tick of a cluster at rest stops at the longest", cur: 16 * time.Second, atRest: true, want: 30 * time.Second},
		{name: "the longest tick stays", cur: 30 * time.Second, atRest: true, want: 30 * time.Second},
		{name: "a pass with something to do brings the tick back", cur: 30 * time.Second, atRest: false, want: 8 * time.Second},
		{name: "an event while ticking fast keeps the tick", cur: 8 * time.Second, atRest: false, want: 8 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tickAfter(tt.cur, tt.atRest, &cfg); got != tt.want {
				t.Errorf("tickAfter(%v, %v) = %v, want %v", tt.cur, tt.atRest, got, tt.want)
			}
		})
	}
	if got := (Config{ReconcileInterval: time.Minute}).withDefaults().MaxIdleInterval; got != time.Minute {
		t.Errorf("a reconcile interval longer than the default idle tick: idle tick %v, want the reconcile interval", got)
	}
}

func TestPacer(t *testing.T) {
	now := testStart
	p := pacer{minInterval: 500 * time.Millisecond}
	if got := p.earliest(now, true); !got.Equal(now) {
		t.Errorf("first pass at %v, want now", got)
	}
	p.lastPass = now
	if got := p.earliest(now.Add(100*time.Millisecond), true); !got.Equal(now.Add(500 * time.Millisecond)) {
		t.Errorf("a poke right after a pass runs at %v, want lastPass+500ms", got)
	}
	p.backoffUntil = now.Add(4 * time.Second)
	if got := p.earliest(now.Add(time.Second), true); !got.Equal(p.backoffUntil) {
		t.Errorf("a poke during backoff runs at %v, want the end of the backoff", got)
	}
	if got := p.earliest(now.Add(time.Second), false); !got.Equal(now.Add(time.Second)) {
		t.Errorf("a spec change during backoff runs at %v, want at once", got)
	}

}

func TestScheduler(t *testing.T) {
	s := scheduler{timer: time.NewTimer(time.Hour)}
	defer s.timer.Stop()
	now := time.Now()
	s.at(now.Add(time.Hour), now)
	s.at(now.Add(time.Minute), now)
	s.at(now.Add(2*time.Hour), now)
	if !s.due.Equal(now.Add(time.Minute)) {
		t.Errorf("due = %v, want the earliest request", s.due)
	}
	if s.fire(now) {
		t.Error("fired before it was due")
	}
	if !s.fire(now.Add(time.Minute)) || !s.due.IsZero() {
		t.Error("did not fire when due")
	}
}

// panickyEtcd panics in its first health check, then answers.
type panickyEtcd struct {
	*fakeEtcd
	calls atomic.Int32
}

func (p *panickyEtcd) ClusterHealth(ctx context.Context, cc etcdutil.ClientConfig) (etcdutil.Health, error) {
	if p.calls.Add(1) == 1 {
		panic("a bug met by one cluster")
	}
	return p.fakeEtcd.ClusterHealth(ctx, cc)
}

// A panic in one cluster's pass is reported and retried; it stops neither
// that cluster's goroutine nor, through the process, any other cluster.
func TestAPanicInAPassIsReportedAndRetried(t *testing.T) {
	f := newFixture(t, newTestCluster(withSize(4)))
	f.withMembers(memberA, memberB, memberC)
	f.pod(memberA)
	f.pod(memberB)
	f.pod(memberC)
	cfg := f.c.cfg
	etcd := &panickyEtcd{fakeEtcd: f.etcd}
	cfg.Etcd = etcd
	cfg.MinBackoff = time.Millisecond
	c := New(t.Context(), cfg, f.cl)
	t.Cleanup(c.Stop)
	waitFor(t, "the pass after the panic asks etcd again", func() bool { return etcd.calls.Load() >= 2 })
	var warned bool
	for _, e := range f.events() {
		warned = warned || strings.HasPrefix(e, "Warning InternalError internal error in the operator")
	}
	if !warned {
		t.Error("the panic was not reported as an InternalError event")
	}
	select {
	case <-c.Done():
		t.Fatal("the goroutine exited after the panic")
	default:
	}
}

// A panic in the goroutine outside a pass (here, a nil object handed to
// Update) is reported, and the goroutine starts its loop again.
func TestAPanicOutsideAPassRestartsTheLoop(t *testing.T) {
	f := newFixture(t, newTestCluster())
	f.withMembers(memberA, memberB, memberC)
	f.pod(memberA)
	f.pod(memberB)
	f.pod(memberC)
	cfg := f.c.cfg
	cfg.MinBackoff = time.Millisecond
	c := New(t.Context(), cfg, f.cl)
	t.Cleanup(c.Stop)
	waitFor(t, "the first pass writes the status", func() bool { return f.statusWrites() >= 1 })
	c.Update(nil)
	waitFor(t, "the panic is reported", func() bool {
		for _, e := range f.events() {
			if strings.HasPrefix(e, "Warning InternalError internal error in the operator") && strings.Contains(e, "the cluster's goroutine panicked") {
				return true
			}
		}
		return false
	})
	// The restarted loop takes the next spec and acts on it.
	edited := f.cl.DeepCopy()
	edited.Generation = 2
	edited.Spec.Size = 5
	c.Update(edited)
	waitFor(t, "the restarted loop adds a member for size 5", func() bool {
		for _, a := range f.kube.Actions() {
			if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
				return true
			}
		}
		return false
	})
	select {
	case <-c.Done():
		t.Fatal("the goroutine exited after the panic")
	default:
	}
}

// TestANewClustersMembersBecomingReadyAreFollowedWithoutPacing starts a
// cluster whose three members were made together and become Ready one after
// the other: each Ready pod's event must bring a pass at once, so that the
// status says 3 ready as soon as the pods are, however long the pacing
// between other passes.
func TestANewClustersMembersBecomingReadyAreFollowedWithoutPacing(t *testing.T) {
	names := []string{"example-a", "example-b", "example-c"}
	f := newFixture(t, newTestCluster(withSize(3), neverAvailable))
	f.withMembers(names...)
	for _, n := range names {
		f.pod(n, notReady)
	}
	reg := prometheus.NewRegistry()
	cfg := f.c.cfg
	cfg.Metrics = NewMetrics(reg)
	cfg.ReconcileInterval = time.Hour
	cfg.MinPassInterval = time.Hour // only an unpaced pass can follow an event here
	c := New(t.Context(), cfg, f.cl)
	t.Cleanup(c.Stop)
	waitFor(t, "the first pass", func() bool { return passCount(t, reg) == 1 })

	for i, n := range names {
		f.setReady(n, true)
		c.Poke()
		waitFor(t, fmt.Sprintf("the status to say %d ready", i+1), func() bool {
			s := f.writtenStatus()
			return s != nil && len(s.Members.Ready) == i+1
		})
	}
}

func TestEventPace(t *testing.T) {
	const paced = 500 * time.Millisecond
	for _, tc := range []struct {
		name string
		mods []snapMod
		want time.Duration
	}{
		{name: "a new cluster whose members start is followed at once", mods: mods(notYetAvailable, podIs(memberB, notReady), podIs(memberC, notReady)), want: startingPace},
		{name: "a new cluster with one member left to be ready is followed at once", mods: mods(notYetAvailable, podIs(memberC, notReady)), want: startingPace},
		{name: "a new cluster whose members are all ready is paced", mods: mods(notYetAvailable), want: paced},
		{name: "a new cluster whose membership is not known yet is paced", mods: mods(notYetAvailable, noMembership, podIs(memberA, notReady)), want: paced},
		{name: "a cluster that was available is paced while a member starts again", mods: mods(podIs(memberC, notReady)), want: paced},
		{name: "a cluster at rest is paced", want: paced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := eventPace(testSnapshot(tc.mods...), paced); got != tc.want {
				t.Errorf("eventPace = %v, want %v", got, tc.want)
			}
		})
	}
}
