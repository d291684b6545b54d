//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/checker"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestChaosDisasterRecoveryFromTheNewestBackup opts a cluster on emptyDir volumes
// into disaster recovery from backups and kills every member's pod while a
// checker writes and reads: no member's data is left. After the grace period
// the operator asks the restore operator (an EtcdRestore of its own) to restore
// the cluster from its newest successful EtcdBackup, and the cluster comes back
// at full size with exactly the keys that backup holds. The clients lose what
// was acknowledged after the backup, and only that: every write acknowledged
// before the backup began is there after the recovery. They reach the restored
// cluster on the client Service's old address, and their watch, resumed from
// where the lost cluster was, is told the history is compacted and goes on
// (the restore bumps the revision past the lost cluster's) instead of waiting
// for revisions the restored cluster counts again. The restored cluster's
// status.recovery records the recovery.
func TestChaosDisasterRecoveryFromTheNewestBackup(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bed := newBackupBed(t, "drbackup", true)
	ns, bucket, srv, secret := bed.ns, bed.bucket, bed.srv, bed.secret

	name, pods := recoverableFromBackup(t, ns, "drb")
	writeKeys(t, ns, name, "/e2e/backed-up")
	const scenario, d, settle = "every-emptydir-member-lost-dr-backup", 90 * time.Second, 4 * time.Minute
	// The history cannot be linearizable (the restore goes back to the
	// backup), and the bound below judges the loss: porcupine only reports.
	c := startLoadUntilRecovered(t, ns, name, scenario, d, settle)
	// A write acknowledged before this linearizable read is in it, and in the
	// backup taken after it.
	ackedBefore := listKeys(t, ns, name, c.Appends())
	ipBefore := clientIP(t, ns, name)
	backUp(t, ns, name, srv, bucket, "backups/"+name+".db", secret)
	putKeys(t, ns, name, "/e2e/after/", 10)

	lostAt := killEveryMember(t, ns, pods)
	t.Logf("killed every member %v: no member's data is left", pods)

	var recovery string
	err := framework.WaitFor(ctx, restoreTimeout, framework.Poll, "the operator's EtcdRestore of "+name+" to complete", func(ctx context.Context) (bool, string, error) {
		list, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, r := range list.Items {
			if r.Spec.EtcdCluster.Name != name {
				continue
			}
			recovery = r.Name
			switch r.Status.Phase {
			case api.RestorePhaseCompleted:
				return true, "", nil
			case api.RestorePhaseFailed:
				return false, "", fmt.Errorf("EtcdRestore %s failed: %s", r.Name, r.Status.Reason)
			}
			return false, fmt.Sprintf("EtcdRestore %s: %s %s", r.Name, r.Status.Phase, r.Status.Reason), nil
		}
		return false, "no EtcdRestore yet", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, name, 3, changeTimeout, pods...)
	recovered := time.Since(lostAt)
	t.Logf("restored from the newest backup by EtcdRestore %s and 3/3 ready %.1fs after every member was lost", recovery, recovered.Seconds())
	// The restore re-creates the cluster: its status still records the
	// recovery, as the docs promise.
	if got, err := f.GetCluster(ctx, ns, name); err != nil {
		t.Fatal(err)
	} else if rec := got.Status.Recovery; rec == nil || rec.FromBackup == "" {
		t.Errorf("status.recovery = %+v after a recovery from a backup, want its record", rec)
	} else {
		t.Logf("status.recovery: %s", rec.Message)
	}
	// The restore keeps the client Service: while it exists its address refuses
	// connections until a member is ready, and then routes them to it; made
	// again, it leaves its address routed nowhere in between, and connections
	// made then stay there.
	ipAfter := clientIP(t, ns, name)
	t.Logf("client service %s-client: %s before the restore, %s after", name, ipBefore, ipAfter)
	if ipAfter != ipBefore {
		t.Errorf("the restore replaced client service %s-client (%s) by %s", name, ipBefore, ipAfter)
	}
	r := judged(t, scenario, c, checkerWait(d, settle), recovered, func(r checker.Result) error {
		lost := missingKeys(t, ns, name, c.Appends(), ackedBefore)
		switch {
		case len(lost) > 0:
			return fmt.Errorf("%d of the %d writes acknowledged before the backup are lost, e.g. %v: the loss is not bounded by the backup",
				len(lost), len(ackedBefore), lost[:min(5, len(lost))])
		case r.WatchMissed > 0 || r.WatchOutOfOrder > 0:
			// Writes to the restored cluster that the watch never saw: it
			// resumed above the restored cluster's revisions.
			return fmt.Errorf("the watch missed %d acknowledged writes that are there and saw %d out of order: the restore took the revision back",
				r.WatchMissed, r.WatchOutOfOrder)
		}
		return nil
	})
	if !t.Failed() {
		t.Logf("%s: %d acknowledged writes lost, none of the %d acknowledged before the backup began; linearizable: %s (a restore to an older revision is not)",
			scenario, r.AckedLost, len(ackedBefore), r.Linearizable)
	}
	expectKeys(t, ns, name, "/e2e/backed-up")
	if n := countKeys(t, ns, name, "/e2e/after/"); n != 0 {
		t.Errorf("%d keys written after the backup are there; the cluster was not restored from it", n)
	}
	if !strings.Contains(eventsOf(t, ns, name), "DisasterRecovery") {
		t.Error("no DisasterRecovery event on the cluster")
	}
}

// listKeys lists the keys under prefix with a linearizable read.
func listKeys(t *testing.T, ns, cluster, prefix string) []string {
	t.Helper()
	var keys []string
	err := framework.WaitFor(t.Context(), dataTimeout, time.Second, "the keys under "+prefix,
		func(ctx context.Context) (bool, string, error) {
			out, err := f.Etcdctl(ctx, ns, cluster, false, "get", prefix, "--prefix", "--keys-only")
			if err != nil {
				return false, err.Error(), nil
			}
			keys = keyLines(out)
			return true, "", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// memberKeys lists the keys under prefix in one member's own store (a
// serializable read of the member pod): what that member holds, whatever the
// others have.
func memberKeys(t *testing.T, ns, pod, prefix string) []string {
	t.Helper()
	out, err := f.EtcdctlExec(t.Context(), ns, pod, "--endpoints=http://localhost:2379", "get", prefix, "--prefix", "--keys-only", "--consistency=s")
	if err != nil {
		t.Fatalf("the keys under %s in %s: %v", prefix, pod, err)
	}
	return keyLines(out)
}

// keyLines are the keys etcdctl's `get --keys-only` printed.
func keyLines(out string) []string {
	var keys []string
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			keys = append(keys, line)
		}
	}
	return keys
}

// missingKeys are the keys of want that the cluster does not hold under
// prefix now.
func missingKeys(t *testing.T, ns, cluster, prefix string, want []string) []string {
	t.Helper()
	present := map[string]bool{}
	for _, k := range listKeys(t, ns, cluster, prefix) {
		present[k] = true
	}
	var missing []string
	for _, k := range want {
		if !present[k] {
			missing = append(missing, k)
		}
	}
	return missing
}

// clientIP is the cluster IP and the UID of the cluster's client Service: the
// restore keeps that very Service.
func clientIP(t *testing.T, ns, cluster string) string {
	t.Helper()
	svc, err := f.Kube.CoreV1().Services(ns).Get(t.Context(), cluster+"-client", metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("cluster IP %s (uid %s)", svc.Spec.ClusterIP, svc.UID)
}

// recoverableFromBackup creates a cluster of 3 on emptyDir volumes, in
// disaster recovery from its backups, and waits for it to be Ready; it
// returns its name and its member pods.
func recoverableFromBackup(t *testing.T, ns, base string) (string, []string) {
	t.Helper()
	name := framework.UniqueName(base)
	cl := framework.NewCluster(name, 3, "3.5.21")
	cl.Spec.DisasterRecovery = &api.DisasterRecoveryPolicy{Enabled: true, GracePeriodInSecond: 10, FromBackup: true}
	createClusterIn(t, ns, ns, cl)
	_, pods := waitReady(t, ns, name, 3, bootstrapTimeout(3))
	return name, pods
}

// startLoadUntilRecovered starts a checker on the cluster for d, with settle
// for the recovery after it, and leaves it loadLead to run.
func startLoadUntilRecovered(t *testing.T, ns, name, scenario string, d, settle time.Duration) *framework.Checker {
	t.Helper()
	c, err := f.StartChecker(t.Context(), framework.CheckerPod{Namespace: ns, Cluster: name, Scenario: scenario, Duration: d, Settle: settle, CheckTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Delete)
	pause(t, loadLead)
	return c
}

// killEveryMember kills the pods of every member at once, and returns when.
func killEveryMember(t *testing.T, ns string, pods []string) time.Time {
	t.Helper()
	for _, p := range pods {
		if err := f.KillPod(t.Context(), ns, p); err != nil {
			t.Fatal(err)
		}
	}
	return time.Now()
}
