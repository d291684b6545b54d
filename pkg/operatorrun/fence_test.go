package operatorrun

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock is a lock whose writes succeed or fail as told.
type fakeLock struct {
	resourcelock.Interface
	id   string
	fail error
}

func (l *fakeLock) Identity() string { return l.id }
func (l *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	return l.fail
}
func (l *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	return l.fail
}

func TestFenceClosesWhenTheLockWentUnrenewedForTheRenewDeadline(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fence := &Fence{now: func() time.Time { return now }}
	inner := &fakeLock{id: "op-1"}
	lock := fencedLock{Interface: inner, fence: fence}
	ctx := context.Background()
	ours := resourcelock.LeaderElectionRecord{HolderIdentity: "op-1"}

	if err := fence.Held(); !errors.Is(err, ErrNotLeading) {
		t.Fatalf("before any write: Held = %v, want ErrNotLeading", err)
	}
	if err := lock.Create(ctx, ours); err != nil {
		t.Fatal(err)
	}
	if err := fence.Held(); err != nil {
		t.Fatalf("right after acquiring: Held = %v", err)
	}
	now = now.Add(RetryPeriod)
	if err := lock.Update(ctx, ours); err != nil {
		t.Fatal(err)
	}
	now = now.Add(RenewDeadline - time.Millisecond)
	if err := fence.Held(); err != nil {
		t.Fatalf("just inside the renew deadline: Held = %v", err)
	}

	// A renewal that fails does not count: the process was frozen past the
	// deadline and the apiserver now says another holds the lock.
	inner.fail = errors.New("conflict")
	now = now.Add(20 * time.Second)
	if err := lock.Update(ctx, ours); err == nil {
		t.Fatal("the failed update was not passed on")
	}
	if err := fence.Held(); !errors.Is(err, ErrNotLeading) {
		t.Fatalf("20 s after the last renewal: Held = %v, want ErrNotLeading", err)
	}

	// Renewed again, then released (a write naming nobody): closed at once.
	inner.fail = nil
	if err := lock.Update(ctx, ours); err != nil || fence.Held() != nil {
		t.Fatalf("renewed: %v, Held = %v", err, fence.Held())
	}
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
	if err := fence.Held(); !errors.Is(err, ErrNotLeading) {
		t.Fatalf("after the release: Held = %v, want ErrNotLeading", err)
	}
}

// A renewal refused because a record of the other kind names another live
// holder closes the fence at once, not a renew deadline after the last
// renewal: that holder may already be acting.
func TestFenceClosesAtOnceWhenARecordOfTheOtherKindIsHeld(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fence := &Fence{now: func() time.Time { return now }}
	inner := &fakeLock{id: "op-1"}
	lock := fencedLock{Interface: inner, fence: fence}
	ours := resourcelock.LeaderElectionRecord{HolderIdentity: "op-1"}
	if err := lock.Update(t.Context(), ours); err != nil || fence.Held() != nil {
		t.Fatalf("renewed: %v, Held = %v", err, fence.Held())
	}
	now = now.Add(RetryPeriod)
	inner.fail = fmt.Errorf("%w: Endpoints ns/etcd-operator names etcd-operator-7d8c9-abcde", ErrOtherLockHeld)
	if err := lock.Update(t.Context(), ours); !errors.Is(err, ErrOtherLockHeld) {
		t.Fatalf("the refusal was not passed on: %v", err)
	}
	if err := fence.Held(); !errors.Is(err, ErrNotLeading) {
		t.Fatalf("right after the refused renewal: Held = %v, want ErrNotLeading", err)
	}
}

func TestRunAsLeaderKeepsTheFenceOpenWhileLeading(t *testing.T) {
	kube := grant(fake.NewClientset(), "leases")
	fence := NewFence()
	ctx, cancel := context.WithCancel(context.Background())
	held := make(chan error, 1)
	done := make(chan error)
	go func() {
		done <- RunAsLeader(ctx, LeaderConfig{Kube: kube, Namespace: "ns", LockName: "etcd-operator", Identity: "op-1",
			Log: logrus.NewEntry(logrus.New()), Fence: fence}, func(ctx context.Context) {
			held <- fence.Held()
			<-ctx.Done()
		})
	}()
	select {
	case err := <-held:
		if err != nil {
			t.Errorf("the leader's work sees the fence closed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("never became the leader")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("clean shutdown returned %v", err)
	}
	if err := fence.Held(); !errors.Is(err, ErrNotLeading) {
		t.Errorf("after the Lease was released: Held = %v, want ErrNotLeading", err)
	}
}
