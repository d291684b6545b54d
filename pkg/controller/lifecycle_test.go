package controller

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/cluster"
	etcdfake "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// slowEtcd answers health checks after its context ends, and only after a
// while, recording that it did.
type slowEtcd struct {
	cluster.EtcdAPI
	entered  chan struct{}
	returned atomic.Bool
}

func (s *slowEtcd) ClusterHealth(ctx context.Context, _ etcdutil.ClientConfig) (etcdutil.Health, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	time.Sleep(300 * time.Millisecond)
	s.returned.Store(true)
	return etcdutil.Health{}, ctx.Err()
}

func (s *slowEtcd) MemberList(context.Context, etcdutil.ClientConfig) ([]*etcdserverpb.Member, error) {
	return nil, context.Canceled
}

func runningCluster() *api.EtcdCluster {
	cl := etcdCluster("operator", "example", nil, api.ClusterPhaseRunning)
	cl.Spec = api.ClusterSpec{Size: 1, Version: "3.5.21"}
	return cl
}

func runningMemberPod(cl *api.EtcdCluster) *corev1.Pod {
	m := &etcdutil.Member{Name: "example-a", Namespace: cl.Namespace, ClusterName: cl.Name}
	p := k8sutil.NewEtcdPod(cl.WithDefaults(), m, "3.5.21", etcdutil.NewMemberSet(m).PeerURLPairs(), k8sutil.ClusterStateNew, "t")
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	return p
}

func testController(t *testing.T, kube *kubefake.Clientset, crs *etcdfake.Clientset, etcd cluster.EtcdAPI) *Controller {
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	return New(Config{
		Namespace:  "operator",
		KubeClient: kube,
		EtcdClient: crs,
		Recorder:   record.NewFakeRecorder(100),
		Registerer: prometheus.NewRegistry(),
		Cluster: cluster.Config{
			ReconcileInterval: time.Hour,
			Etcd:              etcd,
			MembershipWait:    k8sutil.MembershipWait{Image: "op:test"},
		},
		Log: logrus.NewEntry(log),
	})
}

// An empty pod cache looks like a cluster that lost every member: no
// cluster goroutine may run a pass before the caches of what clusters are
// made of have synced.
func TestNoClusterPassRunsBeforeThePodCacheSynced(t *testing.T) {
	cl := runningCluster()
	kube := kubefake.NewSimpleClientset(runningMemberPod(cl))
	// The pod list fails until released (the fake clientset serialises its
	// calls, so a list that blocked would block every other call too).
	var released atomic.Bool
	kube.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if !released.Load() {
			return true, nil, errors.New("the pod list is not answered yet")
		}
		return false, nil, nil
	})
	crs := etcdfake.NewSimpleClientset(cl)
	etcd := &slowEtcd{entered: make(chan struct{}, 1)}
	ctrl := testController(t, kube, crs, etcd)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = ctrl.Run(ctx, nil) }()

	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		for _, a := range crs.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				s := a.(clienttesting.UpdateAction).GetObject().(*api.EtcdCluster).Status
				t.Fatalf("a status was written while the pod cache was empty: %q", s.Reason)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	released.Store(true)
	select {
	case <-etcd.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("once the caches synced, the cluster's pass did not read etcd through its running member")
	}
}

// Run stops every cluster goroutine and returns only once they have exited,
// so that a SIGTERM ends calls in flight before the process exits.
func TestRunWaitsForTheClusterGoroutines(t *testing.T) {
	cl := runningCluster()
	etcd := &slowEtcd{entered: make(chan struct{}, 1)}
	ctrl := testController(t, kubefake.NewSimpleClientset(runningMemberPod(cl)), etcdfake.NewSimpleClientset(cl), etcd)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx, nil) }()
	select {
	case <-etcd.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the cluster's pass never read etcd")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if !etcd.returned.Load() {
		t.Error("Run returned while a cluster goroutine was still in an etcd call")
	}
}

// A cluster the informer delivers once Run is stopping is not started: its
// goroutine would outlive Run, which has stopped and waited for the others.
func TestAClusterDeliveredWhileRunStopsIsNotStarted(t *testing.T) {
	cl := runningCluster()
	ctrl := testController(t, kubefake.NewSimpleClientset(), etcdfake.NewSimpleClientset(cl), &slowEtcd{entered: make(chan struct{}, 1)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ctrl.runCtx = ctx
	ctrl.sync(cl)
	if n := len(ctrl.clusters); n != 0 {
		t.Errorf("%d cluster goroutines started after Run's context ended", n)
	}
}

var _ = metav1.Now

// With the rights to manage PodDisruptionBudgets, every cluster of several
// members gets one keeping a quorum; without them (an older role), the
// operator runs all the same.
func TestClustersGetADisruptionBudgetWhenAllowed(t *testing.T) {
	for _, allowed := range []bool{true, false} {
		cl := runningCluster()
		cl.Spec.Size, cl.Spec.Paused = 3, true
		kube := kubefake.NewSimpleClientset()
		kube.PrependReactor("create", "selfsubjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
			review := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
			review.Status.Allowed = allowed
			return true, review, nil
		})
		ctrl := testController(t, kube, etcdfake.NewSimpleClientset(cl), &slowEtcd{entered: make(chan struct{}, 1)})
		ctx, cancel := context.WithCancel(context.Background())
		synced := make(chan struct{})
		go func() { _ = ctrl.Run(ctx, func() { close(synced) }) }()
		<-synced
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := kube.CoreV1().Services("operator").Get(ctx, "example-client", metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("allowed=%v: the cluster's services were not made", allowed)
		}
		var pdb *policyv1.PodDisruptionBudget
		_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := kube.PolicyV1().PodDisruptionBudgets("operator").Get(ctx, "example", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			pdb = got
			return true, nil
		})
		cancel()
		switch {
		case allowed && (pdb == nil || pdb.Spec.MinAvailable.IntValue() != 2):
			t.Errorf("allowed: budget %+v, want one keeping 2 of 3 members", pdb)
		case !allowed && pdb != nil:
			t.Errorf("not allowed: a budget was made: %+v", pdb)
		}
	}
}

// A role that gains the PodDisruptionBudget rule while the operator runs is
// used without a restart: the operator asks again while it may not, and
// clusters get their budget once it may.
func TestARuleAddedLaterGivesClustersTheirBudget(t *testing.T) {
	cl := runningCluster()
	cl.Spec.Size, cl.Spec.Paused = 3, true
	kube := kubefake.NewSimpleClientset()
	var allowed atomic.Bool
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		review := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		review.Status.Allowed = allowed.Load()
		return true, review, nil
	})
	ctrl := testController(t, kube, etcdfake.NewSimpleClientset(cl), &slowEtcd{entered: make(chan struct{}, 1)})
	ctrl.cfg.BudgetRecheck = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	synced := make(chan struct{})
	go func() { _ = ctrl.Run(ctx, func() { close(synced) }) }()
	<-synced
	budget := func(ctx context.Context) (bool, error) {
		_, err := kube.PolicyV1().PodDisruptionBudgets("operator").Get(ctx, "example", metav1.GetOptions{})
		return err == nil, nil
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Services("operator").Get(ctx, "example-client", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatal("the cluster's services were not made")
	}
	if made, _ := budget(ctx); made {
		t.Fatal("a budget was made before the role allowed it")
	}

	allowed.Store(true)
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, budget); err != nil {
		t.Fatal("the rule was added, and the cluster got no budget without a restart")
	}
}

// The caches keep no managedFields: they are a large part of every cached
// object and nothing reads them, and the caches hold several objects per
// cluster.
func TestTheCachesKeepNoManagedFields(t *testing.T) {
	fields := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{}}}`)}}}
	cl := runningCluster()
	cl.ManagedFields = fields
	pod := runningMemberPod(cl)
	pod.ManagedFields = fields
	kube := kubefake.NewSimpleClientset(pod)
	crs := etcdfake.NewSimpleClientset(cl)
	ctrl := testController(t, kube, crs, &slowEtcd{entered: make(chan struct{}, 1)})
	runUntilSynced(t, ctrl)
	cached, err := corelisters.NewPodLister(ctrl.cfg.Cluster.Pods).Pods(pod.Namespace).Get(pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(cached.ManagedFields) != 0 || cached.Status.Phase != corev1.PodRunning {
		t.Errorf("cached pod: managedFields %v, phase %q; want none and the pod otherwise as it is", cached.ManagedFields, cached.Status.Phase)
	}
	obj, ok, err := ctrl.clusterIndexer.GetByKey(cl.Namespace + "/" + cl.Name)
	if err != nil || !ok {
		t.Fatalf("cluster not cached: %v", err)
	}
	if got := obj.(*api.EtcdCluster); len(got.ManagedFields) != 0 || got.Spec.Size != 1 {
		t.Errorf("cached cluster: managedFields %v, size %d; want none and the cluster otherwise as it is", got.ManagedFields, got.Spec.Size)
	}
}

// The service cache keeps a service's metadata only, which is all a cluster
// reads of it (whose it is); its spec is most of it.
func TestTheServiceCacheKeepsMetadataOnly(t *testing.T) {
	cl := runningCluster()
	svc := k8sutil.NewClientService(cl)
	svc.Spec.ClusterIP = "10.96.0.10"
	kube := kubefake.NewSimpleClientset(svc)
	ctrl := testController(t, kube, etcdfake.NewSimpleClientset(), &slowEtcd{entered: make(chan struct{}, 1)})
	ctx := runUntilSynced(t, ctrl)
	cached, err := ctrl.cfg.Cluster.ServiceLister.Services(svc.Namespace).Get(svc.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(cached.Spec.Ports) != 0 || cached.Spec.ClusterIP != "" {
		t.Errorf("cached service spec %+v, want none", cached.Spec)
	}
	if len(cached.OwnerReferences) != 1 || cached.OwnerReferences[0].UID != cl.UID || cached.Labels[api.LabelClusterName] != cl.Name {
		t.Errorf("cached service metadata %+v, want the owner and labels as they are", cached.ObjectMeta)
	}
	// The API still holds the whole service.
	got, err := kube.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	if err != nil || got.Spec.ClusterIP != "10.96.0.10" {
		t.Errorf("service in the API: %+v, %v", got, err)
	}
}

// The pod cache keeps what a cluster reads of a pod (the containers' names,
// images, commands and probes, the anti-affinity, the phase, conditions, pod
// IP and containers' states), and leaves out the rest.
func TestThePodCacheKeepsWhatClustersRead(t *testing.T) {
	cl := runningCluster()
	pod := servedMemberPod(cl, "example-a")
	pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}}}}
	kube := kubefake.NewSimpleClientset(pod.DeepCopy())
	ctrl := testController(t, kube, etcdfake.NewSimpleClientset(), &slowEtcd{entered: make(chan struct{}, 1)})
	runUntilSynced(t, ctrl)
	cached, err := corelisters.NewPodLister(ctrl.cfg.Cluster.Pods).Pods(pod.Namespace).Get(pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	want := pod.DeepCopy()
	trimPod(want)
	if !equality.Semantic.DeepEqual(cached, want) {
		t.Errorf("cached pod differs from the trimmed one:\n%s", cmp.Diff(want, cached))
	}
	// What is kept.
	etcd, wantEtcd := cached.Spec.Containers[0], pod.Spec.Containers[0]
	if etcd.Name != wantEtcd.Name || etcd.Image != wantEtcd.Image || !slices.Equal(etcd.Command, wantEtcd.Command) ||
		!equality.Semantic.DeepEqual(etcd.ReadinessProbe, wantEtcd.ReadinessProbe) || !equality.Semantic.DeepEqual(etcd.LivenessProbe, wantEtcd.LivenessProbe) {
		t.Errorf("cached etcd container %+v, want its name, image, command and probes", etcd)
	}
	if len(cached.Spec.InitContainers) != len(pod.Spec.InitContainers) || !equality.Semantic.DeepEqual(cached.Spec.Affinity, pod.Spec.Affinity) ||
		!equality.Semantic.DeepEqual(cached.ObjectMeta, pod.ObjectMeta) {
		t.Errorf("cached pod lost its init containers, affinity or metadata")
	}
	st, wantSt := cached.Status, pod.Status
	if st.Phase != wantSt.Phase || st.PodIP != wantSt.PodIP || !equality.Semantic.DeepEqual(st.Conditions, wantSt.Conditions) ||
		st.ContainerStatuses[0].Image != wantSt.ContainerStatuses[0].Image ||
		!equality.Semantic.DeepEqual(st.ContainerStatuses[0].State, wantSt.ContainerStatuses[0].State) ||
		!equality.Semantic.DeepEqual(st.InitContainerStatuses[0].State, wantSt.InitContainerStatuses[0].State) {
		t.Errorf("cached pod status %+v, want the phase, pod IP, conditions and containers' states", st)
	}
	if got, want := k8sutil.PodMaxLearners(cached), k8sutil.PodMaxLearners(pod); got != want || got < 2 {
		t.Errorf("cached pod allows %d learners, the pod %d: the cluster reads ETCD_MAX_LEARNERS from the cache", got, want)
	}
	// What is left out.
	if slices.ContainsFunc(cached.Spec.Volumes, func(v corev1.Volume) bool { return v.Name != k8sutil.EtcdDataVolumeName }) || cached.Spec.Tolerations != nil || etcd.Ports != nil || etcd.SecurityContext != nil ||
		st.ContainerStatuses[0].ImageID != "" || st.PodIPs != nil {
		t.Errorf("cached pod keeps volumes other than the data volume, tolerations, ports, security context, image IDs or pod IPs")
	}
}

// runUntilSynced runs ctrl until the test ends and returns once its caches
// are filled, with the test's context.
func runUntilSynced(t *testing.T, ctrl *Controller) context.Context {
	t.Helper()
	ctx := t.Context()
	synced := make(chan struct{})
	go func() { _ = ctrl.Run(ctx, func() { close(synced) }) }()
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("the caches did not sync")
	}
	return ctx
}

// The pod cache keeps what adopting a pod of coreos/etcd-operator reads of
// it: the data volume and where etcd mounts it. Without them every member
// the original made was refused ("does not mount volume etcd-data").
func TestThePodCacheKeepsWhatAdoptionReads(t *testing.T) {
	const name, peer, client = "example-a", "http://example-a.example.ns.svc:2380", "http://example-a.example.ns.svc:2379"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: k8sutil.EtcdDataVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "member-peer-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "peer"}}},
			},
			Containers: []corev1.Container{{
				Name: k8sutil.EtcdContainerName,
				Command: []string{"/usr/local/bin/etcd", "--data-dir=" + k8sutil.EtcdDataDir, "--name=" + name,
					"--initial-advertise-peer-urls=" + peer, "--advertise-client-urls=" + client},
				VolumeMounts: []corev1.VolumeMount{
					{Name: k8sutil.EtcdDataVolumeName, MountPath: k8sutil.EtcdDataMountDir},
					{Name: "member-peer-tls", MountPath: "/etc/etcdtls/member/peer-tls"},
				},
			}},
		},
	}
	if why := k8sutil.OriginalLayoutProblem(pod, peer, client, false, false); why != "" {
		t.Fatalf("the pod before the cache: %s", why)
	}
	trimPod(pod)
	if why := k8sutil.OriginalLayoutProblem(pod, peer, client, false, false); why != "" {
		t.Errorf("the cached pod: %s", why)
	}
	if len(pod.Spec.Volumes) != 1 || len(pod.Spec.Containers[0].VolumeMounts) != 1 {
		t.Errorf("the cached pod keeps volumes %v and mounts %v; want the data volume and its mount only",
			pod.Spec.Volumes, pod.Spec.Containers[0].VolumeMounts)
	}
}
