package k8sutil

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// AnnotationFirstOnClaim marks a member pod made in the same action as its
// claim: no pod ran on that claim before it, so while its etcd has not run
// the claim holds nothing. A pod made later on an existing claim does not
// carry it: an earlier pod may have written there.
const AnnotationFirstOnClaim = "etcd.database.coreos.com/first-on-claim"

// WithFirstOnClaim marks the pod as the first one on its member's claim.
func WithFirstOnClaim() PodOption {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[AnnotationFirstOnClaim] = "true"
	}
}

// IsFirstOnClaim tells whether the pod was made with its claim.
func IsFirstOnClaim(pod *corev1.Pod) bool {
	return pod.Annotations[AnnotationFirstOnClaim] == "true"
}

// StartedTogether reads the plan of a pod made to start with other members
// from one static initial cluster: its --initial-cluster ("name=peerURL"
// pairs, sorted) and --initial-cluster-token. A seed (one member), a member
// added to a running cluster (state existing) or a pod without an etcd
// container gives nil.
func StartedTogether(pod *corev1.Pod) (pairs []string, token string) {
	etcd := EtcdContainer(pod)
	if etcd == nil || etcdFlag(etcd, "initial-cluster-state") != ClusterStateNew {
		return nil, ""
	}
	pairs = InitialCluster(pod)
	if len(pairs) < 2 {
		return nil, ""
	}
	return pairs, etcdFlag(etcd, "initial-cluster-token")
}

// etcdFlag is the value of --name=value in the container's command, "" when
// it has none.
func etcdFlag(c *corev1.Container, name string) string {
	for _, arg := range c.Command {
		if v, ok := strings.CutPrefix(arg, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}
