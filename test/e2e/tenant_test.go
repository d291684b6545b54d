//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// A Kubernetes control plane is etcd's most demanding client: its watch
// cache lists and watches everything, its writes are transactions on
// resourceVersions, and its controllers act on what the watches deliver. These
// tests run a real kube-apiserver (a tenant control plane) on a cluster of the
// operator's while its members are killed, and a workload of writers and an
// informer on the tenant: every change the tenant acknowledged must reach the
// informer, in order.
//
// The tenant apiserver runs in this test's host, not in a pod: it reaches the
// cluster through the client Service's cluster IP, as the local checker does.

// tenantLoadRun is a tenant workload running in the background.
type tenantLoadRun struct {
	scenario string
	done     chan struct{}
	res      framework.TenantResult
	err      error
}

// startTenant starts a tenant apiserver on the cluster name in opNS, stopped
// when the test ends; its log is kept in the test's output if the test fails.
// With client TLS (s.CA set) it connects through a loopback forward to the
// client Service, since the server certificate names 127.0.0.1 but not the
// Service's cluster IP.
func startTenant(t *testing.T, name string, s framework.TenantAPIServer) *framework.Tenant {
	t.Helper()
	return startTenantIn(t, opNS, name, s)
}

// startTenantIn is startTenant for the cluster name in namespace ns.
func startTenantIn(t *testing.T, ns, name string, s framework.TenantAPIServer) *framework.Tenant {
	t.Helper()
	tenant, _ := startTenantForwarded(t, ns, name, s)
	return tenant
}

// startTenantForwarded is startTenantIn that also returns the loopback
// forward a tenant with client TLS reaches the cluster through (nil without
// TLS), so that a test can end the tenant's connections.
func startTenantForwarded(t *testing.T, ns, name string, s framework.TenantAPIServer) (*framework.Tenant, *framework.LoopbackForward) {
	t.Helper()
	var fwd *framework.LoopbackForward
	secure := len(s.CA) > 0
	endpoint, err := f.ClientServiceURL(t.Context(), ns, name, secure)
	if err != nil {
		t.Fatal(err)
	}
	if secure {
		fwd, err = framework.ForwardLoopback(strings.TrimPrefix(endpoint, "https://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fwd.Close)
		endpoint = "https://" + fwd.Addr
	}
	s.Endpoints = []string{endpoint}
	return runTenant(t, ns, name, s), fwd
}

// tenantWithClientSecret is a tenant apiserver that reaches a TLS cluster
// with the client certificate, key and CA of secret (etcd-client.* keys).
func tenantWithClientSecret(secret *corev1.Secret) framework.TenantAPIServer {
	return framework.TenantAPIServer{
		ClientCert: secret.Data[etcdutil.SecretClientCert],
		ClientKey:  secret.Data[etcdutil.SecretClientKey],
		CA:         secret.Data[etcdutil.SecretClientCA],
	}
}

// runTenant starts the tenant apiserver s on cluster name in ns, stopped
// when the test ends; its log is kept in the test's output if the test fails.
func runTenant(t *testing.T, ns, name string, s framework.TenantAPIServer) *framework.Tenant {
	t.Helper()
	tenant, err := framework.StartTenantAPIServer(t.Context(), s)
	if err != nil {
		// A kube-apiserver has been seen writing to the cluster at once yet
		// failing its own etcd readiness check for minutes. Whether etcd
		// answered then tells the cluster's fault from the apiserver's: it is
		// logged, and a second apiserver is started; a cluster that does not
		// serve fails that one too.
		health, herr := f.Etcdctl(t.Context(), ns, name, len(s.CA) > 0, "endpoint", "health", "--cluster")
		t.Logf("the tenant apiserver did not become ready: %v\netcd's own health then (err %v):\n%s\nstarting another", err, herr, health)
		if tenant, err = framework.StartTenantAPIServer(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("tenant apiserver at %s on %v, etcd prefix %s", tenant.Config.Host, s.Endpoints, tenant.Prefix)
	t.Cleanup(func() {
		tail := tenant.Stop()
		if t.Failed() {
			t.Logf("tenant kube-apiserver log (tail):\n%s", tail)
		}
	})
	return tenant
}

// startTenantLoad runs the workload l on tenant in the background.
func startTenantLoad(t *testing.T, tenant *framework.Tenant, l framework.TenantLoad) *tenantLoadRun {
	t.Helper()
	run := &tenantLoadRun{scenario: l.Scenario, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		run.res, run.err = framework.RunTenantLoad(t.Context(), tenant.Config, l)
	}()
	return run
}

// judgeTenantLoad waits for the workload, logs its figures, keeps them for
// make chaos (writeTenantResult), and fails the test unless every
// acknowledged change reached the informer in order. A workload that did not
// finish or failed is kept as a failed scenario, so that the results list it.
func judgeTenantLoad(t *testing.T, run *tenantLoadRun, timeout time.Duration) framework.TenantResult {
	t.Helper()
	unfinished := tenantResult{TenantResult: framework.TenantResult{Scenario: run.scenario}, Test: t.Name()}
	select {
	case <-run.done:
	case <-t.Context().Done():
		writeTenantResult(t, unfinished)
		t.Fatal(t.Context().Err())
	case <-time.After(timeout):
		writeTenantResult(t, unfinished)
		t.Fatalf("the tenant workload did not finish within %s", timeout)
	}
	r := run.res
	if r.Scenario == "" {
		r.Scenario = run.scenario
	}
	if run.err != nil {
		writeTenantResult(t, tenantResult{TenantResult: r, Test: t.Name()})
		t.Fatalf("tenant workload: %v", run.err)
	}
	writeTenantResult(t, tenantResult{TenantResult: r, Test: t.Name(), Passed: r.Passed() && r.Acked > 0})
	t.Logf("TENANT %s: %s", r.Scenario, r)
	if !r.Passed() {
		t.Errorf("%s: the tenant's informer does not show what its apiserver acknowledged: %s\n%s", r.Scenario, r, strings.Join(r.Examples, "\n"))
	}
	if r.Acked == 0 {
		t.Errorf("%s: the tenant acknowledged no write", r.Scenario)
	}
	return r
}

// tenantResult is one line of _output/chaos/tenant.json: a tenant
// scenario's figures and its verdict, as judgeTenantLoad gives it.
type tenantResult struct {
	framework.TenantResult
	Test   string `json:"test"`
	Passed bool   `json:"passed"`
}

// writeTenantResult keeps the result for hack/chaos.sh, which gathers them
// into _output/chaos/tenant.json. They go to the tenant folder of the fault
// scenarios' results: their figures are not the checker's, and a tenant
// scenario may share its name with a fault scenario (leader-cut-off-30s).
func writeTenantResult(t *testing.T, r tenantResult) {
	dir := filepath.Join(f.ChaosResultsDir(), "tenant")
	out, _ := json.Marshal(r)
	if err := os.MkdirAll(dir, 0o755); err == nil {
		err = os.WriteFile(filepath.Join(dir, r.Scenario+".json"), append(out, '\n'), 0o644)
		if err != nil {
			t.Logf("keep the result: %v", err)
		}
	}
}

// killFollowerThenLeader kills a follower's pod and waits until the cluster
// has three ready members again without it, then does the same to the
// leader's pod.
func killFollowerThenLeader(t *testing.T, name string, secure bool) {
	t.Helper()
	ctx := t.Context()
	leader, members := leaderAndMembers(t, name, secure)
	follower := ""
	for _, m := range members {
		if m.ID != leader.ID && !m.IsLearner {
			follower = m.Name
			break
		}
	}
	if follower == "" {
		t.Fatalf("no follower among %+v", members)
	}
	if err := f.KillPod(ctx, opNS, follower); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the follower %s", follower)
	waitReady(t, opNS, name, 3, changeTimeout, follower)

	// The leader may have changed while the follower came back.
	killTheLeader(ctx, t, name, secure)
}

func TestTenantControlPlaneThroughMemberAndLeaderKill(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("tenant")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	tenant := startTenant(t, name, framework.TenantAPIServer{})

	const d = 90 * time.Second
	load := startTenantLoad(t, tenant, framework.TenantLoad{Scenario: "member-and-leader-kill", Duration: d})
	pause(t, loadLead)
	killFollowerThenLeader(t, name, false)
	judgeTenantLoad(t, load, d+3*time.Minute)
}

func TestTenantControlPlaneOverClientTLSThroughMemberAndLeaderKill(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("tenant-tls")
	secrets := createTLSSecrets(t, opNS, name)
	cl := framework.NewCluster(name, 3, "3.5.21")
	cl.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{
		Member:         &api.MemberSecret{PeerSecret: secrets.peer, ServerSecret: secrets.server},
		OperatorSecret: secrets.client,
	}}
	createCluster(t, cl)
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	client, err := f.Kube.CoreV1().Secrets(opNS).Get(t.Context(), secrets.client, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tenant := startTenant(t, name, tenantWithClientSecret(client))

	const d = 90 * time.Second
	load := startTenantLoad(t, tenant, framework.TenantLoad{Scenario: "tls-member-and-leader-kill", Duration: d})
	pause(t, loadLead)
	killFollowerThenLeader(t, name, true)
	judgeTenantLoad(t, load, d+3*time.Minute)
}

// TestTenantControlPlaneThroughScaleUpgradeAndDefrag: the day-2 changes a
// platform team makes under a hosted control plane: scale 3 → 5 → 3, a
// rolling upgrade across minor versions (3.5 → 3.6), and a defragmentation
// of every member. The tenant's informer must show every change its
// apiserver acknowledged, in order.
func TestTenantControlPlaneThroughScaleUpgradeAndDefrag(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("tenant-day2")
	const from, to = "3.5.35", "3.6.16"
	createCluster(t, framework.NewCluster(name, 3, from))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	tenant := startTenant(t, name, framework.TenantAPIServer{})

	const d = 150 * time.Second
	load := startTenantLoad(t, tenant, framework.TenantLoad{Scenario: "scale-upgrade-defrag", Duration: d})
	pause(t, loadLead)
	for _, size := range []int{5, 3} {
		if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"size": size}); err != nil {
			t.Fatal(err)
		}
		waitReady(t, opNS, name, size, changeTimeout)
		t.Logf("scaled to %d", size)
	}
	if _, err := f.PatchClusterSpec(ctx, opNS, name, map[string]any{"version": to}); err != nil {
		t.Fatal(err)
	}
	err := framework.WaitFor(ctx, upgradeTimeout, framework.Poll, "every member on "+to+" and ready",
		framework.Both(f.PodsOnImage(opNS, name, framework.EtcdImage(to), 3), f.ReadyMembers(opNS, name, 3), currentVersion(opNS, name, to)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("upgraded to %s", to)
	out, err := f.Etcdctl(ctx, opNS, name, false, "defrag", "--cluster")
	if err != nil {
		t.Fatalf("defragment every member: %v\n%s", err, out)
	}
	t.Logf("defragmented every member:\n%s", out)
	judgeTenantLoad(t, load, d+3*time.Minute)
}

// TestTenantControlPlaneThroughALeaderCutOff: the leader is cut off from its
// peers for 30 s (its clients still reach it), as a network partition does.
// Two tenant apiservers share the cluster through the cut: one whose only
// address is the leader's (what the client Service gives a client whose one
// connection lands on the leader: an open connection never moves), one given
// every member's address. Both must keep every change they acknowledged, in
// order; how long each could not serve is what tells a user which addresses
// to give kube-apiserver (docs/user-guide/clients.md).
func TestTenantControlPlaneThroughALeaderCutOff(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("tenant-cutoff")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	leader, members := leaderAndMembers(t, name, false)
	addrs := map[string]string{}
	for _, m := range members {
		pod, err := f.Kube.CoreV1().Pods(opNS).Get(ctx, m.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		addrs[m.Name] = fmt.Sprintf("http://%s:2379", pod.Status.PodIP)
	}
	onTheLeader := runTenant(t, opNS, name, framework.TenantAPIServer{Endpoints: []string{addrs[leader.Name]}})
	onEveryMember := runTenant(t, opNS, name, framework.TenantAPIServer{Endpoints: slices.Sorted(maps.Values(addrs))})

	const d = 90 * time.Second
	loads := []*tenantLoadRun{
		startTenantLoad(t, onTheLeader, framework.TenantLoad{Scenario: "leader-cut-off-30s-on-the-leader", Duration: d}),
		startTenantLoad(t, onEveryMember, framework.TenantLoad{Scenario: "leader-cut-off-30s-on-every-member", Duration: d}),
	}
	pause(t, loadLead)
	cutOffMember(t, name, leader, members, 30*time.Second)
	waitReady(t, opNS, name, 3, changeTimeout)
	for _, load := range loads {
		judgeTenantLoad(t, load, d+3*time.Minute)
	}
}
