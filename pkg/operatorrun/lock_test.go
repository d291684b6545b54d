package operatorrun

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// grant makes the fake apiserver answer SelfSubjectAccessReviews as an RBAC
// role granting get, create and update on the given resources, and nothing
// else, would. A resource written "endpoints:get" is granted that verb only;
// "etcdclusters/status" and "*/status" grant a subresource, as in a Role.
func grant(kube *fake.Clientset, resources ...string) *fake.Clientset {
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		attrs := review.Spec.ResourceAttributes
		if attrs == nil {
			return true, review, nil
		}
		asked := attrs.Resource
		if attrs.Subresource != "" {
			asked += "/" + attrs.Subresource
		}
		for _, r := range resources {
			resource, verbs, only := strings.Cut(r, ":")
			if !only {
				verbs = "get,create,update"
			}
			matches := resource == asked || attrs.Subresource != "" && resource == "*/"+attrs.Subresource
			if matches && slices.Contains(strings.Split(verbs, ","), attrs.Verb) {
				review.Status.Allowed = true
			}
		}
		return true, review, nil
	})
	return kube
}

func TestMissingAsksASubresourceAsTheApiserverAuthorizesIt(t *testing.T) {
	kube := fake.NewClientset()
	var asked []authorizationv1.ResourceAttributes
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		asked = append(asked, *review.Spec.ResourceAttributes)
		return true, review, nil
	})
	if _, err := Missing(t.Context(), kube, Rule{Group: "etcd.database.coreos.com", Resource: "etcdclusters/status", Verbs: []string{"update"}, Namespace: "ops"}); err != nil {
		t.Fatal(err)
	}
	want := authorizationv1.ResourceAttributes{Namespace: "ops", Verb: "update", Group: "etcd.database.coreos.com", Resource: "etcdclusters", Subresource: "status"}
	if len(asked) != 1 || asked[0] != want {
		t.Fatalf("asked %+v, want %+v", asked, want)
	}
}

func TestChooseLock(t *testing.T) {
	tests := []struct {
		name    string
		granted []string
		want    LockKind
		yieldTo LockKind
		why     []string
	}{
		{"a role granting leases and endpoints holds both", []string{"leases", "endpoints"}, LockBoth, "", []string{"both are held"}},
		{"a role granting leases and a read of endpoints, as the published roles, gets the Lease and yields to a live Endpoints record",
			[]string{"leases", "endpoints:get"}, LockLease, LockEndpoints, []string{"does not lead while a live Endpoints record names another holder", "add create, update endpoints to hold both"}},
		{"a role granting only leases gets the Lease and is told it cannot see an original",
			[]string{"leases"}, LockLease, "", []string{"may not get endpoints: an original etcd-operator leading on the Endpoints record is not seen"}},
		{"the original's role (endpoints, no leases) gets the Endpoints lock and is told how to use a Lease",
			[]string{"endpoints"}, LockEndpoints, "", []string{"not get, create, update leases", `{apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"]} in namespace ops`}},
		{"a role granting endpoints and a read of leases gets the Endpoints lock and yields to a live Lease",
			[]string{"endpoints", "leases:get"}, LockEndpoints, LockLease, []string{"not create, update leases", "does not lead while a live Lease names another holder"}},
		{"a role granting neither gets no lock and the rule to add",
			nil, "", "", []string{"may not get, create, update leases nor get, create, update endpoints in namespace ops", `add the rule {apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"]} in namespace ops`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChooseLock(t.Context(), grant(fake.NewClientset(), tc.granted...), "ops")
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind != tc.want || got.YieldTo != tc.yieldTo {
				t.Fatalf("lock %q yielding to %q (%s), want %q yielding to %q", got.Kind, got.YieldTo, got.Why, tc.want, tc.yieldTo)
			}
			for _, w := range tc.why {
				if !strings.Contains(got.Why, w) {
					t.Errorf("reason %q does not say %q", got.Why, w)
				}
			}
		})
	}
}

func TestChooseLockAsksTheOperatorsNamespace(t *testing.T) {
	kube := fake.NewClientset()
	var mu sync.Mutex
	var asked []authorizationv1.ResourceAttributes
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		mu.Lock()
		asked = append(asked, *review.Spec.ResourceAttributes)
		mu.Unlock()
		return true, review, nil
	})
	if _, err := ChooseLock(t.Context(), kube, "ops"); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 6 {
		t.Fatalf("asked %d reviews, want get/create/update of leases and of endpoints: %+v", len(asked), asked)
	}
	for _, a := range asked {
		if a.Namespace != "ops" {
			t.Errorf("review %+v not in the operator's namespace", a)
		}
		if (a.Resource == "leases") != (a.Group == "coordination.k8s.io") {
			t.Errorf("review %+v asks the wrong group", a)
		}
	}
}

// TestEndpointsLockReadsTheOriginalsRecord: the record an original
// etcd-operator (client-go 1.12) wrote is read, so that during a migration
// the two never lead at once.
func TestEndpointsLockReadsTheOriginalsRecord(t *testing.T) {
	original := `{"holderIdentity":"etcd-operator-7d8c9-abcde","leaseDurationSeconds":15,"acquireTime":"2019-02-27T10:00:00Z","renewTime":"2019-02-27T10:05:00Z","leaderTransitions":3}`
	kube := fake.NewClientset(&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "etcd-operator",
		Annotations: map[string]string{resourcelock.LeaderElectionRecordAnnotationKey: original}}})
	l := &EndpointsLock{Namespace: "ops", Name: "etcd-operator", Client: kube.CoreV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: "op-1"}}
	rec, raw, err := l.Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != original || rec.HolderIdentity != "etcd-operator-7d8c9-abcde" || rec.LeaseDurationSeconds != 15 || rec.LeaderTransitions != 3 ||
		!rec.RenewTime.Equal(&metav1.Time{Time: time.Date(2019, 2, 27, 10, 5, 0, 0, time.UTC)}) {
		t.Fatalf("read %+v from %s", rec, raw)
	}

	// An update keeps what else is on the object.
	rec.HolderIdentity = "op-1"
	if err := l.Update(t.Context(), *rec); err != nil {
		t.Fatal(err)
	}
	e, _ := kube.CoreV1().Endpoints("ops").Get(t.Context(), "etcd-operator", metav1.GetOptions{})
	var back resourcelock.LeaderElectionRecord
	if err := json.Unmarshal([]byte(e.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]), &back); err != nil || back.HolderIdentity != "op-1" {
		t.Fatalf("annotation after update: %v, %v", e.Annotations, err)
	}

	// Without the annotation the record is empty: anyone may take it.
	bare := fake.NewClientset(&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "etcd-operator"}})
	l = &EndpointsLock{Namespace: "ops", Name: "etcd-operator", Client: bare.CoreV1()}
	if rec, _, err := l.Get(t.Context()); err != nil || rec.HolderIdentity != "" {
		t.Fatalf("a bare Endpoints object gave %+v, %v", rec, err)
	}
	// A garbled annotation is an error naming it, not a panic or a takeover.
	bad := fake.NewClientset(&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "etcd-operator",
		Annotations: map[string]string{resourcelock.LeaderElectionRecordAnnotationKey: "{"}}})
	l = &EndpointsLock{Namespace: "ops", Name: "etcd-operator", Client: bad.CoreV1()}
	if _, _, err := l.Get(t.Context()); err == nil || !strings.Contains(err.Error(), resourcelock.LeaderElectionRecordAnnotationKey) {
		t.Fatalf("a garbled annotation gave %v", err)
	}
}

func ownPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "op-1", UID: "uid-op-1"}}
}

// events drains what the fake recorder holds.
func events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestRunAsLeaderElectsOnTheOriginalsEndpointsLock(t *testing.T) {
	kube := grant(fake.NewClientset(ownPod()), "endpoints", "pods")
	rec := record.NewFakeRecorder(10)
	ctx, cancel := context.WithCancel(t.Context())
	led := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- RunAsLeader(ctx, LeaderConfig{Kube: kube, Namespace: "ns", LockName: "etcd-operator", Identity: "op-1",
			Log: logrus.NewEntry(logrus.New()), Recorder: rec, PodName: "op-1"}, func(ctx context.Context) {
			close(led)
			<-ctx.Done()
		})
	}()
	receive(t, led, "leadership")
	e, err := kube.CoreV1().Endpoints("ns").Get(t.Context(), "etcd-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var held resourcelock.LeaderElectionRecord
	if err := json.Unmarshal([]byte(e.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]), &held); err != nil || held.HolderIdentity != "op-1" || held.LeaseDurationSeconds != 15 {
		t.Fatalf("Endpoints annotations %v (%v), want op-1 holding for 15 s", e.Annotations, err)
	}
	if _, err := kube.CoordinationV1().Leases("ns").Get(t.Context(), "etcd-operator", metav1.GetOptions{}); err == nil {
		t.Error("a Lease was made although the role does not grant leases")
	}
	got := events(rec)
	if len(got) != 1 || !strings.HasPrefix(got[0], "Normal "+EventLeaderElectionLock+" leader election uses Endpoints ns/etcd-operator") {
		t.Errorf("events %q, want one saying the Endpoints lock is used", got)
	}
	cancel()
	if err := receive(t, done, "RunAsLeader returning"); err != nil {
		t.Fatalf("clean shutdown returned %v", err)
	}
	e, _ = kube.CoreV1().Endpoints("ns").Get(t.Context(), "etcd-operator", metav1.GetOptions{})
	if err := json.Unmarshal([]byte(e.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]), &held); err != nil || held.HolderIdentity != "" {
		t.Fatalf("the Endpoints lock was not released on shutdown: %v", e.Annotations)
	}
}

type recorded struct {
	object               runtime.Object
	typ, reason, message string
}

// objectRecorder keeps the object an event is about, which
// record.FakeRecorder does not.
type objectRecorder struct{ events chan recorded }

func (r *objectRecorder) Event(object runtime.Object, typ, reason, message string) {
	r.events <- recorded{object, typ, reason, message}
}

func (r *objectRecorder) Eventf(object runtime.Object, typ, reason, format string, args ...interface{}) {
	r.Event(object, typ, reason, fmt.Sprintf(format, args...))
}

func (r *objectRecorder) AnnotatedEventf(object runtime.Object, _ map[string]string, typ, reason, format string, args ...interface{}) {
	r.Eventf(object, typ, reason, format, args...)
}

// fakeReadiness records what /readyz was told.
type fakeReadiness struct {
	mu  sync.Mutex
	why []string
}

func (f *fakeReadiness) set(why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.why = append(f.why, why)
}

func (f *fakeReadiness) said() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.why...)
}

func TestRunAsLeaderWithoutALockSaysWhichRuleIsMissing(t *testing.T) {
	kube := grant(fake.NewClientset(ownPod()))
	rec := &objectRecorder{events: make(chan recorded, 10)}
	ready := &fakeReadiness{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		done <- RunAsLeader(ctx, LeaderConfig{Kube: kube, Namespace: "ns", LockName: "etcd-operator", Identity: "op-1",
			Log: logrus.NewEntry(logrus.New()), Recorder: rec, PodName: "op-1", Unready: ready.set}, func(ctx context.Context) {
			t.Error("led without a lock")
		})
	}()
	ev := receive(t, rec.events, "the Warning event")
	cancel()
	if err := receive(t, done, "RunAsLeader returning"); err != nil {
		t.Fatalf("RunAsLeader = %v, want nil after ctx ended", err)
	}
	rule := `add the rule {apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"]} in namespace ns`
	if ev.typ != corev1.EventTypeWarning || ev.reason != EventLeaderElectionForbidden || !strings.Contains(ev.message, rule) {
		t.Errorf("event %+v, want a Warning naming the rule", ev)
	}
	// The event must reach `kubectl describe pod`, which lists events by the
	// pod's UID.
	if ref, ok := ev.object.(*corev1.ObjectReference); !ok || ref.Kind != "Pod" || ref.Name != "op-1" || ref.UID != "uid-op-1" {
		t.Errorf("event on %#v, want the operator's pod with its UID", ev.object)
	}
	if said := ready.said(); len(said) != 1 || !strings.Contains(said[0], rule) {
		t.Errorf("/readyz was told %q, want the missing rule once", said)
	}
}

// TestRunAsLeaderTakesARuleAddedLater: the review is asked again while no
// lock may be used, so adding the rule is enough, and /readyz stops naming it.
func TestRunAsLeaderTakesARuleAddedLater(t *testing.T) {
	var mu sync.Mutex
	allowed := false
	kube := fake.NewClientset(ownPod())
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		mu.Lock()
		review.Status.Allowed = allowed && review.Spec.ResourceAttributes.Resource == "leases"
		mu.Unlock()
		return true, review, nil
	})
	rec := record.NewFakeRecorder(10)
	ready := &fakeReadiness{}
	cfg := LeaderConfig{Kube: kube, Namespace: "ns", LockName: "etcd-operator", Identity: "op-1",
		Log: logrus.NewEntry(logrus.New()), Recorder: rec, PodName: "op-1", Unready: ready.set}
	got := make(chan LockKind)
	go func() {
		choice, _ := chooseLock(t.Context(), cfg, time.Millisecond)
		got <- choice.Kind
	}()
	receive(t, rec.Events, "the Warning event")
	mu.Lock()
	allowed = true
	mu.Unlock()
	if kind := receive(t, got, "the review asked again"); kind != LockLease {
		t.Fatalf("lock %q after leases were granted", kind)
	}
	said := ready.said()
	if len(said) != 2 || said[1] != "" {
		t.Errorf("/readyz was told %q, want the rule and then nothing", said)
	}
}
