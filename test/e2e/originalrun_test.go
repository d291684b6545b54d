//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// The original coreos/etcd-operator v0.9.4 itself, built from its source by
// hack/original/build.sh and run by hack/original/deploy.sh, as the clusters
// this operator is to adopt are run by it.

// originalEtcdVersion is the etcd the original's clusters run here: its
// member pods' probes run /bin/sh, which only the 3.4 image has.
const originalEtcdVersion = "3.4.23"

// runOriginalScript runs hack/original/<script> with args against the suite's
// cluster and logs its output, which says each step.
func runOriginalScript(ctx context.Context, t *testing.T, script string, args ...string) error {
	t.Helper()
	cmd := exec.CommandContext(ctx, "bash", append([]string{f.Env.Path("hack", "original", script)}, args...)...)
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+f.Env.Kubeconfig, "KUBECTL="+f.Env.Kubectl)
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("hack/original/%s %s (%.0fs):\n%s", script, strings.Join(args, " "), time.Since(start).Seconds(), lastLines(string(out), 80))
	if err != nil {
		return fmt.Errorf("hack/original/%s %s: %w", script, strings.Join(args, " "), err)
	}
	return nil
}

// deployOriginalItself runs the original's operators in ns with deploy.sh
// (given its options besides --replace-crds), which replaces the
// cluster-wide CRDs by the hand-made ones the original needs; undeploy.sh and
// this tree's definitions come back at the end.
func deployOriginalItself(t *testing.T, ns string, options ...string) {
	t.Helper()
	putBackCRDsAtEnd(t) // registered first, so it runs after undeploy.sh
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		if t.Failed() {
			t.Logf("======== the original's etcd-operator log\n%s", lastLines(f.DeploymentLogs(ctx, ns, "etcd-operator"), 150))
		}
		if err := runOriginalScript(ctx, t, "undeploy.sh", ns, "--put-back-crds"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	// Registered after undeploy.sh, so it runs before it and dumps what failed.
	dumpOnFailure(t, ns)
	// The first build of the original takes minutes.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	if err := runOriginalScript(ctx, t, "deploy.sh", append([]string{ns, "--replace-crds"}, options...)...); err != nil {
		t.Fatal(err)
	}
}

// originalClusterStatus is the status the original wrote, read without this
// tree's types: phase, size and ready members.
func originalClusterStatus(ctx context.Context, ns, name string) (string, error) {
	out, err := f.Kubectl(ctx, "-n", ns, "get", "etcdclusters.etcd.database.coreos.com", name,
		"-o", "jsonpath={.status.phase} {.status.size} {.status.members.ready}")
	return strings.TrimSpace(out), err
}

// TestOriginalItselfRunsAThreeMemberCluster deploys the original v0.9.4 as its
// example did and creates its example cluster (3 members): the three member
// pods run and are Ready, etcd reports all three members healthy, a key
// written through the client Service reads back, and the original's status
// says Running with 3 members. Its peer Service publishes unready addresses,
// the one change build.sh makes to its code. Deleting the EtcdCluster removes
// the pods through their ownerReferences.
//
// Not parallel: deploy.sh replaces the cluster-wide CRDs the other tests use,
// and they are put back at the end.
func TestOriginalItselfRunsAThreeMemberCluster(t *testing.T) {
	const name = "example-etcd-cluster"
	ctx := t.Context()
	ns := newNamespace(t, "original-itself")
	deployOriginalItself(t, ns, "--only-etcd-operator")

	if err := f.CreateFromExample(ctx, ns, originalManifest("example-etcd-cluster.yaml"),
		`s/"3.2.13"/"`+originalEtcdVersion+`"/`); err != nil {
		t.Fatal(err)
	}
	// The original adds one member per 8 s tick after the seed.
	waitOriginalMembers(t, ns, name, "3 Running and Ready members of the original's cluster")
	pods, err := f.ClusterPods(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if img := framework.EtcdContainerImage(&p); img != "quay.io/coreos/etcd:v"+originalEtcdVersion {
			t.Errorf("member %s runs %s, want the original's image name for %s", p.Name, img, originalEtcdVersion)
		}
	}

	// The status of every member, not their health: etcdctl 3.4 prints
	// `endpoint health` on stderr, which the exec does not return.
	err = framework.WaitFor(ctx, 2*time.Minute, 5*time.Second, "etcd endpoint status of all 3 members",
		func(ctx context.Context) (bool, string, error) {
			out, err := f.Etcdctl(ctx, ns, name, false, "endpoint", "status", "--cluster")
			if err != nil {
				return false, err.Error(), nil
			}
			return strings.Count(out, ", "+originalEtcdVersion+", ") == 3, strings.TrimSpace(out), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	members, err := f.MemberList(ctx, ns, name, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 3 {
		t.Fatalf("etcd lists %d members, want 3: %+v", len(members), members)
	}
	if err := f.PutAndGet(ctx, ns, name, false, "/original", "v0.9.4", time.Minute); err != nil {
		t.Fatal(err)
	}

	err = framework.WaitFor(ctx, time.Minute, 5*time.Second, "the original's status: Running, size 3, 3 ready",
		func(ctx context.Context) (bool, string, error) {
			st, err := originalClusterStatus(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			fields := strings.Fields(st)
			return len(fields) >= 2 && fields[0] == "Running" && fields[1] == "3" && strings.Count(st, name+"-") == 3, st, nil
		})
	if err != nil {
		t.Fatal(err)
	}

	peer, err := f.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !peer.Spec.PublishNotReadyAddresses {
		t.Errorf("peer Service %s does not publish unready addresses: the image was not built from the patched source", name)
	}

	if _, err := f.Kubectl(ctx, "-n", ns, "delete", "etcdclusters.etcd.database.coreos.com", name, "--wait=true"); err != nil {
		t.Fatal(err)
	}
	err = framework.WaitFor(ctx, 2*time.Minute, 5*time.Second, "the members gone with their EtcdCluster",
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.ClusterPods(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			return len(pods) == 0, framework.DescribePods(pods), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// originalBackupStatus is the status the original's backup operator wrote:
// succeeded, and the reason under its capitalised key.
func originalBackupStatus(ctx context.Context, ns, name string) (string, error) {
	out, err := f.Kubectl(ctx, "-n", ns, "get", "etcdbackups.etcd.database.coreos.com", name,
		"-o", "jsonpath={.status.succeeded} {.status.Reason}")
	return strings.TrimSpace(out), err
}

// TestBackupsTheOriginalItselfWroteRestoreHere: the original v0.9.4 runs its
// example cluster and its backup operator takes the walkthroughs' one-shot
// backup and a periodic one (every 5 s instead of 125 s, none pruned), named
// <path>_v<revision>_<time> by the original. Its own restore operator
// restores the one-shot backup over the cluster, as its walkthrough does:
// the keys written before it, none written after. The original is then removed,
// this operator is installed in the namespace, and an EtcdRestore names the
// periodic object, colons and all: the restored cluster holds the keys
// written before that backup and none written after it.
//
// Not parallel: deploy.sh replaces the cluster-wide CRDs the other tests use.
func TestBackupsTheOriginalItselfWroteRestoreHere(t *testing.T) {
	const name, keys = "example-etcd-cluster", 200
	ctx := t.Context()
	ns := newNamespace(t, "original-backups")
	deployOriginalItself(t, ns)

	if err := f.CreateFromExample(ctx, ns, originalManifest("example-etcd-cluster.yaml"),
		`s/"3.2.13"/"`+originalEtcdVersion+`"/`); err != nil {
		t.Fatal(err)
	}
	waitOriginalMembers(t, ns, name, "3 Ready members of the original's cluster")
	putKeys(t, ns, name, "/e2e/before/", keys)

	bucket := "e2e-original-itself"
	srv := startS3Server(t, bucket)
	secret := createS3Secret(t, ns, srv)
	endpoints := framework.ClientURL(name, false)
	oneShot := bucket + "/" + name + ".backup"
	if err := f.CreateFromExample(ctx, ns, originalManifest("backup_cr.yaml"), walkthroughSed(srv, oneShot, secret, endpoints)...); err != nil {
		t.Fatal(err)
	}
	periodicKey := "periodic/" + name + ".backup"
	if err := f.CreateFromExample(ctx, ns, originalManifest("periodic_backup_cr.yaml"),
		append(walkthroughSed(srv, bucket+"/"+periodicKey, secret, endpoints),
			// Every 5 s, and none pruned: the one chosen below must stay.
			"s/backupIntervalInSecond: 125/backupIntervalInSecond: 5/", "s/maxBackups: 4/maxBackups: 0/")...); err != nil {
		t.Fatal(err)
	}
	err := framework.WaitFor(ctx, backupTimeout, 2*time.Second, "the original's one-shot backup to succeed",
		func(ctx context.Context) (bool, string, error) {
			st, err := originalBackupStatus(ctx, ns, exampleBackup)
			if err != nil {
				return false, err.Error(), nil
			}
			return st == "true", st, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Head(ctx, bucket, name+".backup"); err != nil {
		t.Fatalf("the one-shot backup is not at the path as given: %v", err)
	}
	var periodic string
	err = framework.WaitFor(ctx, backupTimeout, 2*time.Second, "a periodic backup named as the original names them",
		func(ctx context.Context) (bool, string, error) {
			objs, err := srv.List(ctx, bucket, periodicKey+"_v")
			if err != nil {
				return false, err.Error(), nil
			}
			for _, o := range objs {
				if originalPeriodicName.MatchString(strings.TrimPrefix(o.Key, periodicKey)) {
					periodic = o.Key
					return true, o.Key, nil
				}
			}
			return false, fmt.Sprintf("%d objects under %s_v", len(objs), periodicKey), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the original wrote %s/%s", bucket, periodic)
	// Its backup operator removes its finalizer.
	if _, err := f.Kubectl(ctx, "-n", ns, "delete", "etcdbackups.etcd.database.coreos.com", examplePeriodicBackup,
		"--wait=true", "--timeout=2m"); err != nil {
		t.Fatal(err)
	}
	// After the backup chosen: a restore from it must not have these.
	putKeys(t, ns, name, "/e2e/after/", 10)

	// The original's restore operator restores the one-shot backup over the
	// running cluster, as its walkthrough does: the cluster is made again
	// from the backup its seed pod fetches from the restore operator with
	// the tutum/curl image (hack/original/build.sh makes one locally).
	if err := f.CreateFromExample(ctx, ns, originalManifest("restore_cr.yaml"), walkthroughSed(srv, oneShot, secret, "")...); err != nil {
		t.Fatal(err)
	}
	err = framework.WaitFor(ctx, restoreTimeout, 2*time.Second, "the original's restore to succeed",
		func(ctx context.Context) (bool, string, error) {
			out, err := f.Kubectl(ctx, "-n", ns, "get", "etcdrestores.etcd.database.coreos.com", name,
				"-o", "jsonpath={.status.succeeded} {.status.reason}")
			if err != nil {
				return false, err.Error(), nil
			}
			return strings.HasPrefix(strings.TrimSpace(out), "true"), out, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	waitOriginalMembers(t, ns, name, "3 Ready members of the cluster the original restored")
	if n := countKeys(t, ns, name, "/e2e/before/"); n != keys {
		t.Errorf("the cluster the original restored has %d keys written before its one-shot backup, want %d", n, keys)
	}
	if n := countKeys(t, ns, name, "/e2e/after/"); n != 0 {
		t.Errorf("the cluster the original restored has %d keys written after its one-shot backup, want none", n)
	}

	// The original goes (its periodic EtcdBackup loses its finalizer while its
	// backup operator still runs), and this tree's CRDs come back.
	if err := runOriginalScript(ctx, t, "undeploy.sh", ns, "--put-back-crds"); err != nil {
		t.Fatal(err)
	}
	installOperator(t, ns, framework.Install{})
	t.Cleanup(func() { releaseRestores(t, ns) })
	deployExampleOperator(t, ns, f.Env.Path("example", "etcd-restore-operator", "deployment.yaml"))
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	_, oldPods := waitReady(t, ns, name, 3, bootstrapTimeout(3))

	if _, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Create(ctx, newS3Restore(name, srv, bucket+"/"+periodic, secret), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRestore(t, ns, name, restoreTimeout, api.RestorePhaseCompleted)
	waitReady(t, ns, name, 3, changeTimeout, oldPods...)
	if n := countKeys(t, ns, name, "/e2e/before/"); n != keys {
		t.Errorf("the restored cluster has %d keys written before the original's backup, want %d", n, keys)
	}
	if n := countKeys(t, ns, name, "/e2e/after/"); n != 0 {
		t.Errorf("the restored cluster has %d keys written after the original's backup, want none", n)
	}
}

// waitOriginalMembers waits up to 5 minutes until cluster name of ns, which
// the original runs, has 3 pods, all Ready; what says what is waited for.
func waitOriginalMembers(t *testing.T, ns, name, what string) {
	t.Helper()
	err := framework.WaitFor(t.Context(), 5*time.Minute, 5*time.Second, what,
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.ClusterPods(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			return len(framework.ReadyPods(pods)) == 3 && len(pods) == 3, framework.DescribePods(pods), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// originalPeriodicName is what the original appended to a periodic backup's
// path: _v<revision>_<UTC time as 2006-01-02-15:04:05>.
var originalPeriodicName = regexp.MustCompile(`^_v[0-9]+_[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{2}:[0-9]{2}:[0-9]{2}$`)

// memberPodFacts are what must not change when a member is adopted: its
// pod's UID, its etcd container's restart count and its pod layout.
type memberPodFacts struct {
	uid           string
	restarts      int32
	restartPolicy corev1.RestartPolicy
}

// memberPodsNow reads the facts of a cluster's pods by name.
func memberPodsNow(ctx context.Context, ns, name string) (map[string]memberPodFacts, error) {
	pods, err := f.ClusterPods(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	out := map[string]memberPodFacts{}
	for _, p := range pods {
		facts := memberPodFacts{uid: string(p.UID), restartPolicy: p.Spec.RestartPolicy}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "etcd" {
				facts.restarts = cs.RestartCount
			}
		}
		out[p.Name] = facts
	}
	return out, nil
}

// TestOriginalItselfRunsAClusterThisOperatorAdopts: the original v0.9.4
// runs a 3-member cluster holding data; it is stopped (its Deployment
// scaled to 0) and the suite's shared operator takes the cluster over
// without restarting any member: the same pods (UIDs, restart counts, the
// original's layout), the same member IDs, the data readable, the status
// filled (Running, the three members ready, the version they run), and one
// AdoptedFromTheOriginal event naming every member. Writes keep working,
// and nothing is changed while the operator keeps managing the cluster.
// Then spec.adoption.convert, under the checker: every member the original
// made is replaced by one of this operator's layout, the history stays
// linearizable with no acknowledged write lost, every key is kept, and the
// converted cluster upgrades from 3.4 to 3.5 as any other.
//
// The shared operator runs in its own namespace, where the original's
// Deployment (also called etcd-operator) cannot run beside it: the original
// runs cluster-wide from a namespace of its own and manages the cluster in
// the shared namespace through the scope annotation, which the shared
// operator, namespaced, leaves alone. Removing the annotation once the
// original is stopped hands the cluster over, as starting this operator in
// the original's place does for a user.
//
// Not parallel: deploy.sh replaces the cluster-wide CRDs the other tests use.
func TestOriginalItselfRunsAClusterThisOperatorAdopts(t *testing.T) {
	const name, keys = "adopted-original", 100
	ctx := t.Context()
	ns := newNamespace(t, "original-adopted")
	deployOriginalItself(t, ns, "--only-etcd-operator", "--cluster-wide")
	membersBefore, podsBefore := originalRunsACluster(t, ns, name, keys, nil)

	// The original stops; the shared operator takes the cluster over.
	stopTheOriginal(t, ns)
	handOver(t, name)
	msg := waitClusterEvent(t, opNS, name, corev1.EventTypeNormal, "AdoptedFromTheOriginal", 3*time.Minute)
	t.Logf("AdoptedFromTheOriginal: %s", msg)
	for _, m := range membersBefore {
		if !strings.Contains(msg, fmt.Sprintf("%s (ID %x)", m.Name, m.ID)) {
			t.Errorf("the adoption event does not name member %s (ID %x): %s", m.Name, m.ID, msg)
		}
	}

	waitStatus(t, name, "the status filled by this operator: Running, 3 ready members, current version "+originalEtcdVersion,
		func(st api.ClusterStatus) bool {
			if st.Phase != api.ClusterPhaseRunning || len(st.Members.Ready) != 3 || st.CurrentVersion != originalEtcdVersion {
				return false
			}
			for _, m := range membersBefore {
				if !slices.Contains(st.Members.Ready, m.Name) {
					return false
				}
			}
			return true
		})

	if n := countKeys(t, opNS, name, "/e2e/original/"); n != keys {
		t.Errorf("the adopted cluster has %d of the %d keys written under the original", n, keys)
	}
	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/adopted", "written after the adoption", time.Minute); err != nil {
		t.Fatal(err)
	}
	putKeys(t, opNS, name, "/e2e/adopted/", keys)

	// A minute of the operator's passes over the adopted cluster changes
	// nothing: same members, same pods, no restart.
	heldUnchanged(t, name, false, membersBefore, podsBefore, time.Minute)
	if n := countKeys(t, opNS, name, "/e2e/adopted/"); n != keys {
		t.Errorf("the adopted cluster has %d of the %d keys written after the adoption", n, keys)
	}
	events, err := clusterEvents(ctx, opNS, name, "AdoptedFromTheOriginal")
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Count > 1 {
		t.Errorf("%d AdoptedFromTheOriginal events, want one, told once", len(events))
	}

	// The conversion, under the checker: each member the original made is
	// replaced by one of this operator's layout, added before the original's
	// goes, until none is left.
	underLoad(t, opNS, name, "original-converted", 3*time.Minute, func(ctx context.Context) {
		if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"adoption": map[string]any{"convert": true}}); err != nil {
			t.Fatal(err)
		}
		waitConverted(ctx, t, name)
	})
	membersAfter, err := f.MemberList(ctx, opNS, name, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range membersAfter {
		for _, b := range membersBefore {
			if m.ID == b.ID {
				t.Errorf("member %s (%x) the original made is still a member after the conversion", m.Name, m.ID)
			}
		}
	}
	for _, prefix := range []string{"/e2e/original/", "/e2e/adopted/"} {
		if n := countKeys(t, opNS, name, prefix); n != keys {
			t.Errorf("the converted cluster has %d of the %d keys under %s", n, keys, prefix)
		}
	}
	// Converted, it is a cluster like any other: it upgrades.
	if err := rollThreeMembersTo(ctx, t, name, "3.5.21"); err != nil {
		t.Fatal(err)
	}
}

// sameMemberIDs tells whether two member lists name the same IDs and names.
func sameMemberIDs(a, b []framework.Member) bool {
	key := func(ms []framework.Member) []string {
		var out []string
		for _, m := range ms {
			out = append(out, fmt.Sprintf("%x=%s", m.ID, m.Name))
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}

// originalRunsACluster has the original, deployed cluster-wide from ns,
// make a cluster of 3 called name in the shared namespace (scope
// annotation: the shared operator leaves it alone), holding keys keys under
// /e2e/original/; it returns etcd's members and the facts of their pods.
// With tls, the cluster is the original's static TLS of those secrets; mods
// change the spec the original is given.
func originalRunsACluster(t *testing.T, ns, name string, keys int, tls *tlsSecretNames, mods ...func(*api.EtcdCluster)) ([]framework.Member, map[string]memberPodFacts) {
	t.Helper()
	ctx := t.Context()
	// Deleted before undeploy.sh puts this tree's CRDs back.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := f.Kubectl(ctx, "-n", opNS, "delete", "etcdclusters.etcd.database.coreos.com", name, "--ignore-not-found", "--wait=true"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	cl := &api.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: opNS,
			Annotations: map[string]string{api.ScopeAnnotation: api.ScopeClusterWide}},
		Spec: api.ClusterSpec{Size: 3, Version: originalEtcdVersion},
	}
	if tls != nil {
		cl.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{
			Member:         &api.MemberSecret{PeerSecret: tls.peer, ServerSecret: tls.server},
			OperatorSecret: tls.client,
		}}
	}
	for _, mod := range mods {
		mod(cl)
	}
	if _, err := f.Etcd.EtcdV1beta2().EtcdClusters(opNS).Create(ctx, cl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := framework.WaitFor(ctx, 5*time.Minute, 5*time.Second, "3 Running and Ready members of the original's cluster",
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.ClusterPods(ctx, opNS, name)
			if err != nil {
				return false, err.Error(), nil
			}
			return len(framework.ReadyPods(pods)) == 3 && len(pods) == 3, framework.DescribePods(pods), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	err = framework.WaitFor(ctx, time.Minute, 5*time.Second, "the original's status: Running, size 3, 3 ready",
		func(ctx context.Context) (bool, string, error) {
			st, err := originalClusterStatus(ctx, opNS, name)
			if err != nil {
				return false, err.Error(), nil
			}
			fields := strings.Fields(st)
			return len(fields) >= 2 && fields[0] == "Running" && fields[1] == "3" && strings.Count(st, name+"-") == 3, st, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	putKeysOver(t, opNS, name, tls != nil, "/e2e/original/", keys)
	membersBefore, err := f.MemberList(ctx, opNS, name, tls != nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(membersBefore) != 3 {
		t.Fatalf("etcd lists %d members, want 3: %+v", len(membersBefore), membersBefore)
	}
	podsBefore, err := memberPodsNow(ctx, opNS, name)
	if err != nil {
		t.Fatal(err)
	}
	for pod, facts := range podsBefore {
		if facts.restartPolicy != corev1.RestartPolicyNever {
			t.Fatalf("pod %s has restartPolicy %s: not the original's layout", pod, facts.restartPolicy)
		}
	}
	return membersBefore, podsBefore
}

// stopTheOriginal scales the original's Deployment in ns to 0 and waits
// until its pod is gone.
func stopTheOriginal(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	if _, err := f.Kubectl(ctx, "-n", ns, "scale", "deployment/etcd-operator", "--replicas=0"); err != nil {
		t.Fatal(err)
	}
	err := framework.WaitFor(ctx, 2*time.Minute, 2*time.Second, "the original's operator pod gone",
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "name=etcd-operator"})
			if err != nil {
				return false, err.Error(), nil
			}
			return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items)), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// handOver gives the original's cluster name to the shared operator, as
// starting this operator in the original's place does for a user.
func handOver(t *testing.T, name string) {
	t.Helper()
	if _, err := f.Kubectl(t.Context(), "-n", opNS, "annotate", "etcdclusters.etcd.database.coreos.com", name, api.ScopeAnnotation+"-"); err != nil {
		t.Fatal(err)
	}
}

// heldUnchanged checks, every 10 s for d, that etcd lists exactly members
// (asked over TLS when secure) and the cluster's pods are exactly pods
// (UIDs, restart counts, layout).
func heldUnchanged(t *testing.T, name string, secure bool, members []framework.Member, pods map[string]memberPodFacts, d time.Duration) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(d)
	for {
		membersNow, err := f.MemberList(ctx, opNS, name, secure)
		if err != nil {
			t.Fatal(err)
		}
		if !sameMemberIDs(members, membersNow) {
			t.Fatalf("the membership changed: before %+v, now %+v", members, membersNow)
		}
		podsNow, err := memberPodsNow(ctx, opNS, name)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(pods, podsNow) {
			t.Fatalf("the member pods changed (UID, restart count, restart policy): before %+v, now %+v", pods, podsNow)
		}
		if time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Second):
		}
	}
}

// TestOriginalItselfPausedWithAMemberLostIsNeverDamaged: the original runs
// a 3-member cluster; the user pauses it (spec.paused, which the original
// honours too), the original stops, and one member's pod is deleted: a
// cluster this operator must not touch. Handed over while paused, it is
// left as it is for a minute (no pod made or deleted, etcd still lists the
// three members) and the status says it is paused. Unpaused, it is adopted
// with the lost member reported, not removed or replaced. Asked to convert,
// under the checker, the lost member (its pod gone with its emptyDir data)
// is replaced first, as this operator replaces its own, and then the other
// two are converted: linearizable, no acknowledged write lost, every key
// kept.
//
// Not parallel: deploy.sh replaces the cluster-wide CRDs the other tests use.
func TestOriginalItselfPausedWithAMemberLostIsNeverDamaged(t *testing.T) {
	const name, keys = "paused-original", 20
	ctx := t.Context()
	ns := newNamespace(t, "original-paused")
	deployOriginalItself(t, ns, "--only-etcd-operator", "--cluster-wide")
	members, pods := originalRunsACluster(t, ns, name, keys, nil)

	if _, err := f.Kubectl(ctx, "-n", opNS, "patch", "etcdclusters.etcd.database.coreos.com", name, "--type=merge", "-p", `{"spec":{"paused":true}}`); err != nil {
		t.Fatal(err)
	}
	stopTheOriginal(t, ns)
	lost := slices.Sorted(maps.Keys(pods))[0]
	if _, err := f.Kubectl(ctx, "-n", opNS, "delete", "pod", lost, "--wait=true"); err != nil {
		t.Fatal(err)
	}
	delete(pods, lost)
	t.Logf("member %s lost: its pod deleted while the original was stopped", lost)

	handOver(t, name)
	waitStatus(t, name, "the status of a paused cluster", func(st api.ClusterStatus) bool { return st.ControlPaused })
	heldUnchanged(t, name, false, members, pods, time.Minute)

	if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"paused": false}); err != nil {
		t.Fatal(err)
	}
	msg := waitClusterEvent(t, opNS, name, corev1.EventTypeNormal, "AdoptedFromTheOriginal", 3*time.Minute)
	t.Logf("AdoptedFromTheOriginal: %s", msg)
	waitStatus(t, name, "the lost member reported, not replaced", func(st api.ClusterStatus) bool {
		return strings.Contains(st.Reason, "member "+lost+" has no pod; it is not replaced")
	})
	heldUnchanged(t, name, false, members, pods, 30*time.Second)
	if n := countKeys(t, opNS, name, "/e2e/original/"); n != keys {
		t.Errorf("the adopted cluster has %d of the %d keys written under the original", n, keys)
	}

	convertUnderTheChecker(t, name, "original-lost-member-converted", "")
	msg = waitClusterEvent(t, opNS, name, corev1.EventTypeNormal, "Replacing Dead Member", time.Minute)
	t.Logf("Replacing Dead Member: %s", msg)
	if !strings.Contains(msg, lost) {
		t.Errorf("the replacement's event does not name the lost member %s: %s", lost, msg)
	}
	if n := countKeys(t, opNS, name, "/e2e/original/"); n != keys {
		t.Errorf("the converted cluster has %d of the %d keys written under the original", n, keys)
	}
}

// TestOriginalItselfOnClaimsIsConvertedInPlace: the original runs a 3-member
// cluster with its persistentVolumeClaimSpec (a claim named as each member,
// mounted where this operator mounts its own). Handed over and converted
// under the checker, each member is restarted on its own claim in this
// operator's layout, one at a time: the same member IDs before and after (no
// member added or removed, no copy of the data), the same claims, no pod of
// the original's layout left, every key kept, linearizable and no
// acknowledged write lost.
//
// Not parallel: deploy.sh replaces the cluster-wide CRDs the other tests use.
func TestOriginalItselfOnClaimsIsConvertedInPlace(t *testing.T) {
	const name, keys = "claims-original", 30
	ns := newNamespace(t, "original-claims")
	deployOriginalItself(t, ns, "--only-etcd-operator", "--cluster-wide")
	group := framework.UniqueName("original-pv")
	createHostPathPVs(t, group, 3)
	members, pods := originalRunsACluster(t, ns, name, keys, nil, func(cl *api.EtcdCluster) {
		cl.Spec.Pod = &api.PodPolicy{PersistentVolumeClaimSpec: claimSpec(group)}
	})
	idsBefore := memberIDs(t, opNS, name)
	claimsBefore := claimUIDs(t, name)
	if len(claimsBefore) != 3 {
		t.Fatalf("the original made %d claims, want 3: %v", len(claimsBefore), claimsBefore)
	}

	stopTheOriginal(t, ns)
	handOver(t, name)
	msg := waitClusterEvent(t, opNS, name, corev1.EventTypeNormal, "AdoptedFromTheOriginal", 3*time.Minute)
	t.Logf("AdoptedFromTheOriginal: %s", msg)
	heldUnchanged(t, name, false, members, pods, 30*time.Second)

	convertUnderTheChecker(t, name, "original-claims-converted-in-place", "")
	msg = waitClusterEvent(t, opNS, name, corev1.EventTypeNormal, "ConvertedInPlace", time.Minute)
	t.Logf("ConvertedInPlace: %s", msg)
	sameMembers(t, idsBefore, memberIDs(t, opNS, name))
	if after := claimUIDs(t, name); !maps.Equal(after, claimsBefore) {
		t.Errorf("claims after the conversion %v, want the original's %v: each member on its own claim", after, claimsBefore)
	}
	if n := countKeys(t, opNS, name, "/e2e/original/"); n != keys {
		t.Errorf("the converted cluster has %d of the %d keys written under the original", n, keys)
	}
}

// claimUIDs are the UIDs of the claims of the shared namespace's cluster
// name, by claim name.
func claimUIDs(t *testing.T, name string) map[string]string {
	t.Helper()
	list, err := f.Kube.CoreV1().PersistentVolumeClaims(opNS).List(t.Context(), metav1.ListOptions{LabelSelector: "etcd_cluster=" + name})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range list.Items {
		out[c.Name] = string(c.UID)
	}
	return out
}

// waitStatus waits up to 2 minutes until the status of the shared
// namespace's cluster name satisfies ok; what describes the wait.
func waitStatus(t *testing.T, name, what string, ok func(api.ClusterStatus) bool) {
	t.Helper()
	err := framework.WaitFor(t.Context(), 2*time.Minute, 2*time.Second, what, func(ctx context.Context) (bool, string, error) {
		got, err := f.Etcd.EtcdV1beta2().EtcdClusters(opNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		st := got.Status
		return ok(st), fmt.Sprintf("phase %q, paused %v, ready %v, unready %v, current version %q, reason %q",
			st.Phase, st.ControlPaused, st.Members.Ready, st.Members.Unready, st.CurrentVersion, st.Reason), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOriginalItselfRunsATLSClusterThisOperatorAdopts is the adoption of a
// cluster the original runs with its static TLS (peer, server and operator
// secrets, as its docs make them): handed over, its members are adopted as
// they run, over TLS (same member IDs, same pods, no restart, for a minute),
// and then converted one at a time under the checker, which talks https with
// the operator's client certificate: linearizable, no acknowledged write
// lost, every key kept, and no pod of the original's layout left.
//
// Not parallel: deploy.sh replaces the cluster-wide CRDs the other tests use.
func TestOriginalItselfRunsATLSClusterThisOperatorAdopts(t *testing.T) {
	const name, keys = "tls-original", 50
	ns := newNamespace(t, "original-tls")
	deployOriginalItself(t, ns, "--only-etcd-operator", "--cluster-wide")
	secrets := createTLSSecrets(t, opNS, name)
	members, pods := originalRunsACluster(t, ns, name, keys, &secrets)
	for _, m := range members {
		for _, u := range append(slices.Clone(m.PeerURLs), m.ClientURLs...) {
			if !strings.HasPrefix(u, "https://") {
				t.Fatalf("member %s has URL %s: the original's cluster is not TLS", m.Name, u)
			}
		}
	}

	stopTheOriginal(t, ns)
	handOver(t, name)
	msg := waitClusterEvent(t, opNS, name, corev1.EventTypeNormal, "AdoptedFromTheOriginal", 3*time.Minute)
	t.Logf("AdoptedFromTheOriginal: %s", msg)
	waitStatus(t, name, "the status filled by this operator: Running, 3 ready members", func(st api.ClusterStatus) bool {
		return st.Phase == api.ClusterPhaseRunning && len(st.Members.Ready) == 3
	})
	heldUnchanged(t, name, true, members, pods, time.Minute)

	convertUnderTheChecker(t, name, "original-tls-converted", secrets.client)
	if n := countKeysOver(t, opNS, name, true, "/e2e/original/"); n != keys {
		t.Errorf("the converted cluster has %d of the %d keys written under the original", n, keys)
	}
}

// convertUnderTheChecker asks for the conversion of the shared namespace's
// cluster name while the checker writes and reads through it for 3 minutes,
// and waits until it is converted; scenario names the checker's figures,
// tlsSecret its client certificate ("" over http).
func convertUnderTheChecker(t *testing.T, name, scenario, tlsSecret string) {
	t.Helper()
	underLoadPod(t, framework.CheckerPod{Namespace: opNS, Cluster: name, Scenario: scenario, Duration: 3 * time.Minute, TLSSecret: tlsSecret},
		func(ctx context.Context) {
			if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"adoption": map[string]any{"convert": true}}); err != nil {
				t.Fatal(err)
			}
			waitConverted(ctx, t, name)
		})
}

// waitConverted waits until the cluster name has 3 Ready members and no pod
// of the original's layout, and logs how long that took.
func waitConverted(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	start := time.Now()
	err := framework.WaitFor(ctx, 10*time.Minute, 5*time.Second, "3 Ready members, none of the original's layout",
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.ClusterPods(ctx, opNS, name)
			if err != nil {
				return false, err.Error(), nil
			}
			desc := framework.DescribePods(pods)
			for _, p := range pods {
				if p.Spec.RestartPolicy == corev1.RestartPolicyNever {
					return false, desc, nil
				}
			}
			return len(pods) == 3 && len(framework.ReadyPods(pods)) == 3, desc, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("converted in %.1fs", time.Since(start).Seconds())
}
