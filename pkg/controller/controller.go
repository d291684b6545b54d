// Package controller watches EtcdClusters and keeps one cluster.Cluster goroutine per
// managed cluster, and tells a cluster's goroutine when one of its pods changes.
package controller

import (
	"context"
	"fmt"
	"sync"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/cluster"
	versioned "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// Config is how the controller is wired.
type Config struct {
	// Namespace is the operator's own namespace, watched unless ClusterWide is set.
	Namespace string
	// ClusterWide watches all namespaces, taking only clusters annotated
	// etcd.database.coreos.com/scope=clusterwide.
	ClusterWide bool
	KubeClient  kubernetes.Interface
	EtcdClient  versioned.Interface
	Recorder    record.EventRecorder
	Registerer  prometheus.Registerer
	// Cluster is passed to every cluster goroutine; its clients, lister, recorder and
	// metrics are filled in by the controller.
	Cluster cluster.Config
	Log     *logrus.Entry
}

// Controller owns the map namespace/name -> cluster goroutine.
type Controller struct {
	cfg     Config
	metrics *metrics

	mu       sync.Mutex
	clusters map[string]*cluster.Cluster

	clusterIndexer  cache.Indexer
	clusterInformer cache.Controller
	pods            informers.SharedInformerFactory
}

// New wires the informers; nothing runs until Run.
func New(cfg Config) *Controller {
	c := &Controller{cfg: cfg, metrics: newMetrics(cfg.Registerer), clusters: map[string]*cluster.Cluster{}}

	ns := cfg.Namespace
	if cfg.ClusterWide {
		ns = metav1.NamespaceAll
	}
	clusters := cfg.EtcdClient.EtcdV1beta2().EtcdClusters(ns)
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			return clusters.List(context.Background(), o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			return clusters.Watch(context.Background(), o)
		},
	}
	// Handlers only hand objects to goroutines without waiting on them, so a slow
	// cluster can never hold up the informer (the original blocked, and panicked after
	// a minute).
	c.clusterIndexer, c.clusterInformer = cache.NewIndexerInformer(lw, &api.EtcdCluster{}, 0, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.sync(obj) },
		UpdateFunc: func(_, obj interface{}) { c.sync(obj) },
		DeleteFunc: c.onDelete,
	}, cache.Indexers{})

	// One shared informer over every etcd pod replaces the original's LIST per cluster
	// per tick, and its events wake the owning cluster at once.
	selector := labels.SelectorFromSet(labels.Set{api.LabelApp: api.LabelAppValue}).String()
	c.pods = informers.NewSharedInformerFactoryWithOptions(cfg.KubeClient, 0,
		informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	podInformer := c.pods.Core().V1().Pods()
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.pokeOwner,
		UpdateFunc: func(_, obj interface{}) { c.pokeOwner(obj) },
		DeleteFunc: c.pokeOwner,
	})

	c.cfg.Cluster.KubeClient = cfg.KubeClient
	c.cfg.Cluster.EtcdClient = cfg.EtcdClient
	c.cfg.Cluster.PodLister = podInformer.Lister()
	c.cfg.Cluster.Recorder = cfg.Recorder
	c.cfg.Cluster.Metrics = cluster.NewMetrics(cfg.Registerer)
	if c.cfg.Cluster.Log == nil {
		c.cfg.Cluster.Log = cfg.Log
	}
	return c
}

// Run starts the informers, calls synced once both caches are filled (the operator is
// ready from then on), and blocks until ctx is done. It then stops every cluster
// goroutine; the clusters themselves keep running.
func (c *Controller) Run(ctx context.Context, synced func()) error {
	c.pods.Start(ctx.Done())
	go c.clusterInformer.Run(ctx.Done())
	podSynced := c.pods.Core().V1().Pods().Informer().HasSynced
	if !cache.WaitForCacheSync(ctx.Done(), podSynced, c.clusterInformer.HasSynced) {
		return fmt.Errorf("informer caches did not sync: %w", ctx.Err())
	}
	c.cfg.Log.Info("caches synced; managing etcd clusters")
	if synced != nil {
		synced()
	}
	<-ctx.Done()
	c.mu.Lock()
	for key, cl := range c.clusters {
		cl.Delete()
		delete(c.clusters, key)
	}
	c.mu.Unlock()
	c.pods.Shutdown()
	return nil
}

// sync starts the goroutine of a cluster it has not seen, or hands the new version to
// the running one. Add and Update both come here, so a re-list is harmless.
func (c *Controller) sync(obj interface{}) {
	cl, ok := obj.(*api.EtcdCluster)
	if !ok {
		return
	}
	key := cl.Namespace + "/" + cl.Name
	log := c.cfg.Log.WithFields(logrus.Fields{"cluster-name": cl.Name, "cluster-namespace": cl.Namespace})

	c.mu.Lock()
	defer c.mu.Unlock()
	running, known := c.clusters[key]
	if !api.IsManagedBy(cl, c.cfg.ClusterWide) {
		// The scope annotation changed: the other kind of operator takes over.
		if known {
			log.Info("cluster is no longer managed by this operator (scope annotation)")
			c.stopLocked(key, running)
		}
		return
	}
	if cl.Status.Phase == api.ClusterPhaseFailed {
		c.metrics.failed.Inc()
		if !known {
			log.Warnf("ignore failed cluster %s: delete it, or restore it with an EtcdRestore", cl.Name)
		}
		return
	}
	if known {
		running.Update(cl)
		c.metrics.changed.Inc()
		return
	}
	c.clusters[key] = cluster.New(c.cfg.Cluster, cl)
	c.metrics.created.Inc()
	c.metrics.clusters.Set(float64(len(c.clusters)))
	log.Info("managing cluster")
}

func (c *Controller) onDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	cl, ok := obj.(*api.EtcdCluster)
	if !ok {
		return
	}
	key := cl.Namespace + "/" + cl.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if running, known := c.clusters[key]; known {
		c.cfg.Log.WithFields(logrus.Fields{"cluster-name": cl.Name, "cluster-namespace": cl.Namespace}).
			Info("cluster deleted; Kubernetes garbage collection removes its pods, services and volumes")
		c.stopLocked(key, running)
	}
}

func (c *Controller) stopLocked(key string, cl *cluster.Cluster) {
	cl.Delete()
	delete(c.clusters, key)
	c.metrics.deleted.Inc()
	c.metrics.clusters.Set(float64(len(c.clusters)))
}

// pokeOwner wakes the cluster a pod belongs to.
func (c *Controller) pokeOwner(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	name := pod.Labels[api.LabelClusterName]
	if name == "" {
		return
	}
	c.mu.Lock()
	cl := c.clusters[pod.Namespace+"/"+name]
	c.mu.Unlock()
	if cl != nil {
		cl.Poke()
	}
}

// Managed lists the keys of the clusters with a running goroutine, for tests and debugging.
func (c *Controller) Managed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.clusters))
	for k := range c.clusters {
		keys = append(keys, k)
	}
	return keys
}
