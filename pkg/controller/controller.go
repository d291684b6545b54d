// Package controller watches EtcdClusters and keeps one cluster.Cluster goroutine per
// managed cluster, and tells a cluster's goroutine when one of its pods changes.
package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/cluster"
	versioned "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
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
	// BudgetRecheck is how often the operator asks again whether it may
	// manage PodDisruptionBudgets while it may not; 0 means
	// statusutil.ReprobeInterval, the interval at which the status writer
	// tries a refused subresource again.
	BudgetRecheck time.Duration
}

// Controller owns the map namespace/name -> cluster goroutine.
type Controller struct {
	cfg     Config
	metrics *metrics

	mu       sync.Mutex
	clusters map[string]*cluster.Cluster

	clusterIndexer  cache.Indexer
	clusterInformer cache.Controller
	// members is the shared informer factory of what clusters are made of:
	// pods, claims and services labelled app=etcd.
	members informers.SharedInformerFactory
	// stopped holds the goroutines stopped, until they have exited.
	stopped []*cluster.Cluster
	// scope says why clusters of the other scope are left alone.
	scope *k8sutil.ScopeNotices
	// budgets is the PodDisruptionBudget lister, nil while the operator may
	// not manage them; every cluster reads it on each pass.
	budgets atomic.Pointer[policylisters.PodDisruptionBudgetLister]
	// runCtx is Run's context, set before any informer starts: the
	// EtcdCluster informer's list and watch calls and the clusters'
	// goroutines are bound to it (informer handlers and client-go v0.32's
	// ListWatch take no context of their own).
	runCtx context.Context
}

// New wires the informers; nothing runs until Run.
func New(cfg Config) *Controller {
	c := &Controller{cfg: cfg, metrics: newMetrics(cfg.Registerer), clusters: map[string]*cluster.Cluster{},
		scope: k8sutil.NewScopeNotices(cfg.Recorder, cfg.ClusterWide, api.EtcdClusterResourceKind)}

	ns := k8sutil.WatchedNamespace(cfg.Namespace, cfg.ClusterWide)
	clusters := cfg.EtcdClient.EtcdV1beta2().EtcdClusters(ns)
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			return clusters.List(c.runCtx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			return clusters.Watch(c.runCtx, o)
		},
	}
	// Handlers only hand objects to goroutines without waiting on them, so a slow
	// cluster can never hold up the informer (the original blocked, and panicked after
	// a minute).
	// A panic in a handler would end the informer's goroutine and, through
	// client-go's crash handler, the process: it ends the one event instead.
	store, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &api.EtcdCluster{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj interface{}) { c.safely("the EtcdCluster handler", func() { c.sync(obj) }) },
			UpdateFunc: func(_, obj interface{}) { c.safely("the EtcdCluster handler", func() { c.sync(obj) }) },
			DeleteFunc: func(obj interface{}) { c.safely("the EtcdCluster handler", func() { c.onDelete(obj) }) },
		},
		Indexers:  cache.Indexers{},
		Transform: dropManagedFields,
	})
	c.clusterIndexer, c.clusterInformer = store.(cache.Indexer), informer

	// One shared informer each over every etcd pod, claim and service replaces the
	// original's LIST per cluster per tick, and their events wake the owning cluster
	// at once.
	selector := labels.SelectorFromSet(labels.Set{api.LabelApp: api.LabelAppValue}).String()
	c.members = informers.NewSharedInformerFactoryWithOptions(cfg.KubeClient, 0,
		informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }),
		informers.WithTransform(trimMember))
	poke := c.pokeHandler()
	pods := c.members.Core().V1().Pods()
	claims := c.members.Core().V1().PersistentVolumeClaims()
	services := c.members.Core().V1().Services()
	for _, inf := range []cache.SharedIndexInformer{pods.Informer(), claims.Informer(), services.Informer()} {
		_, _ = inf.AddEventHandler(poke)
	}
	for _, inf := range []cache.SharedIndexInformer{pods.Informer(), claims.Informer()} {
		// Added before the informers start, so it cannot fail.
		_ = inf.AddIndexers(cache.Indexers{k8sutil.ClusterIndex: k8sutil.IndexByCluster})
	}

	c.cfg.Cluster.KubeClient = cfg.KubeClient
	c.cfg.Cluster.EtcdClient = cfg.EtcdClient
	c.cfg.Cluster.Pods = pods.Informer().GetIndexer()
	c.cfg.Cluster.Claims = claims.Informer().GetIndexer()
	c.cfg.Cluster.ServiceLister = services.Lister()
	c.cfg.Cluster.Budgets = func() policylisters.PodDisruptionBudgetLister {
		if l := c.budgets.Load(); l != nil {
			return *l
		}
		return nil
	}
	c.cfg.Cluster.Recorder = cfg.Recorder
	// One limit for every cluster's etcd calls: a cluster whose etcd hangs
	// holds one slot for a bounded time, never the others' (see LimitEtcd).
	etcd := c.cfg.Cluster.Etcd
	if etcd == nil {
		etcd = cluster.NewEtcdAPI()
	}
	c.cfg.Cluster.Etcd = cluster.LimitEtcd(etcd, cluster.DefaultEtcdConcurrency, cluster.DefaultEtcdCallTimeout)
	c.cfg.Cluster.Metrics = cluster.NewMetrics(cfg.Registerer)
	if c.cfg.Cluster.Log == nil {
		c.cfg.Cluster.Log = cfg.Log
	}
	// One writer for every cluster: whether the CRD serves the status
	// subresource, and whether the role may use it, holds for all of them.
	c.cfg.Cluster.Status = statusutil.ForClusters(cfg.EtcdClient, cfg.Recorder, c.cfg.Cluster.Log)
	return c
}

// dropManagedFields keeps server-side apply's bookkeeping out of the caches:
// nothing here reads it, and it is a large part of each cached object (a
// pod's lists every field the kubelet writes in its status). The caches hold
// a pod, two services, a disruption budget and the EtcdCluster per cluster,
// so this is memory per cluster. An update of an object without
// managedFields leaves the server's as they were.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// trimMember is the transform of the caches of what clusters are made of:
// without managedFields, and without what a cluster never reads of a pod or
// a service, which is most of them. These caches hold a pod and two services
// per member, so this is memory per cluster. A cluster never writes a cached
// object back (pods are patched field by field, services never changed), so
// what the caches leave out is never lost.
func trimMember(obj any) (any, error) {
	obj, err := dropManagedFields(obj)
	switch o := obj.(type) {
	case *corev1.Service:
		// A cluster reads whose a service is (observeServices).
		o.Spec, o.Status = corev1.ServiceSpec{}, corev1.ServiceStatus{}
	case *corev1.Pod:
		trimPod(o)
	}
	return obj, err
}

// trimPod leaves out of a cached pod what the cluster package and the
// k8sutil pod predicates it calls never read: where the pod runs and with
// what other volumes, ports, variables, resources and security settings, and what
// the kubelet says of the containers beyond their state, restarts and image.
// Kept: the metadata, the data volume and its mounts, the containers' names,
// images, commands, arguments and probes, ETCD_MAX_LEARNERS (how many learners the member's etcd accepts), the
// anti-affinity, the phase, conditions, pod IP and the containers' states.
func trimPod(p *corev1.Pod) {
	spec := &p.Spec
	// The data volume and its mount stay: the adoption of a pod the
	// original made checks that etcd's data directory is on it.
	spec.Volumes = keepOnly(spec.Volumes, func(v corev1.Volume) bool { return v.Name == k8sutil.EtcdDataVolumeName })
	spec.Tolerations, spec.NodeSelector = nil, nil
	spec.TopologySpreadConstraints, spec.SecurityContext = nil, nil
	spec.ImagePullSecrets, spec.HostAliases, spec.DNSConfig, spec.ReadinessGates = nil, nil, nil, nil
	spec.Overhead, spec.SchedulingGates, spec.ResourceClaims, spec.Resources = nil, nil, nil, nil
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			c := &cs[i]
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name != api.EnvMaxLearners })
			if len(c.Env) == 0 {
				c.Env = nil
			}
			c.VolumeMounts = keepOnly(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == k8sutil.EtcdDataVolumeName })
			c.Ports, c.EnvFrom, c.VolumeDevices = nil, nil, nil
			c.Resources, c.ResizePolicy, c.SecurityContext = corev1.ResourceRequirements{}, nil, nil
			c.TerminationMessagePath = ""
		}
	}
	spec.EphemeralContainers = nil
	st := &p.Status
	st.HostIPs, st.PodIPs, st.ResourceClaimStatuses = nil, nil, nil
	for _, cs := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses, st.EphemeralContainerStatuses} {
		for i := range cs {
			c := &cs[i]
			c.ImageID, c.ContainerID = "", ""
			c.AllocatedResources, c.Resources, c.VolumeMounts, c.User, c.AllocatedResourcesStatus = nil, nil, nil, nil, nil
		}
	}
}

// Run starts the informers, calls synced once every cache is filled (the operator is
// ready from then on), and blocks until ctx is done. It then stops every cluster
// goroutine and waits for them to exit; the clusters themselves keep running.
//
// The pod, claim and service caches fill before the EtcdCluster informer starts, so
// that no cluster goroutine ever runs a pass on an empty cache: it would report
// healthy clusters as having no member pod, or take a running member for a dead one.
func (c *Controller) Run(ctx context.Context, synced func()) error {
	c.runCtx = ctx
	budgetsAllowed := c.mayManageBudgets(ctx, true)
	if budgetsAllowed {
		c.watchBudgets()
	}
	c.members.Start(ctx.Done())
	defer c.members.Shutdown()
	// Cluster goroutines start as the EtcdCluster informer delivers, which
	// can be before its cache is seen synced: a stop then must end them too,
	// so every way out of Run stops them and waits until they have exited
	// (before the informers are shut down).
	defer c.stopClusters()
	for typ, ok := range c.members.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the %v informer cache did not sync: %w", typ, ctx.Err())
		}
	}
	if budgetsAllowed {
		c.enableBudgets()
	}
	go c.clusterInformer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.clusterInformer.HasSynced) {
		return fmt.Errorf("the EtcdCluster informer cache did not sync: %w", ctx.Err())
	}
	c.cfg.Log.Info("caches synced; managing etcd clusters")
	if synced != nil {
		synced()
	}
	rechecked := make(chan struct{})
	if budgetsAllowed {
		close(rechecked)
	} else {
		go c.recheckBudgets(ctx, rechecked)
	}
	<-ctx.Done()
	<-rechecked
	return nil
}

// stopClusters stops every cluster goroutine and waits until each has
// exited. It runs once Run's context has ended, after which sync starts no
// goroutine (it checks the context under the same lock).
func (c *Controller) stopClusters() {
	c.mu.Lock()
	for key, cl := range c.clusters {
		c.stopLocked(key, cl)
	}
	stopped := c.stopped
	c.stopped = nil
	c.mu.Unlock()
	for _, cl := range stopped {
		<-cl.Done()
	}
}

// mayManageBudgets asks the API server whether the operator may list, watch,
// create, update and delete PodDisruptionBudgets. An operator installed with
// an older role (the original's, say) runs without them rather than waiting
// for a cache it can never fill, and says what to add (when warn is set: the
// first time, not at every later look).
func (c *Controller) mayManageBudgets(ctx context.Context, warn bool) bool {
	ns := k8sutil.WatchedNamespace(c.cfg.Namespace, c.cfg.ClusterWide)
	var missing []string
	for _, verb := range []string{"list", "watch", "create", "update", "delete"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: "policy", Resource: "poddisruptionbudgets"},
		}}
		out, err := c.cfg.KubeClient.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			if warn {
				c.cfg.Log.WithError(err).Warn("could not ask whether PodDisruptionBudgets may be managed; they are not until a later look finds they may")
			}
			return false
		}
		if !out.Status.Allowed {
			missing = append(missing, verb)
		}
	}
	if len(missing) > 0 {
		if warn {
			c.cfg.Log.WithField("missing", strings.Join(missing, ",")).Warnf("the operator may not %s poddisruptionbudgets (group policy): clusters get no disruption budget, so kubectl drain can take a quorum of members at once; add the rule of example/rbac, which is used once it is there (asked every %v)",
				strings.Join(missing, ", "), c.budgetRecheck())
		}
		return false
	}
	return true
}

// watchBudgets adds the PodDisruptionBudget informer to the members'
// factory; it runs from the factory's next Start.
func (c *Controller) watchBudgets() {
	_, _ = c.members.Policy().V1().PodDisruptionBudgets().Informer().AddEventHandler(c.pokeHandler())
}

// enableBudgets hands the budgets' lister to the clusters, once its cache
// has synced: an empty cache would make each cluster create a budget it
// already has.
func (c *Controller) enableBudgets() {
	l := c.members.Policy().V1().PodDisruptionBudgets().Lister()
	c.budgets.Store(&l)
}

// recheckBudgets asks again, every BudgetRecheck, whether the operator may
// manage PodDisruptionBudgets, until it may or ctx ends: a rule added to the
// role while the operator runs is then used without a restart. Once it may,
// the budgets' informer starts and every cluster is woken to make its
// budget. It closes done when it returns, so that Run shuts the informers
// down only after it.
func (c *Controller) recheckBudgets(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	err := wait.PollUntilContextCancel(ctx, c.budgetRecheck(), false, func(ctx context.Context) (bool, error) {
		return c.mayManageBudgets(ctx, false), nil
	})
	if err != nil {
		return
	}
	c.watchBudgets()
	c.members.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.members.Policy().V1().PodDisruptionBudgets().Informer().HasSynced) {
		return
	}
	c.enableBudgets()
	c.cfg.Log.Info("the role now allows managing poddisruptionbudgets: clusters get their disruption budget")
	c.pokeAll()
}

func (c *Controller) budgetRecheck() time.Duration {
	if c.cfg.BudgetRecheck > 0 {
		return c.cfg.BudgetRecheck
	}
	return statusutil.ReprobeInterval
}

// pokeAll wakes every cluster's goroutine.
func (c *Controller) pokeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.clusters {
		cl.Poke()
	}
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
	if !c.scope.Managed(cl) {
		// The scope annotation changed: the other kind of operator takes
		// over, and the event on the cluster says so.
		if known {
			msg, _ := api.ScopeMismatch(cl, c.cfg.ClusterWide)
			log.Infof("cluster is no longer managed by this operator: %s", msg)
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
	if c.runCtx.Err() != nil {
		// Run is stopping its clusters: one started now would outlive it.
		return
	}
	c.reapLocked()
	c.clusters[key] = cluster.New(c.runCtx, c.cfg.Cluster, cl)
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
	c.scope.Forget(cl.UID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if running, known := c.clusters[key]; known {
		c.cfg.Log.WithFields(logrus.Fields{"cluster-name": cl.Name, "cluster-namespace": cl.Namespace}).
			Info("cluster deleted; Kubernetes garbage collection removes its pods, services and volumes")
		c.stopLocked(key, running)
	}
}

func (c *Controller) stopLocked(key string, cl *cluster.Cluster) {
	cl.Stop()
	c.stopped = append(c.stopped, cl)
	delete(c.clusters, key)
	c.metrics.deleted.Inc()
	c.metrics.clusters.Set(float64(len(c.clusters)))
}

// reapLocked forgets the stopped goroutines that have exited.
func (c *Controller) reapLocked() {
	running := c.stopped[:0]
	for _, cl := range c.stopped {
		select {
		case <-cl.Done():
		default:
			running = append(running, cl)
		}
	}
	c.stopped = running
}

// pokeOwner wakes the cluster a pod, claim or service belongs to.
func (c *Controller) pokeOwner(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	name := o.GetLabels()[api.LabelClusterName]
	if name == "" {
		return
	}
	c.mu.Lock()
	cl := c.clusters[o.GetNamespace()+"/"+name]
	c.mu.Unlock()
	if cl != nil {
		cl.Poke()
	}
}

// pokeHandler wakes the owner of a pod, claim, service or budget.
func (c *Controller) pokeHandler() cache.ResourceEventHandlerFuncs {
	poke := func(obj interface{}) { c.safely("the owner's poke", func() { c.pokeOwner(obj) }) }
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, obj interface{}) { poke(obj) },
		DeleteFunc: poke,
	}
}

// safely runs an informer handler; a panic is logged with its stack.
func (c *Controller) safely(what string, fn func()) {
	_ = failure.Safely(c.cfg.Log, what, fn)
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

// keepOnly is the items that keep holds for, nil when none does.
func keepOnly[T any](items []T, keep func(T) bool) []T {
	items = slices.DeleteFunc(items, func(item T) bool { return !keep(item) })
	if len(items) == 0 {
		return nil
	}
	return items
}
