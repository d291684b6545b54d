package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
)

// onNode puts the pod on node.
func onNode(node string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

// placed puts each member's pod on the node of the same index.
func placed(names []string, nodes ...string) snapMod {
	return func(s *snapshot) {
		for i, n := range names {
			podIs(n, onNode(nodes[i]))(s)
		}
	}
}

// inZones gives the nodes their zones, alternately node and zone.
func inZones(nodeZone ...string) snapMod {
	return func(s *snapshot) {
		s.nodeZones = map[string]string{}
		for i := 0; i+1 < len(nodeZone); i += 2 {
			s.nodeZones[nodeZone[i]] = nodeZone[i+1]
		}
	}
}

func zonesUnknown(why string) snapMod { return func(s *snapshot) { s.zonesUnknown = why } }

// TestMembersNotSpread is when status.reason says the members are not
// spread: an advisory problem, never one that holds anything up.
func TestMembersNotSpread(t *testing.T) {
	three := []string{memberA, memberB, memberC}
	five := []string{memberA, memberB, memberC, "example-d", "example-e"}
	cases := []struct {
		name string
		mods []snapMod
		// want are in the problem's message; none wants no problem.
		want []string
		none bool
	}{
		{name: "three members on one node are told, with the quorum the node takes",
			mods: mods(placed(three, "n1", "n1", "n1")),
			want: []string{"members example-a, example-b, example-c run on one node, n1: losing it takes 3 of 3 members, and the quorum (2 needed)"}},
		{name: "two of three members on one node take the quorum with it",
			mods: mods(placed(three, "n1", "n1", "n2")),
			want: []string{"members example-a, example-b run on one node, n1: losing it takes 2 of 3 members, and the quorum"}},
		{name: "members on nodes of their own are spread",
			mods: mods(placed(three, "n1", "n2", "n3")),
			none: true},
		{name: "members spread over nodes and three zones are spread",
			mods: mods(placed(three, "n1", "n2", "n3"), inZones("n1", "z1", "n2", "z2", "n3", "z3")),
			none: true},
		{name: "five members with three in one zone: the zone holds a quorum",
			mods: mods(spec(withSize(5)), members(five...), placed(five, "n1", "n2", "n3", "n4", "n5"),
				inZones("n1", "z1", "n2", "z1", "n3", "z1", "n4", "z2", "n5", "z3")),
			want: []string{"zone z1 holds a quorum (members example-a, example-b, example-c): losing it takes 3 of 5 members, and the quorum (3 needed)"}},
		{name: "five members two to a zone are spread",
			mods: mods(spec(withSize(5)), members(five...), placed(five, "n1", "n2", "n3", "n4", "n5"),
				inZones("n1", "z1", "n2", "z1", "n3", "z2", "n4", "z2", "n5", "z3")),
			none: true},
		{name: "two members of five on one node are told, without the quorum",
			mods: mods(spec(withSize(5)), members(five...), placed(five, "n1", "n1", "n3", "n4", "n5")),
			want: []string{"losing it takes 2 of 5 members."}},
		{name: "members all in one zone are not told of it: no other zone is seen",
			mods: mods(placed(three, "n1", "n2", "n3"), inZones("n1", "z1", "n2", "z1", "n3", "z1")),
			none: true},
		{name: "with zones unknown, members sharing a node are told, and why zones are unknown",
			mods: mods(placed(three, "n1", "n1", "n2"), zonesUnknown(nodesDenied)),
			want: []string{"run on one node, n1", "(zones unknown: the operator's role does not grant get on nodes)"}},
		{name: "with zones unknown, members spread over nodes are not told",
			mods: mods(placed(three, "n1", "n2", "n3"), zonesUnknown(nodesDenied)),
			none: true},
		{name: "a member that is not running is not counted",
			mods: mods(placed(three, "n1", "n1", "n2"), podIs(memberB, pendingFor(time.Minute))),
			none: true},
		{name: "members started together, one not running yet, are not told of: where it lands is not known yet",
			mods: mods(placed(three, "n1", "n1", "n1"), podIs(memberC, pendingFor(time.Second))),
			none: true},
		{name: "pods not scheduled yet are not counted",
			mods: mods(),
			none: true},
		{name: "a member of a cluster of one has no other to be apart from",
			mods: mods(spec(withSize(1)), members(memberA), onlyPods(memberA), placed([]string{memberA}, "n1")),
			none: true},
		{name: "while the membership is unknown nothing is told: it is told once etcd says who the members are",
			mods: mods(noMembership, placed(three, "n1", "n1", "n1")),
			none: true},
		{name: "a cluster still growing to its size is not told: the quorum its members hold is a passing one",
			mods: mods(spec(withSize(5)), placed(three, "n1", "n1", "n1")),
			none: true},
		{name: "a cluster being deleted is not told",
			mods: mods(placed(three, "n1", "n1", "n1"), beingDeleted),
			none: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testSnapshot(tc.mods...)
			p, ok := placementProblem(s)
			if tc.none {
				if ok {
					t.Fatalf("told %q", p.msg)
				}
				return
			}
			if !ok {
				t.Fatal("not told")
			}
			for _, w := range tc.want {
				if !strings.Contains(p.msg, w) {
					t.Errorf("message %q\nlacks %q", p.msg, w)
				}
			}
			if !p.kind.info().advisory || blocking(p) {
				t.Error("the problem holds the cluster up")
			}
			// It reaches status.reason through assess, after what holds the
			// cluster up.
			if reason := joinMessages(assess(s)); !strings.Contains(reason, p.msg) {
				t.Errorf("status.reason %q lacks it", reason)
			}
			// The same arrangement is one problem; another is a new one.
			again, _ := placementProblem(testSnapshot(tc.mods...))
			if again.key() != p.key() {
				t.Error("the same arrangement is keyed anew")
			}
		})
	}
}

func TestMembersNotSpreadIsAnnouncedOncePerArrangement(t *testing.T) {
	three := []string{memberA, memberB, memberC}
	oneNode, _ := placementProblem(testSnapshot(placed(three, "n1", "n1", "n1")))
	twoNodes, _ := placementProblem(testSnapshot(placed(three, "n1", "n1", "n2")))
	if oneNode.key() == twoNodes.key() {
		t.Error("a new arrangement is not a new problem")
	}
}

// nodeWithZone is a node in zone ("" for none).
func nodeWithZone(name, zone string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	if zone != "" {
		n.Labels[k8sutil.ZoneLabel] = zone
	}
	return n
}

func nodeGets(kube *fake.Clientset) int { return countActions(kube, "get", "nodes") }

func countActions(kube *fake.Clientset, verb, resource string) int {
	n := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// nodesReadable makes the fake apiserver answer access reviews for get
// nodes with *allowed.
func nodesReadable(kube *fake.Clientset, allowed *bool) *fake.Clientset {
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		attrs := review.Spec.ResourceAttributes
		review.Status.Allowed = *allowed && attrs.Verb == "get" && attrs.Resource == "nodes" && attrs.Namespace == ""
		return true, review, nil
	})
	return kube
}

func TestZonesAreReadFromTheNodesAndKept(t *testing.T) {
	ctx := context.Background()
	allowed := true
	kube := nodesReadable(fake.NewClientset(nodeWithZone("n1", "z1"), nodeWithZone("n2", "z2"), nodeWithZone("n3", "")), &allowed)
	var z zoneCache
	zones, unknown := z.zonesOf(ctx, kube, []string{"n1", "n2", "n3", "gone"}, testStart)
	if len(zones) != 2 || zones["n1"] != "z1" || zones["n2"] != "z2" {
		t.Errorf("zones %v", zones)
	}
	if !strings.Contains(unknown, "node gone") {
		t.Errorf("a node that cannot be read is not said: %q", unknown)
	}
	if got := nodeGets(kube); got != 4 {
		t.Fatalf("%d node reads, want 4", got)
	}
	// A cluster at rest reads no node again until the interval is over.
	z.zonesOf(ctx, kube, []string{"n1", "n2", "n3"}, testStart.Add(time.Minute))
	if got := nodeGets(kube); got != 4 {
		t.Errorf("%d node reads within the interval, want none more", got)
	}
	z.zonesOf(ctx, kube, []string{"n1"}, testStart.Add(zoneRereadInterval))
	if got := nodeGets(kube); got != 5 {
		t.Errorf("%d node reads after the interval, want one more", got)
	}
	if len(z.nodes) != 1 {
		t.Errorf("nodes no member runs on are kept: %v", z.nodes)
	}
	if got := countActions(kube, "create", "selfsubjectaccessreviews"); got != 1 {
		t.Errorf("%d access reviews, want one: an allowed read is not asked again", got)
	}
	// With no member on a node, nothing is asked.
	before := len(kube.Actions())
	if zones, unknown := z.zonesOf(ctx, kube, nil, testStart.Add(time.Hour)); zones != nil || unknown != "" || len(kube.Actions()) != before {
		t.Errorf("no nodes: zones %v, unknown %q, %d requests", zones, unknown, len(kube.Actions())-before)
	}
}

func TestZonesWithoutTheRightToReadNodesAreUnknownAndAskedAgainLater(t *testing.T) {
	ctx := context.Background()
	allowed := false
	kube := nodesReadable(fake.NewClientset(nodeWithZone("n1", "z1")), &allowed)
	var z zoneCache
	zones, unknown := z.zonesOf(ctx, kube, []string{"n1", "n2"}, testStart)
	if zones != nil || unknown != nodesDenied {
		t.Errorf("zones %v, unknown %q", zones, unknown)
	}
	// The role's refusal is asked, not met: no request the role refuses.
	if got := nodeGets(kube); got != 0 {
		t.Errorf("%d node reads without the right, want none", got)
	}
	// Not asked again at every pass.
	z.zonesOf(ctx, kube, []string{"n1"}, testStart.Add(time.Minute))
	if got := countActions(kube, "create", "selfsubjectaccessreviews"); got != 1 {
		t.Errorf("%d access reviews before the reprobe, want 1", got)
	}
	// A rule added later is found.
	allowed = true
	zones, unknown = z.zonesOf(ctx, kube, []string{"n1"}, testStart.Add(statusutil.ReprobeInterval))
	if zones["n1"] != "z1" || unknown != "" {
		t.Errorf("after the rule was added: zones %v, unknown %q", zones, unknown)
	}
}

func TestZonesAreUnknownWhenTheRuleIsTakenAway(t *testing.T) {
	ctx := context.Background()
	allowed := true
	kube := nodesReadable(fake.NewClientset(nodeWithZone("n1", "z1")), &allowed)
	kube.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("no rule"))
	})
	var z zoneCache
	if zones, unknown := z.zonesOf(ctx, kube, []string{"n1"}, testStart); zones != nil || unknown != nodesDenied {
		t.Errorf("zones %v, unknown %q", zones, unknown)
	}
	z.zonesOf(ctx, kube, []string{"n1"}, testStart.Add(time.Minute))
	if got := nodeGets(kube); got != 1 {
		t.Errorf("%d node reads after a refusal, want no more before the reprobe", got)
	}
}

// TestMembersNotSpreadIsToldInStatusAndOneEvent runs passes of a cluster of
// five at rest whose members' nodes are read from a fake apiserver: three of
// them in one zone. The status and one Warning event say so, passes
// after it announce nothing again and read no node again, and the cluster
// is left alone.
func TestMembersNotSpreadIsToldInStatusAndOneEvent(t *testing.T) {
	five := []string{memberA, memberB, memberC, "example-d", "example-e"}
	zoneOf := map[string]string{"n1": "z1", "n2": "z1", "n3": "z1", "n4": "z2", "n5": "z3"}
	var nodes []runtime.Object
	for n, z := range zoneOf {
		nodes = append(nodes, nodeWithZone(n, z))
	}
	f := newFixture(t, newTestCluster(withSize(5)), nodes...)
	allowed := true
	nodesReadable(f.kube, &allowed)
	f.withMembers(five...)
	for i, name := range five {
		f.pod(name, onNode(fmt.Sprintf("n%d", i+1)))
	}
	f.kube.ClearActions()
	f.mustPass()
	want := "zone z1 holds a quorum (members example-a, example-b, example-c): losing it takes 3 of 5 members, and the quorum (3 needed)"
	if s := f.mustStatus(); !strings.Contains(s.Reason, want) {
		t.Errorf("status.reason = %q, want %q", s.Reason, want)
	}
	if n := countEvents(f.events(), "Warning MembersNotSpread"); n != 1 {
		t.Errorf("%d MembersNotSpread events, want 1", n)
	}
	if got := nodeGets(f.kube); got != len(five) {
		t.Errorf("%d node reads, want one per member's node", got)
	}
	f.kube.ClearActions()
	f.now = f.now.Add(time.Minute)
	f.mustPass()
	if n := countEvents(f.events(), "Warning MembersNotSpread"); n != 0 {
		t.Errorf("%d MembersNotSpread events for the same arrangement", n)
	}
	if got := nodeGets(f.kube); got != 0 {
		t.Errorf("%d node reads at rest, want none", got)
	}
	if pods := f.podActions(); len(pods) != 0 {
		t.Errorf("pod actions %v for an advisory", pods)
	}
}
