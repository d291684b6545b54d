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
	"k8s.io/client-go/dynamic"
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
	// Budgets returns the lister of the clusters' PodDisruptionBudgets, or
	// nil while the operator may not manage them (they are then not made).
	// It is asked on every pass: a rule added to the role later is used
	// without a restart. A nil Budgets means never.
	Budgets func() policylisters.PodDisruptionBudgetLister
	// Recorder records events on the EtcdCluster. The objects handed to it
	// carry their apiVersion and kind, so its scheme need not know our types.
	Recorder record.EventRecorder
	// Metrics may be nil (no metrics).
	Metrics *Metrics
	// Status writes the EtcdCluster's status; nil means one of the cluster's
	// own (statusutil.ForClusters).
	Status *statusutil.ClusterWriter
	// Dynamic reads and writes cert-manager's Certificates for clusters
	// whose certificates cert-manager issues; nil leaves them waiting, and
	// status.reason says why.
	Dynamic dynamic.Interface
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

	// knownMembership caches etcd's membership (see membershipCache).
	knownMembership membershipCache
	// adoptionAnnounced is set once the members coreos/etcd-operator made
	// were told adopted (adoption.go), so that it is told once per start.
	adoptionAnnounced bool
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
	// issued records the last read of the secrets of issued TLS (issue.go).
	issued issuedCache
	// certManager records the last read of cert-manager's certificates
	// (certmanager.go).
	certManager certManagerCache
	// zones are the zones of the nodes members ran on, as last read.
	zones zoneCache
	// volumeNodes are the nodes the members' volumes are tied to, as read.
	volumeNodes volumeNodeCache
	// etcdReadAt is when etcd's view was last read: a cluster at rest is
	// looked at every etcdObserveInterval for its day-2 care.
	etcdReadAt time.Time
	// atRest tells whether the last pass found nothing to do: the loop then
	// ticks less often.
	atRest bool
	// eventPace is the least time the last pass asks before the next one
	// that a pod event or tick brings (eventPace).
	eventPace time.Duration

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
	// told are the events the executors of the pass in progress told; the
	// end of the pass sends them.
	told []toldEvent

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

// tell keeps an event of what an executor did, for the end of the pass to
// send: the pass writes its status and events in one place.
func (c *Cluster) tell(eventType, reason, msg string) {
	c.told = append(c.told, toldEvent{eventType, reason, msg})
}

// toldEvent is an event an executor told, not sent yet.
type toldEvent struct{ eventType, reason, msg string }

// sendEvents sends the events the pass's executors told, in their order.
func (c *Cluster) sendEvents() {
	for _, e := range c.told {
		c.event(e.eventType, e.reason, e.msg)
	}
	c.told = nil
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

// memberTemplate is a new member of the cluster as the pass makes it: in
// the stage of a TLS switch under way (tlsswitch.go), else as the spec
// says.
func (s *snapshot) memberTemplate() *etcdutil.Member {
	m := withTLSSwitch(memberTemplate(s.spec), s.tlsSwitch)
	return &m
}

// clientConfig reaches the cluster's etcd at endpoints, connecting to each
// member at its pod's address in the cache rather than through DNS. The
// client TLS, once read, is given whatever the endpoints' scheme: etcd's
// client uses it for https URLs only, and while TLS is switched a member
// may advertise either scheme.
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
