// Package restorecontroller feeds EtcdRestores to the restore flow (pkg/restore)
// from an informer through a rate-limited workqueue: one key is never processed by
// two workers at once, failures are retried with backoff, and restores in progress
// are looked at again on a timer until they end.
package restorecontroller

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	informers "github.com/openetcd/etcd-operator/pkg/generated/informers/externalversions/etcd/v1beta2"
	listers "github.com/openetcd/etcd-operator/pkg/generated/listers/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/restore"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/keyqueue"
)

// MaxRetryDelay caps the backoff between retries. The default controller rate
// limiter goes up to 1000 s, far beyond the restore timeout: a restore whose
// hand-over hit an API hiccup would otherwise sit idle long after it could go on.
const MaxRetryDelay = 30 * time.Second

// Syncer runs one restore; *restore.Flow is the real one.
type Syncer interface {
	Sync(ctx context.Context, namespace, name string, attempt int) (time.Duration, error)
}

// Config wires a Controller.
type Config struct {
	Informer informers.EtcdRestoreInformer
	Flow     Syncer
	Log      *logrus.Entry
	// ClusterWide: see restore.Config.ClusterWide. The controller skips the
	// restores it does not run without asking the API server about them.
	ClusterWide bool
	// Recorder, when set, receives the events that say why a restore of the
	// other scope is left alone.
	Recorder record.EventRecorder
	// RateLimiter is optional: the default backs off from 5 ms to MaxRetryDelay.
	RateLimiter workqueue.TypedRateLimiter[string]
}

// Controller queues EtcdRestores for the flow.
type Controller struct {
	lister listers.EtcdRestoreLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	flow   Syncer
	log    *logrus.Entry
	// scope selects the restores by their scope annotation and says why
	// the others are left alone.
	scope *k8sutil.ScopeNotices

	// afterSync, if set, is called after every sync; tests wait on it.
	afterSync func(key string, err error)
}

// New wires the event handlers; nothing runs until Run.
func New(cfg Config) *Controller {
	c := &Controller{
		lister: cfg.Informer.Lister(),
		synced: cfg.Informer.Informer().HasSynced,
		flow:   cfg.Flow,
		log:    cfg.Log.WithField("pkg", "restore-controller"),
		scope:  k8sutil.NewScopeNotices(cfg.Recorder, cfg.ClusterWide, api.EtcdRestoreResourceKind),
	}
	limiter := cfg.RateLimiter
	if limiter == nil {
		limiter = workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, MaxRetryDelay)
	}
	c.queue = keyqueue.New("etcdrestores", limiter, cfg.Informer.Informer(), c.log)
	return c
}

// Run waits for the cache, calls synced (if not nil), then processes EtcdRestores
// with the given number of workers until ctx is done, and returns once every
// worker has stopped. A restore interrupted by the shutdown is taken up by the
// next leader from its status and plan.
func (c *Controller) Run(ctx context.Context, workers int, synced func()) error {
	return keyqueue.Run(ctx, c.queue, c.synced, "EtcdRestore", workers, synced, c.log, c.processNext)
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	requeue, err := c.sync(ctx, key)
	switch {
	case err != nil && ctx.Err() == nil:
		if !failure.IsRetry(err) { // the flow has logged those
			c.logForKey(key).Warnf("sync failed, will retry: %v", err)
		}
		c.queue.AddRateLimited(key)
	case requeue > 0:
		c.queue.Forget(key)
		c.queue.AddAfter(key, requeue)
	default:
		c.queue.Forget(key)
	}
	if c.afterSync != nil {
		c.afterSync(key, err)
	}
	return true
}

// sync skips what the cache already shows as done, and hands the rest to the
// flow, which reads the EtcdRestore from the API server itself. A panic becomes
// an error, retried like any: bad input must never take the operator down.
func (c *Controller) sync(ctx context.Context, key string) (requeue time.Duration, err error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil // cannot happen with keys from enqueue; retrying would not help
	}
	er, err := c.lister.EtcdRestores(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if ended(er) || !c.scope.Managed(er) {
		return 0, nil
	}
	if perr := failure.Safely(c.logForKey(key), "the restore flow", func() {
		requeue, err = c.flow.Sync(ctx, namespace, name, c.queue.NumRequeues(key))
	}); perr != nil {
		return 0, perr
	}
	return requeue, err
}

// ended tells an ended restore whose finalizer is gone: nothing is left to do, so
// the operator's start-up does not read every old EtcdRestore from the API server.
func ended(er *api.EtcdRestore) bool {
	if !restore.Finished(er) {
		return false
	}
	for _, f := range er.Finalizers {
		if f == restore.Finalizer {
			return false
		}
	}
	return true
}

func (c *Controller) logForKey(key string) *logrus.Entry {
	namespace, name, _ := cache.SplitMetaNamespaceKey(key)
	return c.log.WithFields(logrus.Fields{"restore-name": name, "restore-namespace": namespace})
}
