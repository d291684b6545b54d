package cluster

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	clienttesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// TestMembersStartedTogether runs the start together (spec.bootstrap.mode
// Together) as whole passes on fake clients: what the executors write.
func TestMembersStartedTogether(t *testing.T) {
	t.Run("a new cluster's members are made in one pass, each on a claim of its own, from one static initial cluster", func(t *testing.T) {
		f := newFixture(t, newTestCluster(withTogether, withPVC, withPhase(api.ClusterPhaseNone)))
		f.mustPass()
		f.mustPass()
		pods := createdPods(f)
		if len(pods) != 3 {
			t.Fatalf("created %d pods, want 3 at once: %v", len(pods), f.podActions())
		}
		var claims int
		for i, a := range f.podActions() {
			if strings.HasPrefix(a, "create persistentvolumeclaims") {
				claims++
				if next := f.podActions()[i+1]; next != strings.Replace(a, "persistentvolumeclaims", "pods", 1) {
					t.Errorf("after %q comes %q: each member's claim goes right before its pod", a, next)
				}
			}
		}
		if claims != 3 {
			t.Errorf("created %d claims, want 3: %v", claims, f.podActions())
		}
		pairs, token := k8sutil.StartedTogether(pods[0])
		for _, p := range pods {
			got, tok := k8sutil.StartedTogether(p)
			if len(got) != 3 || !slices.Equal(got, pairs) || tok != token || token == "" {
				t.Errorf("pod %s starts from %v with token %q; want the 3 members' one initial cluster %v and one token %q", p.Name, got, tok, pairs, token)
			}
			if !k8sutil.IsFirstOnClaim(p) {
				t.Errorf("pod %s does not say it is the first on its claim", p.Name)
			}
		}
		if s := f.mustStatus(); s.Phase != api.ClusterPhaseRunning {
			t.Errorf("phase %q, want Running", s.Phase)
		}
	})

	t.Run("an operator restarted in the middle of a start makes the pods it had not made, with the flags of the one it had", func(t *testing.T) {
		first := newFixture(t, newTestCluster(withTogether, withPhase(api.ClusterPhaseNone)))
		first.mustPass()
		first.mustPass()
		made := createdPods(first)

		f := newFixture(t, newTestCluster(withTogether, withPhase(api.ClusterPhaseCreating)))
		kept := made[0].DeepCopy()
		kept.Status = corev1.PodStatus{Phase: corev1.PodPending}
		f.setPod(kept)
		f.mustPass()
		wantPairs, wantToken := k8sutil.StartedTogether(kept)
		var names []string
		for _, p := range createdPods(f) {
			names = append(names, p.Name)
			if pairs, token := k8sutil.StartedTogether(p); !slices.Equal(pairs, wantPairs) || token != wantToken {
				t.Errorf("pod %s starts from %v with token %q, want the plan %v with token %q", p.Name, pairs, token, wantPairs, wantToken)
			}
		}
		want := []string{made[1].Name, made[2].Name}
		slices.Sort(want)
		expect(t, "pods made again", names, want)
	})

	t.Run("members that cannot start while fewer than a quorum ever ran are deleted, claims first, and start again", func(t *testing.T) {
		first := newFixture(t, newTestCluster(withTogether, withPVC, withPhase(api.ClusterPhaseNone)))
		first.mustPass()
		first.mustPass()
		made := createdPods(first)

		f := newFixture(t, newTestCluster(withTogether, withPVC, withPhase(api.ClusterPhaseRunning), func(cl *api.EtcdCluster) {
			cl.Status.Conditions = []api.ClusterCondition{{Type: api.ClusterConditionAvailable, Status: corev1.ConditionFalse, Reason: reasonNotYetAvailable}}
		}))
		for i, p := range made {
			p = p.DeepCopy()
			p.Status = corev1.PodStatus{Phase: corev1.PodPending}
			if i == 2 {
				p.CreationTimestamp.Time = f.now.Add(-2 * f.c.cfg.PendingTimeout)
			} else {
				p.CreationTimestamp.Time = f.now
			}
			f.setPod(p)
			f.claim(p.Name)
		}
		f.mustPass()
		var deletes []string
		for _, a := range f.podActions() {
			if strings.HasPrefix(a, "delete") {
				deletes = append(deletes, a)
			}
		}
		if len(deletes) != 6 || !strings.Contains(strings.Join(deletes[:3], " "), "persistentvolumeclaims") || strings.Contains(strings.Join(deletes[:3], " "), "pods") {
			t.Errorf("deletions %v; want the 3 claims, then the 3 pods", deletes)
		}
		if s := f.mustStatus(); s.Phase != api.ClusterPhaseCreating {
			t.Errorf("phase %q, want Creating: the next pass starts them again", s.Phase)
		}
	})
}

// createdPods are the pods the passes created, in order.
func createdPods(f *fixture) []*corev1.Pod {
	var out []*corev1.Pod
	for _, a := range f.kube.Actions() {
		if ca, ok := a.(clienttesting.CreateAction); ok && a.GetResource().Resource == "pods" {
			out = append(out, ca.GetObject().(*corev1.Pod))
		}
	}
	return out
}
