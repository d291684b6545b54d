//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// unschedulableHold is how long the test watches a cluster whose new member
// cannot be scheduled: longer than twice the operator's pending timeout, so
// that the pod is seen being replaced.
const unschedulableHold = 45 * time.Second

// TestUnschedulableNewMemberNeverJoinsEtcd scales a cluster up with a node
// selector that matches no node. The new member's pod cannot start, and since
// members join pod first, etcd is never told about it: the cluster keeps its
// quorum and serves, the pod is replaced after the pending timeout, and the
// scale-up completes once the selector is fixed. The original added the member
// to etcd first and then waited for its pod forever, with a member in
// the quorum that could never vote.
func TestUnschedulableNewMemberNeverJoinsEtcd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "unsched")
	installOperator(t, ns, framework.Install{PendingTimeout: 20 * time.Second})
	name := framework.UniqueName("unsched")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 1, "3.5.21"))
	_, first := waitReady(t, ns, name, 1, bootstrapTimeout(1))
	if err := f.PutAndGet(ctx, ns, name, false, "/e2e/unsched", "served", dataTimeout); err != nil {
		t.Fatal(err)
	}

	if _, err := f.PatchClusterSpec(ctx, ns, name, map[string]any{
		"size": 2,
		"pod":  map[string]any{"nodeSelector": map[string]string{"e2e.etcd-operator/no-such-node": "true"}},
	}); err != nil {
		t.Fatal(err)
	}
	// Every pod of the new member seen while the selector holds, and the last
	// status.reason that named one.
	var joiners []string
	var lastReason string
	err := framework.Holds(ctx, unschedulableHold, framework.Poll, "etcd to keep its one member while the new one cannot be scheduled",
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.ClusterPods(ctx, ns, name)
			if err != nil {
				return true, "", nil
			}
			for _, p := range framework.LivePods(pods) {
				if p.Name != first[0] && !slices.Contains(joiners, p.Name) {
					if unschedulable(&p) {
						joiners = append(joiners, p.Name)
					}
				}
			}
			if cl, err := f.GetCluster(ctx, ns, name); err == nil && cl.Status.Reason != "" {
				lastReason = cl.Status.Reason
			}
			members, err := f.MemberList(ctx, ns, name, false)
			if err != nil {
				return false, "", fmt.Errorf("member list: %w", err)
			}
			return len(members) == 1, fmt.Sprintf("members %+v; pods %s", members, framework.DescribePods(pods)), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(joiners) < 2 {
		t.Errorf("unschedulable pods of the new member seen: %q; want one replaced after the pending timeout", joiners)
	}
	// The reason said what the scheduler says, not an empty string.
	if !strings.Contains(lastReason, "cannot be scheduled") || !strings.Contains(lastReason, "node(s)") {
		t.Errorf("status.reason = %q, want the scheduler's message", lastReason)
	}
	if err := f.ExpectValue(ctx, ns, name, false, "/e2e/unsched", "served", dataTimeout); err != nil {
		t.Error(err)
	}

	if _, err := f.PatchClusterSpec(ctx, ns, name, map[string]any{"pod": map[string]any{"nodeSelector": nil}}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, name, 2, changeTimeout)
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}
