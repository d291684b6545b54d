package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func hostnameTerm(values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: values}}}
}

func localVolume(name string, terms ...corev1.NodeSelectorTerm) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if len(terms) > 0 {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}
	}
	return pv
}

func TestVolumeNodeIsTheOneHostnameOfARequiredAffinity(t *testing.T) {
	zone := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}
	notIn := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"n1"}}}}
	both := hostnameTerm("n1")
	both.MatchExpressions = append(both.MatchExpressions, zone.MatchExpressions...)
	for _, tc := range []struct {
		name string
		pv   *corev1.PersistentVolume
		want string
	}{
		{"a local volume of one node", localVolume("pv", hostnameTerm("n1")), "n1"},
		{"a network volume, no affinity", localVolume("pv"), ""},
		{"a volume of a zone follows its pod within the zone", localVolume("pv", zone), ""},
		{"a volume of several nodes", localVolume("pv", hostnameTerm("n1", "n2")), ""},
		{"two terms: either node will do", localVolume("pv", hostnameTerm("n1"), hostnameTerm("n2")), ""},
		{"NotIn names no node it is tied to", localVolume("pv", notIn), ""},
		{"a node and its zone: still that one node", localVolume("pv", both), "n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := volumeNode(tc.pv); got != tc.want {
				t.Errorf("volumeNode = %q, want %q", got, tc.want)
			}
		})
	}
}

// volumeSnapshot is a snapshot of members a, b and c on claims bound to
// pv-a, pv-b and pv-c, with the pods given running.
func volumeSnapshot(running ...string) *snapshot {
	s := &snapshot{now: testStart, pods: map[string]*corev1.Pod{}, claims: map[string]*corev1.PersistentVolumeClaim{}}
	for _, m := range []string{"a", "b", "c"} {
		s.claims[m] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: m}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + m}}
	}
	for _, m := range running {
		s.pods[m] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: m}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	return s
}

func volumeCluster(objects ...runtime.Object) (*Cluster, *fake.Clientset) {
	kube := fake.NewClientset(objects...)
	return &Cluster{cfg: Config{KubeClient: kube}, log: logrus.NewEntry(logrus.New())}, kube
}

func TestAMemberWhoseLocalVolumesNodeIsDeletedIsFound(t *testing.T) {
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	c, kube := volumeCluster(node("n1"), node("n2"),
		localVolume("pv-a", hostnameTerm("n1")), localVolume("pv-b", hostnameTerm("n2")), localVolume("pv-c", hostnameTerm("n3")))

	// Members that run cost no request.
	s := volumeSnapshot("a", "b", "c")
	c.observeVolumeNodes(context.Background(), s)
	if len(kube.Actions()) != 0 || s.volumeNodeGone != nil {
		t.Fatalf("every member runs: %d requests, gone %v", len(kube.Actions()), s.volumeNodeGone)
	}

	// b and c do not run: b's node is there, c's is deleted.
	s = volumeSnapshot("a")
	c.observeVolumeNodes(context.Background(), s)
	if len(s.volumeNodeGone) != 1 || s.volumeNodeGone["c"] != "n3" {
		t.Errorf("gone %v, want c on n3 only", s.volumeNodeGone)
	}
	if s.volumeNodesUnknown != "" {
		t.Errorf("unknown %q", s.volumeNodesUnknown)
	}
	if got := countActions(kube, "get", "persistentvolumes"); got != 2 {
		t.Errorf("%d volume reads, want 2", got)
	}
	// A volume's node is read once: it cannot change; the node is read
	// again at every pass, for evidence of this pass.
	s = volumeSnapshot("a")
	c.observeVolumeNodes(context.Background(), s)
	if got := countActions(kube, "get", "persistentvolumes"); got != 2 {
		t.Errorf("%d volume reads after a second pass, want still 2", got)
	}
	if got := countActions(kube, "get", "nodes"); got != 4 {
		t.Errorf("%d node reads after two passes, want 4", got)
	}
}

func TestANodeThatCannotBeReadIsNoEvidence(t *testing.T) {
	c, kube := volumeCluster(localVolume("pv-c", hostnameTerm("n3")))
	kube.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("the apiserver is restarting")
	})
	s := volumeSnapshot("a", "b")
	c.observeVolumeNodes(context.Background(), s)
	if s.volumeNodeGone != nil {
		t.Errorf("a failed read of the node is taken for evidence: %v", s.volumeNodeGone)
	}
	if !strings.Contains(s.volumeNodesUnknown, "claim c: read node n3") {
		t.Errorf("unknown %q does not say which claim and why", s.volumeNodesUnknown)
	}
}

func TestWithoutTheRightToReadVolumesMembersWaitAndItIsAskedAgainLater(t *testing.T) {
	c, kube := volumeCluster(localVolume("pv-c", hostnameTerm("n3")))
	kube.PrependReactor("get", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("persistentvolumes"), "pv-c", nil)
	})
	s := volumeSnapshot("a", "b")
	c.observeVolumeNodes(context.Background(), s)
	if s.volumeNodeGone != nil || !strings.Contains(s.volumeNodesUnknown, volumesDenied) {
		t.Fatalf("gone %v, unknown %q", s.volumeNodeGone, s.volumeNodesUnknown)
	}
	s = volumeSnapshot("a", "b")
	s.now = testStart.Add(time.Minute)
	c.observeVolumeNodes(context.Background(), s)
	if got := countActions(kube, "get", "persistentvolumes"); got != 1 {
		t.Errorf("%d volume reads within the re-probe interval, want the one refused", got)
	}
	s = volumeSnapshot("a", "b")
	s.now = testStart.Add(10 * time.Minute)
	c.observeVolumeNodes(context.Background(), s)
	if got := countActions(kube, "get", "persistentvolumes"); got != 2 {
		t.Errorf("%d volume reads after the re-probe interval, want one more", got)
	}
}
