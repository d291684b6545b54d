package operatorrun

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// replicaKube is one replica's view of a fake apiserver shared by several:
// the objects are everyone's, the answers to its access reviews come from its
// own role.
type replicaKube struct {
	kubernetes.Interface
	role *fake.Clientset
}

func (k replicaKube) AuthorizationV1() authorizationv1client.AuthorizationV1Interface {
	return k.role.AuthorizationV1()
}

// candidate is one replica running RunAsLeader on the lock etcd-operator in
// namespace ns, under a role granting what grant is given.
type candidate struct {
	id     string
	led    chan struct{}
	log    *logtest.Hook
	fence  *Fence
	cancel context.CancelFunc
	done   chan error
}

func startCandidate(t *testing.T, shared *fake.Clientset, id string, granted ...string) *candidate {
	t.Helper()
	logger, hook := logtest.NewNullLogger()
	ctx, cancel := context.WithCancel(t.Context())
	c := &candidate{id: id, led: make(chan struct{}), log: hook, fence: NewFence(), cancel: cancel, done: make(chan error, 1)}
	cfg := LeaderConfig{Kube: replicaKube{Interface: shared, role: grant(fake.NewClientset(), granted...)},
		Namespace: "ns", LockName: "etcd-operator", Identity: id, Log: logrus.NewEntry(logger), Fence: c.fence}
	go func() {
		c.done <- RunAsLeader(ctx, cfg, func(ctx context.Context) {
			close(c.led)
			<-ctx.Done()
		})
	}()
	t.Cleanup(c.stop)
	return c
}

// stop ends the candidate and waits for it, so that a leader has released
// its lock when stop returns.
func (c *candidate) stop() {
	c.cancel()
	<-c.done
	c.done <- nil // a second stop returns at once
}

func (c *candidate) leading() bool {
	select {
	case <-c.led:
		return true
	default:
		return false
	}
}

// waitStandby waits until c says it is a standby, in a line naming holder,
// and fails the test if c, not leading yet, leads first.
func (c *candidate) waitStandby(t *testing.T, holder string) {
	t.Helper()
	ledBefore := c.leading()
	deadline := time.Now().Add(testDeadline)
	for time.Now().Before(deadline) {
		if !ledBefore && c.leading() {
			t.Fatalf("%s leads beside %s: two leaders", c.id, holder)
		}
		for _, e := range c.log.AllEntries() {
			if strings.Contains(e.Message, "waiting as a standby") && (strings.Contains(e.Message, holder) || e.Data["holder"] == holder) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s neither led nor said it waits for %s", c.id, holder)
}

// originalRecord is the Endpoints object an original etcd-operator leads
// on, naming holder and renewed at renewed for 15 s.
func originalRecord(t *testing.T, holder string, renewed time.Time) *corev1.Endpoints {
	t.Helper()
	raw, err := json.Marshal(resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15,
		AcquireTime: metav1.NewTime(renewed.Add(-time.Hour)), RenewTime: metav1.NewTime(renewed), LeaderTransitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "etcd-operator",
		Annotations: map[string]string{resourcelock.LeaderElectionRecordAnnotationKey: string(raw)}}}
}

// During a rolling update that adds leases to the role, the old replicas
// (endpoints only) and the new ones (both) run side by side: whichever leads,
// the other waits.
func TestAReplicaOnTheEndpointsLockAndOneAllowedBothNeverLeadTogether(t *testing.T) {
	t.Run("the Endpoints replica leads first", func(t *testing.T) {
		shared := fake.NewClientset()
		old := startCandidate(t, shared, "op-old", "endpoints")
		receive(t, old.led, "the Endpoints replica leading")
		both := startCandidate(t, shared, "op-new", "leases", "endpoints")
		both.waitStandby(t, "op-old")

		// Once the old replica is gone (its record released), the new one
		// takes over.
		old.stop()
		receive(t, both.led, "the new replica leading after the old one left")
	})
	t.Run("the replica allowed both leads first", func(t *testing.T) {
		shared := fake.NewClientset()
		both := startCandidate(t, shared, "op-new", "leases", "endpoints")
		receive(t, both.led, "the new replica leading")
		old := startCandidate(t, shared, "op-old", "endpoints")
		old.waitStandby(t, "op-new")
	})
}

// An original etcd-operator (v0.9.4) still running beside ours holds the
// Endpoints record: a replica of ours does not lead beside it, whether it
// holds both locks or, allowed the Lease only, reads the record first.
func TestALiveEndpointsRecordOfTheOriginalKeepsALeaseReplicaFromLeading(t *testing.T) {
	for _, tc := range []struct {
		name    string
		granted []string
	}{
		{"a role granting leases and a read of endpoints", []string{"leases", "endpoints:get"}},
		{"a role granting leases and endpoints", []string{"leases", "endpoints"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const original = "etcd-operator-7d8c9-abcde"
			shared := fake.NewClientset(originalRecord(t, original, time.Now()))
			c := startCandidate(t, shared, "op-1", tc.granted...)
			c.waitStandby(t, original)
			if err := c.fence.Held(); !errors.Is(err, ErrNotLeading) {
				t.Errorf("the fence of a standby: %v, want ErrNotLeading", err)
			}
		})
	}
}

// The record an original left when it stopped is not live: it does not keep
// a replica from leading.
func TestAStaleEndpointsRecordOfTheOriginalDoesNotKeepALeaseReplicaFromLeading(t *testing.T) {
	shared := fake.NewClientset(originalRecord(t, "etcd-operator-7d8c9-abcde", time.Now().Add(-time.Hour)))
	c := startCandidate(t, shared, "op-1", "leases", "endpoints:get")
	receive(t, c.led, "leading")
}

// A replica leading on the Lease alone that finds an original took the
// Endpoints record (started after it, under its own role) stops acting at
// once: its fence closes at the first renewal that reads the record, not a
// renew deadline later.
func TestALeaderOnTheLeaseStopsWhenAnOriginalTakesTheEndpointsRecord(t *testing.T) {
	shared := fake.NewClientset()
	c := startCandidate(t, shared, "op-1", "leases", "endpoints:get")
	receive(t, c.led, "leading")
	if err := c.fence.Held(); err != nil {
		t.Fatalf("the leader's fence: %v", err)
	}
	const original = "etcd-operator-7d8c9-abcde"
	if _, err := shared.CoreV1().Endpoints("ns").Create(t.Context(), originalRecord(t, original, time.Now()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testDeadline)
	for c.fence.Held() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the fence is still open %v after the original took the Endpoints record", testDeadline)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.waitStandby(t, original)
}
