//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// Node events, on a local cluster of three nodes in zones a, b and c (`make
// local-up NODES=3`; hack/e2e.sh runs ^TestNodes only on such a cluster, and
// make test adds the two nodes after the one-node suite). The host's node runs
// the control plane, the shared operator and the checkers (in this process);
// hack/local-cluster/node.sh stops, loses, cuts off and drains the other two.
// Not parallel: a node event reaches every member on the node, whichever
// cluster it belongs to.

// requireNodes fails a test that needs n nodes on a cluster with fewer.
func requireNodes(t *testing.T, n int) {
	t.Helper()
	if f.Env.Nodes < n {
		t.Fatalf("this test needs a local cluster of %d nodes and this one has %d: `sudo make local-up NODES=3` adds them to a running cluster (make test does that for the ^TestNodes tests)", n, f.Env.Nodes)
	}
}

// nodeDo runs hack/local-cluster/node.sh ACTION NODE and says how long it took.
func nodeDo(t *testing.T, action, node string) {
	t.Helper()
	start := time.Now()
	out, err := f.Run(t.Context(), framework.Cmd{Name: "bash", Args: []string{"-c", "bash ../../hack/local-cluster/node.sh " + action + " " + node + " 2>&1"}})
	if err != nil {
		t.Fatalf("node.sh %s %s: %v\n%s", action, node, err, out)
	}
	t.Logf("node.sh %s %s: %.1fs", action, node, time.Since(start).Seconds())
}

// memberNodes maps each live member pod of a cluster to its node.
func memberNodes(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	pods, err := f.ClusterPods(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range framework.LivePods(pods) {
		out[p.Name] = p.Spec.NodeName
	}
	return out
}

// nodeZones maps every node to its topology.kubernetes.io/zone.
func nodeZones(t *testing.T) map[string]string {
	t.Helper()
	nodes, err := f.Kube.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range nodes.Items {
		out[n.Name] = n.Labels[corev1.LabelTopologyZone]
	}
	return out
}

// memberOnAnotherNode picks a member of the cluster on a node other than the
// host's, and not its leader unless leader is true (then it picks the leader,
// moving leadership there first when the leader is on the host's node).
func memberOnAnotherNode(t *testing.T, ns, name string, leader bool) (pod, node string) {
	t.Helper()
	places := memberNodes(t, ns, name)
	l, err := f.Leader(t.Context(), ns, name, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for p := range places {
		names = append(names, p)
	}
	sort.Strings(names)
	if leader {
		if places[l.Name] != f.Env.NodeName {
			return l.Name, places[l.Name]
		}
		for _, p := range names {
			if places[p] != f.Env.NodeName {
				moveLeader(t, ns, name, p)
				return p, places[p]
			}
		}
	} else {
		for _, p := range names {
			if p != l.Name && places[p] != f.Env.NodeName {
				return p, places[p]
			}
		}
	}
	t.Fatalf("no member of %s fits on a node other than %s (members on %v, leader %s)", name, f.Env.NodeName, places, l.Name)
	return "", ""
}

// moveLeader hands the cluster's leadership to member pod, asking the
// leader itself: etcdctl move-leader needs the leader among its endpoints.
func moveLeader(t *testing.T, ns, name, pod string) {
	t.Helper()
	l, err := f.Leader(t.Context(), ns, name, false)
	if err != nil {
		t.Fatal(err)
	}
	members, err := f.MemberList(t.Context(), ns, name, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.Name == pod {
			out, err := f.EtcdctlExec(t.Context(), ns, l.Name, "--endpoints=http://127.0.0.1:2379", "move-leader", fmt.Sprintf("%x", m.ID))
			if err != nil {
				t.Fatalf("move the leadership to %s: %v\n%s", pod, err, out)
			}
			t.Logf("leadership moved to %s", pod)
			return
		}
	}
	t.Fatalf("%s is not a member of %s: %v", pod, name, members)
}

// TestNodesMembersSpreadOverNodesAndZones: with nothing in spec.pod about
// placement, the members of a cluster of 3 are on three nodes in three zones,
// and no zone holds a quorum of a cluster of 5.
func TestNodesMembersSpreadOverNodesAndZones(t *testing.T) {
	requireNodes(t, 3)
	three := framework.UniqueName("spread3")
	five := framework.UniqueName("spread5")
	createCluster(t, framework.NewCluster(three, 3, "3.5.21"))
	createCluster(t, framework.NewCluster(five, 5, "3.5.21"))
	waitReady(t, opNS, three, 3, bootstrapTimeout(3))
	waitReady(t, opNS, five, 5, bootstrapTimeout(5))
	zones := nodeZones(t)

	places := memberNodes(t, opNS, three)
	nodes, inZones := map[string]bool{}, map[string]bool{}
	for _, node := range places {
		nodes[node], inZones[zones[node]] = true, true
	}
	t.Logf("%s: members on %v", three, places)
	if len(nodes) != 3 || len(inZones) != 3 {
		t.Errorf("the 3 members of %s are on %d nodes in %d zones, want 3 and 3: %v", three, len(nodes), len(inZones), places)
	}

	places = memberNodes(t, opNS, five)
	perZone := map[string]int{}
	for _, node := range places {
		perZone[zones[node]]++
	}
	t.Logf("%s: members on %v, per zone %v", five, places, perZone)
	for zone, n := range perZone {
		if n >= 3 {
			t.Errorf("zone %s holds %d of the 5 members of %s, a quorum: losing it loses the cluster (%v)", zone, n, five, places)
		}
	}
}

// TestNodesStoppedNodeGivesItsMemberBack stops the node of a member (a power
// cut: network down, every process killed) for two minutes, under a checker,
// and starts it again. The member comes back on its data, in its pod: no
// member is replaced, and no acknowledged write is lost.
func TestNodesStoppedNodeGivesItsMemberBack(t *testing.T) {
	requireNodes(t, 3)
	name := framework.UniqueName("nodestop")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	before := memberIDs(t, opNS, name)
	pod, node := memberOnAnotherNode(t, opNS, name, false)

	const d = 3 * time.Minute
	c := startLocalLoad(t, name, "node-stopped-2m", d)

	stopped := time.Now()
	nodeDo(t, "stop", node)
	t.Cleanup(func() { ensureNodeUp(t, node) })
	t.Logf("node %s of member %s stopped", node, pod)
	pause(t, 2*time.Minute)
	logReason(t, opNS, name)
	nodeDo(t, "start", node)
	waitReady(t, opNS, name, 3, changeTimeout)
	recovery := time.Since(stopped)
	t.Logf("%s: 3/3 ready %.1fs after its node stopped", name, recovery.Seconds())
	judged(t, "node-stopped-2m", c, checkerWait(d, 0), recovery, nil)
	sameMembers(t, before, memberIDs(t, opNS, name))
}

// TestNodesLongPartitionedMemberIsKeptAndRejoins cuts the node of a member off
// from everything (the others, the control plane) for longer than the node
// controller takes to mark it NotReady. Writes go on through the majority;
// the member, merely partitioned, is not replaced, and rejoins once healed.
func TestNodesLongPartitionedMemberIsKeptAndRejoins(t *testing.T) {
	requireNodes(t, 3)
	name := framework.UniqueName("nodecut")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	before := memberIDs(t, opNS, name)
	pod, node := memberOnAnotherNode(t, opNS, name, false)

	const d = 150 * time.Second
	c := startLocalLoad(t, name, "node-cut-off-90s", d)

	cut := time.Now()
	nodeDo(t, "cut", node)
	healed := false
	t.Cleanup(func() {
		if !healed {
			nodeDo(t, "heal", node)
		}
	})
	t.Logf("node %s of member %s cut off", node, pod)
	pause(t, 90*time.Second)
	logReason(t, opNS, name)
	nodeDo(t, "heal", node)
	healed = true
	waitReady(t, opNS, name, 3, changeTimeout)
	recovery := time.Since(cut)
	judged(t, "node-cut-off-90s", c, checkerWait(d, 0), recovery, nil)
	sameMembers(t, before, memberIDs(t, opNS, name))
}

// ensureNodeUp starts a node a failed test left stopped, so that the tests
// after it have their three nodes.
func ensureNodeUp(t *testing.T, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, err := f.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err == nil {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && time.Since(c.LastHeartbeatTime.Time) < time.Minute {
				return
			}
		}
	}
	out, err := f.Run(ctx, framework.Cmd{Name: "bash", Args: []string{"-c", "bash ../../hack/local-cluster/node.sh start " + node + " 2>&1"}})
	if err != nil {
		t.Logf("starting node %s again after the test: %v\n%s", node, err, out)
	}
}

// startLocalLoad starts a checker's workload of d against a cluster of the
// shared operator from this process, on the host's node which no node event
// touches, and lets it run loadLead before the fault.
func startLocalLoad(t *testing.T, name, scenario string, d time.Duration) checkerRun {
	t.Helper()
	c, err := f.StartLocalChecker(t.Context(), framework.CheckerPod{Namespace: opNS, Cluster: name, Scenario: scenario, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Delete)
	pause(t, loadLead)
	return c
}

// logReason logs what the cluster's status says while a fault lasts.
func logReason(t *testing.T, ns, name string) {
	t.Helper()
	cl, err := f.GetCluster(t.Context(), ns, name)
	if err != nil {
		t.Logf("%s: %v", name, err)
		return
	}
	t.Logf("%s during the fault: %s reason=%q", name, strings.TrimSpace(framework.DescribeStatus(cl)), cl.Status.Reason)
}
