package k8sutil

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

func TestMemberPlacement(t *testing.T) {
	members := &metav1.LabelSelector{MatchLabels: ClusterLabels(testCluster)}
	soft := func(key string) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: members}
	}
	preferOwnNode := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight:          100,
			PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: members, TopologyKey: corev1.LabelHostname},
		}},
	}}
	onePerNode := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1beta2.LabelClusterName: testCluster}},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
	userAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"etcd"}}},
		}}},
	}}
	userZones := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule}
	userZonesOfMembers := userZones
	userZonesOfMembers.LabelSelector = members

	tests := []struct {
		name         string
		policy       *v1beta2.PodPolicy
		wantAffinity *corev1.Affinity
		wantSpread   []corev1.TopologySpreadConstraint
	}{
		{
			name:         "a spec saying nothing of placement spreads members over nodes and zones, softly",
			policy:       nil,
			wantAffinity: preferOwnNode,
			wantSpread:   []corev1.TopologySpreadConstraint{soft(corev1.LabelHostname), soft(corev1.LabelTopologyZone)},
		},
		{
			name:         "a node selector and tolerations say nothing of spreading: the default stays",
			policy:       &v1beta2.PodPolicy{NodeSelector: map[string]string{"disk": "ssd"}, Tolerations: []corev1.Toleration{{Key: "etcd", Operator: corev1.TolerationOpExists}}},
			wantAffinity: preferOwnNode,
			wantSpread:   []corev1.TopologySpreadConstraint{soft(corev1.LabelHostname), soft(corev1.LabelTopologyZone)},
		},
		{
			name:         "antiAffinity true keeps the original's required one member per node",
			policy:       &v1beta2.PodPolicy{AntiAffinity: true},
			wantAffinity: onePerNode,
		},
		{
			name:         "a user's affinity is used as given, with no default added",
			policy:       &v1beta2.PodPolicy{Affinity: userAffinity},
			wantAffinity: userAffinity,
		},
		{
			name:         "a user's affinity wins over antiAffinity",
			policy:       &v1beta2.PodPolicy{Affinity: userAffinity, AntiAffinity: true},
			wantAffinity: userAffinity,
		},
		{
			name:       "a user's topology spread is used as given, its selector defaulting to the members",
			policy:     &v1beta2.PodPolicy{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{userZones}},
			wantSpread: []corev1.TopologySpreadConstraint{userZonesOfMembers},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCluster(func(c *v1beta2.EtcdCluster) { c.Spec.Pod = tt.policy })
			before := c.DeepCopy()
			pod := newSeedPod(c)
			if !reflect.DeepEqual(pod.Spec.Affinity, tt.wantAffinity) {
				t.Errorf("affinity\n got %+v\nwant %+v", pod.Spec.Affinity, tt.wantAffinity)
			}
			if !reflect.DeepEqual(pod.Spec.TopologySpreadConstraints, tt.wantSpread) {
				t.Errorf("topology spread\n got %+v\nwant %+v", pod.Spec.TopologySpreadConstraints, tt.wantSpread)
			}
			if !reflect.DeepEqual(c, before) {
				t.Error("building the pod changed the cluster's spec")
			}
			// The default is no part of spec.pod: pods of running clusters keep
			// the policy hash they were made with.
			if tt.policy == nil && pod.Annotations[AnnotationPodPolicy] != PodPolicyHash(before) {
				t.Error("the pod's policy hash is not the spec's")
			}
		})
	}
}

func TestDefaultPlacementNeverRequiresASecondNodeOrZone(t *testing.T) {
	pod := newSeedPod(newTestCluster())
	if a := pod.Spec.Affinity; a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil || a.NodeAffinity != nil || a.PodAffinity != nil {
		t.Errorf("the default affinity requires something: %+v", a)
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway || c.MinDomains != nil {
			t.Errorf("constraint %+v can keep a member from scheduling on a one-node cluster", c)
		}
	}
}

func TestUndefaultedAntiAffinityStillRequiresOnePerNode(t *testing.T) {
	zones := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: ClusterLabels(testCluster)}}
	for _, tc := range []struct {
		name       string
		spread     []corev1.TopologySpreadConstraint
		wantSpread []corev1.TopologySpreadConstraint
	}{
		{"alone", nil, nil},
		{"with the user's constraints, kept beside it", []corev1.TopologySpreadConstraint{zones}, []corev1.TopologySpreadConstraint{zones}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1beta2.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: testCluster}, Spec: v1beta2.ClusterSpec{Version: "3.5.21",
				Pod: &v1beta2.PodPolicy{AntiAffinity: true, TopologySpreadConstraints: tc.spread}}}
			pod := newSeedPod(c)
			if !reflect.DeepEqual(pod.Spec.Affinity, v1beta2.OnePerNode(testCluster)) || !reflect.DeepEqual(pod.Spec.TopologySpreadConstraints, tc.wantSpread) {
				t.Errorf("placement %+v %+v", pod.Spec.Affinity, pod.Spec.TopologySpreadConstraints)
			}
			// Built alike, defaulted or not.
			if d := newSeedPod(c.WithDefaults()); !reflect.DeepEqual(d.Spec.Affinity, pod.Spec.Affinity) || !reflect.DeepEqual(d.Spec.TopologySpreadConstraints, pod.Spec.TopologySpreadConstraints) {
				t.Errorf("defaulted: placement %+v %+v", d.Spec.Affinity, d.Spec.TopologySpreadConstraints)
			}
		})
	}
}
