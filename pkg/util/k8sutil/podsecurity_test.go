package k8sutil

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// restrictedViolations are the reasons the Pod Security admission's own
// evaluator (the code the apiserver runs) refuses pod at level "restricted".
func restrictedViolations(t *testing.T, pod *corev1.Pod) []string {
	t.Helper()
	eval, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		t.Fatal(err)
	}
	lv := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	var out []string
	for _, r := range eval.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec) {
		if !r.Allowed {
			out = append(out, r.ForbiddenReason+": "+r.ForbiddenDetail)
		}
	}
	return out
}

func withNonRootPod(c *v1beta2.EtcdCluster) {
	if c.Spec.Pod == nil {
		c.Spec.Pod = &v1beta2.PodPolicy{}
	}
	c.Spec.Pod.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot: new(true),
		RunAsUser:    new(int64(65532)),
		FSGroup:      new(int64(65532)),
	}
}

// Member pods meet Pod Security "restricted" once spec.pod.securityContext
// runs them as non-root: every container the operator adds (check-dns, the
// join wait, etcd) brings the rest itself.
func TestMemberPodsMeetRestrictedWithANonRootSecurityContext(t *testing.T) {
	waiting := MembershipWait{Image: "openetcd/etcd-operator:v0.1.0", PullPolicy: corev1.PullIfNotPresent, Timeout: 5 * time.Minute}
	joining := func(c *v1beta2.EtcdCluster) *corev1.Pod {
		seed, third := newTestMember(c, testSeed), newTestMember(c, "example-zc8hd5mv3p")
		members := etcdutil.NewMemberSet(seed, third)
		return NewEtcdPod(c, third, c.Spec.Version, members.PeerURLPairs(), ClusterStateExisting, "",
			WithMembershipWait(third, members.PeerURLPairs(), waiting))
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
	}{
		{"seed of 3.5", newSeedPod(newTestCluster(withNonRootPod))},
		{"seed of 3.6", newSeedPod(newTestCluster(withNonRootPod, withVersion("3.6.6")))},
		{"seed of 3.4", newSeedPod(newTestCluster(withNonRootPod, withVersion("3.4.37")))},
		{"seed with TLS", newSeedPod(newTestCluster(withNonRootPod, withTLS))},
		{"seed with a persistent volume", newSeedPod(newTestCluster(withNonRootPod, withPVC))},
		{"joining member waiting for its membership, with TLS", joining(newTestCluster(withNonRootPod, withTLS))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v := restrictedViolations(t, tc.pod); len(v) > 0 {
				t.Errorf("refused by Pod Security restricted: %v", v)
			}
		})
	}
}

// Without it, running as non-root is all that is missing: old etcd images run
// as root, so the operator cannot choose a user for them.
func TestMemberPodsLackOnlyNonRootByDefault(t *testing.T) {
	v := restrictedViolations(t, newSeedPod(newTestCluster()))
	if len(v) != 1 || !strings.HasPrefix(v[0], "runAsNonRoot != true") {
		t.Errorf("violations %v, want only runAsNonRoot", v)
	}
}

// From 3.4, every container of a member pod runs on a read-only root
// filesystem: etcd writes only its data directory, a volume. Older releases'
// etcd keeps a writable root; the init containers have a read-only one anyway.
func TestMemberContainersHaveAReadOnlyRootFrom34(t *testing.T) {
	for _, tc := range []struct {
		version      string
		etcdReadOnly bool
	}{{"3.6.6", true}, {"3.5.21", true}, {"3.4.37", true}, {"3.3.27", false}, {"3.2.32", false}} {
		t.Run(tc.version, func(t *testing.T) {
			pod := newSeedPod(newTestCluster(withVersion(tc.version)))
			for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
				want := c.Name != EtcdContainerName || tc.etcdReadOnly
				got := c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem
				if got != want {
					t.Errorf("container %s: read-only root %v, want %v", c.Name, got, want)
				}
			}
		})
	}
}
