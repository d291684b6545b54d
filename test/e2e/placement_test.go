//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// placementReportTimeout bounds the wait for the sharing advisory once every
// member runs: it is told by the pass that sees them running.
const placementReportTimeout = time.Minute

// TestMembersSpreadSoftlyAndSharingIsTold: on the local cluster's single node,
// a cluster whose spec says nothing of placement gets member pods that prefer
// other nodes and zones but do not require them, so all three still schedule;
// the three members then share the node, which status.reason and one
// MembersNotSpread Warning event say, while the cluster stays available.
func TestMembersSpreadSoftlyAndSharingIsTold(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("placement")
	created := createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	_, ready := waitReady(t, opNS, name, 3, bootstrapTimeout(3))

	pods, err := f.ClusterPods(ctx, opNS, name)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, p := range framework.LivePods(pods) {
		nodes[p.Spec.NodeName] = true
		if problem := softSpreadProblem(&p, name); problem != "" {
			t.Errorf("pod %s: %s", p.Name, problem)
		}
	}
	if len(ready) != 3 {
		t.Fatalf("ready members %v, want 3 scheduled on the local cluster", ready)
	}
	if len(nodes) != 1 {
		t.Fatalf("the members run on %d nodes: this test needs them on one, as on the single-node local cluster (hack/local-cluster)", len(nodes))
	}

	err = framework.WaitFor(ctx, placementReportTimeout, framework.Poll, "status.reason to say the members run on one node",
		func(ctx context.Context) (bool, string, error) {
			cl, err := f.GetCluster(ctx, opNS, name)
			if err != nil {
				return false, err.Error(), nil
			}
			return strings.Contains(cl.Status.Reason, "members are not spread") && strings.Contains(cl.Status.Reason, "run on one node"),
				framework.DescribeStatus(cl), nil
		})
	if err != nil {
		t.Error(err)
	}

	err = framework.WaitFor(ctx, 30*time.Second, framework.Poll, "a Warning event MembersNotSpread on the cluster",
		func(ctx context.Context) (bool, string, error) {
			evs, err := f.Kube.CoreV1().Events(opNS).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
				"involvedObject.name": name, "involvedObject.uid": string(created.UID), "type": corev1.EventTypeWarning,
			}.String()})
			if err != nil {
				return false, err.Error(), nil
			}
			var seen []string
			for _, e := range evs.Items {
				if e.Reason == "MembersNotSpread" {
					if !strings.Contains(e.Message, "losing it takes 3 of 3 members") {
						return false, "", fmt.Errorf("event message %q does not say what losing the node takes", e.Message)
					}
					return true, "", nil
				}
				seen = append(seen, e.Reason)
			}
			return false, fmt.Sprintf("warning events: %v", seen), nil
		})
	if err != nil {
		t.Error(err)
	}

	// Advice only: the cluster stays available and serves.
	cl, err := f.GetCluster(ctx, opNS, name)
	if err != nil {
		t.Fatal(err)
	}
	if c := framework.StatusCondition(cl, "Available"); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("the advisory touched availability: %s", framework.DescribeStatus(cl))
	}
	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/placement", "served", dataTimeout); err != nil {
		t.Error(err)
	}
}

// softSpreadProblem says what is wrong with a member pod's default
// placement: "" when it prefers a node of its own and spreads over nodes and
// zones, and requires none of it.
func softSpreadProblem(p *corev1.Pod, cluster string) string {
	a := p.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		return fmt.Sprintf("no preferred pod anti-affinity: %+v", a)
	}
	if len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 || a.NodeAffinity != nil {
		return fmt.Sprintf("the default placement requires something: %+v", a)
	}
	term := a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	if term.TopologyKey != corev1.LabelHostname || term.LabelSelector == nil || term.LabelSelector.MatchLabels["etcd_cluster"] != cluster {
		return fmt.Sprintf("the anti-affinity does not keep the cluster's members apart by node: %+v", term)
	}
	keys := map[string]bool{}
	for _, c := range p.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			return fmt.Sprintf("constraint on %s is %s, which keeps members Pending on one node", c.TopologyKey, c.WhenUnsatisfiable)
		}
		if c.LabelSelector == nil || c.LabelSelector.MatchLabels["etcd_cluster"] != cluster {
			return fmt.Sprintf("constraint on %s does not select the cluster's members: %+v", c.TopologyKey, c.LabelSelector)
		}
		keys[c.TopologyKey] = true
	}
	if !keys[corev1.LabelHostname] || !keys[corev1.LabelTopologyZone] {
		return fmt.Sprintf("spread over %v, want nodes and zones", keys)
	}
	return ""
}
