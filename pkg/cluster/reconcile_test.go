package cluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

const (
	memberA = "example-a"
	memberB = "example-b"
	memberC = "example-c"
	memberD = "example-d"
	memberE = "example-e"
)

// TestReconcileMembers covers the diff of original.md §3.5, one pass at a
// time, with the fixes of this re-creation.
func TestReconcileMembers(t *testing.T) {
	tests := []passCase{
		{
			name:    "a complete healthy cluster changes nothing and is reported Available",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.mustPass()
				expect(t, "pod actions", f.podActions(), nil)
				expect(t, "etcd writes", f.etcdWrites(), nil)
				expect(t, "etcd calls", f.etcd.Calls(false), nil)
				s := f.mustStatus()
				if c := condition(s, api.ClusterConditionAvailable); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "ClusterAvailable" {
					t.Errorf("Available = %+v, want True/ClusterAvailable", c)
				}
				if condition(s, api.ClusterConditionScaling) != nil || condition(s, api.ClusterConditionUpgrading) != nil {
					t.Errorf("conditions = %+v, want only Available", s.Conditions)
				}
				expect(t, "ready", s.Members.Ready, []string{memberA, memberB, memberC})
				if s.Size != 3 || s.CurrentVersion != testVersion || s.TargetVersion != "" || s.Phase != api.ClusterPhaseRunning ||
					s.ServiceName != "example-client" || s.ClientPort != 2379 || s.ObservedGeneration != 1 || s.Reason != "" {
					t.Errorf("status = %+v", s)
				}
				expectEvents(t, f.events())
			},
		},
		{
			name:    "no second joining pod is made while the first has not shown up, nor is it added before it resolves",
			cluster: newTestCluster(withSize(5)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.mustPass()
				first := "example-new0000001"
				expect(t, "first pass", f.podActions(), []string{"create pods " + first})

				// The informer has not shown the pod yet: no other pod is made.
				f.kube.ClearActions()
				requeue, err := f.c.pass(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				expect(t, "while the pod is expected", f.podActions(), nil)
				if requeue <= 0 {
					t.Errorf("requeue = %v, want a wake-up at the expectation's deadline", requeue)
				}

				f.showCreatedPods(resolving)
				f.mustPass()
				expect(t, "while it resolves", f.etcdWrites(), nil)
				expect(t, "while it resolves", f.podActions(), nil)
			},
		},
		{
			name:    "a member is added only once every member has run as long as etcd's health interval",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC, func(p *corev1.Pod) {
					p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(testStart.Add(-2 * time.Second))
				})
				joiner := "example-new0000001"
				f.joinerPod(joiner, []string{memberA, memberB, memberC})
				requeue, err := f.c.pass(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				expect(t, "etcd calls", f.etcd.Calls(false), nil)
				if requeue != 3*time.Second {
					t.Errorf("requeue = %v, want the 3s left of etcd's 5s", requeue)
				}
				f.now = f.now.Add(3 * time.Second)
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{f.learnerCall(joiner)})
			},
		},
		{
			name:    "a created pod that never shows up is treated as missing after the expectation timeout",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.mustPass()
				f.now = f.now.Add(DefaultExpectationTimeout - time.Second)
				f.mustPass()
				expect(t, "before the timeout", f.podActions(), []string{"create pods example-new0000001"})
				f.now = f.now.Add(2 * time.Second)
				f.mustPass()
				expect(t, "after the timeout", f.podActions(), []string{"create pods example-new0000001", "create pods example-new0000002"})
				expect(t, "etcd writes", f.etcdWrites(), nil)
			},
		},
		{
			name:    "no member is added while etcd is not healthy, and no warning is raised for the wait",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.joinerPod("example-new0000001", []string{memberA, memberB, memberC})
				f.etcd.down[memberID(memberC)] = true
				requeue, err := f.c.pass(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				expect(t, "etcd writes", f.etcdWrites(), nil)
				if requeue <= 0 || requeue > DefaultReconcileInterval {
					t.Errorf("requeue = %v, want a retry before the next tick", requeue)
				}
				// etcd's own refusal is waited out the same way.
				f.etcd.down = map[uint64]bool{}
				f.etcd.addErr = rpctypes.ErrUnhealthy
				if _, err := f.c.pass(context.Background()); err != nil {
					t.Fatalf("a refused add failed the pass: %v", err)
				}
				expect(t, "pod actions", f.podActions(), nil)
				expectEvents(t, f.events())
				if s := f.mustStatus(); s.Reason != "" {
					t.Errorf("reason = %q, want none for a wait", s.Reason)
				}
			},
		},
		{
			name:    "lost quorum sets Available=False and removes nothing",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod("example-stray") // owned, no member: not deleted either while quorum is lost
				f.mustPass()
				expect(t, "etcd calls", f.etcd.Calls(false), nil)
				expect(t, "pod actions", f.podActions(), nil)
				s := f.mustStatus()
				c := condition(s, api.ClusterConditionAvailable)
				if c == nil || c.Status != corev1.ConditionFalse || c.Reason != "LostQuorum" || !strings.Contains(c.Message, "1 of 3 members are up") {
					t.Errorf("Available = %+v", c)
				}
				if s.Phase != api.ClusterPhaseRunning || !strings.Contains(s.Reason, "lost quorum") {
					t.Errorf("phase %q reason %q", s.Phase, s.Reason)
				}
				expect(t, "ready", s.Members.Ready, []string{memberA})
				expect(t, "unready", s.Members.Unready, []string{memberB, memberC})
				expectEvents(t, f.events(), "Warning LostQuorum lost quorum: 1 of 3 members are up")
				f.mustPass()
				expectEvents(t, f.events()) // reported once, not every pass
			},
		},
		{
			name:    "all pods dead reports that the emptyDir data is gone and how to restore",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA, failed)
				f.pod(memberB, failed)
				f.pod(memberC, failed)
				f.mustPass()
				expect(t, "etcd calls", f.etcd.Calls(false), nil)
				expect(t, "pod actions", f.podActions(), nil)
				s := f.mustStatus()
				c := condition(s, api.ClusterConditionAvailable)
				if c == nil || c.Status != corev1.ConditionFalse || c.Reason != "NoMembersRunning" ||
					!strings.Contains(c.Message, "emptyDir") || !strings.Contains(c.Message, "EtcdRestore") {
					t.Errorf("Available = %+v", c)
				}
				expectEvents(t, f.events(), "Warning NoMembersRunning no member is running (all 3 are down)")
			},
		},
		{
			name:    "unknown pods are deleted, foreign pods are ignored",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.pod("example-stray")
				f.pod("example-foreign", ownedBy("uid-of-someone-else"))
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"delete pods example-stray"})
				expect(t, "etcd writes", f.etcdWrites(), nil)
				if s := f.mustStatus(); s.Size != 3 || len(s.Members.Ready) != 3 {
					t.Errorf("status counts the foreign pod: %+v", s.Members)
				}
			},
		},
		{
			name:    "after a restart the membership is read from etcd through the running pods",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.c.knownMembership.forget()
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.pod("example-stray")
				f.mustPass()
				expect(t, "membership", f.c.knownMembership.set.Names(), []string{memberA, memberB, memberC})
				if id := f.c.knownMembership.set[memberB].ID; id != memberID(memberB) {
					t.Errorf("member ID = %x, want %x", id, memberID(memberB))
				}
				expect(t, "pod actions", f.podActions(), []string{"delete pods example-stray"})
				expect(t, "etcd writes", f.etcdWrites(), nil)
			},
		},
		{
			name:    "a restart during a quorum loss still reports the loss",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.c.knownMembership.forget()
				f.pod(memberA)
				f.etcd.listErr = errors.New("context deadline exceeded")
				f.etcd.noQuorum = true
				_ = f.pass()
				expect(t, "pod actions", f.podActions(), nil)
				expect(t, "etcd writes", f.etcdWrites(), nil)
				s := f.mustStatus()
				if c := condition(s, api.ClusterConditionAvailable); c == nil || c.Reason != "LostQuorum" || !strings.Contains(c.Message, "1 of 3 members are up") {
					t.Errorf("Available = %+v", c)
				}
				expectEvents(t, f.events(), "Warning LostQuorum")
				if f.c.knownMembership.set != nil {
					t.Errorf("a membership read without a leader was kept: %v", f.c.knownMembership.set)
				}
			},
		},
		{
			name:    "a member added behind the operator's back, without a pod, is found and removed",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.etcd.members = append(f.etcd.members, &etcdserverpb.Member{ID: memberID(memberD), PeerURLs: []string{f.member(memberD).PeerURL()}})
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{removeCall(memberD)})
				expect(t, "membership", f.c.knownMembership.set.Names(), []string{memberA, memberB, memberC})
				expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberD})
			},
		},
		{
			name:    "a paused cluster changes nothing and says so",
			cluster: newTestCluster(withSize(5), withPaused),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB, failed)
				f.pod("example-stray")
				f.mustPass()
				expect(t, "etcd calls", f.etcd.Calls(false), nil)
				expect(t, "pod actions", f.podActions(), nil)
				if s := f.mustStatus(); !s.ControlPaused {
					t.Errorf("controlPaused = false")
				}
			},
		},
		{
			name:    "an etcd error is reported once and fails the pass for a retry with backoff",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.etcd.healthErr = errors.New("connection refused")
				if err := f.pass(); err == nil {
					t.Fatal("pass succeeded")
				}
				if err := f.pass(); err == nil {
					t.Fatal("pass succeeded")
				}
				expectEvents(t, f.events(), "Warning EtcdUnreachable ask etcd for its health and membership: connection refused")
				if s := f.mustStatus(); s.Phase != api.ClusterPhaseRunning || !strings.Contains(s.Reason, "connection refused") {
					t.Errorf("status = %+v", s)
				}
				f.etcd.healthErr = nil
				f.mustPass()
				if s := f.mustStatus(); s.Reason != "" {
					t.Errorf("reason %q not cleared", s.Reason)
				}
			},
		},
	}
	runPassCases(t, tests)
}

// initialCluster is the sorted --initial-cluster of the members names.
func initialCluster(f *fixture, names ...string) []string {
	set := etcdutil.MemberSet{}
	for _, n := range names {
		set.Add(f.member(n))
	}
	pairs := set.PeerURLPairs()
	slices.Sort(pairs)
	return pairs
}
