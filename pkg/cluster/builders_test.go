package cluster

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// The builders of the package's tests, one vocabulary for fixtures (whole
// passes on fake clients) and snapshots (decide's table): a cluster is
// shaped with with... options (newTestCluster, or spec(...) on a snapshot),
// a pod with podOpts (fixture.pod, or podIs(...) on a snapshot). The
// snapshot-only facts (etcd's answers, the goroutine's records) are in
// snapshot_builders_test.go.

const (
	testNS      = "ns"
	testName    = "example"
	testUID     = types.UID("uid-example")
	testVersion = "3.5.21"
)

// testStart is the fixture's clock at the beginning of every test.
var testStart = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// newTestCluster is a valid running cluster of three members at testVersion.
func newTestCluster(mods ...func(*api.EtcdCluster)) *api.EtcdCluster {
	cl := &api.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: testName, Namespace: testNS, UID: testUID,
			Generation: 1, ResourceVersion: "1",
		},
		Spec:   api.ClusterSpec{Size: 3, Version: testVersion},
		Status: api.ClusterStatus{Phase: api.ClusterPhaseRunning},
	}
	for _, m := range mods {
		m(cl)
	}
	return cl
}

func withPhase(p api.ClusterPhase) func(*api.EtcdCluster) {
	return func(cl *api.EtcdCluster) { cl.Status.Phase = p }
}

// withTogether asks for a new cluster's members to start together, as
// they do by default.
func withTogether(cl *api.EtcdCluster) {
	cl.Spec.Bootstrap = &api.BootstrapPolicy{Mode: api.BootstrapTogether}
}

// withSeedAndJoin asks for a new cluster to start from one seed, its other
// members added one at a time, as coreos/etcd-operator started clusters.
func withSeedAndJoin(cl *api.EtcdCluster) {
	cl.Spec.Bootstrap = &api.BootstrapPolicy{Mode: api.BootstrapSeedAndJoin}
}

func withSize(n int) func(*api.EtcdCluster) {
	return func(cl *api.EtcdCluster) { cl.Spec.Size = n }
}

func withVersion(v string) func(*api.EtcdCluster) {
	return func(cl *api.EtcdCluster) { cl.Spec.Version = v }
}

func withPaused(cl *api.EtcdCluster) { cl.Spec.Paused = true }

func withRepository(r string) func(*api.EtcdCluster) {
	return func(cl *api.EtcdCluster) { cl.Spec.Repository = r }
}

func withNodeSelector(k, v string) func(*api.EtcdCluster) {
	return func(cl *api.EtcdCluster) {
		if cl.Spec.Pod == nil {
			cl.Spec.Pod = &api.PodPolicy{}
		}
		cl.Spec.Pod.NodeSelector = map[string]string{k: v}
	}
}

// neverAvailable is a cluster whose status says it has not been available yet.
func neverAvailable(cl *api.EtcdCluster) {
	cl.Status.Conditions = []api.ClusterCondition{{
		Type: api.ClusterConditionAvailable, Status: corev1.ConditionFalse, Reason: reasonNotYetAvailable,
		LastUpdateTime: testStart.Format(time.RFC3339), LastTransitionTime: testStart.Format(time.RFC3339),
	}}
}

func withPVC(cl *api.EtcdCluster) {
	cl.Spec.Pod = &api.PodPolicy{PersistentVolumeClaimSpec: &corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceStorage: resource.MustParse("1Gi"),
		}},
	}}
}

// withNodeLostAfter sets spec.pod.nodeLostAfterSeconds; after withPVC, which
// sets spec.pod whole.
func withNodeLostAfter(seconds int64) func(*api.EtcdCluster) {
	return func(cl *api.EtcdCluster) {
		if cl.Spec.Pod == nil {
			cl.Spec.Pod = &api.PodPolicy{}
		}
		cl.Spec.Pod.NodeLostAfterSeconds = seconds
	}
}

func withClusterDomain(domain string) func(*api.EtcdCluster) {
	return func(cl *api.EtcdCluster) {
		if cl.Spec.Pod == nil {
			cl.Spec.Pod = &api.PodPolicy{}
		}
		cl.Spec.Pod.ClusterDomain = domain
	}
}

func withTLS(cl *api.EtcdCluster) {
	cl.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{
		Member:         &api.MemberSecret{PeerSecret: "peer-tls", ServerSecret: "server-tls"},
		OperatorSecret: "operator-tls",
	}}
}

// withIssuedTLS asks the operator to issue the cluster's certificates.
func withIssuedTLS(cl *api.EtcdCluster) {
	cl.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{}}
}

// podOpt changes a test pod.
type podOpt func(*corev1.Pod)

func notReady(p *corev1.Pod) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
}

// readyAgain marks a pod Ready, as after notReady.
func readyAgain(p *corev1.Pod) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i].Status = corev1.ConditionTrue
		}
	}
}

func pendingFor(d time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = nil
		p.Status.ContainerStatuses = nil
		p.CreationTimestamp = metav1.NewTime(testStart.Add(-d))
	}
}

func failed(p *corev1.Pod) {
	p.Status.Phase = corev1.PodFailed
	p.Status.Conditions = nil
}

func terminating(p *corev1.Pod) {
	ts := metav1.NewTime(testStart)
	p.DeletionTimestamp = &ts
}

func ownedBy(uid types.UID) podOpt {
	return func(p *corev1.Pod) { p.OwnerReferences[0].UID = uid }
}

// onVersion makes the pod run another etcd version than the spec's.
func onVersion(v string) podOpt {
	return func(p *corev1.Pod) {
		p.Annotations[api.AnnotationVersion] = v
		p.Spec.Containers[0].Image = api.EtcdImage(api.DefaultRepository, v)
		if len(p.Status.ContainerStatuses) > 0 {
			p.Status.ContainerStatuses[0].Image = p.Spec.Containers[0].Image
		}
	}
}

// madeFor32 gives the pod the exec probes of a pod created for etcd 3.2.
func madeFor32(p *corev1.Pod) {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-ec", "etcdctl endpoint status"}}}}
	p.Spec.Containers[0].ReadinessProbe = probe
	p.Spec.Containers[0].LivenessProbe = probe.DeepCopy()
}

func restarted(n int32) podOpt {
	return func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount = n }
}

// runs makes the pod's container run version v, whatever its spec says.
func runs(v string) podOpt {
	return func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Image = api.EtcdImage(api.DefaultRepository, v) }
}

// withoutMaxLearners makes the pod one made before the operator set
// ETCD_MAX_LEARNERS.
func withoutMaxLearners(p *corev1.Pod) {
	p.Spec.Containers[0].Env = slices.DeleteFunc(p.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == api.EnvMaxLearners })
}

func evicted(p *corev1.Pod) {
	failed(p)
	p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: memory."
}

func unknownPhase(p *corev1.Pod) { p.Status.Phase = corev1.PodUnknown }

// exitedWith makes the pod's etcd end with exit code 2 and msg as the end of
// its log.
func exitedWith(msg string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: msg}}
	}
}

// crashLooping makes the pod's etcd wait to be restarted after its restarts.
func crashLooping(restarts int32) podOpt {
	return func(p *corev1.Pod) {
		notReady(p)
		cs := &p.Status.ContainerStatuses[0]
		cs.Ready, cs.RestartCount = false, restarts
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}}
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}
	}
}

func restoreSeed(p *corev1.Pod) {
	p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "fetch-backup"})
}

func startedAgo(d time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(testStart.Add(-d))
	}
}

func waitingForImage(p *corev1.Pod) { imagePullFailing(p) }

// etcdNeverStarted makes the pod's etcd container one that never started.
func etcdNeverStarted(p *corev1.Pod) {
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	p.Status.ContainerStatuses[0].Ready = false
}

// unschedulable makes the pod one the scheduler cannot place.
func unschedulable(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
	}}
}

// neverReady makes the pod's Ready condition False since before its init
// containers were done: its etcd never passed its readiness check.
func neverReady(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(testStart.Add(-50 * time.Minute))},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(testStart.Add(-time.Hour))},
	}
}

// unmarkedOnClaim makes the pod one made on a claim that was there before
// it: an earlier pod may have written there.
func unmarkedOnClaim(p *corev1.Pod) { delete(p.Annotations, k8sutil.AnnotationFirstOnClaim) }

// readyOnce makes the pod's Ready condition one that went False after the
// pod's init containers were done: its etcd was ready for a while.
func readyOnce(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(testStart.Add(-50 * time.Minute))},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(testStart.Add(-time.Minute))},
	}
}

// sysctlForbidden makes the pod one the kubelet rejected before starting
// any container: it asks for a sysctl the node does not allow.
func sysctlForbidden(p *corev1.Pod) {
	failed(p)
	p.Status.Reason, p.Status.Message = "SysctlForbidden", "Pod forbidden sysctl: \"kernel.msgmax\" not allowlisted"
	p.Status.InitContainerStatuses, p.Status.ContainerStatuses = nil, nil
}

func forced(p *corev1.Pod) { k8sutil.WithForceNewCluster()(p) }

// imagePullFailing makes the etcd container wait for an image that cannot be
// pulled, in a pod the kubelet keeps Running but not Ready.
func imagePullFailing(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if len(p.Status.ContainerStatuses) == 0 {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: k8sutil.EtcdContainerName}}
	}
	p.Status.ContainerStatuses[0].Ready = false
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "ErrImagePull", Message: "failed to pull image: not found",
	}}
}

func runningReady() corev1.PodStatus {
	return corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: k8sutil.EtcdContainerName, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}},
	}
}

// resolvable makes a joining pod Pending with check-dns done and the
// membership wait running: the state in which it is added.
func resolvable(p *corev1.Pod) {
	p.Status = corev1.PodStatus{
		Phase: corev1.PodPending,
		InitContainerStatuses: []corev1.ContainerStatus{
			{Name: k8sutil.DNSCheckContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
			{Name: k8sutil.MembershipWaitContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		},
	}
}

// resolving makes a joining pod Pending with check-dns still running.
func resolving(p *corev1.Pod) {
	p.Status = corev1.PodStatus{
		Phase: corev1.PodPending,
		InitContainerStatuses: []corev1.ContainerStatus{
			{Name: k8sutil.DNSCheckContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		},
	}
}

// resolvingFor makes a pod Pending with check-dns looking up the member's
// name for d.
func resolvingFor(d time.Duration) podOpt {
	return func(p *corev1.Pod) {
		resolving(p)
		p.Status.InitContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(testStart.Add(-d))
	}
}

// gaveUpOnDNS makes a pod Pending with check-dns run again after it gave up
// on the member's name (spec.pod.DNSTimeoutInSecond).
func gaveUpOnDNS(p *corev1.Pod) {
	resolvingFor(time.Second)(p)
	st := &p.Status.InitContainerStatuses[0]
	st.RestartCount = 1
	st.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
}

func createdAgo(d time.Duration) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(testStart.Add(-d)) }
}

// memberPod is the pod of member m as the operator makes it, created an
// hour before the test starts, Running and Ready on the spec's version, its
// etcd started at startedAt; opts change it from there.
func memberPod(cl *api.EtcdCluster, m *etcdutil.Member, startedAt time.Time, opts ...podOpt) *corev1.Pod {
	p := k8sutil.NewEtcdPod(cl, m, cl.Spec.Version, etcdutil.NewMemberSet(m).PeerURLPairs(), k8sutil.ClusterStateExisting, "")
	p.UID = types.UID("pod-uid-" + m.Name)
	p.CreationTimestamp = metav1.NewTime(testStart.Add(-time.Hour))
	p.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: k8sutil.EtcdContainerName, Image: p.Spec.Containers[0].Image, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}},
		}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}
