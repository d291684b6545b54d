package restorecontroller

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/workqueue"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
	"github.com/openetcd/etcd-operator/pkg/generated/informers/externalversions"
	"github.com/openetcd/etcd-operator/pkg/restore"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// waitTimeout bounds every wait; tests poll for state, they never sleep for it.
const waitTimeout = 20 * time.Second

const testNamespace = "ns"

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// call is one call of the fake flow.
type call struct {
	key     string
	attempt int
}

// fakeFlow plays scripted results per key; the last one repeats, and no script
// means done (0, nil).
type fakeFlow struct {
	mu     sync.Mutex
	script map[string][]func() (time.Duration, error)
	calls  []call
}

func (f *fakeFlow) Sync(_ context.Context, namespace, name string, attempt int) (time.Duration, error) {
	key := namespace + "/" + name
	f.mu.Lock()
	n := 0
	for _, c := range f.calls {
		if c.key == key {
			n++
		}
	}
	f.calls = append(f.calls, call{key, attempt})
	s := f.script[key]
	f.mu.Unlock()
	if len(s) == 0 {
		return 0, nil
	}
	return s[min(n, len(s)-1)]()
}

func (f *fakeFlow) callsOf(key string) []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var attempts []int
	for _, c := range f.calls {
		if c.key == key {
			attempts = append(attempts, c.attempt)
		}
	}
	return attempts
}

type fixture struct {
	t      *testing.T
	client *fake.Clientset
	ctrl   *Controller
	mu     sync.Mutex
	syncs  map[string]int
}

func testLog(t *testing.T) *logrus.Entry {
	l := logrus.New()
	l.SetOutput(testWriter{t})
	return logrus.NewEntry(l)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newFixture runs a controller over a fake clientset holding objs, feeding flow.
func newFixture(t *testing.T, flow Syncer, client *fake.Clientset) *fixture {
	t.Helper()
	f := &fixture{t: t, client: client, syncs: map[string]int{}}
	factory := externalversions.NewSharedInformerFactory(client, 0)
	f.ctrl = New(Config{
		Informer:    factory.Etcd().V1beta2().EtcdRestores(),
		Flow:        flow,
		Log:         testLog(t),
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond),
	})
	f.ctrl.afterSync = func(key string, _ error) {
		f.mu.Lock()
		f.syncs[key]++
		f.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	factory.Start(ctx.Done())
	go func() { done <- f.ctrl.Run(ctx, 2, nil) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Error("Run did not return after its context ended")
		}
		factory.Shutdown()
	})
	return f
}

func (f *fixture) syncCount(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs[key]
}

func newRestore(name string, phase api.RestorePhase, finalizers ...string) *api.EtcdRestore {
	return &api.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name), Finalizers: finalizers},
		Status:     api.RestoreStatus{Phase: phase},
	}
}

func TestFinishedRestoresAreNeverRunAgain(t *testing.T) {
	flow := &fakeFlow{}
	f := newFixture(t, flow, fake.NewSimpleClientset(
		newRestore("done", api.RestorePhaseCompleted),
		newRestore("failed", api.RestorePhaseFailed),
		newRestore("failing-to-release", api.RestorePhaseFailed, restore.Finalizer),
		newRestore("new", ""),
	))
	for _, k := range []string{"done", "failed", "failing-to-release", "new"} {
		eventually(t, k+" is processed", func() bool { return f.syncCount(testNamespace+"/"+k) > 0 })
	}
	for _, k := range []string{"done", "failed"} {
		if c := flow.callsOf(testNamespace + "/" + k); len(c) > 0 {
			t.Errorf("ended restore %s was handed to the flow %d times", k, len(c))
		}
	}
	// An ended restore that still has the finalizer goes to the flow, which only
	// removes it.
	for _, k := range []string{"failing-to-release", "new"} {
		if c := flow.callsOf(testNamespace + "/" + k); len(c) != 1 {
			t.Errorf("restore %s: %d flow calls, want 1", k, len(c))
		}
	}
}

func TestOnlyRestoresOfItsScopeAreRun(t *testing.T) {
	annotated := newRestore("clusterwide", "")
	annotated.Annotations = map[string]string{api.ScopeAnnotation: api.ScopeClusterWide}
	flow := &fakeFlow{}
	f := newFixture(t, flow, fake.NewSimpleClientset(annotated, newRestore("plain", "")))
	for _, k := range []string{"clusterwide", "plain"} {
		eventually(t, k+" is processed", func() bool { return f.syncCount(testNamespace+"/"+k) > 0 })
	}
	if len(flow.callsOf(testNamespace+"/clusterwide")) != 0 || len(flow.callsOf(testNamespace+"/plain")) != 1 {
		t.Fatalf("a namespaced controller ran %v", flow.calls)
	}
}

func TestRestoresInProgressAreLookedAtAgain(t *testing.T) {
	key := testNamespace + "/busy"
	flow := &fakeFlow{script: map[string][]func() (time.Duration, error){key: {
		func() (time.Duration, error) { return time.Millisecond, nil },
		func() (time.Duration, error) { return time.Millisecond, nil },
		func() (time.Duration, error) { return 0, nil },
	}}}
	newFixture(t, flow, fake.NewSimpleClientset(newRestore("busy", api.RestorePhaseRestoring)))
	eventually(t, "three looks at the restore", func() bool { return len(flow.callsOf(key)) >= 3 })
	if got := flow.callsOf(key); got[0] != 0 || got[1] != 0 || got[2] != 0 {
		t.Errorf("attempts %v: a requeue after progress is not a retry", got)
	}
}

func TestFailuresAreRetriedWithTheirAttemptNumber(t *testing.T) {
	key := testNamespace + "/flaky"
	fail := func() (time.Duration, error) { return 0, failure.Retry(errors.New("store unreachable")) }
	flow := &fakeFlow{script: map[string][]func() (time.Duration, error){key: {
		fail, fail, fail, func() (time.Duration, error) { return 0, nil },
	}}}
	newFixture(t, flow, fake.NewSimpleClientset(newRestore("flaky", "")))
	eventually(t, "four attempts", func() bool { return len(flow.callsOf(key)) >= 4 })
	got := flow.callsOf(key)[:4]
	for i, a := range got {
		if a != i {
			t.Fatalf("attempts %v, want 0 1 2 3: the flow gives up on attempt numbers", got)
		}
	}
}

func TestAPanicIsRetriedNotFatal(t *testing.T) {
	key := testNamespace + "/buggy"
	flow := &fakeFlow{script: map[string][]func() (time.Duration, error){key: {
		func() (time.Duration, error) { panic("nil map") },
		func() (time.Duration, error) { return 0, nil },
	}}}
	newFixture(t, flow, fake.NewSimpleClientset(newRestore("buggy", "")))
	eventually(t, "a second call after the panic", func() bool { return len(flow.callsOf(key)) >= 2 })
}

// The real flow through the controller: a restore from a backup that does not
// exist ends Failed, and the cluster stays.
func TestControllerRunsTheFlow(t *testing.T) {
	s3, err := backuptest.StartS3(nil, "backups")
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	cl := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: testNamespace, UID: "cluster-uid"},
		Spec: api.ClusterSpec{Size: 3, Version: "3.5.21"}}
	er := &api.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: testNamespace, UID: "restore-uid"},
		Spec: api.RestoreSpec{
			BackupStorageType: api.BackupStorageTypeS3,
			RestoreSource: api.RestoreSource{S3: &api.S3RestoreSource{
				Path: "backups/missing.db", AWSSecret: "aws", Endpoint: s3.URL, ForcePathStyle: true}},
			EtcdCluster: api.EtcdClusterRef{Name: "example"},
		},
	}
	client := fake.NewSimpleClientset(cl, er)
	kube := kubefake.NewSimpleClientset([]k8sruntime.Object{&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "aws", Namespace: testNamespace}, Data: backuptest.AWSSecretData()}}...)
	flow := restore.NewFlow(restore.Config{Kube: kube, Etcd: client, Log: testLog(t), OperatorNamespace: "ops", FetchImage: "img"})
	newFixture(t, flow, client)

	var st api.RestoreStatus
	eventually(t, "the restore fails", func() bool {
		got, err := client.EtcdV1beta2().EtcdRestores(testNamespace).Get(context.Background(), "example", metav1.GetOptions{})
		if err != nil {
			return false
		}
		st = got.Status
		return st.Phase == api.RestorePhaseFailed
	})
	if !strings.Contains(st.Reason, "backups/missing.db does not exist") {
		t.Errorf("reason %q", st.Reason)
	}
	got, err := client.EtcdV1beta2().EtcdClusters(testNamespace).Get(context.Background(), "example", metav1.GetOptions{})
	if err != nil || got.UID != "cluster-uid" {
		t.Fatalf("the cluster did not stay: %v %v", got, err)
	}
}
