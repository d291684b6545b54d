package backupcontroller

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
	"github.com/openetcd/etcd-operator/pkg/generated/informers/externalversions"
)

// waitTimeout bounds every wait; tests poll for state, they never sleep for it.
const waitTimeout = 20 * time.Second

const testNamespace = "ns"

// eventually polls cond until it holds or waitTimeout passes.
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

func (r *recorder) count(prefix string) int {
	n := 0
	for _, e := range r.list() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// outcome is what one call of the fake backup function does.
type outcome struct {
	err   error
	panic bool
	// hang blocks until the backup's context is cancelled.
	hang bool
	// verifyErr is what reading the backup back finds, if it is read back.
	verifyErr error
}

// fakeBackup is an injected BackupFunc that plays scripted outcomes, the last one
// repeating, and succeeds when there is no script.
type fakeBackup struct {
	mu       sync.Mutex
	script   map[string][]outcome
	calls    map[string]int
	revision int64
	// verified lists, per EtcdBackup, whether each call asked for verification.
	verified map[string][]bool
}

func (f *fakeBackup) set(name string, outcomes ...outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script[name] = outcomes
}

func (f *fakeBackup) callCount(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fakeBackup) verifyCalls(name string) []bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bool(nil), f.verified[name]...)
}

// fakeKeyID is the key id fakeBackup reports for an encrypted backup.
const fakeKeyID = "0011223344556677"

func (f *fakeBackup) backup(ctx context.Context, eb *api.EtcdBackup, verify bool) (*backup.Result, error) {
	f.mu.Lock()
	n := f.calls[eb.Name]
	f.calls[eb.Name]++
	f.verified[eb.Name] = append(f.verified[eb.Name], verify)
	f.revision++
	rev := f.revision
	var o outcome
	if s := f.script[eb.Name]; len(s) > 0 {
		o = s[min(n, len(s)-1)]
	}
	f.mu.Unlock()
	switch {
	case o.panic:
		panic("injected panic")
	case o.hang:
		<-ctx.Done()
		return nil, ctx.Err()
	case o.err != nil:
		return nil, o.err
	}
	key := eb.Spec.S3.Path
	res := &backup.Result{
		Snapshot: backup.Snapshot{Endpoint: "http://etcd:2379", EtcdVersion: "3.5.21", Revision: rev, Key: key, Size: 1000 + rev, SHA256: fmt.Sprintf("%064d", rev)},
		Path:     key,
	}
	// As backup.Run reports the codec it stored with.
	res.Compression = string(eb.Spec.Compression)
	if eb.Spec.Encryption != nil {
		res.KeyID = fakeKeyID
	}
	switch {
	case verify && o.verifyErr != nil:
		res.VerifyErr = o.verifyErr
	case verify:
		res.Verified = &backup.Verification{Key: key, Size: res.Size, SHA256: res.SHA256, Revision: rev, TotalKeys: 10 * rev}
	}
	return res, nil
}

type fixture struct {
	t       *testing.T
	client  *fake.Clientset
	ctrl    *Controller
	clock   *clocktesting.FakeClock
	events  *recorder
	backups *fakeBackup
	reg     *prometheus.Registry

	mu    sync.Mutex
	syncs map[string]int
	// syncErrs are the errors syncs returned, in order.
	syncErrs map[string][]error

	cancel context.CancelFunc
	done   chan error
}

// fixtureOption changes the fixture before the controller starts.
type fixtureOption func(*fixture, *Config)

func withMaxRetries(n int) fixtureOption { return func(_ *fixture, c *Config) { c.MaxRetries = n } }

func withBackupFunc(fn BackupFunc) fixtureOption {
	return func(_ *fixture, c *Config) { c.Backup = fn }
}

// withOutcomes scripts the fake backup of one EtcdBackup.
func withOutcomes(name string, outcomes ...outcome) fixtureOption {
	return func(f *fixture, _ *Config) { f.backups.set(name, outcomes...) }
}

// newFixture starts a controller over a fake clientset preloaded with objects and
// waits until its watch is established, so later changes are never missed.
func newFixture(t *testing.T, objects []*api.EtcdBackup, opts ...fixtureOption) *fixture {
	t.Helper()
	var objs []k8sruntime.Object
	for _, o := range objects {
		objs = append(objs, o)
	}
	f := &fixture{
		t:        t,
		client:   fake.NewSimpleClientset(objs...),
		clock:    clocktesting.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)),
		events:   &recorder{},
		backups:  &fakeBackup{script: map[string][]outcome{}, calls: map[string]int{}, verified: map[string][]bool{}, revision: 100},
		reg:      prometheus.NewRegistry(),
		syncs:    map[string]int{},
		syncErrs: map[string][]error{},
		done:     make(chan error, 1),
	}
	factory := externalversions.NewSharedInformerFactory(f.client, 0)
	log := logrus.New()
	log.SetLevel(logrus.DebugLevel)
	log.SetOutput(testWriter{t})
	cfg := Config{
		Client:      f.client,
		Informer:    factory.Etcd().V1beta2().EtcdBackups(),
		Recorder:    f.events,
		Metrics:     NewMetrics(f.reg),
		Backup:      f.backups.backup,
		Log:         logrus.NewEntry(log),
		Clock:       f.clock,
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 20*time.Millisecond),
	}
	for _, o := range opts {
		o(f, &cfg)
	}
	f.ctrl = New(cfg)
	f.ctrl.afterSync = func(key string, err error) {
		f.mu.Lock()
		f.syncs[key]++
		if err != nil {
			f.syncErrs[key] = append(f.syncErrs[key], err)
		}
		f.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	factory.Start(ctx.Done())
	go func() { f.done <- f.ctrl.Run(ctx, 2, nil) }()
	t.Cleanup(f.stop)
	eventually(t, "the informer watches EtcdBackups", func() bool {
		for _, a := range f.client.Actions() {
			if a.GetVerb() == "watch" && a.GetResource().Resource == "etcdbackups" {
				return true
			}
		}
		return false
	})
	return f
}

// stop shuts the controller down and checks that it left no runner behind.
func (f *fixture) stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	f.cancel = nil
	select {
	case err := <-f.done:
		if err != nil {
			f.t.Errorf("Run: %v", err)
		}
	case <-time.After(waitTimeout):
		f.t.Fatal("Run did not return after its context was cancelled")
	}
	if n := f.ctrl.LiveRunners(); n != 0 {
		f.t.Errorf("%d runners still alive after Run returned", n)
	}
	if n := f.ctrl.LiveArchivers(); n != 0 {
		f.t.Errorf("%d archivers still alive after Run returned", n)
	}
}

func (f *fixture) get(name string) *api.EtcdBackup {
	f.t.Helper()
	eb, err := f.client.EtcdV1beta2().EtcdBackups(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return eb
}

func (f *fixture) update(eb *api.EtcdBackup) {
	f.t.Helper()
	if _, err := f.client.EtcdV1beta2().EtcdBackups(testNamespace).Update(context.Background(), eb, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) syncCount(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs[testNamespace+"/"+name]
}

func (f *fixture) syncErrors(name string) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.syncErrs[testNamespace+"/"+name]...)
}

// resync makes the controller look at name again once its cache holds what cached
// says, and waits until it has: the way to prove it then did nothing.
func (f *fixture) resync(name string, cached func(*api.EtcdBackup) bool) {
	f.t.Helper()
	eventually(f.t, "the cache of "+name+" is up to date", func() bool {
		eb, err := f.ctrl.lister.EtcdBackups(testNamespace).Get(name)
		return err == nil && cached(eb)
	})
	before := f.syncCount(name)
	f.ctrl.queue.Add(testNamespace + "/" + name)
	eventually(f.t, "a sync of "+name, func() bool { return f.syncCount(name) > before })
}

// waitStatus waits until the stored status of name satisfies cond.
func (f *fixture) waitStatus(name, what string, cond func(api.BackupStatus) bool) api.BackupStatus {
	f.t.Helper()
	var st api.BackupStatus
	eventually(f.t, name+": "+what, func() bool {
		st = f.get(name).Status
		return cond(st)
	})
	return st
}

// metric returns the value of a counter or gauge with the given labels, or -1 when
// the series does not exist.
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
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				}
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

// runnerGoroutines counts goroutines inside runPeriodic, from the stacks of all
// goroutines: LiveRunners could lie, the runtime cannot.
func runnerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "backupcontroller.(*Controller).runPeriodic(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newBackup is a valid S3 EtcdBackup; interval 0 makes it one-shot.
func newBackup(name string, interval int64) *api.EtcdBackup {
	eb := &api.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: api.BackupSpec{
			EtcdEndpoints: []string{"http://example-etcd-cluster-client:2379"},
			StorageType:   api.BackupStorageTypeS3,
			BackupSource: api.BackupSource{S3: &api.S3BackupSource{
				Path: "bucket/" + name, AWSSecret: "aws",
			}},
		},
	}
	if interval != 0 {
		eb.Spec.BackupPolicy = &api.BackupPolicy{BackupIntervalInSecond: interval, MaxBackups: 4}
	}
	return eb
}
