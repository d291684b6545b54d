package controller

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/cluster"
	etcdfake "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// BenchmarkIdleClusterMemory is what the operator keeps per idle one-member
// cluster: the whole controller (informers, one goroutine per cluster, the
// metrics) on fake clientsets holding n clusters, each with a running,
// ready member pod shaped as the API server and the kubelet fill it in. Once
// every cluster is Running and at rest, the process's memory is read after a
// GC; the controller is then stopped and dropped, and read again: the
// difference is what the operator held. It prints the figures per cluster
// (the slope between the two sizes, so the controller's own constant part
// drops out) and asserts nothing about them.
//
// "real etcd" has every etcd read also go to a real etcd member in this
// process through the cluster's own client (dialled, used, closed at rest as
// in production), so that what a dial leaves behind (a grown goroutine stack,
// the client's state) shows; "fake etcd" answers from memory only.
//
// IDLE_HEAP_PROFILE=file writes a heap profile of the larger size, taken
// while every cluster is at rest (with -memprofilerate=1 for every
// allocation): `go tool pprof -sample_index=inuse_space -top file`.
func BenchmarkIdleClusterMemory(b *testing.B) {
	sizes := []int{50, 250}
	for _, real := range []bool{false, true} {
		name := "fake etcd"
		if real {
			name = "real etcd"
		}
		b.Run(name, func(b *testing.B) {
			var endpoint string
			if real {
				e, err := backuptest.StartEtcd(backuptest.EtcdOptions{Dir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(e.Close)
				endpoint = e.Endpoint
			}
			for b.Loop() {
				var held []idleMemory
				for i, n := range sizes {
					profile := ""
					if i == len(sizes)-1 {
						profile = os.Getenv("IDLE_HEAP_PROFILE")
					}
					held = append(held, measureIdleClusters(b, n, endpoint, profile))
				}
				small, large := held[0], held[len(held)-1]
				per := func(f func(idleMemory) float64) float64 {
					return (f(large) - f(small)) / float64(large.clusters-small.clusters)
				}
				heap := per(func(m idleMemory) float64 { return m.heapInuse })
				live := per(func(m idleMemory) float64 { return m.heapAlloc })
				stack := per(func(m idleMemory) float64 { return m.stackInuse })
				grown := per(func(m idleMemory) float64 { return m.stackBeforeGC })
				goroutines := per(func(m idleMemory) float64 { return m.goroutines })
				b.ReportMetric(heap, "heap-inuse-B/cluster")
				b.ReportMetric(live, "heap-live-B/cluster")
				b.ReportMetric(stack, "stack-B/cluster")
				b.ReportMetric(grown, "stack-before-GC-B/cluster")
				b.ReportMetric(goroutines, "goroutines/cluster")
				b.Logf("%s, per idle cluster (%d to %d clusters): heap in use %.1f KiB, live heap %.1f KiB, stacks %.1f KiB (%.1f KiB before the collections), %.2f goroutines",
					name, small.clusters, large.clusters, heap/1024, live/1024, stack/1024, grown/1024, goroutines)
			}
		})
	}
}

// idleMemory is what a controller with that many idle clusters held.
type idleMemory struct {
	clusters                                     int
	heapInuse, heapAlloc, stackInuse, goroutines float64
	stackBeforeGC                                float64
}

func measureIdleClusters(b *testing.B, n int, realEndpoint, profile string) idleMemory {
	b.Helper()
	var clusters, members []runtime.Object
	for i := range n {
		cl := &api.EtcdCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "operator", Name: fmt.Sprintf("c%04d", i), UID: types.UID(fmt.Sprintf("uid-%04d", i)),
				Generation: 1, ResourceVersion: "1", CreationTimestamp: metav1.Now()},
			Spec:   api.ClusterSpec{Size: 1, Version: "3.5.21"},
			Status: api.ClusterStatus{Phase: api.ClusterPhaseRunning},
		}
		clusters = append(clusters, cl)
		members = append(members, servedMemberPod(cl, idleMemberName(cl.Name)))
		// The services exist already, as those of clusters at rest do.
		for j, svc := range []*corev1.Service{k8sutil.NewClientService(cl), k8sutil.NewPeerService(cl)} {
			svc.UID = types.UID(fmt.Sprintf("svc-%d-%s", j, cl.UID))
			svc.ResourceVersion, svc.CreationTimestamp = "1", metav1.Now()
			if svc.Spec.ClusterIP == "" {
				svc.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", i/250, i%250)
			}
			svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
			single := corev1.IPFamilyPolicySingleStack
			cluster := corev1.ServiceInternalTrafficPolicyCluster
			svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv4Protocol}, &single
			svc.Spec.SessionAffinity, svc.Spec.InternalTrafficPolicy = corev1.ServiceAffinityNone, &cluster
			members = append(members, svc)
		}
	}
	kube := kubefake.NewSimpleClientset(members...)
	crs := etcdfake.NewSimpleClientset(clusters...)
	spacedWrites(&kube.Fake)
	spacedWrites(&crs.Fake)
	etcd := &idleEtcd{real: realEndpoint}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	ctrl := New(Config{
		Namespace:  "operator",
		KubeClient: kube,
		EtcdClient: crs,
		Recorder:   &record.FakeRecorder{},
		Registerer: prometheus.NewRegistry(),
		Cluster: cluster.Config{
			// Short ticks so that every cluster comes to rest within the
			// benchmark; each tick is a pass as in production.
			ReconcileInterval: 50 * time.Millisecond,
			MaxIdleInterval:   5 * time.Second,
			MinPassInterval:   10 * time.Millisecond,
			Etcd:              etcd,
			MembershipWait:    k8sutil.MembershipWait{Image: "op:test"},
		},
		Log: logrus.NewEntry(log),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx, nil) }()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := crs.EtcdV1beta2().EtcdClusters("operator").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, cl := range list.Items {
			if len(cl.Status.Members.Ready) != 1 || cl.Status.ServiceName == "" {
				return false, nil
			}
		}
		return etcd.reads() >= n, nil
	})
	if err != nil {
		cancel()
		b.Fatalf("%d clusters did not all come to rest: %v", n, err)
	}
	// A few idle passes each, until the ticks are seconds apart: few passes
	// are under way when the memory is read.
	time.Sleep(4 * time.Second)
	running := readMemory()
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
		_ = f.Close()
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	ctrl = nil
	stopped := readMemory()
	goruntime.KeepAlive(kube)
	goruntime.KeepAlive(crs)
	return idleMemory{
		clusters:   n,
		heapInuse:  running.heapInuse - stopped.heapInuse,
		heapAlloc:  running.heapAlloc - stopped.heapAlloc,
		stackInuse: running.stackInuse - stopped.stackInuse,
		// The stopped controller's stacks are gone whatever the collections.
		stackBeforeGC: running.stackBeforeGC - stopped.stackInuse,
		goroutines:    running.goroutines - stopped.goroutines,
	}
}

func readMemory() idleMemory {
	// Stacks as they are between collections: a collection halves the
	// stacks that use little of their size, one halving each.
	var before goruntime.MemStats
	goruntime.ReadMemStats(&before)
	// Two collections: the first may leave objects with finalizers.
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return idleMemory{heapInuse: float64(ms.HeapInuse), heapAlloc: float64(ms.HeapAlloc),
		stackInuse: float64(ms.StackInuse), stackBeforeGC: float64(before.StackInuse), goroutines: float64(goruntime.NumGoroutine())}
}

func idleMemberName(cluster string) string { return cluster + "-abcdefghij" }

// servedMemberPod is the member pod the operator made, as the API server
// and the kubelet fill it in: defaults, the service account's token volume,
// the scheduler's and kubelet's status.
func servedMemberPod(cl *api.EtcdCluster, name string) *corev1.Pod {
	m := &etcdutil.Member{Name: name, Namespace: cl.Namespace, ClusterName: cl.Name}
	p := k8sutil.NewEtcdPod(cl.WithDefaults(), m, "3.5.21", etcdutil.NewMemberSet(m).PeerURLPairs(), k8sutil.ClusterStateNew, "token")
	p.UID = types.UID("pod-" + name)
	p.ResourceVersion = "12345"
	p.CreationTimestamp = metav1.Now()
	p.GenerateName = ""
	spec := &p.Spec
	spec.DNSPolicy = corev1.DNSClusterFirst
	spec.SchedulerName = corev1.DefaultSchedulerName
	spec.ServiceAccountName, spec.DeprecatedServiceAccount = "default", "default"
	spec.NodeName = "node-1"
	spec.TerminationGracePeriodSeconds = new(int64(30))
	spec.Priority = new(int32(0))
	policy := corev1.PreemptLowerPriority
	spec.PreemptionPolicy = &policy
	spec.Tolerations = append(spec.Tolerations,
		corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
		corev1.Toleration{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))})
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			cs[i].TerminationMessagePath = corev1.TerminationMessagePathDefault
			if cs[i].TerminationMessagePolicy == "" {
				cs[i].TerminationMessagePolicy = corev1.TerminationMessageReadFile
			}
		}
	}
	now := metav1.Now()
	started := metav1.NewTime(now.Add(-time.Minute))
	conds := []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled}
	for _, c := range conds {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.HostIP, p.Status.PodIP = "10.0.0.1", "10.244.0.17"
	p.Status.HostIPs = []corev1.HostIP{{IP: "10.0.0.1"}}
	p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.0.17"}}
	p.Status.StartTime = &started
	p.Status.QOSClass = corev1.PodQOSBestEffort
	status := func(c corev1.Container, state corev1.ContainerState, ready bool) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: c.Name, State: state, Ready: ready, Image: c.Image,
			ImageID:     c.Image + "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			ContainerID: "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Started: new(ready)}
	}
	for _, c := range spec.InitContainers {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, status(c, corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: started, FinishedAt: started}}, true))
	}
	for _, c := range spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, status(c, corev1.ContainerState{
			Running: &corev1.ContainerStateRunning{StartedAt: started}}, true))
	}
	return p
}

// spacedWrites spaces a fake clientset's writes out by a millisecond or
// two (the fake runs one call at a time): its watchers hold 100 events and
// panic when full, fewer than a burst of a status write per cluster.
func spacedWrites(fake *clienttesting.Fake) {
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		fake.PrependReactor(verb, "*", func(clienttesting.Action) (bool, runtime.Object, error) {
			time.Sleep(2 * time.Millisecond)
			return false, nil, nil
		})
	}
}

// idleEtcd answers every idle cluster's reads as its healthy one-member
// etcd would; with real set, each read also goes to that real etcd through
// the cluster's own client.
type idleEtcd struct {
	cluster.EtcdAPI
	real string

	mu    sync.Mutex
	count int
}

func (e *idleEtcd) reads() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.count
}

// member is the one member behind cc's endpoint.
func (e *idleEtcd) member(cc etcdutil.ClientConfig) (*etcdutil.Member, uint64) {
	name, _ := etcdutil.MemberNameFromPeerURL(cc.Endpoints[0])
	m := &etcdutil.Member{Name: name, Namespace: "operator", ClusterName: etcdutil.ClusterNameFromMemberName(name)}
	var id uint64 = 1469598103934665603
	for _, c := range []byte(name) {
		id = (id ^ uint64(c)) * 1099511628211
	}
	return m, id
}

// alsoReal makes the same call of the real etcd through cc's client cache.
func (e *idleEtcd) alsoReal(ctx context.Context, cc etcdutil.ClientConfig, call func(context.Context, cluster.EtcdAPI, etcdutil.ClientConfig) error) error {
	if e.real == "" {
		return nil
	}
	cc.Endpoints = []string{e.real}
	return call(ctx, cluster.NewEtcdAPI(), cc)
}

func (e *idleEtcd) ClusterHealth(ctx context.Context, cc etcdutil.ClientConfig) (etcdutil.Health, error) {
	if err := e.alsoReal(ctx, cc, func(ctx context.Context, a cluster.EtcdAPI, cc etcdutil.ClientConfig) error {
		_, err := a.ClusterHealth(ctx, cc)
		return err
	}); err != nil {
		return etcdutil.Health{}, err
	}
	m, id := e.member(cc)
	e.mu.Lock()
	e.count++
	e.mu.Unlock()
	return etcdutil.Health{
		Members: []etcdutil.MemberHealth{{ID: id, Name: m.Name, PeerURLs: []string{m.PeerURL()}, ClientURL: m.ClientURL(),
			Version: "3.5.21", Leader: id, Revision: 1, DBSize: 20480, DBSizeInUse: 16384}},
		LeaderID:     id,
		Linearizable: true,
	}, nil
}

func (e *idleEtcd) MemberList(ctx context.Context, cc etcdutil.ClientConfig) ([]*etcdserverpb.Member, error) {
	if err := e.alsoReal(ctx, cc, func(ctx context.Context, a cluster.EtcdAPI, cc etcdutil.ClientConfig) error {
		_, err := a.MemberList(ctx, cc)
		return err
	}); err != nil {
		return nil, err
	}
	m, id := e.member(cc)
	return []*etcdserverpb.Member{{ID: id, Name: m.Name, PeerURLs: []string{m.PeerURL()}, ClientURLs: []string{m.ClientURL()}}}, nil
}

func (e *idleEtcd) ClusterVersion(ctx context.Context, cc etcdutil.ClientConfig) (string, error) {
	if err := e.alsoReal(ctx, cc, func(ctx context.Context, a cluster.EtcdAPI, cc etcdutil.ClientConfig) error {
		_, err := a.ClusterVersion(ctx, cc)
		return err
	}); err != nil {
		return "", err
	}
	return "3.5.0", nil
}
