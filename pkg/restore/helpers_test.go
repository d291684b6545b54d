package restore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// snapshot is a real etcd snapshot, as the Snapshot RPC sends it (trailer
// included), of a member holding snapshotKeys keys. TestMain takes it once.
var snapshot []byte

const snapshotKeys = 50

func TestMain(m *testing.M) {
	data, err := takeSnapshot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "take a snapshot of an embedded etcd:", err)
		os.Exit(1)
	}
	snapshot = data
	os.Exit(m.Run())
}

func takeSnapshot() ([]byte, error) {
	dir, err := os.MkdirTemp("", "restore-test-etcd-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	e, err := backuptest.StartEtcd(backuptest.EtcdOptions{Dir: dir})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.Fill(ctx, "/restore-test/", snapshotKeys, 100); err != nil {
		return nil, err
	}
	c, err := e.Client()
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	rc, err := c.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	return io.ReadAll(rc)
}

const (
	testNamespace = "ns"
	opNamespace   = "ops"
	testBucket    = "backups"
	testCluster   = "example"
	oldUID        = types.UID("11111111-1111-4111-8111-111111111111")
	restoreUID    = types.UID("22222222-2222-4222-8222-222222222222")
	awsSecret     = "aws"
	fetchImage    = "openetcd/etcd-operator:v0.1.0"
)

// recorder keeps events as "<type> <reason> <message>".
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Event(_ k8sruntime.Object, eventtype, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventtype+" "+reason+" "+message)
}

func (r *recorder) Eventf(obj k8sruntime.Object, eventtype, reason, format string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

func (r *recorder) AnnotatedEventf(obj k8sruntime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	r.Eventf(obj, eventtype, reason, format, args...)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// has tells whether an event of that type and reason was recorded.
func (r *recorder) has(eventType, reason string) bool {
	for _, e := range r.list() {
		if strings.HasPrefix(e, eventType+" "+reason+" ") {
			return true
		}
	}
	return false
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLog(t *testing.T) *logrus.Entry {
	l := logrus.New()
	l.SetLevel(logrus.DebugLevel)
	l.SetOutput(testWriter{t})
	return logrus.NewEntry(l)
}

// startS3 starts an in-process S3 server with the test bucket and returns it with
// a store on that bucket.
func startS3(t *testing.T) (*backuptest.S3, *s3store.Store) {
	t.Helper()
	srv, err := backuptest.StartS3(nil, testBucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	store, err := s3store.New(srv.StoreConfig(testBucket))
	if err != nil {
		t.Fatal(err)
	}
	return srv, store
}

func putObject(t *testing.T, store *s3store.Store, key string, data []byte) {
	t.Helper()
	if _, _, err := store.Put(context.Background(), key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
}

// newCluster is the cluster a restore replaces: three members of 3.5.21.
func newCluster() *api.EtcdCluster {
	return &api.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: testCluster, Namespace: testNamespace, UID: oldUID,
			Labels:      map[string]string{"team": "storage"},
			Annotations: map[string]string{"note": "keep me"},
		},
		Spec: api.ClusterSpec{Size: 3, Version: "3.5.21"},
		Status: api.ClusterStatus{
			Phase:   api.ClusterPhaseRunning,
			Members: api.MembersStatus{Ready: []string{"example-aaaaaaaaaa"}, Unready: []string{"example-bbbbbbbbbb", "example-cccccccccc"}},
		},
	}
}

// newRestore is an S3 restore of the test cluster from key in the test bucket of srv.
func newRestore(name, key string, srv *backuptest.S3) *api.EtcdRestore {
	endpoint := "http://127.0.0.1:1"
	if srv != nil {
		endpoint = srv.URL
	}
	return &api.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: restoreUID},
		Spec: api.RestoreSpec{
			BackupStorageType: api.BackupStorageTypeS3,
			RestoreSource: api.RestoreSource{S3: &api.S3RestoreSource{
				Path: testBucket + "/" + key, AWSSecret: awsSecret, Endpoint: endpoint, ForcePathStyle: true,
			}},
			EtcdCluster: api.EtcdClusterRef{Name: testCluster},
		},
	}
}

func awsSecretObject() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: awsSecret, Namespace: testNamespace}, Data: backuptest.AWSSecretData()}
}

// oldDependents are what etcd-operator made for the old cluster: member pods and
// the two services, owned by it.
func oldDependents() []k8sruntime.Object {
	cl := newCluster()
	var objs []k8sruntime.Object
	for _, m := range []string{"example-aaaaaaaaaa", "example-bbbbbbbbbb"} {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: m, Namespace: testNamespace, Labels: k8sutil.MemberLabels(cl, m),
			OwnerReferences: []metav1.OwnerReference{k8sutil.AsOwner(cl)},
		}})
	}
	objs = append(objs, k8sutil.NewPeerService(cl), k8sutil.NewClientService(cl))
	return objs
}

// fixture is a Flow over fake clientsets that behave like an apiserver where it
// matters here: created objects get a UID.
type fixture struct {
	t      *testing.T
	kube   *kubefake.Clientset
	etcd   *fake.Clientset
	flow   *Flow
	events *recorder
	clock  *clocktesting.FakeClock
	reg    *prometheus.Registry
	uids   int

	mu      sync.Mutex
	version int
	// writes are the writes to either clientset, in order, as "<verb> <resource>[/<subresource>]".
	writes []string
}

// writesTo lists the writes to the given resources, in order.
func (f *fixture) writesTo(resources ...string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, w := range f.writes {
		_, res, _ := strings.Cut(w, " ")
		res, _, _ = strings.Cut(res, "/")
		if slices.Contains(resources, res) {
			out = append(out, w)
		}
	}
	return out
}

func newFixture(t *testing.T, kubeObjs []k8sruntime.Object, etcdObjs ...k8sruntime.Object) *fixture {
	t.Helper()
	f := &fixture{
		t:      t,
		kube:   kubefake.NewSimpleClientset(kubeObjs...),
		etcd:   fake.NewSimpleClientset(etcdObjs...),
		events: &recorder{},
		clock:  clocktesting.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)),
		reg:    prometheus.NewRegistry(),
	}
	setUID := func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		obj := action.(k8stesting.CreateAction).GetObject().(metav1.Object)
		if obj.GetUID() == "" {
			f.uids++
			obj.SetUID(types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", f.uids)))
		}
		return false, nil, nil
	}
	record := func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		switch v := action.GetVerb(); v {
		case "get", "list", "watch":
		default:
			w := v + " " + action.GetResource().Resource
			if s := action.GetSubresource(); s != "" {
				w += "/" + s
			}
			f.mu.Lock()
			f.writes = append(f.writes, w)
			f.mu.Unlock()
		}
		return false, nil, nil
	}
	for _, c := range []interface {
		PrependReactor(verb, resource string, fn k8stesting.ReactionFunc)
	}{f.etcd, f.kube} {
		c.PrependReactor("*", "*", record)
		c.PrependReactor("create", "*", setUID)
	}
	// The fake tracker ignores resourceVersions; the apiserver refuses a write
	// based on an old read, and the flow relies on that for EtcdRestores.
	f.etcd.PrependReactor("*", "etcdrestores", func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		// CreateAction and UpdateAction have the same methods: tell them by verb.
		a, ok := action.(k8stesting.UpdateAction)
		if !ok {
			return false, nil, nil
		}
		switch action.GetVerb() {
		case "create":
			f.bumpVersion(a.GetObject().(metav1.Object))
		case "update":
			obj := a.GetObject().(metav1.Object)
			cur, err := f.etcd.Tracker().Get(a.GetResource(), a.GetNamespace(), obj.GetName())
			if err == nil && cur.(metav1.Object).GetResourceVersion() != obj.GetResourceVersion() {
				return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), obj.GetName(),
					fmt.Errorf("the object has been modified (resourceVersion %s, stored %s)", obj.GetResourceVersion(), cur.(metav1.Object).GetResourceVersion()))
			}
			f.bumpVersion(obj)
		}
		return false, nil, nil
	})
	f.flow = NewFlow(Config{
		Kube:              f.kube,
		Etcd:              f.etcd,
		Recorder:          f.events,
		Log:               testLog(t),
		Metrics:           NewMetrics(f.reg),
		OperatorNamespace: opNamespace,
		FetchImage:        fetchImage,
		FetchPullPolicy:   corev1.PullIfNotPresent,
		Clock:             f.clock,
		MaxRetries:        3,
	})
	return f
}

func (f *fixture) bumpVersion(obj metav1.Object) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version++
	obj.SetResourceVersion(fmt.Sprint(f.version))
}

// sync runs the flow once for name, as a worker would at the given attempt.
func (f *fixture) sync(name string, attempt int) (time.Duration, error) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return f.flow.Sync(ctx, testNamespace, name, attempt)
}

// mustSync runs the flow and fails the test on an error.
func (f *fixture) mustSync(name string) time.Duration {
	f.t.Helper()
	d, err := f.sync(name, 0)
	if err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
	return d
}

func (f *fixture) restore(name string) *api.EtcdRestore {
	f.t.Helper()
	er, err := f.etcd.EtcdV1beta2().EtcdRestores(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return er
}

// cluster returns the EtcdCluster, or nil when there is none.
func (f *fixture) cluster() *api.EtcdCluster {
	f.t.Helper()
	cl, err := f.etcd.EtcdV1beta2().EtcdClusters(testNamespace).Get(context.Background(), testCluster, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return cl
}

// clusterActions are the verbs (with subresource) done on EtcdClusters.
func (f *fixture) clusterActions() []string {
	var out []string
	for _, a := range f.etcd.Actions() {
		if a.GetResource().Resource != "etcdclusters" || a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		v := a.GetVerb()
		if s := a.GetSubresource(); s != "" {
			v += "/" + s
		}
		out = append(out, v)
	}
	return out
}

// expectUntouched checks that the old cluster is exactly as it was: nothing
// deleted, created or changed.
func (f *fixture) expectUntouched() {
	f.t.Helper()
	if acts := f.clusterActions(); len(acts) > 0 {
		f.t.Errorf("the EtcdCluster was written to: %v", acts)
	}
	cl := f.cluster()
	if cl == nil || cl.UID != oldUID {
		f.t.Fatalf("the old EtcdCluster is gone or replaced: %+v", cl)
	}
	for _, a := range f.kube.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			f.t.Errorf("a Kubernetes object was written to: %s %s", v, a.GetResource().Resource)
		}
	}
}

// setClusterStatus writes the restored cluster's status, as etcd-operator would.
func (f *fixture) setClusterStatus(ready int, available bool) {
	f.t.Helper()
	cl := f.cluster()
	cl.Status.Members.Ready = nil
	for i := range ready {
		cl.Status.Members.Ready = append(cl.Status.Members.Ready, fmt.Sprintf("example-m%d", i))
	}
	status := corev1.ConditionFalse
	if available {
		status = corev1.ConditionTrue
	}
	cl.Status.Conditions = []api.ClusterCondition{{Type: api.ClusterConditionAvailable, Status: status}}
	if _, err := f.etcd.EtcdV1beta2().EtcdClusters(testNamespace).UpdateStatus(context.Background(), cl, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// metric returns the value of a counter, or the sample count of a histogram,
// with the given labels; -1 when the series does not exist.
func (f *fixture) metric(name string, labels map[string]string) float64 {
	f.t.Helper()
	families, err := f.reg.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			if labelsMatch(m, labels) {
				if m.Counter != nil {
					return m.Counter.GetValue()
				}
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	if len(m.GetLabel()) != len(want) {
		return false
	}
	for _, l := range m.GetLabel() {
		if want[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}
