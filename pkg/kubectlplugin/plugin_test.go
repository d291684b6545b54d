package kubectlplugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	etcdfake "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

const ns = "team-a"

// directForwarder "forwards" member pods to embedded etcd members: the
// plugin's flow is tested end to end but for the API server's tunnel,
// which the e2e suite covers.
type directForwarder struct {
	endpoints map[string]string // pod -> client URL
	failing   map[string]bool
	forwarded []string
}

func (f *directForwarder) Forward(_ context.Context, namespace, pod string, port int) (string, func(), error) {
	if namespace != ns || port != etcdutil.ClientPort {
		return "", nil, fmt.Errorf("forward %s/%s:%d: unexpected target", namespace, pod, port)
	}
	if f.failing[pod] {
		return "", nil, errors.New("pods/portforward is forbidden")
	}
	ep, ok := f.endpoints[pod]
	if !ok {
		return "", nil, fmt.Errorf("no endpoint for pod %s", pod)
	}
	u, err := url.Parse(ep)
	if err != nil {
		return "", nil, err
	}
	f.forwarded = append(f.forwarded, pod)
	return u.Host, func() {}, nil
}

type fixture struct {
	plugin    *Plugin
	forwarder *directForwarder
	members   []*backuptest.Etcd
	pods      []string
	cluster   *api.EtcdCluster
}

// newFixture runs an n-member embedded cluster behind an EtcdCluster
// "example" whose member pods "example-m<i>" the fake clientset holds, with
// extra objects added.
func newFixture(t *testing.T, n int, extraEtcd ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWith(t, n, 0, extraEtcd...)
}

// newFixtureWith is newFixture with a backend quota (0: etcd's default).
func newFixtureWith(t *testing.T, n int, quota int64, extraEtcd ...runtime.Object) *fixture {
	t.Helper()
	members, err := backuptest.StartCluster(n, backuptest.EtcdOptions{Dir: t.TempDir(), QuotaBytes: quota})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.Close()
		}
	})
	cluster := &api.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: ns, UID: types.UID("uid-example")},
		Spec:       api.ClusterSpec{Size: n, Version: "3.5.21"},
		Status:     api.ClusterStatus{Phase: api.ClusterPhaseRunning},
	}
	f := &fixture{forwarder: &directForwarder{endpoints: map[string]string{}, failing: map[string]bool{}}, members: members, cluster: cluster}
	var kubeObjs []runtime.Object
	for i, m := range members {
		name := fmt.Sprintf("example-m%d", i)
		f.pods = append(f.pods, name)
		f.forwarder.endpoints[name] = m.Endpoint
		kubeObjs = append(kubeObjs, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: k8sutil.MemberLabels(cluster, name),
				OwnerReferences: []metav1.OwnerReference{k8sutil.AsOwner(cluster)}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		})
	}
	// A look-alike pod of another owner must be ignored.
	kubeObjs = append(kubeObjs, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "example-stranger", Namespace: ns, Labels: k8sutil.ClusterLabels("example")},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	})
	f.plugin = &Plugin{
		Kube:      kubefake.NewSimpleClientset(kubeObjs...),
		Etcd:      etcdfake.NewSimpleClientset(append([]runtime.Object{cluster}, extraEtcd...)...),
		Forwarder: f.forwarder,
		Timeout:   5 * time.Second,
	}
	return f
}

func (f *fixture) health(t *testing.T) etcdutil.Health {
	t.Helper()
	var ms []etcdutil.MemberHealth
	for i, m := range f.members {
		h := etcdutil.MemberStatus(t.Context(), etcdutil.ClientConfig{}, m.Endpoint)
		h.Name = f.pods[i]
		ms = append(ms, h)
	}
	return etcdutil.HealthOf(ms)
}

func (f *fixture) podOf(t *testing.T, id uint64) string {
	t.Helper()
	for i, m := range f.members {
		if m.ID() == id {
			return f.pods[i]
		}
	}
	t.Fatalf("no member %x", id)
	return ""
}

func TestStatus(t *testing.T) {
	t.Parallel()
	older := metav1.NewTime(time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC))
	newer := metav1.NewTime(time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC))
	backupOf := func(name, endpoint string, when metav1.Time, ok bool) *api.EtcdBackup {
		return &api.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: api.BackupSpec{EtcdEndpoints: []string{endpoint}},
			Status: api.BackupStatus{Succeeded: ok, LastSuccessDate: when, EtcdRevision: 42,
				BackupPath: "bucket/" + name, BackupSize: 3 << 20}}
	}
	f := newFixture(t, 3,
		backupOf("nightly", "http://example-client:2379", older, true),
		backupOf("latest", "http://example-client.team-a.svc:2379", newer, true),
		backupOf("failed-later", "http://example-client:2379", metav1.NewTime(newer.Add(time.Hour)), false),
		backupOf("other-cluster", "http://other-client:2379", metav1.NewTime(newer.Add(2*time.Hour)), true),
	)
	var out bytes.Buffer
	if err := f.plugin.Status(t.Context(), &out, ns, "example"); err != nil {
		t.Fatal(err)
	}
	h := f.health(t)
	leader := f.podOf(t, h.LeaderID)
	text := out.String()
	for _, want := range []string{
		"Cluster:      team-a/example",
		"Phase:        Running",
		"Leader:       " + leader,
		"Alarms:       none",
		"Last backup:  latest at 2026-11-23T03:00:00Z: bucket/latest, revision 42, 3.0MiB",
		"MEMBER", "ROLE", "DB SIZE", "IN USE",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("status output lacks %q:\n%s", want, text)
		}
	}
	for i, pod := range f.pods {
		role := "Follower"
		if pod == leader {
			role = "Leader"
		}
		line := regexp.MustCompile(`(?m)^` + pod + `\s+` + fmt.Sprintf("%x", f.members[i].ID()) + `\s+` + role + `\s+3\.5\.21\s+\d+\.\d[KM]iB\s+\d+\.\d[KM]iB \(\d+%\)\s+-$`)
		if !line.MatchString(text) {
			t.Errorf("no line for %s as %s with version, sizes and no alarm:\n%s", pod, role, text)
		}
	}
	if strings.Contains(text, "stranger") {
		t.Errorf("a pod the cluster does not own was reported:\n%s", text)
	}
}

func TestStatusReportsAnUnreachableMember(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	f.forwarder.failing[f.pods[2]] = true
	var out bytes.Buffer
	if err := f.plugin.Status(t.Context(), &out, ns, "example"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Unreachable:  example-m2 (port-forward: pods/portforward is forbidden)") {
		t.Fatalf("status does not name the unreachable member:\n%s", out.String())
	}
	var dout bytes.Buffer
	err := f.plugin.Defragment(t.Context(), &dout, ns, "example", "")
	if err == nil || !strings.Contains(err.Error(), "every member must be up first") {
		t.Fatalf("defrag with a member unreachable = %v, want a refusal", err)
	}
}

func TestDefragmentEveryMemberLeaderLast(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	ctx := t.Context()
	if err := f.members[0].Fill(ctx, "k", 200, 8<<10); err != nil {
		t.Fatal(err)
	}
	if err := f.members[0].Fill(ctx, "k", 200, 8<<10); err != nil { // overwrite: history to compact
		t.Fatal(err)
	}
	oldLeader := f.podOf(t, f.health(t).LeaderID)

	var out bytes.Buffer
	if err := f.plugin.Compact(ctx, &out, ns, "example"); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`compacted team-a/example up to revision \d+`).MatchString(out.String()) {
		t.Errorf("compact printed %q", out.String())
	}
	before := f.health(t)

	out.Reset()
	if err := f.plugin.Defragment(ctx, &out, ns, "example", ""); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "leadership moved from "+oldLeader+" to ") ||
		!strings.HasPrefix(lines[3], "defragmented "+oldLeader+":") {
		t.Fatalf("want two followers, the leadership move, then the old leader:\n%s", out.String())
	}
	after := f.health(t)
	if after.LeaderID == before.LeaderID {
		t.Errorf("the leader %s still leads after its defragmentation", oldLeader)
	}
	for i, m := range after.Members {
		if m.DBSize >= before.Members[i].DBSize {
			t.Errorf("%s: database %d bytes before, %d after defragmentation", m.Name, before.Members[i].DBSize, m.DBSize)
		}
	}

	out.Reset()
	err := f.plugin.Defragment(ctx, &out, ns, "example", "example-nobody")
	if !errors.Is(err, errNoMember) {
		t.Errorf("defrag of an unknown member = %v", err)
	}
}

func TestMoveLeader(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	ctx := t.Context()
	leader := f.podOf(t, f.health(t).LeaderID)
	var target string
	for _, p := range f.pods {
		if p != leader {
			target = p
			break
		}
	}
	var out bytes.Buffer
	if err := f.plugin.MoveLeader(ctx, &out, ns, "example", target); err != nil {
		t.Fatal(err)
	}
	if got := f.podOf(t, f.health(t).LeaderID); got != target || !strings.Contains(out.String(), "to "+target) {
		t.Fatalf("leader is %s after moving it to %s; printed %q", got, target, out.String())
	}
	out.Reset()
	if err := f.plugin.MoveLeader(ctx, &out, ns, "example", target); err != nil || !strings.Contains(out.String(), "leads already") {
		t.Fatalf("moving to the leader = %v, %q", err, out.String())
	}
	out.Reset()
	if err := f.plugin.MoveLeader(ctx, &out, ns, "example", ""); err != nil {
		t.Fatal(err)
	}
	if got := f.podOf(t, f.health(t).LeaderID); got == target {
		t.Fatalf("move-leader without --to left %s leading", got)
	}
}

func TestSnapshot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	ctx := t.Context()
	if err := f.members[0].Fill(ctx, "k", 100, 1<<10); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "example.db")
	var out bytes.Buffer
	if err := f.plugin.Snapshot(ctx, &out, ns, "example", path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := backuptest.CheckSnapshot(t.TempDir(), data)
	if err != nil || keys < 100 {
		t.Fatalf("the saved snapshot restores to %d keys, %v; want at least 100", keys, err)
	}
	if !strings.Contains(out.String(), "saved "+path) || !strings.Contains(out.String(), "etcd 3.5.21") {
		t.Errorf("snapshot printed %q", out.String())
	}
	leftovers, _ := filepath.Glob(path + ".part-*")
	if len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

func TestTLSClusterWithoutReadableSecret(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	c := f.cluster.DeepCopy()
	c.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{OperatorSecret: "etcd-client-tls", Member: &api.MemberSecret{ServerSecret: "server"}}}
	f.plugin.Etcd = etcdfake.NewSimpleClientset(c)
	err := f.plugin.Status(t.Context(), &bytes.Buffer{}, ns, "example")
	if err == nil || !strings.Contains(err.Error(), "pass your own with --cert, --key and --cacert") {
		t.Fatalf("status of a TLS cluster without its secret = %v", err)
	}
}

func TestNoSuchCluster(t *testing.T) {
	t.Parallel()
	p := &Plugin{Kube: kubefake.NewSimpleClientset(), Etcd: etcdfake.NewSimpleClientset(), Forwarder: &directForwarder{}}
	err := p.Status(context.Background(), &bytes.Buffer{}, ns, "missing")
	if err == nil || !strings.Contains(err.Error(), "get EtcdCluster team-a/missing") {
		t.Fatalf("status of a missing cluster = %v", err)
	}
}

func TestBacksUp(t *testing.T) {
	c := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: ns}}
	tests := []struct {
		endpoint string
		want     bool
	}{
		{"http://example-client:2379", true},
		{"https://example-client.team-a.svc:2379", true},
		{"http://example-client.other-ns.svc:2379", false},
		{"http://example-abc.example.team-a.svc:2379", true},
		{"http://example-abc.example:2379", true},
		{"http://examples-client:2379", false},
		{"http://other-client:2379", false},
	}
	for _, tt := range tests {
		b := &api.EtcdBackup{Spec: api.BackupSpec{EtcdEndpoints: []string{tt.endpoint}}}
		if got := backsUp(b, c); got != tt.want {
			t.Errorf("backsUp(%s) = %v, want %v", tt.endpoint, got, tt.want)
		}
	}
}

func TestNoSpaceRecoveredByHand(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, 3, 1<<20)
	ctx := t.Context()
	cli, err := f.members[0].Client()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	// Ten keys written over and over: history, not live data, fills the
	// quota, so compaction and defragmentation can make room.
	value := strings.Repeat("x", 4<<10)
	for i := 0; err == nil && i < 2000; i++ {
		_, err = cli.Put(ctx, fmt.Sprintf("k%d", i%10), value)
	}
	if err == nil || !strings.Contains(err.Error(), "database space exceeded") {
		t.Fatalf("filling a 1 MiB quota = %v, want NOSPACE", err)
	}
	var out bytes.Buffer
	if err := f.plugin.Status(ctx, &out, ns, "example"); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`Alarms:\s+NOSPACE on example-m\d`).MatchString(out.String()) ||
		!regexp.MustCompile(`(?m)^example-m\d .*NOSPACE$`).MatchString(out.String()) {
		t.Fatalf("status does not show the NOSPACE alarm:\n%s", out.String())
	}
	for _, step := range []func() error{
		func() error { return f.plugin.Compact(ctx, &out, ns, "example") },
		func() error { return f.plugin.Defragment(ctx, &out, ns, "example", "") },
		func() error { return f.plugin.DisarmNoSpace(ctx, &out, ns, "example") },
	} {
		if err := step(); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
	}
	if !strings.Contains(out.String(), "disarmed NOSPACE on example-m") {
		t.Errorf("disarm printed:\n%s", out.String())
	}
	out.Reset()
	if err := f.plugin.Status(ctx, &out, ns, "example"); err != nil || !strings.Contains(out.String(), "Alarms:       none") {
		t.Fatalf("status after recovery = %v:\n%s", err, out.String())
	}
	if _, err := cli.Put(ctx, "after", "room again"); err != nil {
		t.Fatalf("put after recovery: %v", err)
	}
	out.Reset()
	if err := f.plugin.DisarmNoSpace(ctx, &out, ns, "example"); err != nil || !strings.Contains(out.String(), "no NOSPACE alarm") {
		t.Fatalf("disarm with nothing to disarm = %v, %q", err, out.String())
	}
}
