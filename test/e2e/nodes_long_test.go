//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// The longer node events, in make chaos (E2E_CHAOS=1): a drain of every
// node, a node lost for good, a zone lost under a cluster of 5, the leader's
// node lost. Each lost node is added again, empty, when the test ends.

// localVolumeClass is the local cluster's StorageClass of volumes bound to
// one node (hack/local-cluster/nodes.sh).
const localVolumeClass = "local-node"

// createLocalPVs makes perNode local volumes of class local-node on every
// node for the claims of one test (label pvGroupLabel=group), under the
// node's own state directory, so that a node lost for good takes its volumes
// with it. They are deleted when the test ends.
func createLocalPVs(t *testing.T, group string, perNode int) {
	t.Helper()
	state := os.Getenv("LOCAL_CLUSTER_STATE_DIR")
	if state == "" {
		state = filepath.Dir(framework.DefaultEnvFile)
	}
	var names []string
	for node, zone := range nodeZones(t) {
		for k := range perNode {
			name := fmt.Sprintf("%s-%s-%d", group, zone, k)
			dir := filepath.Join(state, "nodes", zone, "e2e", name)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{pvGroupLabel: group, "etcd-operator-e2e": "1"}},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					StorageClassName:              localVolumeClass,
					PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
					NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
					}}}},
				},
			}
			if _, err := f.Kube.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, n := range names {
			_ = f.Kube.CoreV1().PersistentVolumes().Delete(ctx, n, metav1.DeleteOptions{})
		}
	})
}

// localClaimCluster is a 3-member cluster whose members keep their data on
// local volumes of one node each.
func localClaimCluster(t *testing.T, base string, mods ...func(*api.EtcdCluster)) string {
	t.Helper()
	name := framework.UniqueName(base)
	group := "e2e-" + name
	createLocalPVs(t, group, 3)
	cl := framework.NewCluster(name, 3, "3.5.21")
	spec := claimSpec(group)
	spec.StorageClassName = new(localVolumeClass)
	cl.Spec.Pod = &api.PodPolicy{PersistentVolumeClaimSpec: spec}
	for _, m := range mods {
		m(cl)
	}
	createCluster(t, cl)
	return name
}

// podsOn are the live member pods of a cluster on node: the ones a lost node
// takes, which the waits for full size exclude.
func podsOn(t *testing.T, ns, name, node string) []string {
	t.Helper()
	var out []string
	for pod, n := range memberNodes(t, ns, name) {
		if n == node {
			out = append(out, pod)
		}
	}
	return out
}

// loseNode loses a node for good and adds it again, empty, when the test ends.
func loseNode(t *testing.T, node string) time.Time {
	t.Helper()
	t.Cleanup(func() {
		out, err := f.Run(context.Background(), framework.Cmd{Name: "bash", Args: []string{"-c", "bash ../../hack/local-cluster/node.sh add " + node + " 2>&1"}})
		if err != nil {
			t.Errorf("adding node %s again: %v\n%s", node, err, out)
		}
	})
	lost := time.Now()
	nodeDo(t, "lose", node)
	return lost
}

// claimsOf are the names of the cluster's PersistentVolumeClaims.
func claimsOf(t *testing.T, ns, name string) []string {
	t.Helper()
	claims, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).List(t.Context(), metav1.ListOptions{LabelSelector: framework.ClusterSelector(name)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range claims.Items {
		if c.DeletionTimestamp == nil {
			out = append(out, c.Name)
		}
	}
	return out
}

// clustersSharingANode are a cluster on emptyDir and one on local volumes,
// both of 3 and Ready, with a node other than the host's that holds a member
// of each, under a checker each.
type clustersSharingANode struct {
	onEmptyDir, onLocal string
	clusters            []string
	// node holds a member of both clusters; gone are the member pods on it.
	node string
	gone map[string][]string
	// claimsBefore are onLocal's claims before the node goes.
	claimsBefore []string
	scenarios    map[string]string
	checkers     map[string]checkerRun
}

// twoClustersSharingANode creates the clusters (named after base, changed by
// mods) and starts their checkers for d, scenario-emptydir and
// scenario-local-volume, leaving them loadLead to run before the node goes.
func twoClustersSharingANode(t *testing.T, base, scenario string, d time.Duration, mods ...func(*api.EtcdCluster)) clustersSharingANode {
	t.Helper()
	two := clustersSharingANode{onEmptyDir: framework.UniqueName(base)}
	cl := framework.NewCluster(two.onEmptyDir, 3, "3.5.21")
	for _, mod := range mods {
		mod(cl)
	}
	createCluster(t, cl)
	two.onLocal = localClaimCluster(t, base+"-local", mods...)
	waitReady(t, opNS, two.onEmptyDir, 3, bootstrapTimeout(3))
	waitReady(t, opNS, two.onLocal, 3, bootstrapTimeout(3))

	// A node both clusters have a member on, other than the host's.
	placesE, placesL := memberNodes(t, opNS, two.onEmptyDir), memberNodes(t, opNS, two.onLocal)
	for _, n := range placesE {
		for _, m := range placesL {
			if n == m && n != f.Env.NodeName {
				two.node = n
			}
		}
	}
	if two.node == "" {
		t.Fatalf("no node other than %s holds a member of both clusters: %v, %v", f.Env.NodeName, placesE, placesL)
	}
	two.claimsBefore = claimsOf(t, opNS, two.onLocal)

	two.clusters = []string{two.onEmptyDir, two.onLocal}
	two.scenarios = map[string]string{two.onEmptyDir: scenario + "-emptydir", two.onLocal: scenario + "-local-volume"}
	two.checkers = map[string]checkerRun{}
	for _, name := range two.clusters {
		c, err := f.StartLocalChecker(t.Context(), framework.CheckerPod{Namespace: opNS, Cluster: name, Scenario: two.scenarios[name], Duration: d})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Delete)
		two.checkers[name] = c
	}
	pause(t, loadLead)

	two.gone = map[string][]string{}
	for _, name := range two.clusters {
		two.gone[name] = podsOn(t, opNS, name, two.node)
	}
	return two
}

// expectNewClaims checks that the cluster on local volumes has one claim per
// member once its member on the node was replaced.
func (two clustersSharingANode) expectNewClaims(t *testing.T) {
	t.Helper()
	claimsAfter := claimsOf(t, opNS, two.onLocal)
	t.Logf("%s: claims before %v, after %v", two.onLocal, two.claimsBefore, claimsAfter)
	if len(claimsAfter) != 3 {
		t.Errorf("%s has %d claims after the replacement, want 3 (one per member): %v", two.onLocal, len(claimsAfter), claimsAfter)
	}
}

// TestNodesLongLostNodeMembersAreReplaced loses, for good, a node holding a
// member of a cluster on emptyDir and one of a cluster on local volumes,
// under checkers. Each member is replaced on another node (the one on a local
// volume with a new claim: its volume cannot follow it), the old claim is
// removed, and both clusters are back at full size with no acknowledged write
// lost.
func TestNodesLongLostNodeMembersAreReplaced(t *testing.T) {
	requireNodes(t, 3)
	const d = 4 * time.Minute
	two := twoClustersSharingANode(t, "nodelost", "node-lost", d)
	clusters, node, gone := two.clusters, two.node, two.gone
	scenarios, checkers := two.scenarios, two.checkers
	lost := loseNode(t, node)
	recovery := map[string]time.Duration{}
	for _, name := range clusters {
		waitReady(t, opNS, name, 3, 2*changeTimeout, gone[name]...)
		recovery[name] = time.Since(lost)
		t.Logf("%s: back at full size %.1fs after node %s was lost: members on %v", name, recovery[name].Seconds(), node, memberNodes(t, opNS, name))
	}
	for _, name := range clusters {
		for pod, n := range memberNodes(t, opNS, name) {
			if n == node {
				t.Errorf("%s: member %s is still on the lost node %s", name, pod, n)
			}
		}
		judged(t, scenarios[name], checkers[name], checkerWait(d, 0), recovery[name], nil)
	}
	two.expectNewClaims(t)
}

// TestNodesLongDrainOfEveryNodeKeepsAQuorum drains each node in turn, as a
// node-pool upgrade does (drain, then uncordon once the node is back), under
// a checker: the PodDisruptionBudget lets one member go at a time, the
// cluster stays available, and it is back at full size after each node.
func TestNodesLongDrainOfEveryNodeKeepsAQuorum(t *testing.T) {
	requireNodes(t, 3)
	name := framework.UniqueName("nodedrain")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))

	nodes := nodeZones(t)
	const d = 8 * time.Minute
	c := startLocalLoad(t, name, "drain-every-node", d)

	start := time.Now()
	order := []string{}
	for n := range nodes {
		if n != f.Env.NodeName {
			order = append(order, n)
		}
	}
	// The host's node last: draining it also moves the operator.
	order = append(order, f.Env.NodeName)
	for _, node := range order {
		t.Cleanup(func() { _, _ = f.Kubectl(context.Background(), "uncordon", node) })
		drained := time.Now()
		nodeDo(t, "drain", node)
		nodeDo(t, "uncordon", node)
		if node == f.Env.NodeName {
			if err := f.WaitDeploymentReady(t.Context(), opNS, framework.OperatorDeployment, 1, framework.OperatorReadyTimeout); err != nil {
				t.Fatal(err)
			}
		}
		waitReady(t, opNS, name, 3, changeTimeout)
		t.Logf("node %s drained, %s back at full size after %.1fs: members on %v", node, name, time.Since(drained).Seconds(), memberNodes(t, opNS, name))
	}
	judged(t, "drain-every-node", c, checkerWait(d, 0), time.Since(start), nil)
}

// TestNodesLongZoneLostUnderFiveMembers loses the zone (one node) holding
// the most members of a cluster of 5. Spread over three zones, no zone holds
// a quorum: the cluster stays available and grows back to 5 on the nodes
// left.
func TestNodesLongZoneLostUnderFiveMembers(t *testing.T) {
	requireNodes(t, 3)
	name := framework.UniqueName("zonelost")
	createCluster(t, framework.NewCluster(name, 5, "3.5.21"))
	waitReady(t, opNS, name, 5, bootstrapTimeout(5))
	perNode := map[string]int{}
	for _, n := range memberNodes(t, opNS, name) {
		perNode[n]++
	}
	node, most := "", 0
	for n, k := range perNode {
		if n != f.Env.NodeName && k > most {
			node, most = n, k
		}
	}
	if most >= 3 {
		t.Fatalf("node %s holds %d of 5 members, a quorum: %v", node, most, perNode)
	}

	const d = 4 * time.Minute
	c := startLocalLoad(t, name, "zone-lost-5-members", d)
	t.Logf("losing zone %s (node %s, %d of the 5 members)", nodeZones(t)[node], node, most)
	gone := podsOn(t, opNS, name, node)
	lost := loseNode(t, node)
	waitReady(t, opNS, name, 5, 2*changeTimeout, gone...)
	recovery := time.Since(lost)
	t.Logf("%s: back at 5 members %.1fs after the zone was lost: %v", name, recovery.Seconds(), memberNodes(t, opNS, name))
	judged(t, "zone-lost-5-members", c, checkerWait(d, 0), recovery, nil)
}

// TestNodesLongLeadersNodeLost loses, for good, the node of the cluster's
// leader: the others elect a leader, the member is replaced on another node,
// and no acknowledged write is lost.
func TestNodesLongLeadersNodeLost(t *testing.T) {
	requireNodes(t, 3)
	name := framework.UniqueName("leaderlost")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	pod, node := memberOnAnotherNode(t, opNS, name, true)

	const d = 4 * time.Minute
	c := startLocalLoad(t, name, "leaders-node-lost", d)
	t.Logf("losing node %s of the leader %s", node, pod)
	lost := loseNode(t, node)
	waitReady(t, opNS, name, 3, 2*changeTimeout, pod)
	recovery := time.Since(lost)
	t.Logf("%s: back at full size %.1fs after the leader's node was lost: %v", name, recovery.Seconds(), memberNodes(t, opNS, name))
	judged(t, "leaders-node-lost", c, checkerWait(d, 0), recovery, nil)
}

// lostAfterAMinute counts a node not Ready for a minute as lost, and lets
// the node controller evict member pods 5 s after it marks their node
// unreachable or not ready (the default is 5 minutes), so that a pod is
// stuck terminating within the test's time.
func lostAfterAMinute(cl *api.EtcdCluster) {
	if cl.Spec.Pod == nil {
		cl.Spec.Pod = &api.PodPolicy{}
	}
	cl.Spec.Pod.NodeLostAfterSeconds = api.MinNodeLostAfterSeconds
	for _, key := range []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady} {
		cl.Spec.Pod.Tolerations = append(cl.Spec.Pod.Tolerations, corev1.Toleration{
			Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(5))})
	}
}

// TestNodesLongNodeNotReadyPastTheUsersBoundCountsAsLost stops, and leaves
// stopped, a node holding a member of a cluster on emptyDir and one of a
// cluster on local volumes, both with spec.pod.nodeLostAfterSeconds. Nobody
// deletes the Node: its member pods are evicted and stay terminating, as on
// a hypervisor that hung. Once the node has been NotReady for the bound, the
// stuck pods are force-deleted, each member replaced on another node (the
// one on a local volume with a new claim), and both clusters are back at
// full size with no acknowledged write lost. The node comes back at the end
// and gives nothing back: its old members are gone.
func TestNodesLongNodeNotReadyPastTheUsersBoundCountsAsLost(t *testing.T) {
	requireNodes(t, 3)
	const d = 5 * time.Minute
	two := twoClustersSharingANode(t, "nodenotready", "node-notready-past-bound", d, lostAfterAMinute)
	clusters, node, gone := two.clusters, two.node, two.gone
	onLocal, scenarios, checkers := two.onLocal, two.scenarios, two.checkers
	stopped := time.Now()
	nodeDo(t, "stop", node)
	t.Cleanup(func() { ensureNodeUp(t, node) })
	recovery := map[string]time.Duration{}
	for _, name := range clusters {
		waitReady(t, opNS, name, 3, 3*changeTimeout, gone[name]...)
		recovery[name] = time.Since(stopped)
		t.Logf("%s: back at full size %.1fs after node %s stopped: members on %v", name, recovery[name].Seconds(), node, memberNodes(t, opNS, name))
	}
	for _, name := range clusters {
		pods, err := f.ClusterPods(t.Context(), opNS, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if p.Spec.NodeName == node {
				t.Errorf("%s: pod %s is still on the stopped node %s (deleting since %v)", name, p.Name, node, p.DeletionTimestamp)
			}
		}
		t.Logf("%s: %s", name, waitClusterEvent(t, opNS, name, corev1.EventTypeWarning, "PodForceDeleted", time.Minute))
		judged(t, scenarios[name], checkers[name], checkerWait(d, 0), recovery[name], nil)
	}
	two.expectNewClaims(t)
	// The node comes back: what ran there was replaced, and stays so.
	nodeDo(t, "start", node)
	waitReady(t, opNS, onLocal, 3, changeTimeout)
	for _, name := range clusters {
		if n := len(memberNodes(t, opNS, name)); n != 3 {
			t.Errorf("%s has %d member pods once the node is back, want 3", name, n)
		}
	}
}
