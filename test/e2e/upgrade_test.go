//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestRollingUpgradeAcrossThreeMinorVersions is the original's TestEtcdUpgrade on
// the versions a cluster born on 3.4 goes through to today's: 3.4 → 3.5 → 3.6 →
// 3.7, one minor version at a time as etcd requires, through the releases
// etcd's guides accept (3.5.32 or later before 3.6, 3.6.11 or later before
// 3.7; the operator refuses the moves from older ones), under the checker.
// Each step must end with every member on the new image, keep the data, and
// keep a majority of members Ready throughout (the original upgraded one
// member per tick without waiting for it to come back, yet never went below 2
// of 3 Ready in its measurements); the clients' history must stay
// linearizable with no acknowledged write lost.
func TestRollingUpgradeAcrossThreeMinorVersions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("upgrade")
	cl := framework.NewCluster(name, 3, "3.4.23")
	// etcd 3.6 refuses to start on a raft log that still holds the v2 entries 3.4
	// and 3.5 write for the cluster version, until a snapshot covers them (etcd's
	// 3.6 upgrade guide). A user's cluster has taken many snapshots by then; this
	// young one takes them every 10 entries so that the test can follow the guide.
	cl.Spec.Pod = &api.PodPolicy{EtcdEnv: []corev1.EnvVar{{Name: "ETCD_SNAPSHOT_COUNT", Value: "10"}}}
	createCluster(t, cl)
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/upgrade", "written by 3.4.23", dataTimeout); err != nil {
		t.Fatal(err)
	}

	// The whole way under the checker: writes and reads through the client
	// Service must stay linearizable and lose nothing, step after step.
	underLoad(t, opNS, name, "upgrade-3.4-to-3.7", 3*time.Minute, func(ctx context.Context) {
		for _, version := range []string{"3.5.35", "3.6.16", "3.7.3"} {
			start := time.Now()
			sampler := &readinessSampler{ns: opNS, name: name, minPods: 3, minStatus: 3}
			err := rollThreeMembersTo(ctx, t, name, version, sampler.cond())
			t.Logf("upgrade to %s in %.1fs: lowest Ready pods seen %d of 3, lowest status.members.ready %d (%d samples)",
				version, time.Since(start).Seconds(), sampler.minPods, sampler.minStatus, sampler.samples)
			if err != nil {
				t.Fatal(err)
			}
			if sampler.minPods < 2 {
				t.Errorf("upgrade to %s: only %d of 3 pods were Ready at one point; a majority must stay Ready", version, sampler.minPods)
			}
			if err := f.ExpectValue(ctx, opNS, name, false, "/e2e/upgrade", "written by 3.4.23", dataTimeout); err != nil {
				t.Fatalf("after the upgrade to %s: %v", version, err)
			}
		}
	})
}

// rollThreeMembersTo sets spec.version of a 3-member cluster upgraded from
// 3.4 with ETCD_SNAPSHOT_COUNT=10 (waiting first for what 3.6 needs, see
// readyForThreeSix) and waits until every member runs it, ready, with
// status.currentVersion saying so, and until also holds.
func rollThreeMembersTo(ctx context.Context, t *testing.T, name, version string, also ...framework.Condition) error {
	t.Helper()
	if strings.HasPrefix(version, "3.6.") {
		readyForThreeSix(t, opNS, name)
	}
	if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"version": version}); err != nil {
		return err
	}
	image := framework.EtcdImage(version)
	conds := append(also, f.PodsOnImage(opNS, name, image, 3), currentVersion(opNS, name, version), f.ReadyMembers(opNS, name, 3))
	return framework.WaitFor(ctx, upgradeTimeout, framework.Poll,
		fmt.Sprintf("every member of %s on %s and status.currentVersion %s", name, image, version), framework.Both(conds...))
}

// readyForThreeSix waits until a cluster upgraded from 3.4 to 3.5, with
// ETCD_SNAPSHOT_COUNT=10, may move to 3.6: every member on 3.5, the operator
// knowing where the v2 entries of its log end, and a snapshot past them.
func readyForThreeSix(t *testing.T, ns, name string) {
	t.Helper()
	ctx := t.Context()
	waitClusterVersion(t, ns, name, "3.5.0")
	// The operator knows where the v2 entries end once it has seen every
	// member on 3.5; until then it counts every entry, these writes too, as
	// possibly v2.
	err := framework.WaitFor(ctx, changeTimeout, framework.Poll, "the operator to know where the v2 entries of "+name+" end", func(ctx context.Context) (bool, string, error) {
		cl, err := f.GetCluster(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		m := cl.Status.Maintenance
		return m != nil && m.V2EntriesUntilIndex > 0 && !m.V2EntriesPending, fmt.Sprintf("status.maintenance %+v", m), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Twenty transactions: every member snapshots after the 3.5 cluster
	// version entry, the last v2 entry of its log.
	putKeys(t, ns, name, "/e2e/snapshot/", 20*putsPerTxn)
}

// waitClusterVersion waits until every member reports the given cluster version on
// its client port (plain HTTP in this cluster, reached from the node at the pod's IP).
func waitClusterVersion(t *testing.T, ns, name, want string) {
	t.Helper()
	client := &http.Client{Timeout: 3 * time.Second}
	err := framework.WaitFor(t.Context(), dataTimeout, framework.Poll, "cluster version "+want+" on every member of "+name,
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.ClusterPods(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			var seen []string
			for _, p := range pods {
				resp, err := client.Get("http://" + p.Status.PodIP + ":2379/version")
				if err != nil {
					return false, err.Error(), nil
				}
				var v struct {
					Cluster string `json:"etcdcluster"`
				}
				err = json.NewDecoder(resp.Body).Decode(&v)
				resp.Body.Close()
				if err != nil {
					return false, err.Error(), nil
				}
				seen = append(seen, p.Name+"="+v.Cluster)
				if v.Cluster != want {
					return false, fmt.Sprint(seen), nil
				}
			}
			return len(pods) > 0, fmt.Sprint(seen), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// currentVersion is done when status.currentVersion is version and no upgrade is pending.
func currentVersion(ns, name, version string) framework.Condition {
	return func(ctx context.Context) (bool, string, error) {
		cl, err := f.GetCluster(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return cl.Status.CurrentVersion == version && cl.Status.TargetVersion == "", framework.DescribeStatus(cl), nil
	}
}

// readinessSampler records the fewest Ready pods and the fewest ready members in
// status seen while a wait polls; it never ends the wait itself.
type readinessSampler struct {
	ns, name           string
	minPods, minStatus int
	samples            int
}

func (s *readinessSampler) cond() framework.Condition {
	return func(ctx context.Context) (bool, string, error) {
		pods, err := f.ClusterPods(ctx, s.ns, s.name)
		if err != nil {
			return true, "", nil
		}
		cl, err := f.GetCluster(ctx, s.ns, s.name)
		if err != nil {
			return true, "", nil
		}
		s.samples++
		s.minPods = min(s.minPods, len(framework.ReadyPods(pods)))
		s.minStatus = min(s.minStatus, len(cl.Status.Members.Ready))
		return true, fmt.Sprintf("lowest so far: %d Ready pods, %d ready in status", s.minPods, s.minStatus), nil
	}
}
