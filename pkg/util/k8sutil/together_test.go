package k8sutil

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

func TestStartedTogetherReadsThePlanOfMembersStartedTogether(t *testing.T) {
	c := newTestCluster()
	a, b, d := newTestMember(c, "example-a"), newTestMember(c, "example-b"), newTestMember(c, "example-c")
	three := etcdutil.NewMemberSet(a, b, d).PeerURLPairs()
	tests := []struct {
		name      string
		pod       *corev1.Pod
		wantPairs []string
		wantToken string
	}{
		{"a member started together names every initial member and the token", NewEtcdPod(c, b, c.Spec.Version, three, ClusterStateNew, testToken), three, testToken},
		{"a seed started alone is no plan", newSeedPod(c), nil, ""},
		{"a member added to a running cluster is no plan", NewEtcdPod(c, b, c.Spec.Version, three, ClusterStateExisting, ""), nil, ""},
		{"a pod without an etcd container is no plan", &corev1.Pod{}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pairs, token := StartedTogether(tt.pod)
			if !slices.Equal(pairs, tt.wantPairs) || token != tt.wantToken {
				t.Errorf("StartedTogether = %v, %q; want %v, %q", pairs, token, tt.wantPairs, tt.wantToken)
			}
		})
	}
}

func TestOnlyAPodMadeWithItsClaimIsFirstOnIt(t *testing.T) {
	c := newTestCluster(withPVC)
	if IsFirstOnClaim(newSeedPod(c)) {
		t.Error("a pod made without the option says it is the first on its claim")
	}
	if !IsFirstOnClaim(newSeedPod(c, WithFirstOnClaim())) {
		t.Error("a pod made with its claim does not say it is the first on it")
	}
}
