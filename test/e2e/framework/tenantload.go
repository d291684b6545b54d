package framework

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/openetcd/etcd-operator/pkg/checker"
)

// TenantLoad is a workload of a tenant apiserver's clients: writers that
// create, update and delete ConfigMaps, and an informer that watches them, the
// way every controller of a Kubernetes control plane reads the API.
type TenantLoad struct {
	// Scenario names the run in its result.
	Scenario string
	// Namespace is created for the run (default "tenant-load").
	Namespace string
	// Duration of the writes.
	Duration time.Duration
	// Writers run at once (default 3), each at Rate writes per second (default 10).
	Writers int
	Rate    float64
	// Settle bounds the wait, after the writes, for the informer to show the
	// final state of every object (default 1 min).
	Settle time.Duration
}

// TenantResult is the verdict on one tenant workload.
type TenantResult struct {
	Scenario string `json:"scenario,omitempty"`
	// Ops: writes attempted; Acked: writes the apiserver acknowledged.
	Ops   int `json:"ops"`
	Acked int `json:"acked"`
	// Missing: objects whose final acknowledged state (their last acknowledged
	// version, or their deletion) the informer does not hold at the end.
	// OutOfOrder: deliveries of an object with a resourceVersion older than one
	// the informer delivered before. Both must be 0.
	Missing    int `json:"missing"`
	OutOfOrder int `json:"outOfOrder"`
	// LongestUnavailableSeconds: the longest time with no acknowledged write.
	LongestUnavailableSeconds float64 `json:"longestUnavailableSeconds"`
	// ReadyzFailures: /readyz polls that did not answer ok; LongestNotReadySeconds:
	// the longest span from a failed poll to the next ok one.
	ReadyzFailures         int     `json:"readyzFailures"`
	LongestNotReadySeconds float64 `json:"longestNotReadySeconds"`
	// LongestSilentWatchSeconds: the longest time an acknowledged write waited
	// while the informer delivered nothing at all.
	LongestSilentWatchSeconds float64 `json:"longestSilentWatchSeconds"`
	// WatchErrors: watches the informer's reflector lost and made again.
	WatchErrors int `json:"watchErrors,omitempty"`
	// Examples of missing or out-of-order objects, for the failure message.
	Examples []string `json:"examples,omitempty"`
	// Errors: the most frequent errors the writes got, by message.
	Errors []checker.ErrorCount `json:"errors,omitempty"`
}

// Passed: no acknowledged change is missing from what the informer shows, and
// it showed each object's versions in order.
func (r TenantResult) Passed() bool { return r.Missing == 0 && r.OutOfOrder == 0 }

func (r TenantResult) String() string {
	s := fmt.Sprintf("ops=%d acked=%d missing=%d outOfOrder=%d longestUnavailable=%.1fs readyzFailures=%d longestNotReady=%.1fs longestSilentWatch=%.1fs",
		r.Ops, r.Acked, r.Missing, r.OutOfOrder, r.LongestUnavailableSeconds, r.ReadyzFailures, r.LongestNotReadySeconds, r.LongestSilentWatchSeconds)
	if r.WatchErrors > 0 {
		s += fmt.Sprintf(" watchErrors=%d", r.WatchErrors)
	}
	for _, e := range r.Errors {
		s += fmt.Sprintf(" error[%q]=%d", e.Message, e.Count)
	}
	return s
}

// tenantLoadLabel marks the workload's objects; the informer watches only them.
const tenantLoadLabel = "etcd-operator.e2e/tenant-load"

// liveObjectsPerWriter is how many ConfigMaps a writer keeps at once: enough
// that updates and deletes mix, few enough that most writes are updates.
const liveObjectsPerWriter = 5

// change is one write to an object.
type change struct {
	name string
	op   string // create, update, delete
	// rv is the object's resourceVersion after the write; 0 for a delete, whose
	// answer carries none.
	rv    int64
	acked bool
	at    time.Time
}

// delivery is one informer notification about an object.
type delivery struct {
	rv      int64
	deleted bool
	at      time.Time
}

// tenantRun is the shared record of one workload.
type tenantRun struct {
	mu         sync.Mutex
	changes    []change // in the order each writer made them
	deliveries map[string][]delivery
	lastRV     map[string]int64
	outOfOrder []string
	errors     map[string]int
	ops        int
	watchErrs  int
}

// RunTenantLoad runs the workload against the apiserver cfg reaches and
// judges it. It returns an error only when the workload could not start
// (the namespace could not be made, the informer never synced).
func RunTenantLoad(ctx context.Context, cfg *rest.Config, l TenantLoad) (TenantResult, error) {
	if l.Namespace == "" {
		l.Namespace = "tenant-load"
	}
	if l.Writers == 0 {
		l.Writers = 3
	}
	if l.Rate == 0 {
		l.Rate = 10
	}
	if l.Settle == 0 {
		l.Settle = time.Minute
	}
	res := TenantResult{Scenario: l.Scenario}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return res, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.Namespace}}
	err = WaitFor(ctx, time.Minute, time.Second, "namespace "+l.Namespace+" in the tenant", func(ctx context.Context) (bool, string, error) {
		_, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		return res, err
	}

	run := &tenantRun{deliveries: map[string][]delivery{}, lastRV: map[string]int64{}, errors: map[string]int{}}
	informer, err := run.startInformer(ctx, kube, l.Namespace)
	if err != nil {
		return res, err
	}
	defer informer.stop()

	readyzCtx, stopReadyz := context.WithCancel(ctx)
	readyzDone := make(chan struct{})
	go func() {
		defer close(readyzDone)
		res.ReadyzFailures, res.LongestNotReadySeconds = pollReadyz(readyzCtx, cfg)
	}()

	start := time.Now()
	writeCtx, stopWrites := context.WithTimeout(ctx, l.Duration)
	var wg sync.WaitGroup
	for w := range l.Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.write(ctx, writeCtx, kube.CoreV1().ConfigMaps(l.Namespace), w, l.Rate)
		}()
	}
	wg.Wait()
	stopWrites()
	end := time.Now()

	want := run.finalStates(ctx, kube.CoreV1().ConfigMaps(l.Namespace))
	_ = WaitFor(ctx, l.Settle, 200*time.Millisecond, "the informer to show every acknowledged change", func(context.Context) (bool, string, error) {
		missing, _ := informer.missing(want)
		return missing == 0, fmt.Sprintf("%d objects not in their final state", missing), nil
	})
	settled := time.Now()
	stopReadyz()
	<-readyzDone

	run.mu.Lock()
	defer run.mu.Unlock()
	res.Ops = run.ops
	res.Missing, res.Examples = informer.missing(want)
	res.OutOfOrder = len(run.outOfOrder)
	res.Examples = append(res.Examples, run.outOfOrder[:min(len(run.outOfOrder), 5)]...)
	res.WatchErrors = run.watchErrs
	res.Errors = topErrorCounts(run.errors)
	var acked []time.Time
	for _, c := range run.changes {
		if c.acked {
			res.Acked++
			acked = append(acked, c.at)
		}
	}
	res.LongestUnavailableSeconds = longestGap(start, end, acked).Seconds()
	res.LongestSilentWatchSeconds = run.longestSilentWatch(settled).Seconds()
	return res, nil
}

// write is one writer: it keeps a few ConfigMaps of its own, each named once
// (a deleted name never comes back, so an object's versions form one line),
// and at rate per second creates, updates or deletes one of them until
// writeCtx ends. The writes themselves run under ctx: one cut short by the
// end of the run would be an error of the workload, not of the apiserver.
func (r *tenantRun) write(ctx, writeCtx context.Context, cms configMaps, writer int, rate float64) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(writer)))
	live := map[string]*corev1.ConfigMap{}
	next := 0
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for {
		select {
		case <-writeCtx.Done():
			return
		case <-tick.C:
		}
		switch {
		case len(live) < liveObjectsPerWriter:
			name := fmt.Sprintf("w%d-%d", writer, next)
			next++
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{tenantLoadLabel: "1"}},
				Data:       map[string]string{"n": "0"},
			}
			got, err := cms.Create(ctx, cm, metav1.CreateOptions{})
			r.record(name, "create", got, err)
			live[name] = r.resolve(writeCtx, cms, name, got, err)
		case rng.IntN(4) == 0:
			name := anyKey(rng, live)
			err := cms.Delete(ctx, name, metav1.DeleteOptions{})
			r.record(name, "delete", nil, err)
			if err == nil || apierrors.IsNotFound(err) {
				delete(live, name)
			} else {
				live[name] = r.resolve(writeCtx, cms, name, nil, err)
			}
		default:
			name := anyKey(rng, live)
			cm := live[name].DeepCopy()
			n, _ := strconv.Atoi(cm.Data["n"])
			cm.Data["n"] = strconv.Itoa(n + 1)
			got, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
			r.record(name, "update", got, err)
			live[name] = r.resolve(writeCtx, cms, name, got, err)
		}
		for name, cm := range live {
			if cm == nil {
				delete(live, name)
			}
		}
	}
}

// resolve is the object as it is after a write: the answer when there is
// one, else (the write may or may not have happened) a fresh read, retried
// until the apiserver answers or the writes end; nil when it does not exist.
// The writer goes on from there, so its next write builds on what is stored.
func (r *tenantRun) resolve(ctx context.Context, cms configMaps, name string, got *corev1.ConfigMap, err error) *corev1.ConfigMap {
	if err == nil {
		return got
	}
	for ctx.Err() == nil {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			return cm
		case apierrors.IsNotFound(err):
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// record keeps one write and its outcome.
func (r *tenantRun) record(name, op string, got *corev1.ConfigMap, err error) {
	c := change{name: name, op: op, acked: err == nil, at: time.Now()}
	if got != nil && err == nil {
		c.rv = parseRV(got.ResourceVersion)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops++
	r.changes = append(r.changes, c)
	if err != nil {
		r.errors[errorMessage(err)]++
	}
}

// objectState is what an object should be at the end: absent, or at rv.
type objectState struct {
	absent bool
	rv     int64
}

// finalStates is, per object written, its state after its last acknowledged
// change. An object whose last write was not acknowledged (it may or may
// not have happened) is read back instead: the apiserver's answer then is
// its final state, and it must not be older than the last acknowledged one.
func (r *tenantRun) finalStates(ctx context.Context, cms configMaps) map[string]objectState {
	r.mu.Lock()
	last := map[string]change{}
	lastAcked := map[string]change{}
	for _, c := range r.changes {
		last[c.name] = c
		if c.acked {
			lastAcked[c.name] = c
		}
	}
	r.mu.Unlock()
	// One bound for all the read-backs: an apiserver that does not answer
	// must not hold the verdict for a minute per object.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	want := map[string]objectState{}
	for name, c := range last {
		if c.acked {
			want[name] = objectState{absent: c.op == "delete", rv: c.rv}
			continue
		}
		err := WaitFor(ctx, time.Minute, 200*time.Millisecond, "read back "+name, func(ctx context.Context) (bool, string, error) {
			cm, err := cms.Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				want[name] = objectState{absent: true}
			case err != nil:
				return false, err.Error(), nil
			default:
				want[name] = objectState{rv: parseRV(cm.ResourceVersion)}
			}
			return true, "", nil
		})
		if err != nil {
			// Unknown: the informer is held to the last acknowledged state.
			if a, ok := lastAcked[name]; ok {
				want[name] = objectState{absent: a.op == "delete", rv: a.rv}
			}
		}
	}
	return want
}

// longestSilentWatch is the longest time an acknowledged change waited for
// the informer while it delivered nothing: from the change's acknowledgement
// to the informer's next delivery of anything, for each change the informer
// had not shown yet. A change never shown waits until end.
func (r *tenantRun) longestSilentWatch(end time.Time) time.Duration {
	var all []time.Time
	for _, ds := range r.deliveries {
		for _, d := range ds {
			all = append(all, d.at)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Before(all[j]) })
	var longest time.Duration
	for _, c := range r.changes {
		if !c.acked || r.shownBy(c, c.at) {
			continue
		}
		i := sort.Search(len(all), func(i int) bool { return !all[i].Before(c.at) })
		next := end
		if i < len(all) {
			next = all[i]
		}
		longest = max(longest, next.Sub(c.at))
	}
	return longest
}

// shownBy: the informer delivered c, or a later state of its object, by t.
func (r *tenantRun) shownBy(c change, t time.Time) bool {
	for _, d := range r.deliveries[c.name] {
		if d.at.After(t) {
			return false
		}
		if d.deleted || (c.op != "delete" && d.rv >= c.rv) {
			return true
		}
	}
	return false
}

// tenantInformer is the workload's SharedInformer on its ConfigMaps.
type tenantInformer struct {
	informer  cache.SharedIndexInformer
	namespace string
	stop      context.CancelFunc
}

// startInformer starts an informer on the workload's ConfigMaps in ns that
// records every delivery, and waits for its first list.
func (r *tenantRun) startInformer(ctx context.Context, kube kubernetes.Interface, ns string) (*tenantInformer, error) {
	selector := tenantLoadLabel + "=1"
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return kube.CoreV1().ConfigMaps(ns).List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return kube.CoreV1().ConfigMaps(ns).Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		r.mu.Lock()
		r.watchErrs++
		r.mu.Unlock()
	})
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.deliver(obj, false) },
		UpdateFunc: func(_, obj any) { r.deliver(obj, false) },
		DeleteFunc: func(obj any) { r.deliver(obj, true) },
	})
	if err != nil {
		return nil, err
	}
	infCtx, stop := context.WithCancel(ctx)
	go inf.Run(infCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		stop()
		return nil, fmt.Errorf("the informer on the tenant's ConfigMaps never synced")
	}
	return &tenantInformer{informer: inf, namespace: ns, stop: stop}, nil
}

// deliver records one notification and whether it went back in time.
func (r *tenantRun) deliver(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	rv := parseRV(cm.ResourceVersion)
	r.mu.Lock()
	defer r.mu.Unlock()
	// Equal is fine: a relist delivers an object again as an update.
	if prev, ok := r.lastRV[cm.Name]; ok && rv < prev {
		r.outOfOrder = append(r.outOfOrder, fmt.Sprintf("%s: resourceVersion %d after %d", cm.Name, rv, prev))
	}
	r.lastRV[cm.Name] = max(rv, r.lastRV[cm.Name])
	r.deliveries[cm.Name] = append(r.deliveries[cm.Name], delivery{rv: rv, deleted: deleted, at: time.Now()})
}

// missing counts the objects the informer's store does not hold in their
// wanted state, with a few examples.
func (i *tenantInformer) missing(want map[string]objectState) (int, []string) {
	return missingFrom(i.informer.GetStore(), i.namespace, want)
}

// missingFrom counts the objects of namespace ns that store does not hold in
// their wanted state, with a few examples.
func missingFrom(store cache.Store, ns string, want map[string]objectState) (int, []string) {
	n := 0
	var examples []string
	for name, w := range want {
		obj, exists, _ := store.GetByKey(ns + "/" + name)
		var got string
		switch {
		case w.absent && exists:
			got = "present at " + obj.(*corev1.ConfigMap).ResourceVersion + ", want deleted"
		case !w.absent && !exists:
			got = fmt.Sprintf("absent, want resourceVersion %d", w.rv)
		case !w.absent && parseRV(obj.(*corev1.ConfigMap).ResourceVersion) != w.rv:
			got = fmt.Sprintf("at resourceVersion %s, want %d", obj.(*corev1.ConfigMap).ResourceVersion, w.rv)
		default:
			continue
		}
		n++
		if len(examples) < 5 {
			examples = append(examples, name+": "+got)
		}
	}
	sort.Strings(examples)
	return n, examples
}

// pollReadyz asks /readyz every 500 ms until ctx ends and returns how many
// answers were not ok and the longest span from a failed answer to the next
// ok one.
func pollReadyz(ctx context.Context, cfg *rest.Config) (failures int, longestSeconds float64) {
	client, err := tenantHTTPClient(cfg)
	if err != nil {
		return 0, 0
	}
	var since time.Time // first failure of the current span
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if !since.IsZero() {
				longestSeconds = max(longestSeconds, time.Since(since).Seconds())
			}
			return failures, longestSeconds
		case <-tick.C:
		}
		ok, _ := readyz(ctx, client, cfg)
		switch {
		case ctx.Err() != nil:
		case !ok:
			failures++
			if since.IsZero() {
				since = time.Now()
			}
		case !since.IsZero():
			longestSeconds = max(longestSeconds, time.Since(since).Seconds())
			since = time.Time{}
		}
	}
}

// longestGap is the longest time between start, the sorted times ts, and end.
func longestGap(start, end time.Time, ts []time.Time) time.Duration {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	var longest time.Duration
	prev := start
	for _, t := range append(ts, end) {
		longest = max(longest, t.Sub(prev))
		prev = t
	}
	return longest
}

// errorMessage is err without what differs between writes (object names,
// addresses), so that the same failure is counted once.
func errorMessage(err error) string {
	if status, ok := err.(apierrors.APIStatus); ok {
		s := status.Status()
		msg := s.Message
		if s.Details != nil && s.Details.Name != "" {
			msg = strings.ReplaceAll(msg, s.Details.Name, "NAME")
		}
		if s.Reason == "" {
			return fmt.Sprintf("%d: %s", s.Code, msg)
		}
		return fmt.Sprintf("%d %s: %s", s.Code, s.Reason, msg)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Op + ": " + uerr.Err.Error()
	}
	return err.Error()
}

// topErrorCounts are the five most frequent messages, the most frequent first.
func topErrorCounts(counts map[string]int) []checker.ErrorCount {
	var out []checker.ErrorCount
	for msg, n := range counts {
		out = append(out, checker.ErrorCount{Message: msg, Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Message < out[j].Message
	})
	return out[:min(len(out), 5)]
}

// parseRV reads a resourceVersion: with etcd3 storage, the etcd revision of
// the object's last change, so versions of one object compare as numbers.
func parseRV(rv string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(rv), 10, 64)
	return n
}

// anyKey is one of m's keys, at random.
func anyKey[V any](rng *rand.Rand, m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys[rng.IntN(len(keys))]
}

// configMaps is the part of the ConfigMap client the writers use.
type configMaps interface {
	Create(ctx context.Context, cm *corev1.ConfigMap, o metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(ctx context.Context, cm *corev1.ConfigMap, o metav1.UpdateOptions) (*corev1.ConfigMap, error)
	Delete(ctx context.Context, name string, o metav1.DeleteOptions) error
	Get(ctx context.Context, name string, o metav1.GetOptions) (*corev1.ConfigMap, error)
}
