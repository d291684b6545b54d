package operatorrun

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// leadingReplica is a replica whose Base has its Leadership, as Start makes
// it, and whose work labels its pod as soon as it leads.
func leadingReplica(t *testing.T, shared *fake.Clientset, pod string) *replica {
	t.Helper()
	r := newReplica(t, replicaKube{Interface: shared, role: grant(fake.NewClientset(), "leases", "endpoints:get")}, pod)
	r.Leadership = NewLeadership(r.Clients.Kube, r.id, "etcd-operator", r.Server.Registry, r.Base.log)
	r.run(t, func(ctx context.Context) { r.Leadership.Working(ctx) })
	return r
}

func operatorPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "uid-" + types.UID(name), Labels: labels}}
}

func leaderLabelled() map[string]string {
	return map[string]string{LeaderLabel: "true", "name": "etcd-operator"}
}

// lease is the Lease etcd-operator held by holder, last renewed at renewed.
func lease(holder string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "etcd-operator"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: new(int32(15)),
			AcquireTime: &metav1.MicroTime{Time: renewed.Add(-time.Hour)}, RenewTime: &metav1.MicroTime{Time: renewed}},
	}
}

// labelled lists, in order, which of pods carry LeaderLabel=true.
func labelled(t *testing.T, shared *fake.Clientset, pods ...string) []string {
	t.Helper()
	var out []string
	for _, name := range pods {
		p, err := shared.CoreV1().Pods("ns").Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Labels[LeaderLabel] == "true" {
			out = append(out, name)
		}
		if p.Labels["name"] != "etcd-operator" {
			t.Errorf("pod %s lost its other labels: %v", name, p.Labels)
		}
	}
	return out
}

// waitLabelled polls until exactly want of pods carry the label.
func waitLabelled(t *testing.T, shared *fake.Clientset, want []string, pods ...string) {
	t.Helper()
	var got []string
	for deadline := time.Now().Add(testDeadline); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got = labelled(t, shared, pods...); strings.Join(got, ",") == strings.Join(want, ",") {
			return
		}
	}
	t.Fatalf("labelled the leader: %v, want %v", got, want)
}

func TestTheLeaderIsLabelledAndCountedUntilItStops(t *testing.T) {
	shared := fake.NewClientset(operatorPod("op-1", map[string]string{"name": "etcd-operator"}))
	r := leadingReplica(t, shared, "op-1")
	receive(t, r.working, "leading")
	waitLabelled(t, shared, []string{"op-1"}, "op-1")
	if got := testutil.ToFloat64(r.Leadership.gauge); got != 1 {
		t.Errorf("etcd_operator_leader = %v while leading, want 1", got)
	}
	if err := testutil.CollectAndCompare(r.Leadership.gauge, strings.NewReader(`
# HELP etcd_operator_leader 1 while this replica holds the leader-election lock, 0 while it stands by.
# TYPE etcd_operator_leader gauge
etcd_operator_leader 1
`)); err != nil {
		t.Error(err)
	}

	r.stop()
	if got := labelled(t, shared, "op-1"); len(got) != 0 {
		t.Errorf("after a clean shutdown the label is still on %v", got)
	}
	if got := testutil.ToFloat64(r.Leadership.gauge); got != 0 {
		t.Errorf("etcd_operator_leader = %v after the shutdown, want 0", got)
	}
}

// Only the leader carries the label, also after a crash left it where it
// no longer belongs.
func TestOnlyTheLeadersPodCarriesTheLabel(t *testing.T) {
	for _, tc := range []struct {
		name        string
		pods        []*corev1.Pod
		lease       *coordinationv1.Lease
		wantLeading bool
		want        []string
	}{
		{"a new leader takes the label off the pod of a leader that crashed",
			[]*corev1.Pod{operatorPod("op-old", leaderLabelled()), operatorPod("op-1", map[string]string{"name": "etcd-operator"})},
			lease("op-old", time.Now().Add(-time.Minute)), true, []string{"op-1"}},
		{"a replica restarted after a crash takes the label its last run left off its pod while another leads",
			[]*corev1.Pod{operatorPod("op-other", map[string]string{"name": "etcd-operator"}), operatorPod("op-1", leaderLabelled())},
			lease("op-other", time.Now()), false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := []runtime.Object{tc.lease}
			var names []string
			for _, p := range tc.pods {
				objs = append(objs, p)
				names = append(names, p.Name)
			}
			shared := fake.NewClientset(objs...)
			r := leadingReplica(t, shared, "op-1")
			if tc.wantLeading {
				// A replica takes a Lease over once it saw it unrenewed for a
				// lease duration, by its own clock.
				select {
				case <-r.working:
				case <-time.After(LeaseDuration + testDeadline):
					t.Fatal("not leading")
				}
			}
			waitLabelled(t, shared, tc.want, names...)
			want := map[bool]float64{true: 1, false: 0}[tc.wantLeading]
			if got := testutil.ToFloat64(r.Leadership.gauge); got != want {
				t.Errorf("etcd_operator_leader = %v, want %v", got, want)
			}
		})
	}
}

// A leader that cannot renew the Lease takes its label off when it gives
// up, before it exits to come back as a standby.
func TestALeaderThatLosesTheLeaseTakesItsLabelOff(t *testing.T) {
	t.Parallel()
	shared := fake.NewClientset(operatorPod("op-1", map[string]string{"name": "etcd-operator"}))
	var cutOff atomic.Bool
	shared.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if cutOff.Load() {
			return true, nil, errors.New("the apiserver is unreachable")
		}
		return false, nil, nil
	})
	r := leadingReplica(t, shared, "op-1")
	receive(t, r.working, "leading")
	waitLabelled(t, shared, []string{"op-1"}, "op-1")
	cutOff.Store(true)
	select {
	case err := <-r.done:
		r.done <- err
		if !errors.Is(err, ErrLostLeadership) {
			t.Errorf("RunAsLeader returned %v, want ErrLostLeadership", err)
		}
	case <-time.After(RenewDeadline + testDeadline):
		t.Fatal("the leader did not give up")
	}
	if got := labelled(t, shared, "op-1"); len(got) != 0 {
		t.Errorf("after losing the Lease the label is still on %v", got)
	}
	if got := testutil.ToFloat64(r.Leadership.gauge); got != 0 {
		t.Errorf("etcd_operator_leader = %v after losing the Lease, want 0", got)
	}
}

// The original's roles, and roles made for an older version, may lack
// patch on pods: the leader then leads without the label, and says so once.
func TestALeaderWhoseRoleMayNotPatchPodsLeadsUnlabelled(t *testing.T) {
	shared := fake.NewClientset(operatorPod("op-1", map[string]string{"name": "etcd-operator"}))
	shared.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "op-1", errors.New("RBAC: not allowed"))
	})
	r := leadingReplica(t, shared, "op-1")
	receive(t, r.working, "leading")
	r.Leadership.Working(t.Context())
	if got := testutil.ToFloat64(r.Leadership.gauge); got != 1 {
		t.Errorf("etcd_operator_leader = %v while leading, want 1", got)
	}
	if got := labelled(t, shared, "op-1"); len(got) != 0 {
		t.Errorf("labelled %v", got)
	}
	var said int
	for _, e := range r.logs.AllEntries() {
		if strings.Contains(e.Message, "is not labelled "+LeaderLabel) && strings.Contains(e.Message, `verbs: ["patch"]`) {
			said++
		}
	}
	if said != 1 {
		t.Errorf("the missing rule was said %d times, want once", said)
	}
	waitReadyz(t, r.Server, 200, "ok")
}
