package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
)

// A member on a claim is restarted in place on it (repair.go): its data is
// there. A claim whose volume can be used on one node only — a local volume,
// whose PersistentVolume's required node affinity names one node — cannot
// follow its member anywhere else. Once that node is deleted from
// Kubernetes (a node lost for good, as a cloud's node controller or an
// administrator declares it), the data on it is gone with it, and a pod made
// on the claim can never start: the member is replaced instead, removed from
// etcd and made again on a new claim.
//
// The evidence is read in the pass that acts on it: the volume's node, from
// the PersistentVolume, and that node read as NotFound, or, under the user's
// spec.pod.nodeLostAfterSeconds, read as not Ready for that long
// (nodelost.go). Nothing else counts: no right to read volumes or nodes, a
// read that failed, a node that is NotReady or cut off for less than the
// user's bound (its volume and its data may come back with it) leave the
// member to be restarted in place, and it waits.

// volumeNodeCache keeps the node each volume is bound to, read once: a
// PersistentVolume's node affinity cannot change. Whether volumes may be
// read is learnt from the first refusal, and asked again every
// ReprobeInterval.
type volumeNodeCache struct {
	// nodes maps a volume to the one node it can be used on, "" when it can
	// be used on more (a network volume, or affinity to a zone).
	nodes    map[string]string
	deniedAt time.Time
	denied   string
}

// volumesDenied is why the operator cannot tell whether a claim's volume is
// on a node that is gone.
const volumesDenied = "the operator's role does not grant get on persistentvolumes"

// nodeOf returns the one node volume can be used on, "" when it is not tied
// to one node.
func (v *volumeNodeCache) nodeOf(ctx context.Context, kube kubernetes.Interface, volume string, now time.Time) (string, error) {
	if node, ok := v.nodes[volume]; ok {
		return node, nil
	}
	if v.denied != "" && now.Sub(v.deniedAt) < statusutil.ReprobeInterval {
		return "", errors.New(v.denied)
	}
	pv, err := kube.CoreV1().PersistentVolumes().Get(ctx, volume, metav1.GetOptions{})
	switch {
	case apierrors.IsForbidden(err):
		v.denied, v.deniedAt = volumesDenied, now
		return "", errors.New(volumesDenied)
	case err != nil:
		return "", fmt.Errorf("read volume %s: %w", volume, err)
	}
	v.denied = ""
	if v.nodes == nil {
		v.nodes = map[string]string{}
	}
	node := volumeNode(pv)
	v.nodes[volume] = node
	return node, nil
}

// volumeNode is the one node a volume can be used on: its required node
// affinity has a single term that names a single hostname. Any other shape
// (no affinity, zones, several nodes) lets it follow a pod elsewhere, or
// says nothing the operator can prove.
func volumeNode(pv *corev1.PersistentVolume) string {
	a := pv.Spec.NodeAffinity
	if a == nil || a.Required == nil || len(a.Required.NodeSelectorTerms) != 1 {
		return ""
	}
	node := ""
	for _, e := range a.Required.NodeSelectorTerms[0].MatchExpressions {
		if e.Key == corev1.LabelHostname {
			if e.Operator != corev1.NodeSelectorOpIn || len(e.Values) != 1 || node != "" {
				return ""
			}
			node = e.Values[0]
		}
	}
	return node
}

// observeVolumeNodes finds, for each member claim whose member does not run,
// whether its volume is tied to a node that is gone: read as NotFound in this
// pass. A cluster whose members run costs no request.
func (c *Cluster) observeVolumeNodes(ctx context.Context, s *snapshot) {
	var unknown []string
	for _, name := range sortedKeys(s.claims) {
		claim := s.claims[name]
		if pod := s.pods[name]; pod != nil && pod.Status.Phase == corev1.PodRunning || claim.Spec.VolumeName == "" {
			continue
		}
		node, err := c.volumeNodes.nodeOf(ctx, c.cfg.KubeClient, claim.Spec.VolumeName, s.now)
		if err != nil {
			unknown = append(unknown, fmt.Sprintf("claim %s: %v", name, err))
			continue
		}
		if node == "" {
			continue
		}
		n, err := c.cfg.KubeClient.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		gone := apierrors.IsNotFound(err)
		if err == nil && s.nodeLostAfter() > 0 {
			// Under the user's bound, a node not Ready for that long
			// counts as lost too (nodelost.go).
			if s.nodesLost == nil {
				s.nodesLost = map[string]string{}
			}
			s.nodesLost[node] = nodeLostWhy(n, s.nodeLostAfter(), s.now)
			gone = s.nodesLost[node] != ""
		}
		switch {
		case gone:
			if s.volumeNodeGone == nil {
				s.volumeNodeGone = map[string]string{}
			}
			s.volumeNodeGone[name] = node
		case err != nil && !apierrors.IsNotFound(err):
			unknown = append(unknown, fmt.Sprintf("claim %s: read node %s: %v", name, node, err))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		s.volumeNodesUnknown = strings.Join(unknown, "; ")
		c.log.WithField("claims", s.volumeNodesUnknown).Debug("whether the volumes of members that do not run are on nodes that are gone is unknown")
	}
}

// dataGoneWithNode says that member name's data went with a node lost for
// good, when the snapshot read so, for a member that does not run.
func (s *snapshot) dataGoneWithNode(name string, state memberState) string {
	node := s.volumeNodeGone[name]
	if node == "" || state == memberRunning || state == memberCrashing {
		return ""
	}
	if why := s.nodesLost[node]; why != "" {
		return fmt.Sprintf("its claim's volume can only be used on node %s, which counts as lost: %s", node, why)
	}
	return fmt.Sprintf("its claim's volume can only be used on node %s, which is gone from the cluster", node)
}
