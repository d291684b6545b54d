package cluster

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// fixture is one cluster on fake clients: the EtcdCluster in the generated
// fake clientset, pods in a lister the test fills (the informer), a fake
// kube clientset recording what the loop does, a fake recorder and a fake
// etcd. The clock stands still unless the test moves it.
type fixture struct {
	t        testing.TB
	cl       *api.EtcdCluster
	kube     *kubefake.Clientset
	crs      *fake.Clientset
	indexer  cache.Indexer
	claims   cache.Indexer
	services cache.Indexer
	recorder *record.FakeRecorder
	etcd     *fakeEtcd
	now      time.Time
	names    int
	c        *Cluster
}

func newFixture(t testing.TB, cl *api.EtcdCluster, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		t:        t,
		cl:       cl,
		kube:     kubefake.NewSimpleClientset(objs...),
		crs:      fake.NewSimpleClientset(cl.DeepCopy()),
		indexer:  newIndexer(),
		claims:   newIndexer(),
		services: newIndexer(),
		recorder: record.NewFakeRecorder(1000),
		etcd:     &fakeEtcd{down: map[uint64]bool{}, answering: map[uint64]bool{}, dbSize: map[uint64]int64{}, dbSizeInUse: map[uint64]int64{}},
		now:      testStart,
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	if testing.Verbose() {
		log.SetOutput(testWriter{t})
		log.SetLevel(logrus.DebugLevel)
	}
	f.c = newCluster(t.Context(), Config{
		KubeClient:     f.kube,
		EtcdClient:     f.crs,
		Pods:           f.indexer,
		Claims:         f.claims,
		ServiceLister:  corelisters.NewServiceLister(f.services),
		Recorder:       f.recorder,
		Metrics:        NewMetrics(nil),
		Etcd:           f.etcd,
		PendingTimeout: 5 * time.Minute,
		MembershipWait: k8sutil.MembershipWait{Image: testJoinImage, PullPolicy: corev1.PullIfNotPresent, Timeout: 5 * time.Minute},
		Log:            logrus.NewEntry(log),
	}, cl)
	f.c.now = func() time.Time { return f.now }
	// A cluster at rest reads etcd once a minute for its day-2 care; the
	// tests start right after such a read.
	f.c.etcdReadAt = testStart
	f.c.randomSuffix = func() string {
		f.names++
		return fmt.Sprintf("new%07d", f.names)
	}
	// Most tests start from a cluster whose services exist already.
	cld := cl.WithDefaults()
	for _, svc := range []*corev1.Service{k8sutil.NewPeerService(cld), k8sutil.NewClientService(cld)} {
		f.addService(svc)
	}
	return f
}

func newIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, k8sutil.ClusterIndex: k8sutil.IndexByCluster})
}

// addService puts a service in the lister and in the fake API.
func (f *fixture) addService(svc *corev1.Service) {
	f.t.Helper()
	if err := f.services.Update(svc); err != nil {
		f.t.Fatal(err)
	}
	if err := f.kube.Tracker().Add(svc); err != nil {
		f.t.Fatal(err)
	}
}

// withoutServices removes the services the fixture starts with.
func (f *fixture) withoutServices() *fixture {
	f.deleteService(k8sutil.PeerServiceName(testName))
	f.deleteService(k8sutil.ClientServiceName(testName))
	f.kube.ClearActions()
	return f
}

// deleteService deletes a service from the lister and the fake API.
func (f *fixture) deleteService(name string) {
	f.t.Helper()
	if obj, exists, _ := f.services.GetByKey(testNS + "/" + name); exists {
		_ = f.services.Delete(obj)
	}
	_ = f.kube.CoreV1().Services(testNS).Delete(context.Background(), name, metav1.DeleteOptions{})
}

// claim puts the claim of member name in the lister and the fake API, bound.
func (f *fixture) claim(name string) *corev1.PersistentVolumeClaim {
	f.t.Helper()
	pvc := k8sutil.NewEtcdPVC(f.cl.WithDefaults(), name, f.cl.WithDefaults().Spec.Version)
	if pvc == nil {
		f.t.Fatal("the test cluster uses no claims")
	}
	pvc.Status.Phase = corev1.ClaimBound
	if err := f.claims.Update(pvc); err != nil {
		f.t.Fatal(err)
	}
	if err := f.kube.Tracker().Add(pvc); err != nil {
		if err := f.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), pvc, testNS); err != nil {
			f.t.Fatal(err)
		}
	}
	return pvc
}

// claimsFixture is a healthy cluster of three members on claims.
func claimsFixture(t *testing.T) *fixture {
	f := newFixture(t, newTestCluster(withPVC))
	f.withMembers(memberA, memberB, memberC)
	for _, n := range []string{memberA, memberB, memberC} {
		f.pod(n)
		f.claim(n)
	}
	return f
}

// forgetMembership makes the loop lose its record of the membership, as an
// operator restart does.
func (f *fixture) forgetMembership() { f.c.knownMembership.forget() }

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// member is the etcdutil member of the test cluster called name.
func (f *fixture) member(name string) *etcdutil.Member {
	m := memberTemplate(f.cl.WithDefaults())
	m.Name = name
	m.ID = memberID(name)
	return &m
}

// withMembers makes names the membership, both in etcd (started, the first
// one leading) and in the loop's memory.
func (f *fixture) withMembers(names ...string) *fixture {
	f.etcd.members = nil
	set := etcdutil.MemberSet{}
	for _, n := range names {
		m := f.member(n)
		set.Add(m)
		f.etcd.members = append(f.etcd.members, &etcdserverpb.Member{
			ID: m.ID, Name: n, PeerURLs: []string{m.PeerURL()}, ClientURLs: []string{m.ClientURL()},
		})
	}
	if len(names) > 0 {
		f.etcd.leader = memberID(names[0])
	}
	f.c.knownMembership.learn(set)
	return f
}

// pod builds the pod of member name as the operator would have created it,
// Running and Ready, and puts it in the lister.
func (f *fixture) pod(name string, opts ...podOpt) *corev1.Pod {
	f.t.Helper()
	p := memberPod(f.cl.WithDefaults(), f.member(name), time.Time{}, opts...)
	f.setPod(p)
	return p
}

// podGone removes member name's pod from the lister and the fake API, as if
// it had been deleted and its deletion completed.
func (f *fixture) podGone(name string) {
	f.t.Helper()
	if obj, exists, _ := f.indexer.GetByKey(testNS + "/" + name); exists {
		_ = f.indexer.Delete(obj)
	}
	_ = f.kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), testNS, name)
}

// setPod puts a pod in the lister (the informer saw it) and in the fake API.
func (f *fixture) setPod(p *corev1.Pod) {
	f.t.Helper()
	if err := f.indexer.Update(p); err != nil {
		f.t.Fatal(err)
	}
	if err := f.kube.Tracker().Add(p); err != nil {
		if err := f.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), p, p.Namespace); err != nil {
			f.t.Fatal(err)
		}
	}
}

// showCreatedPods moves the pods the loop created through the API into the
// lister, as the informer would, Running and Ready unless opts say otherwise.
func (f *fixture) showCreatedPods(opts ...podOpt) {
	f.t.Helper()
	list, err := f.kube.CoreV1().Pods(testNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		if _, exists, _ := f.indexer.Get(p); exists {
			continue
		}
		p.Status = corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: k8sutil.EtcdContainerName, Image: p.Spec.Containers[0].Image, Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			}},
		}
		for _, o := range opts {
			o(p)
		}
		f.setPod(p)
		f.etcd.start(p.Name)
	}
	f.kube.ClearActions()
}

// pass runs one pass and returns its error.
func (f *fixture) pass() error {
	f.t.Helper()
	f.syncEtcdWithPods()
	seen := len(f.kube.Actions())
	_, err := f.c.pass(context.Background())
	f.mirrorDeletes(f.kube.Actions()[seen:])
	return err
}

// mirrorDeletes removes what the pass deleted from the listers, as the
// informers would once the objects are gone.
func (f *fixture) mirrorDeletes(actions []clienttesting.Action) {
	for _, a := range actions {
		d, ok := a.(clienttesting.DeleteAction)
		if !ok {
			continue
		}
		var idx cache.Indexer
		switch a.GetResource().Resource {
		case "pods":
			idx = f.indexer
		case "persistentvolumeclaims":
			idx = f.claims
		case "services":
			idx = f.services
		default:
			continue
		}
		if obj, exists, _ := idx.GetByKey(testNS + "/" + d.GetName()); exists {
			_ = idx.Delete(obj)
		}
	}
}

// syncEtcdWithPods makes the members whose pod does not run stop answering
// in the fake etcd, as they do in a real one.
func (f *fixture) syncEtcdWithPods() {
	f.etcd.mu.Lock()
	defer f.etcd.mu.Unlock()
	f.etcd.podless = map[uint64]bool{}
	for _, m := range f.etcd.members {
		obj, exists, _ := f.indexer.GetByKey(testNS + "/" + nameOf(m))
		if !exists {
			f.etcd.podless[m.ID] = true
			continue
		}
		p := obj.(*corev1.Pod)
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			f.etcd.podless[m.ID] = true
		}
	}
}

// mustPass runs one pass that must not fail.
func (f *fixture) mustPass() {
	f.t.Helper()
	if err := f.pass(); err != nil {
		f.t.Fatalf("reconcile: %v", err)
	}
}

// mustSeed runs the two passes that take a new cluster to its seed: the
// first records the phase Creating, the second makes the seed.
func (f *fixture) mustSeed() {
	f.t.Helper()
	f.mustPass()
	f.mustPass()
}

// podActions are the loop's writes to pods and PVCs, as "verb resource name".
func (f *fixture) podActions() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		res := a.GetResource().Resource
		if res != "pods" && res != "persistentvolumeclaims" {
			continue
		}
		switch a := a.(type) {
		case clienttesting.CreateAction:
			obj := a.GetObject().(metav1.Object)
			out = append(out, fmt.Sprintf("create %s %s", res, obj.GetName()))
		case clienttesting.DeleteAction:
			out = append(out, fmt.Sprintf("delete %s %s", res, a.GetName()))
		case clienttesting.PatchAction:
			out = append(out, fmt.Sprintf("patch %s %s", res, a.GetName()))
		}
	}
	return out
}

// createdPod returns the pod the loop created with the given name.
func (f *fixture) createdPod(name string) *corev1.Pod {
	f.t.Helper()
	for _, a := range f.kube.Actions() {
		if ca, ok := a.(clienttesting.CreateAction); ok && a.GetResource().Resource == "pods" {
			if p := ca.GetObject().(*corev1.Pod); p.Name == name {
				return p
			}
		}
	}
	f.t.Fatalf("no pod %s was created; actions: %v", name, f.podActions())
	return nil
}

// setReady makes the lister's pod name Running and Ready (or not), its etcd
// container running with the restart count given, and starts its member in
// the fake etcd.
func (f *fixture) setReady(name string, ready bool, opts ...podOpt) {
	f.t.Helper()
	obj, exists, err := f.indexer.GetByKey(testNS + "/" + name)
	if err != nil || !exists {
		f.t.Fatalf("pod %s is not in the lister", name)
	}
	p := obj.(*corev1.Pod).DeepCopy()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if len(p.Status.ContainerStatuses) == 0 {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: k8sutil.EtcdContainerName}}
	}
	cs := &p.Status.ContainerStatuses[0]
	cs.Image = p.Spec.Containers[0].Image
	cs.Ready = ready
	cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	for _, o := range opts {
		o(p)
	}
	f.setPod(p)
	f.etcd.start(name)
}

// join runs the passes of a pod-first join of member name: its pod is
// created, shows up resolvable, is added as a learner, runs and is promoted.
func (f *fixture) join(name string) {
	f.t.Helper()
	f.mustPass()
	f.showCreatedPods(resolvable)
	f.mustPass()
	f.setReady(name, true)
	f.mustPass()
}

// writtenStatuses are the statuses written, in order.
func (f *fixture) writtenStatuses() []api.ClusterStatus {
	var out []api.ClusterStatus
	for _, a := range f.crs.Actions() {
		if ua, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" {
			out = append(out, ua.GetObject().(*api.EtcdCluster).Status)
		}
	}
	return out
}

// writtenStatus is the status of the last status write, or nil.
func (f *fixture) writtenStatus() *api.ClusterStatus {
	var last *api.ClusterStatus
	for _, a := range f.crs.Actions() {
		if ua, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" {
			last = &ua.GetObject().(*api.EtcdCluster).Status
		}
	}
	return last
}

func (f *fixture) statusWrites() int {
	n := 0
	for _, a := range f.crs.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// mustStatus is the last written status; the test fails if none was written.
func (f *fixture) mustStatus() *api.ClusterStatus {
	f.t.Helper()
	s := f.writtenStatus()
	if s == nil {
		f.t.Fatal("no status was written")
	}
	return s
}

// events drains the recorder.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// conflictOnNextStatusWrite makes the next status write meet a conflict, as
// when the object changed under the pass.
func (f *fixture) conflictOnNextStatusWrite() {
	conflicts := 1
	f.crs.PrependReactor("update", "etcdclusters", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(api.Resource("etcdclusters"), testName, nil)
		}
		return false, nil, nil
	})
}

// passCase is a case of a table of whole passes: a cluster, and what passes
// on a fixture of it do and show.
type passCase struct {
	name    string
	cluster *api.EtcdCluster
	run     func(t *testing.T, f *fixture)
}

// runPassCases runs each case on a fixture of its own.
func runPassCases(t *testing.T, cases []passCase) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, newFixture(t, tt.cluster))
		})
	}
}
