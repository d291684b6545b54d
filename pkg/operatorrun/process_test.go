package operatorrun

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// Long enough for a fake election and a shutdown on a loaded machine; only a
// broken Process waits this long.
const testDeadline = 10 * time.Second

func testLeaderConfig(kube kubernetes.Interface, log *logrus.Entry) LeaderConfig {
	return LeaderConfig{Kube: kube, Namespace: "ns", LockName: "etcd-operator", Identity: "op-1", Log: log}
}

// receive fails the test unless ch yields within testDeadline.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testDeadline):
		t.Fatalf("%s: not within %v", what, testDeadline)
		var zero T
		return zero
	}
}

func TestProcessEndsWithTheFirstFatalError(t *testing.T) {
	tests := []struct {
		name string
		// background runs in the background once the process leads; stop ends it
		// from the outside: the process's parent context or the leader's work.
		background func(ctx context.Context) error
		stop       func(cancelParent context.CancelFunc, proc *Process)
		wantErr    string
	}{
		{
			name:       "a server failing is fatal",
			background: func(context.Context) error { return errors.New("accept: too many open files") },
			wantErr:    "HTTP server: accept: too many open files",
		},
		{
			name:       "a server that panics ends the process cleanly, saying why",
			background: func(context.Context) error { panic("nil map") },
			wantErr:    "HTTP server: internal error: HTTP server panicked: nil map",
		},
		{
			name:       "a server stopping without an error is fatal too",
			background: func(context.Context) error { return nil },
			wantErr:    "HTTP server: stopped on its own",
		},
		{
			name:       "a failure reported by the leader's work is fatal",
			background: func(ctx context.Context) error { <-ctx.Done(); return nil },
			stop: func(_ context.CancelFunc, proc *Process) {
				proc.Fail(errors.New("listen for the backup server: address already in use"))
				proc.Fail(errors.New("a consequence of the first"))
			},
			wantErr: "listen for the backup server: address already in use",
		},
		{
			name:       "a clean cancellation is not an error",
			background: func(ctx context.Context) error { <-ctx.Done(); return nil },
			stop:       func(cancelParent context.CancelFunc, _ *Process) { cancelParent() },
		},
		{
			name: "an error while shutting down is still an error",
			background: func(ctx context.Context) error {
				<-ctx.Done()
				return errors.New("shutdown: connections still open")
			},
			stop:    func(cancelParent context.CancelFunc, _ *Process) { cancelParent() },
			wantErr: "HTTP server: shutdown: connections still open",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancelParent := context.WithCancel(t.Context())
			defer cancelParent()
			log, _ := logtest.NewNullLogger()
			proc, ctx := NewProcess(parent, logrus.NewEntry(log))
			defer proc.Cancel()

			leading := make(chan struct{})
			leadEnded := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- proc.RunAsLeader(testLeaderConfig(grant(fake.NewClientset(), "leases"), logrus.NewEntry(log)), testDeadline, func(leadCtx context.Context) {
					defer close(leadEnded)
					// Started from within the leader's work, so that a server failing
					// at once still finds the process leading.
					proc.Go(ctx, "HTTP server", tc.background)
					close(leading)
					<-leadCtx.Done()
				})
			}()
			receive(t, leading, "becoming the leader")
			if tc.stop != nil {
				tc.stop(cancelParent, proc)
			}
			err := receive(t, done, "RunAsLeader returning")

			if tc.wantErr == "" && err != nil {
				t.Fatalf("RunAsLeader = %v, want nil", err)
			}
			if tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("RunAsLeader = %v, want %q", err, tc.wantErr)
			}
			if ctx.Err() == nil {
				t.Error("the process's context was not cancelled")
			}
			select {
			case <-leadEnded:
			default:
				t.Error("RunAsLeader returned before the leader's work did")
			}
		})
	}
}

// Seeds download backups from the leader only: a server that serves while
// leading stops with the leadership, and that is no failure.
func TestProcessServerStoppedWithItsOwnContextIsNotFatal(t *testing.T) {
	log, _ := logtest.NewNullLogger()
	proc, ctx := NewProcess(t.Context(), logrus.NewEntry(log))
	defer proc.Cancel()
	serverCtx, stopServer := context.WithCancel(ctx)
	stopped := make(chan struct{})
	proc.Go(serverCtx, "backup server", func(ctx context.Context) error {
		defer close(stopped)
		<-ctx.Done()
		return nil
	})
	stopServer()
	receive(t, stopped, "the server stopping")
	// The waiting also lets the goroutine judge how the server stopped.
	proc.stopAndWait(testDeadline)
	if err := proc.fatalError(); err != nil {
		t.Fatalf("fatal error %v", err)
	}
}

func TestProcessWaitsForTheLeaderToStop(t *testing.T) {
	kube := grant(fake.NewClientset(), "leases")
	log, hook := logtest.NewNullLogger()
	parent, cancelParent := context.WithCancel(t.Context())
	defer cancelParent()
	proc, _ := NewProcess(parent, logrus.NewEntry(log))
	defer proc.Cancel()

	leading := make(chan struct{})
	stopping := make(chan struct{})
	mayReturn := make(chan struct{})
	returned := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- proc.RunAsLeader(testLeaderConfig(kube, logrus.NewEntry(log)), testDeadline, func(ctx context.Context) {
			close(leading)
			<-ctx.Done()
			close(stopping)
			<-mayReturn
			close(returned)
		})
	}()
	receive(t, leading, "becoming the leader")
	cancelParent()
	receive(t, stopping, "the leader's work seeing the cancellation")

	// The election is over once the Lease is released; a RunAsLeader that did not
	// wait would return right after.
	released := make(chan struct{})
	go func() {
		defer close(released)
		for {
			lease, err := kube.CoordinationV1().Leases("ns").Get(context.Background(), "etcd-operator", metav1.GetOptions{})
			if err == nil && (lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "op-1") {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	receive(t, released, "the Lease being released")
	select {
	case err := <-done:
		t.Fatalf("RunAsLeader returned %v while the leader's work was still running", err)
	case <-time.After(100 * time.Millisecond):
	}

	close(mayReturn)
	if err := receive(t, done, "RunAsLeader returning"); err != nil {
		t.Fatalf("RunAsLeader = %v, want nil", err)
	}
	select {
	case <-returned:
	default:
		t.Fatal("RunAsLeader returned before the leader's work did")
	}
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			t.Errorf("unexpected warning %q", e.Message)
		}
	}
}

func TestProcessAbandonsALeaderThatDoesNotStop(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	parent, cancelParent := context.WithCancel(t.Context())
	defer cancelParent()
	proc, _ := NewProcess(parent, logrus.NewEntry(log))
	defer proc.Cancel()

	leading := make(chan struct{})
	stuck := make(chan struct{})
	// Let the stuck leader go once the test is over.
	t.Cleanup(func() { close(stuck) })
	done := make(chan error, 1)
	go func() {
		done <- proc.RunAsLeader(testLeaderConfig(grant(fake.NewClientset(), "leases"), logrus.NewEntry(log)), time.Millisecond, func(context.Context) {
			close(leading)
			<-stuck
		})
	}()
	receive(t, leading, "becoming the leader")
	cancelParent()
	if err := receive(t, done, "RunAsLeader giving up on the leader's work"); err != nil {
		t.Fatalf("RunAsLeader = %v, want nil", err)
	}
	var warned bool
	var logged []string
	for _, e := range hook.AllEntries() {
		warned = warned || (e.Level == logrus.WarnLevel && strings.Contains(e.Message, "did not stop within 1ms"))
		logged = append(logged, e.Level.String()+": "+e.Message)
	}
	if !warned {
		t.Errorf("no warning about the abandoned leader; logged %q", logged)
	}
}
