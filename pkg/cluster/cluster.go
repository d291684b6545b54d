// Package cluster runs one EtcdCluster: a long-lived goroutine per cluster that
// bootstraps it, then diffs desired against running members on every tick and on every
// pod event, changing one member at a time.
//
// Everything the goroutine knows (membership, expectations, the status it wrote) is
// owned by that goroutine alone; the controller talks to it only through Update, Poke
// and Delete, none of which ever blocks.
package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	versioned "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// Defaults of Config.
const (
	// DefaultReconcileInterval is the original's tick. Pod events and spec
	// changes wake the loop earlier, so the tick only catches what no event
	// announces (a member that became healthy inside etcd, a timeout).
	DefaultReconcileInterval = 8 * time.Second
	// DefaultPendingTimeout bounds how long a member pod may stay Pending
	// (unschedulable, image pull, DNS init container) before it is replaced.
	DefaultPendingTimeout = 5 * time.Minute
	// DefaultMinPassInterval keeps a flapping pod from spinning the loop: pod
	// events and ticks never start passes closer together than this.
	DefaultMinPassInterval = 500 * time.Millisecond
	// DefaultExpectationTimeout is how long the loop waits for a pod it created
	// to show up in the pod lister. Informers deliver in milliseconds; the
	// timeout only matters if the pod vanished before it was ever seen.
	DefaultExpectationTimeout = 2 * time.Minute
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
	// PodLister reads member pods from the controller's shared informer (label
	// app=etcd). Its cache must have synced before New is called: an empty
	// cache would look like a cluster without pods, and a Creating cluster
	// would get a second seed.
	PodLister corelisters.PodLister
	// Recorder records events on the EtcdCluster. The objects handed to it
	// carry their apiVersion and kind, so its scheme need not know our types.
	Recorder record.EventRecorder
	// Metrics may be nil (no metrics).
	Metrics *Metrics
	// Etcd talks to etcd; nil means the real thing (NewEtcdAPI).
	Etcd EtcdAPI
	// ReconcileInterval is the tick of the diff loop; pod events wake it earlier.
	ReconcileInterval time.Duration
	// PendingTimeout is how long a member pod may stay Pending before it is replaced.
	PendingTimeout time.Duration
	// MinPassInterval is the least time between two passes started by pod
	// events or ticks (spec changes are only held by this, not by backoff).
	MinPassInterval time.Duration
	// ExpectationTimeout is how long to wait for a created pod to appear in
	// PodLister before treating it as missing.
	ExpectationTimeout time.Duration
	// MembershipWait, with an Image (the operator's own), makes new members
	// join pod first (join.go); without one they are added to etcd first,
	// as the original did. Its Timeout defaults to PendingTimeout.
	MembershipWait k8sutil.MembershipWait
	// MinBackoff and MaxBackoff bound the retry delay after a failed pass.
	MinBackoff, MaxBackoff time.Duration
	Log                    *logrus.Entry
}

func (cfg Config) withDefaults() Config {
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = DefaultReconcileInterval
	}
	if cfg.PendingTimeout <= 0 {
		cfg.PendingTimeout = DefaultPendingTimeout
	}
	if cfg.MinPassInterval <= 0 {
		cfg.MinPassInterval = DefaultMinPassInterval
	}
	if cfg.ExpectationTimeout <= 0 {
		cfg.ExpectationTimeout = DefaultExpectationTimeout
	}
	if cfg.MembershipWait.Image != "" && cfg.MembershipWait.Timeout <= 0 {
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
	return cfg
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

	// Everything below belongs to the run goroutine (or to a test driving
	// reconcile directly); nothing else reads or writes it.

	// now and randomSuffix are replaced by tests.
	now          func() time.Time
	randomSuffix func() string

	// latest is the newest object seen, for its resourceVersion when the
	// status is written. Never modified in place: it may be the informer's.
	latest *api.EtcdCluster
	// spec is the last object whose spec passed validation, the one being
	// reconciled; nil until one does.
	spec *api.EtcdCluster
	// specProblem reports the newest spec that failed validation.
	specProblem *problem
	// observedGeneration is the generation of the newest spec validated.
	observedGeneration int64

	// status is the status being built; written is what the server is
	// believed to hold. statusDirty forces a write, after someone else may
	// have changed the status.
	status      api.ClusterStatus
	written     api.ClusterStatus
	statusDirty bool

	// members is the etcd membership; nil means unknown (after a restart,
	// or when the restore operator handed the cluster over) and it is read
	// from etcd once a member pod runs.
	members etcdutil.MemberSet
	// tlsConfig is the client TLS of a secure-client cluster, read from the
	// operator secret once.
	tlsConfig *tls.Config
	// servicesReady is set once both services exist.
	servicesReady bool

	podExpect     *podExpectation
	upgradeExpect *upgradeExpectation
	// failedUpgrade halts an upgrade whose last patched member stopped.
	failedUpgrade *failedUpgrade
	// refusedAdd is the member etcd refused to add for now; the next try
	// reuses its name and its PVC.
	refusedAdd string

	// problems are this pass's problems; reported holds the keys of the
	// problems already announced with a Warning event.
	problems []problem
	reported map[string]bool

	// errBackoff spaces retries after failed passes; waitBackoff spaces
	// polls of etcd while waiting for it to become healthy.
	errBackoff  backoff
	waitBackoff backoff
}

// New starts the goroutine of a cluster.
func New(cfg Config, cl *api.EtcdCluster) *Cluster {
	c := newCluster(cfg, cl)
	go c.run()
	return c
}

// newCluster builds a Cluster without starting its goroutine; tests drive
// reconcile on it directly.
func newCluster(cfg Config, cl *api.EtcdCluster) *Cluster {
	cfg = cfg.withDefaults()
	c := &Cluster{
		cfg:       cfg,
		name:      cl.Name,
		namespace: cl.Namespace,
		log: cfg.Log.WithFields(logrus.Fields{
			"cluster-name":      cl.Name,
			"cluster-namespace": cl.Namespace,
			"pkg":               "cluster",
		}),
		updates:      make(chan *api.EtcdCluster, 1),
		pokes:        make(chan struct{}, 1),
		stop:         make(chan struct{}),
		done:         make(chan struct{}),
		now:          time.Now,
		randomSuffix: func() string { return utilrand.String(10) },
		latest:       cl,
		status:       *cl.Status.DeepCopy(),
		written:      *cl.Status.DeepCopy(),
		reported:     map[string]bool{},
		errBackoff:   backoff{min: cfg.MinBackoff, max: cfg.MaxBackoff},
		waitBackoff:  backoff{min: cfg.MinBackoff, max: min(etcdHealthInterval, cfg.ReconcileInterval)},
	}
	c.acceptSpec(cl)
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

// Poke wakes the goroutine for a reconcile pass, without blocking.
func (c *Cluster) Poke() {
	select {
	case c.pokes <- struct{}{}:
	default:
	}
}

// Delete stops the goroutine. Kubernetes garbage collection removes the pods,
// services and volumes through their owner references.
func (c *Cluster) Delete() {
	c.stopOnce.Do(func() { close(c.stop) })
}

// Done is closed when the goroutine has exited.
func (c *Cluster) Done() <-chan struct{} { return c.done }

// run is the goroutine. Passes are scheduled rather than run on every signal:
// the earliest wanted time wins, pod events and ticks are held back by
// MinPassInterval and by the error backoff, spec changes only by
// MinPassInterval (a user fixing a problem should not wait out a backoff).
func (c *Cluster) run() {
	defer close(c.done)
	defer c.cfg.Metrics.forget(c.namespace, c.name)

	// Delete cancels whatever API or etcd call is in flight.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()

	ticker := time.NewTicker(c.cfg.ReconcileInterval)
	defer ticker.Stop()
	s := scheduler{timer: time.NewTimer(time.Hour)}
	defer s.timer.Stop()
	p := pacer{minInterval: c.cfg.MinPassInterval}
	s.at(c.now(), c.now()) // the first pass runs at once

	for {
		select {
		case <-c.stop:
			return
		case cl := <-c.updates:
			if c.handleUpdate(cl) {
				s.at(p.earliest(c.now(), false), c.now())
			}
		case <-c.pokes:
			s.at(p.earliest(c.now(), true), c.now())
		case <-ticker.C:
			s.at(p.earliest(c.now(), true), c.now())
		case <-s.timer.C:
			if !s.fire(c.now()) {
				continue
			}
			pctx, cancelPass := context.WithTimeout(ctx, passTimeout)
			requeue, err := c.reconcile(pctx)
			cancelPass()
			if ctx.Err() != nil {
				return
			}
			now := c.now()
			p.lastPass = now
			if err != nil {
				p.backoffUntil = now.Add(c.errBackoff.next())
				s.at(p.backoffUntil, now)
				continue
			}
			c.errBackoff.reset()
			p.backoffUntil = time.Time{}
			if requeue > 0 {
				s.at(now.Add(requeue), now)
			}
		}
	}
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

// backoff doubles from min to max.
type backoff struct {
	min, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }

// handleUpdate takes a new version of the object and tells whether it calls
// for a pass now.
func (c *Cluster) handleUpdate(cl *api.EtcdCluster) bool {
	prev := c.latest
	if prev.UID != "" && cl.UID != prev.UID {
		// The cluster was deleted and created again under the same name, and
		// the controller missed the deletion: nothing known about the old
		// one holds for the new one.
		c.log.Infof("cluster was re-created (uid %s, was %s); starting over", cl.UID, prev.UID)
		c.startOver(cl)
		return true
	}
	c.latest = cl
	pass := false

	// The restore operator's hand-over (see adoptPhase) arrives as a status
	// change of a cluster this goroutine has not bootstrapped.
	if c.adoptPhase(cl.Status.Phase) {
		pass = true
	}
	// Someone else wrote the status (or this is an old event overtaken by our
	// own write): make sure the next pass writes ours, comparing with the
	// server's copy if that conflicts.
	if !equality.Semantic.DeepEqual(cl.Status, c.written) {
		c.statusDirty = true
	}
	if cl.Generation != prev.Generation || !equality.Semantic.DeepEqual(cl.Spec, prev.Spec) {
		c.acceptSpec(cl)
		pass = true
	}
	return pass
}

// startOver forgets everything learnt about a previous object.
func (c *Cluster) startOver(cl *api.EtcdCluster) {
	c.latest = cl
	c.spec, c.specProblem = nil, nil
	c.status = *cl.Status.DeepCopy()
	c.written = *cl.Status.DeepCopy()
	c.statusDirty = false
	c.members = nil
	c.tlsConfig = nil
	c.servicesReady = false
	c.podExpect, c.upgradeExpect, c.failedUpgrade = nil, nil, nil
	c.refusedAdd = ""
	c.acceptSpec(cl)
}

// adoptPhase takes over a phase set by someone else on a cluster that was
// never bootstrapped here.
//
// This is the restore operator's hand-over: it creates the EtcdCluster paused,
// sets status.phase to Running through the status subresource, creates the
// seed pod (restored from the backup) itself, then unpauses the cluster. While
// paused with phase "" this goroutine does not bootstrap; once the phase says
// Running it must not create a seed of its own either: it adopts the phase, and
// when the cluster is unpaused and the seed pod runs, it reads the membership
// from that pod's etcd and grows the cluster from there.
//
// A Creating cluster whose seed was not created yet (its Creating write is
// what found the Running phase) is not bootstrapped here either.
func (c *Cluster) adoptPhase(p api.ClusterPhase) bool {
	notBootstrapped := c.status.Phase == api.ClusterPhaseNone ||
		c.status.Phase == api.ClusterPhaseCreating && p == api.ClusterPhaseRunning && c.members == nil && c.podExpect == nil
	if !notBootstrapped || p == api.ClusterPhaseNone || p == c.status.Phase {
		return false
	}
	c.log.Infof("cluster phase was set to %q by another party before it was bootstrapped here; taking the cluster over as it is", p)
	c.status.Phase = p
	c.members = nil
	return true
}

// acceptSpec validates a new spec. An invalid spec is reported and ignored:
// a cluster that never had a valid spec waits, a running one keeps
// reconciling its last valid spec (the original only logged, so users never
// learned why their edit had no effect).
func (c *Cluster) acceptSpec(cl *api.EtcdCluster) {
	c.observedGeneration = cl.Generation
	var err error
	if c.spec == nil {
		err = cl.Validate()
	} else {
		err = cl.ValidateUpdate(c.spec)
	}
	if err != nil {
		what := "invalid spec: the cluster is not created until it is fixed"
		if c.spec != nil {
			what = fmt.Sprintf("invalid spec update ignored, still reconciling generation %d", c.spec.Generation)
		}
		c.specProblem = &problem{
			code:      reasonInvalidSpec,
			event:     warnInvalidSpec,
			msg:       fmt.Sprintf("%s: %v", what, err),
			byMessage: true,
		}
		return
	}
	if c.spec != nil && c.spec.Spec.Paused != cl.Spec.Paused {
		c.log.Infof("spec.paused is now %v", cl.Spec.Paused)
	}
	c.spec = cl
	c.specProblem = nil
}

// desired is the valid spec with defaults filled in, in memory only: defaults
// are never written back to the user's object.
func (c *Cluster) desired() *api.EtcdCluster {
	return c.spec.WithDefaults()
}

// ensureServices creates the peer and client services once per goroutine.
// An existing service is fine if this cluster owns it. One owned by another
// EtcdCluster of the same name is a leftover that garbage collection is about
// to delete (the restore operator deletes and re-creates the cluster): keeping
// it would leave the cluster without services moments later, so wait for it.
// One that nobody owns was made by a user; it is used as it is, with a warning.
func (c *Cluster) ensureServices(ctx context.Context, cl *api.EtcdCluster) error {
	if c.servicesReady {
		return nil
	}
	for _, svc := range []*corev1.Service{k8sutil.NewPeerService(cl), k8sutil.NewClientService(cl)} {
		_, err := c.cfg.KubeClient.CoreV1().Services(c.namespace).Create(ctx, svc, metav1.CreateOptions{})
		if err == nil {
			c.log.Infof("created service %s", svc.Name)
			continue
		}
		if !apierrors.IsAlreadyExists(err) {
			return kubeError(fmt.Sprintf("create service %s", svc.Name), err)
		}
		existing, err := c.cfg.KubeClient.CoreV1().Services(c.namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return kubeError(fmt.Sprintf("get service %s", svc.Name), err)
		}
		switch ref := metav1.GetControllerOfNoCopy(existing); {
		case k8sutil.IsOwnedBy(existing, cl):
		case ref != nil:
			return newPassError(reasonServiceConflict, warnServiceConflict,
				fmt.Sprintf("service %s", svc.Name),
				fmt.Errorf("it belongs to %s %s (uid %s), not to this cluster; waiting for it to be deleted", ref.Kind, ref.Name, ref.UID))
		default:
			c.problems = append(c.problems, problem{
				code:  reasonServiceConflict,
				event: warnServiceConflict,
				msg:   fmt.Sprintf("service %s exists and is not owned by this cluster; it is used as it is", svc.Name),
			})
		}
	}
	c.servicesReady = true
	return nil
}

// loadTLS reads the operator secret of a secure-client cluster and builds the
// etcd client TLS configuration in memory. A missing or broken secret is a
// retried problem, not a failure: with cert-manager the secret routinely
// appears after the cluster (original issue #2129, where the cluster stayed
// Failed for good).
func (c *Cluster) loadTLS(ctx context.Context, cl *api.EtcdCluster) error {
	if c.tlsConfig != nil || !cl.Spec.TLS.IsSecureClient() {
		return nil
	}
	name := cl.Spec.TLS.Static.OperatorSecret
	secret, err := c.cfg.KubeClient.CoreV1().Secrets(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		what := fmt.Sprintf("read TLS secret %s (spec.TLS.static.operatorSecret)", name)
		if apierrors.IsNotFound(err) {
			err = fmt.Errorf("not found; it needs %s, %s and %s; retrying until it exists",
				etcdutil.SecretClientCert, etcdutil.SecretClientKey, etcdutil.SecretClientCA)
		}
		return newPassError(reasonTLSSecret, warnTLSSecret, what, err)
	}
	cfg, err := etcdutil.TLSConfigFromSecretData(secret.Data)
	if err != nil {
		return newPassError(reasonTLSSecret, warnTLSSecret, fmt.Sprintf("use TLS secret %s", name), err)
	}
	c.tlsConfig = cfg
	return nil
}

// bootstrap creates the seed member of a new cluster. The phase is written as
// Creating before the seed pod exists, so that an operator restarting in
// between finds either no pod (and creates the seed) or the seed (and adopts
// it); it never has to fail the cluster as the original did.
func (c *Cluster) bootstrap(ctx context.Context, cl *api.EtcdCluster) (time.Duration, error) {
	if c.status.Phase == api.ClusterPhaseNone {
		c.status.Phase = api.ClusterPhaseCreating
		c.refreshStatus(nil)
		if err := c.writeStatus(ctx); err != nil {
			c.status.Phase = api.ClusterPhaseNone
			return 0, err
		}
		if c.status.Phase != api.ClusterPhaseCreating {
			// The write found the restore operator's hand-over.
			return c.cfg.MinPassInterval, nil
		}
		c.log.Infof("creating cluster: size %d, version %s", cl.Spec.Size, cl.Spec.Version)
	}

	seed := c.newMember(cl)
	members := etcdutil.NewMemberSet(seed)
	// The token keeps members of different clusters from ever forming one
	// cluster; the CR's UID in it makes sure a re-created cluster of the same
	// name never talks to leftover members of its predecessor.
	token := string(cl.UID) + "-" + c.randomSuffix()
	if err := c.ensurePVC(ctx, cl, seed.Name); err != nil {
		return 0, err
	}
	if err := c.createMemberPod(ctx, cl, seed, members, k8sutil.ClusterStateNew, token); err != nil {
		return 0, err
	}
	c.members = members
	c.event(corev1.EventTypeNormal, eventNewMemberAdded, fmt.Sprintf("New member %s added to cluster", seed.Name))
	c.log.Infof("created seed member %s", seed.Name)
	c.status.Phase = api.ClusterPhaseRunning
	c.status.CurrentVersion = cl.Spec.Version
	return c.cfg.MinPassInterval, nil
}

// event records an event on the EtcdCluster. The object's kind is set on a
// copy so the recorder can build the reference without knowing our scheme.
func (c *Cluster) event(eventType, reason, msg string) {
	obj := c.latest.DeepCopy()
	obj.APIVersion = api.SchemeGroupVersion.String()
	obj.Kind = api.EtcdClusterResourceKind
	c.cfg.Recorder.Event(obj, eventType, reason, msg)
}
