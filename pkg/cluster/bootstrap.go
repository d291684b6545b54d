package cluster

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/etcdversion"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// seedClaim is the claim a Creating cluster's seed starts on, "" for a new
// one: the claim of the member the status lists, else the only claim.
func seedClaim(s *snapshot) string {
	for _, name := range s.lastMembers {
		if s.claims[name] != nil {
			return name
		}
	}
	if len(s.claims) == 1 {
		return sortedKeys(s.claims)[0]
	}
	return ""
}

// lonelyNeverStartedPod finds the one pod of a cluster that was never
// available, when that pod cannot run: such a cluster holds no data anyone
// was told is stored, so making a new seed loses nothing. A seed made by the
// restore operator (it restores a backup in init containers of its own) is
// that operator's to make again.
func lonelyNeverStartedPod(s *snapshot) (string, bool) {
	if s.everAvailable {
		return "", false
	}
	// A joining pod made while the seed started does not count: it waits
	// for a membership that never came.
	seeds := map[string]*corev1.Pod{}
	for name, pod := range s.pods {
		if !k8sutil.WaitsForMembership(pod) {
			seeds[name] = pod
		}
	}
	if len(seeds) != 1 {
		return "", false
	}
	for name, pod := range seeds {
		if !k8sutil.IsMadeByOperator(pod) {
			return "", false
		}
		if (k8sutil.IsPodDead(pod) || s.pendingInVain(pod) != "") && seedMayBeMadeAgain(s, pod) {
			return name, true
		}
	}
	return "", false
}

// seedMayBeMadeAgain tells whether a seed of a cluster never seen available
// can be made again without losing what it may hold. On a claim it can: the
// new seed starts on that claim, and etcd finds whatever data the old one
// wrote. On an emptyDir, only a seed whose etcd never started holds nothing:
// one that started may have served between two passes.
func seedMayBeMadeAgain(s *snapshot, pod *corev1.Pod) bool {
	if s.usesClaims() && s.claims[pod.Name] != nil {
		return true
	}
	return k8sutil.EtcdNeverRan(pod)
}

// seedToMakeAgain says why the seed of a cluster never available is made
// again, "" when it is not. A seed whose pod is gone left nothing behind on
// an emptyDir, and its claim, if any, is where the next seed starts. One that
// never started, or that never served and was made from another spec than
// the one in force (the spec was fixed since: its image, environment, node
// selector or resources), is made again from the spec in force at once,
// rather than left to fail the old way until the pending timeout.
func seedToMakeAgain(s *snapshot, m *memberView) string {
	switch {
	case m.pod == nil && m.state == memberGone:
		return "the seed's pod is gone and the cluster was never available"
	case m.pod == nil || !k8sutil.IsMadeByOperator(m.pod) || k8sutil.IsBeingDeleted(m.pod):
		return ""
	case m.state == memberFailed && seedMayBeMadeAgain(s, m.pod):
		return "the seed never ran and the cluster was never available"
	}
	changed := specChangedSince(s, m.pod)
	if changed == "" || m.state == memberRunning && m.ready {
		return ""
	}
	if !neverServed(m.pod) {
		return ""
	}
	return "the seed never served and " + changed + " since it was made"
}

// specChangedSince says what of the spec in force differs from what pod was
// made from, "" when nothing does (or the pod does not tell).
func specChangedSince(s *snapshot, pod *corev1.Pod) string {
	etcd := k8sutil.EtcdContainer(pod)
	switch {
	case etcd == nil:
		return ""
	case podPolicyChanged(s, pod):
		return "spec.pod changed"
	case podVersion(pod) != "" && podVersion(pod) != etcdversion.Normalize(s.spec.Spec.Version):
		return "spec.version changed"
	case etcd.Image != api.EtcdImage(s.spec.Spec.Repository, podVersion(pod)):
		return "spec.repository changed"
	}
	tmpl := memberTemplate(s.spec)
	tmpl.Name = pod.Name
	own := tmpl.Name + "=" + tmpl.PeerURL()
	for _, pair := range k8sutil.InitialCluster(pod) {
		if name, _, _ := strings.Cut(pair, "="); name == pod.Name && pair != own {
			return "spec.clusterDomain changed"
		}
	}
	return ""
}

// podPolicyChanged tells whether pod was made from another spec.pod than
// the one in force; a pod that does not record it tells nothing.
func podPolicyChanged(s *snapshot, pod *corev1.Pod) bool {
	made := pod.Annotations[k8sutil.AnnotationPodPolicy]
	return made != "" && made != k8sutil.PodPolicyHash(s.spec)
}

// neverServed tells from the pod's conditions that its etcd never passed its
// readiness check, so that no client reached it through the client service:
// its Ready condition is False and has not changed since the pod's init
// containers were done (the kubelet moves a condition's transition time
// only when its status changes). Without those conditions nothing proves it.
func neverServed(pod *corev1.Pod) bool {
	if k8sutil.EtcdNeverRan(pod) {
		return true
	}
	var ready, initialized *corev1.PodCondition
	for i := range pod.Status.Conditions {
		switch c := &pod.Status.Conditions[i]; c.Type {
		case corev1.PodReady:
			ready = c
		case corev1.PodInitialized:
			initialized = c
		}
	}
	return ready != nil && initialized != nil && ready.Status == corev1.ConditionFalse && initialized.Status == corev1.ConditionTrue &&
		!ready.LastTransitionTime.After(initialized.LastTransitionTime.Time)
}

// recordCreating writes nothing itself: its outcome is the phase Creating,
// which the end of the pass writes before any seed pod exists. An operator
// restarting in between then finds either no pod (and creates the seed) or
// the seed (and adopts it); it never has to fail the cluster as the
// original did. The write also finds the restore operator's hand-over,
// which sets the phase first: the object changed, nothing is written, and
// the next pass starts from the phase the restore operator set.
func (c *Cluster) recordCreating(s *snapshot) outcome {
	c.log.Infof("creating cluster: size %d, version %s", s.spec.Spec.Size, s.spec.Spec.Version)
	return outcome{phase: api.ClusterPhaseCreating, requeue: c.followUp(true)}
}

// seed creates the first member of a new cluster, once its phase says
// Creating.
func (c *Cluster) seed(ctx context.Context, s *snapshot, a action) outcome {
	m := c.newMember(s)
	if a.member != "" {
		m.Name = a.member
	}
	membership := etcdutil.NewMemberSet(m)
	// The token keeps members of different clusters from ever forming one
	// cluster; the CR's UID in it makes sure a re-created cluster of the same
	// name never talks to leftover members of its predecessor.
	token := string(s.spec.UID) + "-" + c.randomSuffix()
	if err := c.createClaim(ctx, s, m.Name, a.version); err != nil {
		return outcome{err: err}
	}
	pod := k8sutil.NewEtcdPod(s.spec, m, a.version, membership.PeerURLPairs(), k8sutil.ClusterStateNew, token)
	if err := c.createPod(ctx, pod); err != nil {
		return outcome{err: err}
	}
	c.knownMembership.learn(membership)
	c.tell(corev1.EventTypeNormal, eventNewMemberAdded, fmt.Sprintf("New member %s added to cluster", m.Name))
	c.log.Infof("created seed member %s", m.Name)
	return outcome{phase: api.ClusterPhaseRunning, requeue: c.cfg.MinPassInterval}
}

// adopt takes over pods found while the phase says Creating: the phase
// becomes Running and the membership is read from etcd next.
func (c *Cluster) adopt(a action) outcome {
	c.log.Infof("%s; adopting them", a.reason)
	c.knownMembership.forget()
	return outcome{phase: api.ClusterPhaseRunning, requeue: c.cfg.MinPassInterval}
}

// reseed deletes a seed that never ran, so that the next pass makes a new
// one from the spec in force: the cluster never served, there is nothing to
// lose, and a spec fixed since (memory, environment, secrets) takes effect.
func (c *Cluster) reseed(ctx context.Context, s *snapshot, a action) outcome {
	c.log.Infof("making a new seed: %s", a.reason)
	if pod := s.pods[a.member]; pod != nil {
		// A new seed that fails the same way is made after a wait that
		// grows, not in a loop.
		_, cause := podTroubleCause(pod, s.claims[a.member], s.now)
		c.recordReplacement(cause, s.spec.Generation)
	}
	if a.member != "" {
		// Its claim stays: the next seed starts on it (bootstrap).
		if err := c.deletePod(ctx, a.member); err != nil {
			return outcome{err: err}
		}
		c.tell(corev1.EventTypeNormal, eventReplacingDeadMember, fmt.Sprintf("The dead member %s is being replaced", a.member))
	}
	// A joining pod made while the seed started names the seed in its
	// --initial-cluster: it goes with it, or it would be adopted as a member.
	for _, name := range sortedKeys(s.pods) {
		if name == a.member || !k8sutil.WaitsForMembership(s.pods[name]) || s.membership[name] != nil {
			continue
		}
		if err := c.deletePod(ctx, name); err != nil {
			return outcome{err: err}
		}
		if err := c.deleteClaim(ctx, s, name); err != nil {
			return outcome{err: err}
		}
	}
	if a.member != "" && s.claims[a.member] != nil {
		// The status keeps listing it, for the next seed to take its claim.
		m := memberTemplate(s.spec)
		m.Name = a.member
		c.knownMembership.learn(etcdutil.NewMemberSet(&m))
	} else {
		c.knownMembership.forget()
	}
	return outcome{phase: api.ClusterPhaseCreating, requeue: c.cfg.MinPassInterval}
}
