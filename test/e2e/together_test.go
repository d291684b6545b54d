//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// togetherCluster is a cluster of n members on the default etcd version
// whose spec names no bootstrap mode: its members start together, the
// default.
func togetherCluster(prefix string, n int) *api.EtcdCluster {
	return framework.NewCluster(framework.UniqueName(prefix), n, api.DefaultEtcdVersion)
}

// TestMembersStartedTogetherRunAsOneCluster creates clusters of three
// members started together: every pod is made from one static initial
// cluster naming all three and one token, and the cluster becomes Running
// with three voting members, none added as a learner.
func TestMembersStartedTogetherRunAsOneCluster(t *testing.T) {
	t.Parallel()
	for i := range 2 {
		t.Run(fmt.Sprintf("cluster-%d", i+1), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			cl := createCluster(t, togetherCluster("together", 3))
			pods := waitPodsStartedTogether(t, cl.Name, 3)
			var token string
			for _, p := range pods {
				pairs, tok := k8sutil.StartedTogether(&p)
				if len(pairs) != 3 {
					t.Errorf("pod %s names %d initial members (%v), want the 3 started together", p.Name, len(pairs), pairs)
				}
				if token == "" {
					token = tok
				}
				if tok != token {
					t.Errorf("pod %s has token %q, pod %s %q: one token for the members started together", p.Name, tok, pods[0].Name, token)
				}
			}
			got, _ := waitReady(t, opNS, cl.Name, 3, bootstrapTimeout(1))
			if got.Status.Phase != api.ClusterPhaseRunning {
				t.Errorf("phase %q, want Running", got.Status.Phase)
			}
			checkThreeVoters(ctx, t, cl.Name)
			if err := f.PutAndGet(ctx, opNS, cl.Name, false, "/e2e/together", "born", dataTimeout); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestAClusterAskingForSeedAndJoinGrowsFromOneSeed: the original's way of
// starting a cluster stays selectable. Its first pod is a seed whose initial
// cluster names only itself; the two others join an existing cluster, and
// end as voters.
func TestAClusterAskingForSeedAndJoinGrowsFromOneSeed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cl := framework.NewCluster(framework.UniqueName("seed-join"), 3, api.DefaultEtcdVersion)
	cl.Spec.Bootstrap = &api.BootstrapPolicy{Mode: api.BootstrapSeedAndJoin}
	cl = createCluster(t, cl)
	waitReady(t, opNS, cl.Name, 3, bootstrapTimeout(3))
	pods, err := f.ClusterPods(ctx, opNS, cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	seeds, joined := 0, 0
	for _, p := range pods {
		command := strings.Join(k8sutil.EtcdContainer(&p).Command, " ")
		switch {
		case strings.Contains(command, "--initial-cluster-state="+k8sutil.ClusterStateNew) && len(k8sutil.InitialCluster(&p)) == 1:
			seeds++
		case strings.Contains(command, "--initial-cluster-state="+k8sutil.ClusterStateExisting):
			joined++
		default:
			t.Errorf("pod %s is neither a seed nor a member that joined: %s", p.Name, command)
		}
	}
	if seeds != 1 || joined != 2 {
		t.Errorf("%d seed(s) and %d member(s) that joined, want 1 and 2", seeds, joined)
	}
	checkThreeVoters(ctx, t, cl.Name)
}

// TestAMemberStartedTogetherWhosePodIsDeletedAtOnceIsReplaced deletes one
// of the three pods as soon as they exist: the member is made again (from
// the plan while no quorum formed, or replaced as a dead member through a
// learner once the two others formed one) and the cluster reaches three
// ready members, none on the deleted pod.
func TestAMemberStartedTogetherWhosePodIsDeletedAtOnceIsReplaced(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cl := createCluster(t, togetherCluster("together-lose", 3))
	pods := waitPodsStartedTogether(t, cl.Name, 3)
	victim := pods[1]
	if err := f.KillPod(ctx, opNS, victim.Name); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted pod %s (uid %s) right after its creation", victim.Name, victim.UID)
	_, names := waitReady(t, opNS, cl.Name, 3, bootstrapTimeout(3))
	now, err := f.ClusterPods(ctx, opNS, cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(now, func(p corev1.Pod) bool { return p.UID == victim.UID }) {
		t.Errorf("the deleted pod %s (uid %s) is still among the cluster's pods %v", victim.Name, victim.UID, names)
	}
	checkThreeVoters(ctx, t, cl.Name)
	if err := f.PutAndGet(ctx, opNS, cl.Name, false, "/e2e/together", "whole", dataTimeout); err != nil {
		t.Error(err)
	}
}

// waitPodsStartedTogether waits until the cluster has n pods, which the
// operator makes in one pass when members start together, and returns them.
func waitPodsStartedTogether(t *testing.T, name string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := framework.WaitFor(t.Context(), changeTimeout, measurePoll, fmt.Sprintf("%d pods of members started together", n), func(ctx context.Context) (bool, string, error) {
		all, err := f.ClusterPods(ctx, opNS, name)
		if err != nil {
			return false, "", err
		}
		pods = all
		return len(all) == n, fmt.Sprintf("%d pods", len(all)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// checkThreeVoters checks that etcd itself lists three voting members.
func checkThreeVoters(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	members, err := f.MemberList(ctx, opNS, name, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 3 {
		t.Errorf("etcd lists %d members, want 3: %+v", len(members), members)
	}
	for _, m := range members {
		if m.IsLearner {
			t.Errorf("member %s is still a learner", m.Name)
		}
	}
}
