package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
)

// This file tells the user when the members are not spread: two running
// members on one node, or a zone holding a quorum of them, so that one node or
// zone lost takes more than one member, or the quorum. It is advice only: the
// operator never moves a member for it (moving one is a new member and a
// full copy of the data, and what the scheduler could not spread before it
// may not spread again). Member pods are spread softly where they are made
// (k8sutil's default placement); this is what tells that the scheduler could
// not, or that the pods were made before that placement.

// zoneRereadInterval is how long a node's zone is taken as read: zones of
// nodes do not move, and a cluster at rest must not cost a request a pass.
const zoneRereadInterval = 10 * time.Minute

// zoneCache keeps the zones of the nodes that members ran on, read with a
// Get of each node. Whether nodes may be read is asked first (a
// SelfSubjectAccessReview, which every role may create), so that an operator
// without the right (a namespaced Role cannot grant it) makes no request its
// role refuses; it then asks again every ReprobeInterval, and finds a rule
// added later.
type zoneCache struct {
	nodes map[string]zoneRead
	// denied says why nodes may not be read, as asked at askedAt; asked is
	// set once it was asked.
	asked   bool
	askedAt time.Time
	denied  string
}

// zoneRead is one node's zone as read: "" when the node has no zone label
// or could not be read (err then says why).
type zoneRead struct {
	zone string
	err  string
	at   time.Time
}

// zonesOf returns the zones of nodes, by node name, for those that have
// one, and why any could not be read ("" when all were).
func (z *zoneCache) zonesOf(ctx context.Context, kube kubernetes.Interface, nodes []string, now time.Time) (map[string]string, string) {
	if len(nodes) == 0 {
		return nil, ""
	}
	if denied := z.readNodesDenied(ctx, kube, now); denied != "" {
		return nil, denied
	}
	if z.nodes == nil {
		z.nodes = map[string]zoneRead{}
	}
	zones := map[string]string{}
	var unknown []string
	for _, name := range nodes {
		r, ok := z.nodes[name]
		if !ok || now.Sub(r.at) >= zoneRereadInterval {
			node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsForbidden(err):
				// The rule was taken away since it was asked.
				z.askedAt, z.denied = now, nodesDenied
				return nil, z.denied
			case err != nil:
				r = zoneRead{err: fmt.Sprintf("node %s: %v", name, err), at: now}
			default:
				r = zoneRead{zone: node.Labels[k8sutil.ZoneLabel], at: now}
			}
			z.nodes[name] = r
		}
		if r.zone != "" {
			zones[name] = r.zone
		} else if r.err != "" {
			unknown = append(unknown, r.err)
		}
	}
	for name := range z.nodes {
		if !slices.Contains(nodes, name) {
			delete(z.nodes, name)
		}
	}
	return zones, strings.Join(unknown, ", ")
}

// readNodesDenied says why nodes may not be read, "" when they may: asked once
// (a SelfSubjectAccessReview, so that no refused request is made), and
// again every ReprobeInterval while denied. Every reader of nodes asks it.
func (z *zoneCache) readNodesDenied(ctx context.Context, kube kubernetes.Interface, now time.Time) string {
	if !z.asked || z.denied != "" && now.Sub(z.askedAt) >= statusutil.ReprobeInterval {
		z.asked, z.askedAt, z.denied = true, now, mayReadNodes(ctx, kube)
	}
	return z.denied
}

// nodesDenied is why zones are unknown to an operator whose role does not
// let it read nodes.
const nodesDenied = "the operator's role does not grant get on nodes"

// mayReadNodes asks whether the operator may get nodes: "" when it may,
// otherwise why zones are unknown.
func mayReadNodes(ctx context.Context, kube kubernetes.Interface) string {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes"},
	}}
	out, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	switch {
	case err != nil:
		return fmt.Sprintf("could not ask whether nodes may be read: %v", err)
	case !out.Status.Allowed:
		return nodesDenied
	}
	return ""
}

// observeZones reads the zones of the nodes the members run on, for a
// cluster big enough to be spread.
func (c *Cluster) observeZones(ctx context.Context, s *snapshot) {
	if s.spec.Spec.Size < minSpreadSize {
		return
	}
	// Before classify: every running pod of the cluster, members or not.
	var nodes []string
	for _, p := range s.pods {
		if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && !slices.Contains(nodes, p.Spec.NodeName) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	slices.Sort(nodes)
	s.nodeZones, s.zonesUnknown = c.zones.zonesOf(ctx, c.cfg.KubeClient, nodes, s.now)
}

// minSpreadSize is the least size told about its placement: one member has
// no other to be apart from, and two lose their quorum with either.
const minSpreadSize = 3

// memberPlace is where a running member is.
type memberPlace struct {
	member, node, zone string
}

// runningMemberPods are the pods of the members running on a node: those of
// the membership, or, while it is unknown, every pod of the cluster.
func runningMemberPods(s *snapshot) []*corev1.Pod {
	var out []*corev1.Pod
	add := func(p *corev1.Pod) {
		if p != nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
			out = append(out, p)
		}
	}
	if s.membership == nil {
		for _, name := range sortedKeys(s.pods) {
			add(s.pods[name])
		}
		return out
	}
	for _, name := range sortedKeys(s.views) {
		if m := s.views[name]; m.state == memberRunning {
			add(m.pod)
		}
	}
	return out
}

// placementProblem is the advisory problem of members not spread, if any.
func placementProblem(s *snapshot) (problem, bool) {
	if s.spec.Spec.Size < minSpreadSize || s.beingDeleted {
		return problem{}, false
	}
	// Told of a cluster at its size only: while it grows (its bootstrap, a
	// scale, a replacement) or while etcd has not said who its members are,
	// the members counted and the quorum they hold move from pass to pass,
	// and an arrangement told then ("2 of 1 members") would be a passing one.
	if s.membership == nil || s.quorum.voters != s.spec.Spec.Size {
		return problem{}, false
	}
	var places []memberPlace
	for _, p := range runningMemberPods(s) {
		if m := s.membership[p.Name]; m != nil && !m.IsLearner {
			places = append(places, memberPlace{member: p.Name, node: p.Spec.NodeName, zone: s.nodeZones[p.Spec.NodeName]})
		}
	}
	// Members started together are voters before their pods run: while one
	// is not running yet, where it lands is not known, and the arrangement
	// told would be a passing one too.
	if len(places) < s.spec.Spec.Size {
		return problem{}, false
	}
	msg := notSpread(places, s.spec.Spec.Size, s.zonesUnknown)
	if msg == "" {
		return problem{}, false
	}
	// Keyed by the message: a new arrangement is announced again, the same
	// one back within causeMemory is not.
	return problem{kind: problemMembersNotSpread, msg: msg, topic: msg}, true
}

// notSpread says which nodes run more than one of places and which zone
// holds a quorum of a cluster of size members; "" when none does. Zones are
// judged only when the members are seen in two zones or more: members all in
// one zone are a cluster without other zones to spread over, as far as the
// operator can tell. zonesUnknown, when set, is why zones could not be read.
func notSpread(places []memberPlace, size int, zonesUnknown string) string {
	needed := size/2 + 1
	byNode, byZone := map[string][]string{}, map[string][]string{}
	for _, p := range places {
		byNode[p.node] = append(byNode[p.node], p.member)
		if p.zone != "" {
			byZone[p.zone] = append(byZone[p.zone], p.member)
		}
	}
	var parts []string
	for _, node := range sortedKeys(byNode) {
		ms := byNode[node]
		if len(ms) < 2 {
			continue
		}
		parts = append(parts, fmt.Sprintf("members %s run on one node, %s: losing it takes %s", strings.Join(ms, ", "), node, takes(len(ms), size, needed)))
	}
	if len(byZone) >= 2 {
		for _, zone := range sortedKeys(byZone) {
			if ms := byZone[zone]; len(ms) >= needed {
				parts = append(parts, fmt.Sprintf("zone %s holds a quorum (members %s): losing it takes %s", zone, strings.Join(ms, ", "), takes(len(ms), size, needed)))
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	msg := "members are not spread: " + strings.Join(parts, ", and ") +
		". Add nodes or zones for the scheduler to spread members over; a member moves only when its pod is made again (docs/user-guide/clusters.md#placement)"
	if zonesUnknown != "" {
		msg += " (zones unknown: " + zonesUnknown + ")"
	}
	return msg
}

// takes says what losing n of size members costs.
func takes(n, size, needed int) string {
	if n >= needed {
		return fmt.Sprintf("%d of %d members, and the quorum (%d needed)", n, size, needed)
	}
	return fmt.Sprintf("%d of %d members", n, size)
}
