//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/operatorrun"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// Faults of the control plane and the network, each under the checker (underLoad):
// the kube-apiserver restarted, a member cut off from its peers, two operators
// fighting over their Lease, the operators killed during a restore. The cut-off
// member is in `make test`; the others, longer or disturbing the whole node, run in
// `make chaos` (^TestChaosLong).

// restoreOperatorDeployment is the name example/etcd-restore-operator/deployment.yaml
// gives the restore operator.
const restoreOperatorDeployment = "etcd-restore-operator"

// The kube-apiserver is stopped for 20 s and started again
// (hack/local-cluster/apiserver-restart.sh). etcd does not need it: the clients
// must see nothing. The operator loses its Lease and its watches meanwhile; that
// it came back is shown by a member killed afterwards being replaced.
//
// Not parallel: every test talks to the apiserver, so it runs while no other
// scenario does (Go starts the parallel tests after the sequential ones), as
// TestNodeRestartKeepsEveryAcknowledgedWrite does.
func TestChaosLongApiserverRestart(t *testing.T) {
	name := framework.UniqueName("chaos-apiserver")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	underLoad(t, opNS, name, "apiserver-restart-20s", 90*time.Second, func(ctx context.Context) {
		stopped := time.Now()
		out, err := f.Run(ctx, framework.Cmd{Name: "bash", Args: []string{f.Env.Path("hack", "local-cluster", "apiserver-restart.sh"), "20"}})
		if err != nil {
			t.Fatalf("apiserver restart: %v\n%s", err, out)
		}
		t.Logf("kube-apiserver back %.1fs after it was stopped", time.Since(stopped).Seconds())
		victim := killFollower(ctx, t, name, pods)
		t.Logf("killed the follower %s after the restart", victim)
		waitReady(t, opNS, name, 3, changeTimeout, victim)
	})
}

// The leader is cut off from its peers for 30 s (hack/local-cluster/pod-isolate.sh:
// every packet to or from port 2380 dropped in its pod's network namespace; its
// clients still reach it on 2379). The two others elect a new leader; once healed,
// the old leader rejoins as the same member, not replaced.
func TestChaosMemberCutOff(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("chaos-cutoff")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	before := memberIDs(t, opNS, name)
	underLoad(t, opNS, name, "leader-cut-off-30s", 75*time.Second, func(ctx context.Context) {
		cutOffTheLeader(t, name, 30*time.Second)
		waitReady(t, opNS, name, 3, changeTimeout)
	})
	sameMembers(t, before, memberIDs(t, opNS, name))
}

// cutOffTheLeader cuts the leader of cluster name off from its peers for d
// (its clients still reach it), waits for the others to elect another
// leader, and heals it.
func cutOffTheLeader(t *testing.T, name string, d time.Duration) {
	t.Helper()
	leader, members := leaderAndMembers(t, name, false)
	cutOffMember(t, name, leader, members, d)
}

// leaderAndMembers reads the leader and the members of cluster name.
func leaderAndMembers(t *testing.T, name string, secure bool) (framework.Member, []framework.Member) {
	t.Helper()
	leader, err := f.Leader(t.Context(), opNS, name, secure)
	if err != nil {
		t.Fatal(err)
	}
	members, err := f.MemberList(t.Context(), opNS, name, secure)
	if err != nil {
		t.Fatal(err)
	}
	return leader, members
}

// cutOffMember cuts leader, one of members of cluster name, off from its
// peers for d (its clients still reach it), waits for the others to elect
// another leader, and heals it.
func cutOffMember(t *testing.T, name string, leader framework.Member, members []framework.Member, d time.Duration) {
	t.Helper()
	ctx := t.Context()
	isolate(t, "cut", opNS, leader.Name)
	healed := false
	t.Cleanup(func() {
		if !healed {
			isolate(t, "heal", opNS, leader.Name)
		}
	})
	cut := time.Now()
	t.Logf("cut the leader %s off from its peers", leader.Name)
	elected, err := newLeader(ctx, opNS, leader, members)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s leads the majority %.1fs after the cut", elected, time.Since(cut).Seconds())
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(d - time.Since(cut)):
	}
	isolate(t, "heal", opNS, leader.Name)
	healed = true
	t.Logf("healed %s after %.1fs", leader.Name, time.Since(cut).Seconds())
}

// isolate runs hack/local-cluster/pod-isolate.sh VERB on the pod, for etcd's peer port.
func isolate(t *testing.T, verb, ns, pod string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := f.Run(ctx, framework.Cmd{Name: "bash", Args: []string{f.Env.Path("hack", "local-cluster", "pod-isolate.sh"), verb, ns, pod, "2380"}})
	if err != nil {
		t.Fatalf("pod-isolate.sh %s %s/%s: %v\n%s", verb, ns, pod, err, out)
	}
}

// newLeader waits until the members other than old agree on a leader that is not
// old, asking them from inside one of them (the client service may route to old,
// which has no leader to tell of), and returns its name.
func newLeader(ctx context.Context, ns string, old framework.Member, members []framework.Member) (string, error) {
	var others []string
	var inside string
	names := map[uint64]string{}
	for _, m := range members {
		names[m.ID] = m.Name
		if m.ID != old.ID {
			others = append(others, m.ClientURLs...)
			inside = m.Name
		}
	}
	var elected string
	err := framework.WaitFor(ctx, time.Minute, time.Second, "the majority to elect a leader other than "+old.Name, func(ctx context.Context) (bool, string, error) {
		out, err := f.EtcdctlExec(ctx, ns, inside, "endpoint", "status", "-w", "json", "--endpoints="+strings.Join(others, ","))
		if err != nil {
			return false, err.Error(), nil
		}
		var statuses []struct {
			Status struct {
				Leader uint64 `json:"leader"`
			} `json:"Status"`
		}
		if err := json.Unmarshal([]byte(out), &statuses); err != nil {
			return false, "", fmt.Errorf("parse endpoint status %q: %w", out, err)
		}
		leaders := map[uint64]bool{}
		for _, s := range statuses {
			leaders[s.Status.Leader] = true
		}
		if len(statuses) != len(others) || len(leaders) != 1 || leaders[old.ID] || leaders[0] {
			return false, out, nil
		}
		elected = names[statuses[0].Status.Leader]
		return true, "", nil
	})
	return elected, err
}

// Two replicas of the operator share the Lease. The leader is frozen (SIGSTOP)
// and the cluster scaled 3 -> 5: the standby takes the Lease over and starts the
// scale; the old leader is thawed (SIGCONT) in the middle of it, with a view of
// the cluster 20 s old. It must not act on that view: the membership ends at
// exactly five members, one per pod, and stays there.
func TestChaosLongOperatorsFightOverLease(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "chaos-lease")
	installOperator(t, ns, framework.Install{})
	ctx := t.Context()
	if err := f.ScaleDeployment(ctx, ns, framework.OperatorDeployment, 2); err != nil {
		t.Fatal(err)
	}
	// A standby is Ready too: wait for both Ready and one labelled the leader.
	err := framework.WaitFor(ctx, framework.OperatorReadyTimeout, framework.Poll, "a leading and a standby operator", func(ctx context.Context) (bool, string, error) {
		pods, err := f.DeploymentPods(ctx, ns, framework.OperatorDeployment)
		if err != nil {
			return false, err.Error(), nil
		}
		live := framework.LivePods(pods)
		leaders := 0
		for _, p := range live {
			if p.Labels[operatorrun.LeaderLabel] == "true" {
				leaders++
			}
		}
		return len(live) == 2 && len(framework.ReadyPods(live)) == 2 && leaders == 1, framework.DescribePods(pods), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	name := framework.UniqueName("chaos-lease")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, ns, name, 3, bootstrapTimeout(3))
	var oldLeader string
	var frozenAt time.Time
	underLoad(t, ns, name, "operators-fight-over-lease", 120*time.Second, func(ctx context.Context) {
		old, err := leaseHolder(ctx, ns, framework.OperatorDeployment)
		if err != nil {
			t.Fatal(err)
		}
		oldLeader = old
		pid, err := containerPID(ctx, ns, old, "etcd-operator")
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP %d: %v", pid, err)
		}
		thawed := false
		thaw := func() {
			if thawed {
				return
			}
			thawed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && err != syscall.ESRCH {
				t.Errorf("SIGCONT %d: %v", pid, err)
			}
		}
		t.Cleanup(thaw)
		frozen := time.Now()
		frozenAt = frozen
		t.Logf("froze the leading operator %s (pid %d)", old, pid)
		if _, err := f.PatchClusterSpec(ctx, ns, name, map[string]any{"size": 5}); err != nil {
			t.Fatal(err)
		}
		var standby string
		err = framework.WaitFor(ctx, 2*time.Minute, framework.Poll, "the standby to take the Lease over", func(ctx context.Context) (bool, string, error) {
			h, err := leaseHolder(ctx, ns, framework.OperatorDeployment)
			if err != nil {
				return false, err.Error(), nil
			}
			standby = h
			return h != old, "held by " + h, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s took the Lease over %.1fs after %s froze", standby, time.Since(frozen).Seconds(), old)
		err = framework.WaitFor(ctx, changeTimeout, framework.Poll, "the new leader to add a fourth member", func(ctx context.Context) (bool, string, error) {
			pods, err := f.ClusterPods(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			return len(framework.LivePods(pods)) >= 4, framework.DescribePods(pods), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		atThaw := memberIDs(t, ns, name)
		thaw()
		t.Logf("thawed %s after %.1fs, in the middle of the scale; members %v", old, time.Since(frozen).Seconds(), atThaw)
		if err := framework.WaitFor(ctx, bootstrapTimeout(3), framework.Poll, "5 ready members",
			framework.Both(f.ReadyMembers(ns, name, 5), f.ReadyPodsCond(ns, name, 5))); err != nil {
			t.Fatal(err)
		}
		// A thawed leader acting on its old view (size 3) would have removed a
		// member the new one added; the new one would then add another.
		// By ID: a member added but not started yet has no name.
		final := memberIDs(t, ns, name)
		for n, id := range atThaw {
			if !slices.Contains(slices.Collect(maps.Values(final)), id) {
				t.Errorf("member %q (%x), there when the old leader was thawed, is gone: members now %v", n, id, final)
			}
		}
	})
	if t.Failed() {
		return
	}
	// Long enough for a stale operator to have added or removed a member: the
	// cluster's reconcile runs every few seconds.
	err = framework.Holds(ctx, 20*time.Second, framework.Poll, "five members, one per pod", func(ctx context.Context) (bool, string, error) {
		members, err := f.MemberList(ctx, ns, name, false)
		if err != nil {
			return false, err.Error(), nil
		}
		pods, err := f.ClusterPods(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		var names []string
		for _, m := range members {
			names = append(names, m.Name)
		}
		slices.Sort(names)
		podNames := framework.PodNames(framework.LivePods(pods))
		slices.Sort(podNames)
		return slices.Equal(names, podNames) && len(names) == 5, fmt.Sprintf("members %v, pods %v", names, podNames), nil
	})
	if err != nil {
		t.Error(err)
	}
	logOperatorRestarts(t, ns)
	oldLeaderActed(t, ns, oldLeader, frozenAt)
}

// oldLeaderActed fails the test if the operator pod old logged an action pass
// (pkg/cluster logs those at info, idle ones at debug) after it was frozen at
// frozen: a frozen process logs nothing, so such a line is from after its thaw,
// when it no longer held the Lease. Its container restarted on losing the Lease,
// so the log is the previous container's if there is one.
func oldLeaderActed(t *testing.T, ns, old string, frozen time.Time) {
	t.Helper()
	ctx := t.Context()
	log, err := f.Kubectl(ctx, "logs", "-n", ns, old, "--previous")
	if err != nil {
		log, err = f.Kubectl(ctx, "logs", "-n", ns, old)
	}
	if err != nil {
		t.Errorf("log of the old leader %s: %v", old, err)
		return
	}
	var after []string
	for _, line := range strings.Split(log, "\n") {
		ts, _, ok := strings.Cut(strings.TrimPrefix(line, `time="`), `"`)
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339, ts)
		if err != nil || !at.After(frozen.Add(time.Second)) {
			continue
		}
		after = append(after, line)
		if strings.Contains(line, "level=info") && strings.Contains(line, `msg=pass`) {
			t.Errorf("the old leader %s acted after it was thawed: %s", old, line)
		}
	}
	t.Logf("the old leader %s after its thaw:\n%s", old, strings.Join(after, "\n"))
}

// leaseHolder is the pod that holds the operator's leader-election Lease.
func leaseHolder(ctx context.Context, ns, lock string) (string, error) {
	l, err := f.Kube.CoordinationV1().Leases(ns).Get(ctx, lock, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return "", fmt.Errorf("lease %s/%s has no holder", ns, lock)
	}
	return *l.Spec.HolderIdentity, nil
}

// containerPID finds a pod's running container on this node through containerd
// (the suite runs as root on the node) and returns its process id.
func containerPID(ctx context.Context, ns, pod, container string) (int, error) {
	ctr := []string{"--address", "/run/containerd/containerd.sock", "--namespace", "k8s.io"}
	filter := fmt.Sprintf(`labels."io.kubernetes.pod.namespace"==%s,labels."io.kubernetes.pod.name"==%s,labels."io.kubernetes.container.name"==%s`, ns, pod, container)
	ids, err := f.Run(ctx, framework.Cmd{Name: "ctr", Args: append(ctr, "containers", "ls", "-q", filter)})
	if err != nil {
		return 0, fmt.Errorf("ctr containers ls (the suite must run as root on the node): %w", err)
	}
	tasks, err := f.Run(ctx, framework.Cmd{Name: "ctr", Args: append(ctr, "tasks", "ls")})
	if err != nil {
		return 0, fmt.Errorf("ctr tasks ls: %w", err)
	}
	want := strings.Fields(ids)
	for _, line := range strings.Split(tasks, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 3 && fields[2] == "RUNNING" && slices.Contains(want, fields[0]) {
			return strconv.Atoi(fields[1])
		}
	}
	return 0, fmt.Errorf("no running container %s of pod %s/%s on this node (containers %v)", container, ns, pod, want)
}

// logOperatorRestarts says which operator pods restarted: one that lost its Lease
// exits (operatorrun.ErrLostLeadership) and comes back as a standby.
func logOperatorRestarts(t *testing.T, ns string) {
	pods, err := f.DeploymentPods(t.Context(), ns, framework.OperatorDeployment)
	if err != nil {
		t.Log(err)
		return
	}
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			t.Logf("operator pod %s: %d restart(s)", p.Name, cs.RestartCount)
		}
	}
}

// A cluster whose quorum is lost is restored from its backup, and both operators
// the restore needs are killed in the middle of it: the restore operator once the
// seed member exists, etcd-operator (under the checker) while the restored
// cluster grows back to its size. The restore must finish (or fail and succeed
// when made again), with exactly the backed-up keys and nothing written after
// the backup, and no acknowledged write of the clients may be lost.
func TestChaosLongOperatorKillDuringRestore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bed := newBackupBed(t, "chaos-restore", true)
	ns, srv, bucket, secretName := bed.ns, bed.srv, bed.bucket, bed.secret

	name := framework.UniqueName("chaos-restore")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	_, oldPods := waitReady(t, ns, name, 3, bootstrapTimeout(3))
	const backedUp = 300
	putKeys(t, ns, name, "/e2e/before/", backedUp)
	key := "backups/" + name + ".db"
	backUp(t, ns, name, srv, bucket, key, secretName)
	putKeys(t, ns, name, "/e2e/after/", 50)
	for _, victim := range oldPods[:2] {
		if err := f.KillPod(ctx, ns, victim); err != nil {
			t.Fatal(err)
		}
	}
	broken := waitQuorumLost(t, ns, name)

	newRestore := func(ctx context.Context) {
		er := &api.EtcdRestore{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: api.RestoreSpec{
				BackupStorageType: api.BackupStorageTypeS3,
				RestoreSource: api.RestoreSource{S3: &api.S3RestoreSource{
					Path: bucket + "/" + key, AWSSecret: secretName, Endpoint: srv.Endpoint, ForcePathStyle: true,
				}},
				EtcdCluster: api.EtcdClusterRef{Name: name},
			},
		}
		if _, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Create(ctx, er, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	isOld := func(p corev1.Pod) bool { return slices.Contains(oldPods, p.Name) }
	oldService, err := f.Kube.CoreV1().Services(ns).Get(ctx, name+"-client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	requested := time.Now()
	newRestore(ctx)
	err = framework.WaitFor(ctx, restoreTimeout, time.Second/2, "the seed member", func(ctx context.Context) (bool, string, error) {
		pods, err := f.ClusterPods(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return slices.ContainsFunc(framework.LivePods(pods), func(p corev1.Pod) bool { return !isOld(p) }), framework.DescribePods(pods), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	killDeployment(t, ns, restoreOperatorDeployment, "the seed member exists", name)
	// The checker starts once the client Service routes to a restored member:
	// it judges the clients of the restored cluster (those of the old one lose
	// what was written after the backup, which the disaster-recovery scenario
	// bounds). The Service is the old one, kept through the restore.
	err = framework.WaitFor(ctx, restoreTimeout, time.Second/2, "the client Service to route to a restored member", func(ctx context.Context) (bool, string, error) {
		svc, err := f.Kube.CoreV1().Services(ns).Get(ctx, name+"-client", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if svc.UID != oldService.UID || svc.Spec.ClusterIP != oldService.Spec.ClusterIP {
			return false, "", fmt.Errorf("the restore replaced client Service %s (uid %s, %s) by uid %s, %s", svc.Name, oldService.UID, oldService.Spec.ClusterIP, svc.UID, svc.Spec.ClusterIP)
		}
		eps, err := f.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc.Name})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, es := range eps.Items {
			for _, ep := range es.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready && ep.TargetRef != nil && !slices.Contains(oldPods, ep.TargetRef.Name) {
					return true, "", nil
				}
			}
		}
		return false, "no ready endpoint on a restored member", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	underLoad(t, ns, name, "operator-kill-during-restore", 90*time.Second, func(ctx context.Context) {
		pods, err := f.ClusterPods(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		killDeployment(t, ns, framework.OperatorDeployment, fmt.Sprintf("the restored cluster has %d ready member(s)", len(framework.ReadyPods(pods))), name)

		st := waitRestoreEnd(t, ns, name)
		if st.Phase == api.RestorePhaseFailed {
			// A failed restore must say why and be retryable by making it again.
			t.Logf("the restore failed (%s); making it again", st.Reason)
			if st.Succeeded || st.Reason == "" {
				t.Errorf("failed restore's status %+v: want a reason and Succeeded false", st)
			}
			deleteRestore(t, ns, name)
			newRestore(ctx)
			st = waitRestoreEnd(t, ns, name)
		}
		if st.Phase != api.RestorePhaseCompleted || !st.Succeeded {
			t.Fatalf("the restore ended %s: %+v", st.Phase, st)
		}
		// Completed is only said of a cluster that serves at full size with the
		// whole backup: nothing half-restored.
		if n := countKeys(t, ns, name, "/e2e/before/"); n != backedUp {
			t.Errorf("the restore said Completed with %d of the %d backed-up keys", n, backedUp)
		}
		waitReady(t, ns, name, 3, changeTimeout, oldPods...)
		t.Logf("restored %.1fs after the EtcdRestore was made", time.Since(requested).Seconds())
	})
	if t.Failed() {
		return
	}
	cl, err := f.GetCluster(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if cl.UID == broken.UID || cl.Spec.Paused {
		t.Errorf("the cluster after the restore: uid %s (old %s), paused %v", cl.UID, broken.UID, cl.Spec.Paused)
	}
	if n := countKeys(t, ns, name, "/e2e/after/"); n != 0 {
		t.Errorf("%d keys written after the backup are there; the cluster was not restored from it", n)
	}
	for _, d := range []string{framework.OperatorDeployment, restoreOperatorDeployment} {
		if err := f.WaitDeploymentReady(ctx, ns, d, 1, framework.OperatorReadyTimeout); err != nil {
			t.Error(err)
		}
	}
}

// killDeployment kills every pod of an operator's Deployment, saying where the
// restore of cluster stood.
func killDeployment(t *testing.T, ns, deployment, when, cluster string) {
	t.Helper()
	ctx := t.Context()
	pods, err := f.DeploymentPods(ctx, ns, deployment)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range framework.LivePods(pods) {
		if err := f.KillPod(ctx, ns, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	phase := "?"
	if er, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Get(ctx, cluster, metav1.GetOptions{}); err == nil {
		phase = string(er.Status.Phase)
	}
	t.Logf("killed %s (%d pods) when %s; restore phase %s", deployment, len(pods), when, phase)
}

// waitRestoreEnd waits for the EtcdRestore to be Completed or Failed.
func waitRestoreEnd(t *testing.T, ns, name string) api.RestoreStatus {
	t.Helper()
	var st api.RestoreStatus
	err := framework.WaitFor(t.Context(), restoreTimeout, framework.Poll, "EtcdRestore "+name+" to end", func(ctx context.Context) (bool, string, error) {
		er, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "", err
		}
		if err != nil {
			return false, err.Error(), nil
		}
		st = er.Status
		return st.Phase == api.RestorePhaseCompleted || st.Phase == api.RestorePhaseFailed,
			fmt.Sprintf("phase %q reason %q", st.Phase, st.Reason), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
