// Package keyqueue is the queue the backup and restore controllers share: an
// informer's handlers put namespace/name keys on a rate-limited workqueue,
// and workers take them off.
package keyqueue

import (
	"context"
	"errors"
	"sync"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// New returns a queue fed by informer. Its handlers only queue keys, so that
// a slow backup or restore never holds up the informer: every decision is
// taken by a worker, from the lister.
func New(name string, limiter workqueue.TypedRateLimiter[string], informer cache.SharedInformer, log *logrus.Entry) workqueue.TypedRateLimitingInterface[string] {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
	enqueue := func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			log.Errorf("cannot queue %T: %v", obj, err)
			return
		}
		q.Add(key)
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	return q
}

// Run waits for the informer's cache (synced), calls onSynced (if not nil),
// then runs processNext in the given number of workers until ctx is done or
// processNext returns false. It returns once every worker has stopped. kind
// names the resource in the log and in the error.
func Run(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], synced cache.InformerSynced, kind string, workers int,
	onSynced func(), log *logrus.Entry, processNext func(context.Context) bool) error {
	defer q.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return errors.New(kind + " cache did not sync")
	}
	if onSynced != nil {
		onSynced()
	}
	log.Infof("watching %ss with %d workers", kind, workers)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			// A panic ends the key's processing, not the worker: the
			// controllers turn panics of their own work into retried
			// errors, and this catches what slips past them.
			more := true
			for more {
				if err := failure.Safely(log, kind+" worker", func() { more = processNext(ctx) }); err != nil {
					more = ctx.Err() == nil
				}
			}
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
	return nil
}
