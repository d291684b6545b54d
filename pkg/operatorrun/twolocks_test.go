package operatorrun

import (
	"errors"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

func testBothLocks(kube *fake.Clientset, id string) *bothLocks {
	rlc := resourcelock.ResourceLockConfig{Identity: id}
	return &bothLocks{
		endpoints: &EndpointsLock{Namespace: "ns", Name: "etcd-operator", Client: kube.CoreV1(), LockConfig: rlc},
		lease: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: "ns", Name: "etcd-operator"},
			Client: kube.CoordinationV1(), LockConfig: rlc},
	}
}

func heldLease(holder string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "etcd-operator"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: renewed}}}
}

// holders reads who the Endpoints record and the Lease name ("-" for a
// missing object).
func holders(t *testing.T, kube *fake.Clientset) (endpoints, lease string) {
	t.Helper()
	b := testBothLocks(kube, "reader")
	endpoints, lease = "-", "-"
	if rec, _, err := b.endpoints.Get(t.Context()); err == nil {
		endpoints = rec.HolderIdentity
	}
	if rec, _, err := b.lease.Get(t.Context()); err == nil {
		lease = rec.HolderIdentity
	}
	return endpoints, lease
}

func TestBothLocks(t *testing.T) {
	now := time.Now()
	ours := resourcelock.LeaderElectionRecord{HolderIdentity: "op-1", LeaseDurationSeconds: 15, RenewTime: metav1.NewTime(now), AcquireTime: metav1.NewTime(now)}

	t.Run("an empty namespace: both are created naming this replica", func(t *testing.T) {
		kube := fake.NewClientset()
		b := testBothLocks(kube, "op-1")
		if _, _, err := b.Get(t.Context()); !apierrors.IsNotFound(err) {
			t.Fatalf("Get = %v, want NotFound so that the elector creates", err)
		}
		if err := b.Create(t.Context(), ours); err != nil {
			t.Fatal(err)
		}
		if e, l := holders(t, kube); e != "op-1" || l != "op-1" {
			t.Fatalf("Endpoints names %q, Lease %q", e, l)
		}
		if rec, _, err := b.Get(t.Context()); err != nil || rec.HolderIdentity != "op-1" {
			t.Fatalf("Get = %+v, %v", rec, err)
		}
	})

	t.Run("an Endpoints object made between the Get and the Create is a lost round, not a lead beside its maker", func(t *testing.T) {
		kube := fake.NewClientset()
		b := testBothLocks(kube, "op-1")
		if _, _, err := b.Get(t.Context()); !apierrors.IsNotFound(err) {
			t.Fatalf("Get = %v, want NotFound", err)
		}
		if _, err := kube.CoreV1().Endpoints("ns").Create(t.Context(), originalRecord(t, "etcd-operator-7d8c9-abcde", now), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := b.Create(t.Context(), ours); !apierrors.IsAlreadyExists(err) {
			t.Fatalf("Create = %v, want AlreadyExists", err)
		}
		if e, l := holders(t, kube); e != "etcd-operator-7d8c9-abcde" || l != "-" {
			t.Fatalf("Endpoints names %q, Lease %q; want the original's record untouched and no Lease", e, l)
		}
	})

	t.Run("the original's Endpoints record and no Lease read as the original's", func(t *testing.T) {
		kube := fake.NewClientset(originalRecord(t, "etcd-operator-7d8c9-abcde", now))
		rec, _, err := testBothLocks(kube, "op-1").Get(t.Context())
		if err != nil || rec.HolderIdentity != "etcd-operator-7d8c9-abcde" {
			t.Fatalf("Get = %+v, %v", rec, err)
		}
	})

	t.Run("a Lease held by a replica allowed leases only, and no Endpoints object, read as the Lease's", func(t *testing.T) {
		kube := fake.NewClientset(heldLease("op-2", now))
		rec, _, err := testBothLocks(kube, "op-1").Get(t.Context())
		if err != nil || rec.HolderIdentity != "op-2" {
			t.Fatalf("Get = %+v, %v", rec, err)
		}
		if e, l := holders(t, kube); e != "-" || l != "op-2" {
			t.Fatalf("a Get wrote: Endpoints names %q, Lease %q", e, l)
		}
	})

	t.Run("records naming different holders read as an unknown leader", func(t *testing.T) {
		kube := fake.NewClientset(originalRecord(t, "etcd-operator-7d8c9-abcde", now), heldLease("op-2", now))
		rec, raw, err := testBothLocks(kube, "op-1").Get(t.Context())
		if err != nil || rec.HolderIdentity != resourcelock.UnknownLeader {
			t.Fatalf("Get = %+v, %v", rec, err)
		}
		if len(raw) == 0 {
			t.Error("no raw record: the elector could not tell when either changes")
		}
	})

	t.Run("an update takes the Endpoints record and creates the Lease the Get found missing", func(t *testing.T) {
		kube := fake.NewClientset(originalRecord(t, "etcd-operator-7d8c9-abcde", now.Add(-time.Hour)))
		b := testBothLocks(kube, "op-1")
		if _, _, err := b.Get(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := b.Update(t.Context(), ours); err != nil {
			t.Fatal(err)
		}
		if e, l := holders(t, kube); e != "op-1" || l != "op-1" {
			t.Fatalf("Endpoints names %q, Lease %q", e, l)
		}
		// The renewals that follow, without a Get between (the elector's fast
		// path), update both.
		if err := b.Update(t.Context(), ours); err != nil {
			t.Fatal(err)
		}
		// The release names nobody on both.
		if err := b.Update(t.Context(), resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}); err != nil {
			t.Fatal(err)
		}
		if e, l := holders(t, kube); e != "" || l != "" {
			t.Fatalf("after the release Endpoints names %q, Lease %q", e, l)
		}
	})
}

// yieldingFixture is a replica allowed the Lease only, yielding to the
// Endpoints record, on a fake clock.
type yieldingFixture struct {
	kube *fake.Clientset
	lock *yieldingLock
	now  time.Time
	log  *logtest.Hook
}

func newYieldingFixture(t *testing.T, objects ...runtime.Object) *yieldingFixture {
	kube := fake.NewClientset(objects...)
	logger, hook := logtest.NewNullLogger()
	f := &yieldingFixture{kube: kube, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), log: hook}
	rlc := resourcelock.ResourceLockConfig{Identity: "op-1"}
	f.lock = &yieldingLock{
		Interface: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: "ns", Name: "etcd-operator"}, Client: kube.CoordinationV1(), LockConfig: rlc},
		kind:      LockLease, otherKind: LockEndpoints,
		other: &EndpointsLock{Namespace: "ns", Name: "etcd-operator", Client: kube.CoreV1(), LockConfig: rlc},
		now:   func() time.Time { return f.now },
		log:   logrus.NewEntry(logger),
	}
	return f
}

func (f *yieldingFixture) ours() resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{HolderIdentity: "op-1", LeaseDurationSeconds: 15, RenewTime: metav1.NewTime(f.now), AcquireTime: metav1.NewTime(f.now)}
}

// renewOriginal writes the original's record as renewed at renewed.
func (f *yieldingFixture) renewOriginal(t *testing.T, renewed time.Time) {
	t.Helper()
	if _, err := f.kube.CoreV1().Endpoints("ns").Update(t.Context(), originalRecord(t, "etcd-operator-7d8c9-abcde", renewed), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *yieldingFixture) warnings() []*logrus.Entry {
	var out []*logrus.Entry
	for _, e := range f.log.AllEntries() {
		if e.Level == logrus.WarnLevel {
			out = append(out, e)
		}
	}
	return out
}

func TestYieldingLockRefusesWhileTheOtherRecordIsLive(t *testing.T) {
	const original = "etcd-operator-7d8c9-abcde"
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newYieldingFixture(t, originalRecord(t, original, start))
	ctx := t.Context()

	for range 3 {
		if err := f.lock.Create(ctx, f.ours()); !errors.Is(err, ErrOtherLockHeld) {
			t.Fatalf("Create beside the original's live record = %v, want ErrOtherLockHeld", err)
		}
		f.now = f.now.Add(RetryPeriod)
	}
	if _, err := f.kube.CoordinationV1().Leases("ns").Get(ctx, "etcd-operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused Create made the Lease: %v", err)
	}
	warned := f.warnings()
	if len(warned) != 1 {
		t.Fatalf("%d warnings for three refusals by one holder, want one", len(warned))
	}
	if w := warned[0]; w.Data["holder"] != original || w.Data["lock"] != LockLease || w.Data["otherLock"] != LockEndpoints ||
		w.Data["leaseDurationSeconds"] != 15 || w.Data["renewTime"] != "2026-01-01T00:00:00Z" {
		t.Errorf("the warning's fields %v", w.Data)
	}

	// A release is never refused.
	if err := f.lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}); errors.Is(err, ErrOtherLockHeld) {
		t.Errorf("a release was refused: %v", err)
	}

	// The original stopped: once its record lapses the replica may lead, and
	// says so.
	f.now = start.Add(15 * time.Second)
	if err := f.lock.Create(ctx, f.ours()); err != nil {
		t.Fatalf("Create once the original's record lapsed = %v", err)
	}
	if last := f.log.LastEntry(); last.Level != logrus.InfoLevel || last.Data["holder"] != original {
		t.Errorf("last log %q %v, want the lapse said", last.Message, last.Data)
	}
}

// A holder whose clock is behind this replica's writes renewTimes that look
// expired here; the record keeps changing, so it is live all the same.
func TestYieldingLockRefusesARecordStillBeingRenewedByAClockBehind(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	behind := start.Add(-time.Minute)
	f := newYieldingFixture(t, originalRecord(t, "etcd-operator-7d8c9-abcde", behind))
	ctx := t.Context()
	if err := f.lock.Create(ctx, f.ours()); err != nil {
		t.Fatalf("first sight of a record that looks a minute old: %v, want it taken as lapsed", err)
	}
	for i := range 5 {
		f.now = f.now.Add(RetryPeriod)
		f.renewOriginal(t, behind.Add(time.Duration(i+1)*RetryPeriod))
		if err := f.lock.Update(ctx, f.ours()); !errors.Is(err, ErrOtherLockHeld) {
			t.Fatalf("renewal %d of the record: Update = %v, want ErrOtherLockHeld", i+1, err)
		}
	}
	// It stops changing: a lease duration after it last changed, it is free.
	f.now = f.now.Add(15 * time.Second)
	if err := f.lock.Update(ctx, f.ours()); errors.Is(err, ErrOtherLockHeld) {
		t.Fatalf("a record unchanged for a lease duration still refused: %v", err)
	}
}

func TestYieldingLockLetsThroughWhatNamesNoOtherLiveHolder(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
	}{
		{"no Endpoints object", nil},
		{"an Endpoints object without the record (the restore operator's Service's)",
			[]runtime.Object{&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "etcd-operator"}}}},
		{"a released record", []runtime.Object{originalRecord(t, "", start)}},
		{"a record naming this replica", []runtime.Object{originalRecord(t, "op-1", start)}},
		{"a record renewed long ago", []runtime.Object{originalRecord(t, "etcd-operator-7d8c9-abcde", start.Add(-time.Hour))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newYieldingFixture(t, tc.objects...)
			if err := f.lock.Create(t.Context(), f.ours()); err != nil {
				t.Fatalf("Create = %v", err)
			}
			if len(f.warnings()) > 0 {
				t.Errorf("warned %q", f.warnings()[0].Message)
			}
		})
	}
}

// A record that cannot be read might be live: the write waits.
func TestYieldingLockDoesNotWriteWhenTheOtherRecordCannotBeRead(t *testing.T) {
	f := newYieldingFixture(t)
	f.kube.PrependReactor("get", "endpoints", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "endpoints"}, "etcd-operator", errors.New("RBAC"))
	})
	err := f.lock.Create(t.Context(), f.ours())
	if err == nil || errors.Is(err, ErrOtherLockHeld) {
		t.Fatalf("Create = %v, want the read's error", err)
	}
	if _, err := f.kube.CoordinationV1().Leases("ns").Get(t.Context(), "etcd-operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Lease was made: %v", err)
	}
}
