//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestNodeRestartKeepsEveryAcknowledgedWrite puts the node through a reboot
// (hack/local-cluster/node-restart.sh: the kubelet, kube-proxy and containerd
// stop, every container is killed with SIGKILL, all start again) with two
// clusters on it, one on claims and one on emptyDir, and the operator itself.
// Both come back with their members' IDs and every acknowledged write: the
// kubelet recreates each pod's containers on the volumes the pod had, the
// claim's and the emptyDir's alike, so nothing is replaced and nothing is lost.
//
// Not parallel: a node restart kills every container on the node, so it runs
// while no other scenario does (Go starts the parallel tests after the
// sequential ones).
func TestNodeRestartKeepsEveryAcknowledgedWrite(t *testing.T) {
	onClaims, _ := pvcCluster(t, opNS, "noderestart")
	onEmptyDir := framework.UniqueName("noderestart-empty")
	createClusterIn(t, opNS, opNS, framework.NewCluster(onEmptyDir, 3, "3.5.21"))
	waitReady(t, opNS, onEmptyDir, 3, bootstrapTimeout(3))

	clusters := []string{onClaims, onEmptyDir}
	before := map[string]map[string]uint64{}
	restarts := map[string]int32{}
	for _, name := range clusters {
		writeKeys(t, opNS, name, "/e2e/"+name)
		before[name] = memberIDs(t, opNS, name)
		for pod, n := range etcdRestartCounts(t, name) {
			restarts[pod] = n
		}
	}

	restarted := time.Now()
	out, err := f.Run(t.Context(), framework.Cmd{Name: "bash", Args: []string{"../../hack/local-cluster/node-restart.sh", "5"}})
	if err != nil {
		t.Fatalf("node restart: %v\n%s", err, out)
	}
	t.Logf("node back %.1fs after the restart began", time.Since(restarted).Seconds())

	for _, name := range clusters {
		// Status is the operator's last word from before the restart until it
		// runs again: wait first for every etcd container to have restarted.
		err := framework.WaitFor(t.Context(), changeTimeout, framework.Poll, "the etcd containers of "+name+" to restart", func(ctx context.Context) (bool, string, error) {
			now := etcdRestartCounts(t, name)
			for pod, n := range restarts {
				if _, ok := now[pod]; !ok {
					continue
				}
				if now[pod] <= n && podOf(name, pod) {
					return false, fmt.Sprintf("%s: restarts %d, was %d", pod, now[pod], n), nil
				}
			}
			return true, "", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		waitReady(t, opNS, name, 3, changeTimeout)
		t.Logf("%s: 3/3 ready %.1fs after the node restart began", name, time.Since(restarted).Seconds())
		sameMembers(t, before[name], memberIDs(t, opNS, name))
		expectKeys(t, opNS, name, "/e2e/"+name)
	}
}

// etcdRestartCounts is the etcd container's restart count per member pod of
// the cluster.
func etcdRestartCounts(t *testing.T, name string) map[string]int32 {
	t.Helper()
	pods, err := f.Kube.CoreV1().Pods(opNS).List(t.Context(), metav1.ListOptions{LabelSelector: "etcd_cluster=" + name})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int32{}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "etcd" {
				counts[p.Name] = cs.RestartCount
			}
		}
	}
	return counts
}

// podOf says whether pod still belongs to the cluster's members (a pod the
// operator replaced has a new name and nothing to wait for).
func podOf(cluster, pod string) bool {
	return len(pod) > len(cluster) && pod[:len(cluster)] == cluster
}
