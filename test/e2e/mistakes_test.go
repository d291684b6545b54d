//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// fixedWithin is how long a fixed spec may take to heal a cluster that never
// served: a pass or two, the pod's start and its readiness, far below the
// operator's pending timeout (5 minutes), which must not be what heals it.
const fixedWithin = 90 * time.Second

// mistake is a cluster made with a mistake in its spec, watched: every pod
// of it ever seen, and the reasons its status gave.
type mistake struct {
	t    *testing.T
	name string
	pods map[types.UID]string
}

// makeMistake creates a one-member cluster in the shared operator's
// namespace, shaped by edit, and waits until status.reason says what
// wantReason names, within a minute of the first pod.
func makeMistake(t *testing.T, prefix string, edit func(*api.EtcdCluster), wantReason ...string) *mistake {
	return makeMistakeSaidWithin(t, prefix, edit, invalidReportTimeout, wantReason...)
}

// makeMistakeSaidWithin is makeMistake for a mistake that shows only after
// a while: status.reason must name it within said.
func makeMistakeSaidWithin(t *testing.T, prefix string, edit func(*api.EtcdCluster), said time.Duration, wantReason ...string) *mistake {
	t.Helper()
	m := &mistake{t: t, name: framework.UniqueName(prefix), pods: map[types.UID]string{}}
	cl := framework.NewCluster(m.name, 1, "3.5.21")
	edit(cl)
	createCluster(t, cl)
	m.waitReason("status.reason to name the mistake", said, wantReason...)
	return m
}

// waitReason waits until status.reason holds every part of want, counting
// the pods seen meanwhile.
func (m *mistake) waitReason(what string, within time.Duration, want ...string) string {
	m.t.Helper()
	var reason string
	err := framework.WaitFor(m.t.Context(), within, time.Second, what, func(ctx context.Context) (bool, string, error) {
		m.see(ctx)
		cl, err := f.GetCluster(ctx, opNS, m.name)
		if err != nil {
			return false, err.Error(), nil
		}
		reason = cl.Status.Reason
		for _, w := range want {
			if !strings.Contains(reason, w) {
				return false, fmt.Sprintf("reason %q", reason), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Logf("%s: %s", m.name, reason)
	return reason
}

// waitPodsMade waits until n pods of the cluster have been seen.
func (m *mistake) waitPodsMade(n int, within time.Duration) {
	m.t.Helper()
	err := framework.WaitFor(m.t.Context(), within, time.Second, fmt.Sprintf("%d pods of %s made", n, m.name), func(ctx context.Context) (bool, string, error) {
		m.see(ctx)
		return len(m.pods) >= n, fmt.Sprintf("pods %v", m.pods), nil
	})
	if err != nil {
		m.t.Fatal(err)
	}
}

// see records the pods of the cluster there are now.
func (m *mistake) see(ctx context.Context) {
	pods, err := f.ClusterPods(ctx, opNS, m.name)
	if err != nil {
		return
	}
	for _, p := range pods {
		m.pods[p.UID] = p.Name
	}
}

// watchFor watches the cluster for d, polling every second: status.reason
// must keep saying mustSay, and at most two new pods may be made meanwhile.
func (m *mistake) watchFor(d time.Duration, mustSay string) {
	m.t.Helper()
	ctx := m.t.Context()
	before := len(m.pods)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		m.see(ctx)
		cl, err := f.GetCluster(ctx, opNS, m.name)
		if err != nil {
			continue
		}
		if !strings.Contains(cl.Status.Reason, mustSay) {
			m.t.Errorf("status.reason %q does not say %q while the mistake lasts", cl.Status.Reason, mustSay)
			return
		}
	}
	m.t.Logf("%s: %d pods made in %v while the mistake lasted (%d before)", m.name, len(m.pods)-before, d, before)
	if made := len(m.pods) - before; made > 2 {
		m.t.Errorf("%d pods were made in %v for a mistake that stays: no back-off", made, d)
	}
}

// fix patches the spec and waits for the cluster to serve within
// fixedWithin.
func (m *mistake) fix(spec map[string]any) {
	m.t.Helper()
	if _, err := f.PatchClusterSpec(m.t.Context(), opNS, m.name, spec); err != nil {
		m.t.Fatal(err)
	}
	start := time.Now()
	waitReady(m.t, opNS, m.name, 1, fixedWithin)
	m.t.Logf("%s: ready %.1fs after the fix", m.name, time.Since(start).Seconds())
	if err := f.PutAndGet(m.t.Context(), opNS, m.name, false, "/e2e/fixed", "yes", dataTimeout); err != nil {
		m.t.Fatal(err)
	}
}

// TestForbiddenSysctlBacksOffAndHealsWithTheFix: a one-member cluster whose
// pod asks for a sysctl the kubelet does not allow. The kubelet rejects each
// seed; after the first, made again at once, the operator makes the next one
// after a wait that grows, not one a second, and status.reason names the
// rejection all along. Removing the
// sysctl heals the cluster at once, not after the back-off.
func TestForbiddenSysctlBacksOffAndHealsWithTheFix(t *testing.T) {
	t.Parallel()
	m := makeMistake(t, "sysctl", func(cl *api.EtcdCluster) {
		cl.Spec.Pod = &api.PodPolicy{SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "65536"}}}}
	}, "SysctlForbidden")
	// The first seed rejected is made again at once, and status.reason is
	// blank while the new one starts: nothing says yet that the mistake
	// stays. The back-off starts with the second rejection, and from then on
	// status.reason names it all along.
	m.waitPodsMade(2, changeTimeout)
	m.waitReason("status.reason to name the mistake again", changeTimeout, "SysctlForbidden")
	m.watchFor(45*time.Second, "SysctlForbidden")
	m.fix(map[string]any{"pod": map[string]any{"securityContext": nil}})
}

// TestSeedWithABadEnvironmentSaysEtcdsErrorAndComesBackAfterTheFix: a seed
// whose etcd exits at start (an etcdEnv value etcd refuses). status.reason
// shows etcd's own complaint, not the end of a stack trace; removing the
// variable makes the seed again from the fixed spec, though its old pod
// crash-loops on the old environment, since it never served.
func TestSeedWithABadEnvironmentSaysEtcdsErrorAndComesBackAfterTheFix(t *testing.T) {
	t.Parallel()
	m := makeMistake(t, "badenv", func(cl *api.EtcdCluster) {
		cl.Spec.Pod = &api.PodPolicy{EtcdEnv: []corev1.EnvVar{{Name: "ETCD_LOG_LEVEL", Value: "bogus"}}}
	}, "bogus")
	m.fix(map[string]any{"pod": map[string]any{"etcdEnv": nil}})
}

// TestSeedOfAWrongImageHealsWithTheFixNotTheTimer: a one-member cluster whose
// repository names an image that cannot be pulled. Once the repository is
// fixed, the seed is made again at the next pass, not at the pending timeout
// counted from the cluster's creation.
func TestSeedOfAWrongImageHealsWithTheFixNotTheTimer(t *testing.T) {
	t.Parallel()
	m := makeMistake(t, "badrepo", func(cl *api.EtcdCluster) {
		cl.Spec.Repository = "localhost/no-such-etcd"
	}, "Image")
	m.fix(map[string]any{"repository": nil})
}

// TestWrongClusterDomainIsSaidAndHealsWithTheFix: a one-member cluster whose
// spec.pod.ClusterDomain is not the Kubernetes cluster's. Its pod's check-dns
// never resolves the member's name; status.reason says so, naming the name
// and the field, once cluster DNS's cache of a name not found yet is past,
// and fixing the domain makes the seed again at once.
func TestWrongClusterDomainIsSaidAndHealsWithTheFix(t *testing.T) {
	t.Parallel()
	m := makeMistakeSaidWithin(t, "domain", func(cl *api.EtcdCluster) {
		cl.Spec.Pod = &api.PodPolicy{ClusterDomain: ".cluster.wrong"}
	}, 90*time.Second, "waits for its DNS name", ".cluster.wrong", "spec.pod.ClusterDomain")
	m.fix(map[string]any{"pod": map[string]any{"ClusterDomain": nil}})
}
