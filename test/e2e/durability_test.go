//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/checker"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// A cluster survives the loss of its pods with every acknowledged
// write, as long as its members' claims hold their data. Each scenario runs a
// checker pod that writes and reads through the client Service before, during
// and after the fault; every write it saw acknowledged must be readable at the
// end, and the history linearizable where the data survives. Each checks the
// members kept their etcd IDs: restarted in place, not removed and replaced.

const durableKeys = 20

// durableLoad is the checker of a durability scenario: two clients at a low
// rate, so that judging the history adds seconds to make test, not minutes. d
// covers loadLead and most of the fault; the read-back waits for the rest.
func durableLoad(ns, name, scenario string, d time.Duration) framework.CheckerPod {
	return framework.CheckerPod{Namespace: ns, Cluster: name, Scenario: scenario, Duration: d, Clients: 2, Rate: 25}
}

// pvcCluster creates a 3-member cluster on the test's own hostPath volumes
// and waits for it; it returns the cluster's name and the volumes' host
// directories by claim name, once bound.
func pvcCluster(t *testing.T, ns, base string) (string, []string) {
	t.Helper()
	name := framework.UniqueName(base)
	createHostPathPVs(t, "e2e-"+name, 4)
	cl := framework.NewCluster(name, 3, "3.5.21")
	cl.Spec.Pod = &api.PodPolicy{PersistentVolumeClaimSpec: claimSpec("e2e-" + name)}
	createClusterIn(t, ns, opNamespaceOf(ns), cl)
	logVolumesOnFailure(t, "e2e-"+name)
	_, pods := waitReady(t, ns, name, 3, bootstrapTimeout(3))
	return name, pods
}

// opNamespaceOf is the operator namespace managing clusters in ns: the shared
// operator's, or ns itself for tests with an operator of their own.
func opNamespaceOf(ns string) string { return ns }

// writeKeys puts durableKeys keys through the client Service.
func writeKeys(t *testing.T, ns, name, prefix string) {
	t.Helper()
	for i := range durableKeys {
		if _, err := f.Etcdctl(t.Context(), ns, name, false, "put", fmt.Sprintf("%s/%02d", prefix, i), fmt.Sprintf("value-%d", i)); err != nil {
			t.Fatalf("put %s/%02d: %v", prefix, i, err)
		}
	}
}

// expectKeys reads every key back through the client Service.
func expectKeys(t *testing.T, ns, name, prefix string) {
	t.Helper()
	for i := range durableKeys {
		if err := f.ExpectValue(t.Context(), ns, name, false, fmt.Sprintf("%s/%02d", prefix, i), fmt.Sprintf("value-%d", i), dataTimeout); err != nil {
			t.Errorf("an acknowledged write is lost: %v", err)
		}
	}
}

// memberIDs is etcd's membership as name -> ID.
func memberIDs(t *testing.T, ns, name string) map[string]uint64 {
	t.Helper()
	var members []framework.Member
	err := framework.WaitFor(t.Context(), dataTimeout, framework.Poll, "etcd's member list", func(ctx context.Context) (bool, string, error) {
		var err error
		members, err = f.MemberList(ctx, ns, name, false)
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]uint64{}
	for _, m := range members {
		ids[m.Name] = m.ID
	}
	return ids
}

func sameMembers(t *testing.T, before, after map[string]uint64) {
	t.Helper()
	if len(before) != len(after) {
		t.Errorf("members before %v, after %v", before, after)
		return
	}
	for n, id := range before {
		if after[n] != id {
			t.Errorf("member %s had ID %x and has %x now: it was replaced, not restarted in place (members after: %v)", n, id, after[n], after)
		}
	}
}

// stopOperator scales the operator of namespace ns to no replica and waits
// until its pod is gone.
func stopOperator(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	if err := f.ScaleDeployment(ctx, ns, framework.OperatorDeployment, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitDeploymentScaledDown(ctx, ns, framework.OperatorDeployment, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// eventsOf lists the reasons of the events on the cluster, one a line.
func eventsOf(t *testing.T, ns, name string) string {
	t.Helper()
	out, err := f.Kubectl(t.Context(), "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+name,
		"-o", "custom-columns=REASON:.reason", "--no-headers")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKilledMemberOnAClaimIsRestartedInPlace force-deletes one member's pod
// of a cluster on PersistentVolumeClaims: the member comes back with its name,
// its ID and its data, without MemberRemove or MemberAdd (the original, and
// this operator before, replaced it with an empty member).
func TestKilledMemberOnAClaimIsRestartedInPlace(t *testing.T) {
	t.Parallel()
	name, pods := pvcCluster(t, opNS, "inplace")
	before := memberIDs(t, opNS, name)

	victim := pods[1]
	underLoadPod(t, durableLoad(opNS, name, "member-killed-restarted-in-place", 20*time.Second), func(ctx context.Context) {
		killed := time.Now()
		if err := f.KillPod(ctx, opNS, victim); err != nil {
			t.Fatal(err)
		}
		waitReady(t, opNS, name, 3, changeTimeout)
		t.Logf("member %s restarted in place and the cluster 3/3 ready %.1fs after the kill", victim, time.Since(killed).Seconds())
	})
	sameMembers(t, before, memberIDs(t, opNS, name))
	reasons := eventsOf(t, opNS, name)
	if !strings.Contains(reasons, "Member Restarted") {
		t.Errorf("no Member Restarted event: %v", reasons)
	}
	if strings.Contains(reasons, "Replacing Dead Member") {
		t.Errorf("a member was replaced: %v", reasons)
	}
}

// TestEveryPodDeletedOnClaimsComesBackWithItsData is `kubectl delete pods -l
// etcd_cluster=<name>` on a cluster on claims: every member comes back
// together, with its ID, no seed and no restore, and nothing written is lost.
func TestEveryPodDeletedOnClaimsComesBackWithItsData(t *testing.T) {
	t.Parallel()
	name, _ := pvcCluster(t, opNS, "allpods")
	before := memberIDs(t, opNS, name)

	underLoadPod(t, durableLoad(opNS, name, "every-pod-deleted-kubectl-pvc", 30*time.Second), func(ctx context.Context) {
		deleted := time.Now()
		if _, err := f.Kubectl(ctx, "delete", "pods", "-n", opNS, "-l", "etcd_cluster="+name, "--wait=false"); err != nil {
			t.Fatal(err)
		}
		waitReady(t, opNS, name, 3, changeTimeout)
		t.Logf("every member restarted in place, the cluster 3/3 ready %.1fs after the pods were deleted", time.Since(deleted).Seconds())
	})
	sameMembers(t, before, memberIDs(t, opNS, name))
	cl, err := f.GetCluster(t.Context(), opNS, name)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cl.Status.Reason, "restore") {
		t.Errorf("status.reason = %q", cl.Status.Reason)
	}
}

// TestQuorumLostWhileTheOperatorIsDownHealsWhenItReturns stops the operator,
// deletes two of three members' pods (quorum lost), and starts the operator
// again: it restarts both members in place and the cluster serves its data.
func TestQuorumLostWhileTheOperatorIsDownHealsWhenItReturns(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "quorum-down")
	installOperator(t, ns, framework.Install{})
	name, pods := pvcCluster(t, ns, "qdown")
	before := memberIDs(t, ns, name)

	underLoadPod(t, durableLoad(ns, name, "quorum-lost-operator-down-pvc", 30*time.Second), func(ctx context.Context) {
		stopOperator(ctx, t, ns)
		for _, victim := range pods[:2] {
			if err := f.KillPod(ctx, ns, victim); err != nil {
				t.Fatal(err)
			}
		}
		back := time.Now()
		if err := f.ScaleDeployment(ctx, ns, framework.OperatorDeployment, 1); err != nil {
			t.Fatal(err)
		}
		waitReady(t, ns, name, 3, changeTimeout)
		t.Logf("quorum healed %.1fs after the operator was started again", time.Since(back).Seconds())
	})
	sameMembers(t, before, memberIDs(t, ns, name))
}

// TestChaosEvictionThatWouldBreakQuorumIsRefused evicts members through the
// eviction API, as kubectl drain does, while a checker writes and reads: the
// cluster's PodDisruptionBudget lets one of three go, and refuses a second
// while the first is not back. The evicted member (emptyDir) is replaced; the
// clients' history stays linearizable with no acknowledged write lost.
func TestChaosEvictionThatWouldBreakQuorumIsRefused(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("evict")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	err := framework.WaitFor(t.Context(), time.Minute, framework.Poll, "the cluster's PodDisruptionBudget to allow one disruption",
		func(ctx context.Context) (bool, string, error) {
			pdb, err := f.Kube.PolicyV1().PodDisruptionBudgets(opNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			return pdb.Status.DisruptionsAllowed == 1 && pdb.Spec.MinAvailable.IntValue() == 2,
				fmt.Sprintf("minAvailable %v, disruptions allowed %d", pdb.Spec.MinAvailable, pdb.Status.DisruptionsAllowed), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	underLoad(t, opNS, name, "eviction-pdb", 60*time.Second, func(ctx context.Context) {
		evict := func(pod string) error {
			return f.Kube.PolicyV1().Evictions(opNS).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: opNS}})
		}
		first, err := f.Kube.CoreV1().Pods(opNS).Get(ctx, pods[0], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := evict(pods[0]); err != nil {
			t.Fatalf("the first eviction was refused: %v", err)
		}
		err = evict(pods[1])
		if err == nil {
			t.Fatal("a second eviction was allowed while the first member is not back: quorum could be lost")
		}
		if !apierrors.IsTooManyRequests(err) {
			t.Errorf("the second eviction failed with %v, want the disruption budget's refusal (429)", err)
		}
		waitReplaced(t, opNS, name, 3, changeTimeout, map[types.UID]bool{first.UID: true})
	})
}

// TestMemberWhoseDataIsDestroyedIsReplaced garbles a member's write-ahead log
// on its volume, then kills its pod: restarted in place, etcd refuses the data
// (checksum mismatch), and the repair ladder replaces the member with a new
// one on a fresh claim, while the others keep the quorum and the data.
func TestMemberWhoseDataIsDestroyedIsReplaced(t *testing.T) {
	t.Parallel()
	name, pods := pvcCluster(t, opNS, "garbled")
	victim := pods[2]
	pvc, err := f.Kube.CoreV1().PersistentVolumeClaims(opNS).Get(t.Context(), victim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(pvRoot, pvc.Spec.VolumeName, "data", "member", "wal")
	underLoadPod(t, durableLoad(opNS, name, "member-data-garbled-replaced", 40*time.Second), func(ctx context.Context) {
		// The records garbled are ones the running etcd has read and only
		// appends after, so it notices nothing until it starts again. Garbled
		// after the kill instead, they could be read first by the pod the
		// operator restarts in place within a second.
		garbleWAL(t, dir)
		killed := time.Now()
		if err := f.KillPod(ctx, opNS, victim); err != nil {
			t.Fatal(err)
		}
		waitReady(t, opNS, name, 3, changeTimeout, victim)
		t.Logf("member %s with garbled data replaced, the cluster 3/3 ready %.1fs after the kill", victim, time.Since(killed).Seconds())
	})
	ids := memberIDs(t, opNS, name)
	if _, still := ids[victim]; still {
		t.Errorf("member %s with garbled data is still a member: %v", victim, ids)
	}
}

// garbleWAL overwrites the middle of every WAL file in dir.
func garbleWAL(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no WAL files in %s: %v", dir, err)
	}
	for _, file := range files {
		fh, err := os.OpenFile(file, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		garbage := []byte(strings.Repeat("\xde\xad\xbe\xef", 1024))
		for _, off := range []int64{0, 4096, 16384} {
			if _, err := fh.WriteAt(garbage, off); err != nil {
				t.Fatal(err)
			}
		}
		if err := fh.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDisasterRecoveryFromTheSurvivor opts a cluster on claims into disaster
// recovery and loses two of its three members for good: their claims are
// deleted with their pods. After the grace period the survivor becomes a
// one-member cluster with its data (--force-new-cluster on its claim), is
// restarted without the flag, and the cluster regrows to three members;
// status.recovery records it. A checker writes all along: what only the lost
// members held is lost by design, so its history is reported, not judged, and
// the bound is that every write the survivor held when the others were lost
// is there.
func TestDisasterRecoveryFromTheSurvivor(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("dr")
	createHostPathPVs(t, "e2e-"+name, 6)
	cl := framework.NewCluster(name, 3, "3.5.21")
	cl.Spec.Pod = &api.PodPolicy{PersistentVolumeClaimSpec: claimSpec("e2e-" + name)}
	cl.Spec.DisasterRecovery = &api.DisasterRecoveryPolicy{Enabled: true, GracePeriodInSecond: 10}
	createCluster(t, cl)
	logVolumesOnFailure(t, "e2e-"+name)
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))

	const scenario, d = "two-claims-lost-dr-survivor", 45 * time.Second
	c, err := f.StartChecker(ctx, durableLoad(opNS, name, scenario, d))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Delete)
	pause(t, loadLead)
	survivor := pods[0]
	held := memberKeys(t, opNS, survivor, c.Appends())
	for _, lost := range pods[1:] {
		// The claim goes once its pod is gone (the claim protection
		// finalizer waits for it).
		if err := f.Kube.CoreV1().PersistentVolumeClaims(opNS).Delete(ctx, lost, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.KillPod(ctx, opNS, lost); err != nil {
			t.Fatal(err)
		}
	}
	lostAt := time.Now()
	waitReady(t, opNS, name, 3, 2*changeTimeout, pods[1:]...)
	recovered := time.Since(lostAt)
	t.Logf("recovered from %s and regrown to 3 members %.1fs after two members were lost for good", survivor, recovered.Seconds())
	res := judged(t, scenario, c, checkerWait(d, 0), recovered, func(checker.Result) error {
		if lost := missingKeys(t, opNS, name, c.Appends(), held); len(lost) > 0 {
			return fmt.Errorf("%d of the %d writes the survivor held when the others were lost are lost, e.g. %v: the loss is not bounded by the survivor's data",
				len(lost), len(held), lost[:min(5, len(lost))])
		}
		return nil
	})
	got, err := f.GetCluster(ctx, opNS, name)
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Status.Recovery; r == nil || r.FromMember != survivor || r.RecoveredRevision == 0 {
		t.Errorf("status.recovery = %+v, want a recovery from %s", r, survivor)
	} else {
		t.Logf("%s: %d acknowledged writes lost, none of the %d the survivor held; status.recovery: revision %d recovered, %d the highest seen before",
			scenario, res.AckedLost, len(held), r.RecoveredRevision, r.LastSeenRevision)
	}
	pod, err := f.Kube.CoreV1().Pods(opNS).Get(ctx, survivor, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range pod.Spec.Containers {
		if slices.Contains(c.Command, "--force-new-cluster") {
			t.Errorf("the survivor still runs with --force-new-cluster")
		}
	}
	if !strings.Contains(eventsOf(t, opNS, name), "DisasterRecovery") {
		t.Error("no DisasterRecovery event")
	}
}
