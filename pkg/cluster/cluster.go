// Package cluster runs one EtcdCluster: a long-lived goroutine per cluster
// whose passes each observe the cluster, decide one action and act on it.
//
// The goroutine owns everything it records (the spec in force, the membership
// it learnt, its expectations, the problems it announced); the controller
// talks to it only through Update, Poke and Stop, none of which ever blocks.
// See decide.go for the algorithm.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	versioned "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
)

// Defaults of Config.
const (
	// DefaultReconcileInterval is the original's tick. Pod events and spec
	// changes wake the loop earlier, so the tick only catches what no event
	// announces (a member that became healthy inside etcd, a timeout).
	DefaultReconcileInterval = 8 * time.Second
	// DefaultPendingTimeout bounds how long a member pod may stay Pending
	// (unschedulable, image pull, DNS init container), and an upgraded
	// member may take to be Ready again, before it counts as failed.
	DefaultPendingTimeout = 5 * time.Minute
	// DefaultMinPassInterval keeps a flapping pod from spinning the loop: pod
	// events and ticks never start passes closer together than this.
	DefaultMinPassInterval = 500 * time.Millisecond
	// DefaultExpectationTimeout is how long the loop waits for a pod it created
	// to show up in the pod lister. Informers deliver in milliseconds; the
	// timeout only matters if the pod vanished before it was ever seen.
	DefaultExpectationTimeout = 2 * time.Minute
	// DefaultMaxIdleInterval is the longest tick of a cluster at rest: each
	// pass that finds nothing to do doubles the tick up to it, and any event
	// or spec change brings it back to ReconcileInterval. Everything that
	// needs a pass shows as an event (a pod that fails or stops being Ready,
	// a spec edit), except day-2 care, which reads etcd every minute.
	DefaultMaxIdleInterval = 30 * time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the retry delay after a
	// failed pass (API error, etcd unreachable, missing TLS secret).
	DefaultMinBackoff = 1 * time.Second
	DefaultMaxBackoff = 30 * time.Second
)

// passTimeout bounds one pass, so that an API call that hangs cannot stall
// the cluster for good; etcd calls have their own 5 s timeouts.
const passTimeout = 2 * time.Minute

// Config is what every Cluster shares.
type Config struct {
	KubeClient kubernetes.Interface
	EtcdClient versioned.Interface
	// Pods, Claims and ServiceLister read the cluster's pods,
	// PersistentVolumeClaims and services from the controller's shared
	// informers (label app=etcd); Pods and Claims are indexed by
	// k8sutil.IndexByCluster, so that a pass reads its cluster's objects
	// only. Their caches must have synced before New is called: an empty
	// cache looks like a cluster that lost its pods. Claims may be nil.
	// ServiceLister's services may hold their metadata only (the
	// controller's cache keeps no more): observeServices reads no more.
	Pods          cache.Indexer
	Claims        cache.Indexer
	ServiceLister corelisters.ServiceLister
	// BudgetLister reads the clusters' PodDisruptionBudgets; nil when the
	// operator may not manage them (they are then not made).
	BudgetLister policylisters.PodDisruptionBudgetLister
	// Recorder records events on the EtcdCluster. The objects handed to it
	// carry their apiVersion and kind, so its scheme need not know our types.
	Recorder record.EventRecorder
	// Metrics may be nil (no metrics).
	Metrics *Metrics
	// Status writes the EtcdCluster's status; nil means one of the cluster's
	// own (statusutil.ForClusters).
	Status *statusutil.ClusterWriter
	// Etcd talks to etcd; nil means the real thing (NewEtcdAPI).
	Etcd EtcdAPI
	// ReconcileInterval is the tick of the diff loop; pod events wake it earlier.
	ReconcileInterval time.Duration
	// MaxIdleInterval is the longest tick of a cluster at rest (see
	// DefaultMaxIdleInterval); never shorter than ReconcileInterval.
	MaxIdleInterval time.Duration
	// PendingTimeout is how long a member pod may stay Pending, and an
	// upgraded member may take to be Ready, before it counts as failed.
	PendingTimeout time.Duration
	// MinPassInterval is the least time between two passes started by pod
	// events or ticks (spec changes are only held by this, not by backoff).
	MinPassInterval time.Duration
	// ExpectationTimeout is how long to wait for a created pod to appear in
	// Pods before treating it as missing.
	ExpectationTimeout time.Duration
	// MembershipWait is the init container that holds a joining member back
	// until it is added (join.go). Its Image, the operator's own, is
	// required; its Timeout defaults to PendingTimeout.
	MembershipWait k8sutil.MembershipWait
	// MinBackoff and MaxBackoff bound the retry delay after a failed pass.
	MinBackoff, MaxBackoff time.Duration
	Log                    *logrus.Entry

	// MayAct, when set, is asked right before a pass changes anything (its
	// action, the status): an error means this process may no longer act as
	// the leader (operatorrun.Fence.Held), and the pass ends with it instead.
	MayAct func() error
}

func (cfg Config) withDefaults() Config {
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = DefaultReconcileInterval
	}
	if cfg.MaxIdleInterval <= 0 {
		cfg.MaxIdleInterval = DefaultMaxIdleInterval
	}
	cfg.MaxIdleInterval = max(cfg.MaxIdleInterval, cfg.ReconcileInterval)
	if cfg.PendingTimeout <= 0 {
		cfg.PendingTimeout = DefaultPendingTimeout
	}
	if cfg.MinPassInterval <= 0 {
		cfg.MinPassInterval = DefaultMinPassInterval
	}
	if cfg.ExpectationTimeout <= 0 {
		cfg.ExpectationTimeout = DefaultExpectationTimeout
	}
	if cfg.MembershipWait.Timeout <= 0 {
		cfg.MembershipWait.Timeout = cfg.PendingTimeout
	}
	if cfg.MembershipWait.PullPolicy == "" {
		cfg.MembershipWait.PullPolicy = corev1.PullIfNotPresent
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	if cfg.Etcd == nil {
		cfg.Etcd = NewEtcdAPI()
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{} // drops events
	}
	if cfg.Log == nil {
		cfg.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	if cfg.Status == nil {
		cfg.Status = statusutil.ForClusters(cfg.EtcdClient, cfg.Recorder, cfg.Log)
	}
	return cfg
}

// Validate says what a Config lacks to run clusters.
func (cfg Config) Validate() error {
	if cfg.MembershipWait.Image == "" {
		return errors.New("no image for the wait-membership init container of joining members: run the operator in a pod (its own image is used) or give -join-image")
	}
	return nil
}

// Cluster is the goroutine that owns one EtcdCluster.
type Cluster struct {
	cfg       Config
	log       *logrus.Entry
	name      string
	namespace string

	updates  chan *api.EtcdCluster
	pokes    chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	// ctx is the goroutine's; Stop cancels it, which ends whatever API or
	// etcd call is in flight (cancelled by Stop itself rather than by a
	// goroutine of its own per cluster watching stop).
	ctx    context.Context
	cancel context.CancelFunc

	// Everything below belongs to the run goroutine (or to a test driving
	// passes directly); nothing else reads or writes it.

	// now and randomSuffix are replaced by tests.
	now          func() time.Time
	randomSuffix func() string

	// latest is the newest object seen, for its resourceVersion, its status
	// as the server holds it, and the newest spec. Never modified in place:
	// it may be the informer's.
	latest *api.EtcdCluster
	// spec is the newest object whose spec passed validation: the spec in
	// force. nil until one does. specSeen is the generation of the newest
	// spec looked at, valid or not: a new spec is one of another generation,
	// whatever object it came with.
	spec     *api.EtcdCluster
	specSeen int64

	// members caches etcd's membership (see membershipCache).
	members membershipCache
	// tlsConfig is the client TLS of a secure-client cluster, read from the
	// operator secret and kept until etcd stops answering with it.
	tlsConfig *tls.Config
	// clients are the etcd clients kept across passes; podsSeen is the
	// running member pods they were made for (names, UIDs, addresses): a
	// pod replaced under the same name has another address, and the
	// clients are closed and dialled again.
	clients  *etcdutil.ClientCache
	podsSeen string
	// certs are the TLS secrets as last read for their check (certs.go).
	certs certCache
	// etcdReadAt is when etcd's view was last read: a cluster at rest is
	// looked at every etcdObserveInterval for its day-2 care.
	etcdReadAt time.Time
	// atRest tells whether the last pass found nothing to do: the loop then
	// ticks less often.
	atRest bool

	// Records of the goroutine's own recent actions that no observation
	// can tell (see expect.go).
	podExpect     *podExpectation
	upgradeExpect *upgradeExpectation
	failedUpgrade *failedUpgrade
	replaced      map[string]replacement
	// recovering is a disaster recovery under way; lastRevision is the
	// highest store revision seen since the goroutine started, the measure
	// of what a recovery may lose.
	recovering   *recovering
	lastRevision int64
	// restartWindows count the kubelet's restarts of each member pod's etcd
	// container within the repair ladder's window, by pod name and UID; quorumLoss
	// is the quorum this goroutine saw lost. Both start afresh when the
	// operator restarts: the ladder then counts fewer restarts and the grace
	// of a disaster recovery starts again, the safe side of each.
	restartWindows map[string]restartWindow
	quorumLoss     *quorumLoss
	// endedPods are the members whose ended pods this goroutine deleted
	// to restart them in place (restartFollowsFailure).
	endedPods map[string]bool
	// waitingSince is when the passes started waiting, zero when the last
	// one did not wait (noteWait).
	waitingSince time.Time

	// unstored is the status the last pass derived when the server answered
	// its write without storing it: a role without etcdclusters/status on a
	// CRD that serves the subresource (the original's roles on example/crd),
	// or a CRD whose schema prunes status. nil while the server holds the
	// status. The passes keep their progress in the status (the phase, that
	// the cluster was once available, the members last listed, maintenance
	// done), and no observation can tell it again: without this record a
	// new cluster would stay at its first member. The server's status wins
	// again as soon as it changes or a write is stored.
	unstored *api.ClusterStatus

	// announced holds the keys of the problems announced with a Warning
	// event, with when each was last seen.
	announced map[string]announcement

	// errBackoff spaces retries after failed passes; waitBackoff spaces
	// polls of etcd while waiting for it to accept a change.
	errBackoff  failure.Backoff
	waitBackoff failure.Backoff
}

// membershipCache is etcd's membership as this goroutine last read it from
// the leader or changed it. etcd is the truth: the cache saves a dial per
// pass for a cluster at rest, and every change that depends on it has decide
// read it again first. A change whose outcome is unknown forgets it.
type membershipCache struct {
	set etcdutil.MemberSet // nil: unknown
}

func (m *membershipCache) learn(set etcdutil.MemberSet) { m.set = set.Clone() }
func (m *membershipCache) forget()                      { m.set = nil }
func (m *membershipCache) known() etcdutil.MemberSet {
	if m.set == nil {
		return nil
	}
	return m.set.Clone()
}

// New starts the goroutine of a cluster. Its calls end when ctx (the
// controller's) ends or when it is stopped.
func New(ctx context.Context, cfg Config, cl *api.EtcdCluster) *Cluster {
	c := newCluster(ctx, cfg, cl)
	go c.run()
	return c
}

// newCluster builds a Cluster without starting its goroutine; tests drive
// passes on it directly.
func newCluster(ctx context.Context, cfg Config, cl *api.EtcdCluster) *Cluster {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(ctx)
	c := &Cluster{
		ctx:       ctx,
		cancel:    cancel,
		cfg:       cfg,
		name:      cl.Name,
		namespace: cl.Namespace,
		log: cfg.Log.WithFields(logrus.Fields{
			"cluster-name":      cl.Name,
			"cluster-namespace": cl.Namespace,
			"pkg":               "cluster",
		}),
		updates:        make(chan *api.EtcdCluster, 1),
		pokes:          make(chan struct{}, 1),
		stop:           make(chan struct{}),
		done:           make(chan struct{}),
		now:            time.Now,
		clients:        &etcdutil.ClientCache{},
		randomSuffix:   func() string { return utilrand.String(10) },
		announced:      map[string]announcement{},
		replaced:       map[string]replacement{},
		restartWindows: map[string]restartWindow{},
		errBackoff:     failure.Backoff{Min: cfg.MinBackoff, Max: cfg.MaxBackoff},
		waitBackoff:    failure.Backoff{Min: cfg.MinPassInterval, Max: min(etcdHealthInterval, cfg.ReconcileInterval)},
	}
	c.take(cl)
	return c
}

// Update hands the goroutine the latest version of the object. It never blocks: an
// update not yet taken is replaced by the newer one.
func (c *Cluster) Update(cl *api.EtcdCluster) {
	for {
		select {
		case c.updates <- cl:
			return
		default:
		}
		select {
		case <-c.updates:
		default:
		}
	}
}

// Poke wakes the goroutine for a pass, without blocking.
func (c *Cluster) Poke() {
	select {
	case c.pokes <- struct{}{}:
	default:
	}
}

// Stop ends the goroutine; it does not touch the cluster. Kubernetes garbage
// collection removes a deleted cluster's pods, services and claims through
// their owner references.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		close(c.stop)
		c.cancel()
	})
}

// Done is closed when the goroutine has exited.
func (c *Cluster) Done() <-chan struct{} { return c.done }

// run is the goroutine. A panic outside a pass (safePass has its own) is
// reported like one inside, and the loop starts again after the error
// backoff from what it observes, so that the cluster stays looked after.
func (c *Cluster) run() {
	defer c.exited()
	for {
		err := failure.Safely(c.log, "the cluster's goroutine", func() { c.loop(c.ctx) })
		if err == nil || !c.backOffAfterPanic(err) {
			return // stopped
		}
	}
}

// backOffAfterPanic reports a panic of the loop and waits out the error
// backoff; false means the goroutine was stopped meanwhile.
func (c *Cluster) backOffAfterPanic(err error) bool {
	c.recovered(err)
	t := time.NewTimer(c.errBackoff.Next())
	defer t.Stop()
	select {
	case <-c.stop:
		return false
	case <-t.C:
		return true
	}
}

// exited ends what the goroutine held, and says it has exited.
func (c *Cluster) exited() {
	c.cancel()
	c.clients.Close()
	c.cfg.Metrics.forget(c.namespace, c.name)
	close(c.done)
}

// loop runs passes until the goroutine is stopped. Passes are scheduled
// rather than run on every signal: the earliest wanted time wins, pod events
// and ticks are held back by MinPassInterval and by the error backoff, spec
// changes only by MinPassInterval (a user fixing a problem should not wait
// out a backoff).
//
// The tick is ReconcileInterval while the cluster changes and doubles after
// each pass that finds it at rest, up to MaxIdleInterval: a thousand idle
// clusters then cost a few passes a minute each, and any event or spec change
// brings the tick back at once.
func (c *Cluster) loop(ctx context.Context) {
	// The loop's state lives on the heap and each signal is handled in a
	// call of its own: the goroutine spends its life parked in the select
	// below, and the less its frames take there, the smaller the stack it
	// keeps (the runtime halves a stack only while a quarter of it is
	// unused: under about 1.2 KiB parked for 4 KiB instead of 8 KiB).
	l := c.newLoop()
	defer l.stop()

	for {
		select {
		case <-c.stop:
			return
		case cl := <-c.updates:
			c.updated(l, cl)
		case <-c.pokes:
			c.poked(l)
		case <-l.ticker.C:
			c.ticked(l)
		case <-l.timer.C:
			if c.due(ctx, l) {
				return
			}
		}
	}
}

// loopState is what loop keeps between signals: the tick, the time of the
// next pass and what paces passes.
type loopState struct {
	interval time.Duration
	ticker   *time.Timer
	scheduler
	pacer
}

// newLoop is the state of a loop whose first pass runs at once.
func (c *Cluster) newLoop() *loopState {
	l := &loopState{interval: c.cfg.ReconcileInterval, pacer: pacer{minInterval: c.cfg.MinPassInterval}}
	l.ticker = time.NewTimer(l.interval)
	l.timer = time.NewTimer(time.Hour)
	l.at(c.now(), c.now())
	return l
}

func (l *loopState) stop() {
	l.ticker.Stop()
	l.timer.Stop()
}

// busy brings the tick back to ReconcileInterval.
func (l *loopState) busy(cfg *Config) {
	if next := tickAfter(l.interval, false, cfg); next != l.interval {
		l.interval = next
		l.ticker.Reset(l.interval)
	}
}

func (c *Cluster) updated(l *loopState, cl *api.EtcdCluster) {
	if c.take(cl) {
		l.busy(&c.cfg)
		l.at(l.earliest(c.now(), false), c.now())
	}
}

func (c *Cluster) poked(l *loopState) {
	l.busy(&c.cfg)
	l.at(l.earliest(c.now(), true), c.now())
}

func (c *Cluster) ticked(l *loopState) {
	l.ticker.Reset(l.interval)
	l.at(l.earliest(c.now(), true), c.now())
}

// due runs the pass whose time has come, if one has, and schedules the
// next; it tells whether the goroutine was stopped meanwhile.
func (c *Cluster) due(ctx context.Context, l *loopState) (stopped bool) {
	if !l.fire(c.now()) {
		return false
	}
	pctx, cancelPass := context.WithTimeout(ctx, passTimeout)
	requeue, err := c.passAside(pctx)
	cancelPass()
	if ctx.Err() != nil {
		return true
	}
	now := c.now()
	l.lastPass = now
	if err != nil {
		l.busy(&c.cfg)
		l.backoffUntil = now.Add(c.errBackoff.Next())
		l.at(l.backoffUntil, now)
		return false
	}
	c.errBackoff.Reset()
	l.backoffUntil = time.Time{}
	if requeue > 0 {
		l.at(now.Add(requeue), now)
	}
	if next := tickAfter(l.interval, c.atRest && requeue == 0, &c.cfg); next != l.interval {
		l.interval = next
		l.ticker.Reset(l.interval)
	}
	return false
}

// tickAfter is the tick that follows one of cur: doubled after a pass that
// found the cluster at rest, up to MaxIdleInterval; ReconcileInterval as soon
// as anything happens.
func tickAfter(cur time.Duration, atRest bool, cfg *Config) time.Duration {
	if !atRest {
		return cfg.ReconcileInterval
	}
	return min(max(2*cur, cfg.ReconcileInterval), cfg.MaxIdleInterval)
}

// passAside runs a pass on a goroutine of its own and waits for it, so that
// the pass still has the cluster to itself. A pass grows its goroutine's
// stack to what its deepest call needs (an etcd dial through gRPC, a status
// write through client-go), and Go keeps a grown stack until garbage
// collections halve it again, one halving each: on the long-lived goroutine
// an idle cluster would keep most of that between passes many seconds apart.
// The helper's stack goes with it.
func (c *Cluster) passAside(ctx context.Context) (time.Duration, error) {
	type result struct {
		requeue time.Duration
		err     error
	}
	done := make(chan result, 1)
	go func() {
		requeue, err := c.safePass(ctx)
		done <- result{requeue, err}
	}()
	r := <-done
	return r.requeue, r.err
}

// safePass runs a pass and turns a panic into a reported problem, retried
// with backoff: a bug met by one cluster must not stop every other cluster
// of the operator.
func (c *Cluster) safePass(ctx context.Context) (requeue time.Duration, err error) {
	if perr := failure.Safely(c.log, "a pass", func() { requeue, err = c.pass(ctx) }); perr != nil {
		c.recovered(perr)
		return 0, perr
	}
	return requeue, err
}

// recovered reports a panic of the goroutine (logged by failure.Safely) with
// one Warning event and the metric, and forgets what the goroutine recorded,
// so that the next pass starts from what it observes.
func (c *Cluster) recovered(err error) {
	c.members.forget()
	c.podExpect, c.upgradeExpect = nil, nil
	p := newProblem(problemInternal, "internal error in the operator (reported in its log; the pass is retried): %v", err)
	if _, done := c.announced[p.key()]; !done {
		c.announced[p.key()] = announcement{seen: c.now()}
		c.event(corev1.EventTypeWarning, p.kind.info().event, p.msg)
	}
	c.cfg.Metrics.failed(c.namespace, c.name, p.kind.info().code)
}

// pacer decides how soon a pass may run.
type pacer struct {
	minInterval  time.Duration
	lastPass     time.Time
	backoffUntil time.Time
}

// earliest is the soonest a pass asked for at now may start: never closer
// than minInterval to the last one, so a flapping pod cannot spin the loop,
// and, when honourBackoff is set (pod events, ticks), not before the backoff
// after a failed pass has passed.
func (p pacer) earliest(now time.Time, honourBackoff bool) time.Time {
	t := now
	if !p.lastPass.IsZero() {
		t = later(t, p.lastPass.Add(p.minInterval))
	}
	if honourBackoff {
		t = later(t, p.backoffUntil)
	}
	return t
}

// scheduler keeps the time of the next pass on one timer.
type scheduler struct {
	timer *time.Timer
	due   time.Time // zero: no pass wanted
}

// at asks for a pass at t, unless one is already due earlier.
func (s *scheduler) at(t, now time.Time) {
	if !s.due.IsZero() && !t.Before(s.due) {
		return
	}
	s.due = t
	s.timer.Reset(max(0, t.Sub(now)))
}

// fire tells whether the timer's firing is a due pass, and clears it.
func (s *scheduler) fire(now time.Time) bool {
	if s.due.IsZero() {
		return false
	}
	if now.Before(s.due) {
		s.timer.Reset(s.due.Sub(now))
		return false
	}
	s.due = time.Time{}
	return true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// event records an event on the EtcdCluster. The object's kind is set on a
// copy so the recorder can build the reference without knowing our scheme.
func (c *Cluster) event(eventType, reason, msg string) {
	obj := c.latest.DeepCopy()
	obj.APIVersion = api.SchemeGroupVersion.String()
	obj.Kind = api.EtcdClusterResourceKind
	c.cfg.Recorder.Event(obj, eventType, reason, msg)
}

// memberTemplate is a member of this cluster without name or ID: namespace,
// TLS and DNS are properties of the cluster.
func memberTemplate(cl *api.EtcdCluster) etcdutil.Member { return k8sutil.MemberOf(cl, "") }

func (s *snapshot) memberTemplate() *etcdutil.Member {
	m := memberTemplate(s.spec)
	return &m
}

// clientConfig reaches the cluster's etcd at endpoints, connecting to each
// member at its pod's address in the cache rather than through DNS.
func (c *Cluster) clientConfig(s *snapshot, endpoints []string) etcdutil.ClientConfig {
	return etcdutil.ClientConfig{Endpoints: endpoints, TLS: c.tlsConfig, Cache: c.clients, Addresses: podAddresses(s)}
}

// podAddresses map each member's DNS name to its pod's IP address.
func podAddresses(s *snapshot) map[string]string {
	tmpl := memberTemplate(s.spec)
	out := make(map[string]string, len(s.pods))
	for name, p := range s.pods {
		if p.Status.PodIP != "" {
			m := tmpl
			m.Name = name
			out[m.Addr()] = p.Status.PodIP
		}
	}
	return out
}
