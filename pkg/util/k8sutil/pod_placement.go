package k8sutil

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// ZoneLabel is the well-known node label of a node's zone.
const ZoneLabel = corev1.LabelTopologyZone

// spreadPreferenceWeight is the weight of the default preference for a node
// without another member: the highest the scheduler takes, so that among
// preferences it weighs most, while it never keeps a pod from scheduling.
const spreadPreferenceWeight = 100

// memberPlacement is where the scheduler may put a member pod: its affinity
// and its topology spread constraints.
//
//   - spec.pod.affinity or spec.pod.topologySpreadConstraints set: the user's,
//     as given (a constraint without selector selects the cluster's members);
//   - spec.pod.antiAffinity true and no affinity: the original's required rule
//     of one member per node, with the user's constraints if any
//     (WithDefaults fills the rule in as the affinity; a cluster that was not
//     defaulted gets it here alike);
//   - nothing said of placement: members spread over nodes and zones, softly.
//
// The default is a preference, never a requirement: a cluster of one node
// (a laptop, a CI cluster) or of one zone still schedules every member,
// since a member Pending for want of a second node is worse than two members
// on one node. A user who wants it required says so (antiAffinity, or their
// own affinity or constraints with DoNotSchedule).
func memberPlacement(clusterName string, policy *v1beta2.PodPolicy) (*corev1.Affinity, []corev1.TopologySpreadConstraint) {
	affinity := policy.Affinity.DeepCopy()
	if affinity == nil && policy.AntiAffinity {
		affinity = v1beta2.OnePerNode(clusterName)
	}
	if affinity != nil || len(policy.TopologySpreadConstraints) > 0 {
		return affinity, spreadConstraints(clusterName, policy.TopologySpreadConstraints)
	}
	return defaultSpreadAffinity(clusterName), defaultSpreadConstraints(clusterName)
}

// defaultSpreadAffinity prefers a node that runs no other member of the
// cluster: losing a node then takes at most one member. Pod anti-affinity
// counts the members already on a node, which a spread constraint of skew 1
// tells less sharply while the cluster has fewer members than nodes.
func defaultSpreadAffinity(clusterName string) *corev1.Affinity {
	return &corev1.Affinity{
		PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: spreadPreferenceWeight,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchLabels: ClusterLabels(clusterName)},
					TopologyKey:   corev1.LabelHostname,
				},
			}},
		},
	}
}

// defaultSpreadConstraints spread the cluster's members evenly over nodes
// and zones, scheduling anyway when they cannot be: a zone that holds a
// quorum of members takes the quorum with it when it goes. Nodes without a
// zone label are left out of the zone spreading by the scheduler, so a
// cluster without zones is spread over nodes only.
func defaultSpreadConstraints(clusterName string) []corev1.TopologySpreadConstraint {
	constraint := func(key string) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{
			MaxSkew:           1,
			TopologyKey:       key,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: ClusterLabels(clusterName)},
		}
	}
	return []corev1.TopologySpreadConstraint{constraint(corev1.LabelHostname), constraint(ZoneLabel)}
}
