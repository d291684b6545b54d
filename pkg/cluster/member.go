package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// Events of the original, with its exact texts (§3.11).
const (
	eventNewMemberAdded      = "New Member Added"
	eventMemberRemoved       = "Member Removed"
	eventReplacingDeadMember = "Replacing Dead Member"
	eventMemberUpgraded      = "Member Upgraded"
)

// podDeleteGracePeriod is the original's: a member removed from etcd has
// nothing left to flush.
const podDeleteGracePeriod int64 = 5

// etcdHealthInterval is etcd's etcdserver.HealthInterval: with its strict
// reconfiguration check (on by default) etcd refuses MemberAdd with
// "unhealthy cluster" unless every voting member has been connected to the
// leader for this long. The original met that refusal on every bootstrap.
const etcdHealthInterval = 5 * time.Second

// EtcdAPI is everything the reconcile loop asks etcd. It is an interface so
// that the loop can be tested against a fake; NewEtcdAPI is the real one.
// Every call dials the endpoints in cc and closes the connection again.
type EtcdAPI interface {
	// MemberList returns the membership, read with quorum.
	MemberList(ctx context.Context, cc etcdutil.ClientConfig) ([]*etcdserverpb.Member, error)
	// MemberAdd adds a voting member with the given peer URL.
	MemberAdd(ctx context.Context, cc etcdutil.ClientConfig, peerURL string) (*etcdserverpb.Member, error)
	// MemberAddAsLearner adds a member that does not vote until promoted.
	MemberAddAsLearner(ctx context.Context, cc etcdutil.ClientConfig, peerURL string) (*etcdserverpb.Member, error)
	// MemberPromote makes a learner vote; etcd refuses while it catches up.
	MemberPromote(ctx context.Context, cc etcdutil.ClientConfig, id uint64) error
	// MemberRemove removes a member; one already gone is not an error.
	MemberRemove(ctx context.Context, cc etcdutil.ClientConfig, id uint64) error
	// LeaderID returns the ID of the leader a majority follows.
	LeaderID(ctx context.Context, cc etcdutil.ClientConfig) (uint64, error)
	// ClusterHealth reports leader, quorum and every member's own state.
	ClusterHealth(ctx context.Context, cc etcdutil.ClientConfig) (etcdutil.Health, error)
}

// NewEtcdAPI returns the EtcdAPI that talks to real etcd through etcdutil.
func NewEtcdAPI() EtcdAPI { return etcdutilAPI{} }

type etcdutilAPI struct{}

func (etcdutilAPI) MemberList(ctx context.Context, cc etcdutil.ClientConfig) ([]*etcdserverpb.Member, error) {
	resp, err := etcdutil.ListMembers(ctx, cc)
	if err != nil {
		return nil, err
	}
	return resp.Members, nil
}

func (etcdutilAPI) MemberAdd(ctx context.Context, cc etcdutil.ClientConfig, peerURL string) (*etcdserverpb.Member, error) {
	return etcdutil.AddMember(ctx, cc, peerURL)
}

func (etcdutilAPI) MemberAddAsLearner(ctx context.Context, cc etcdutil.ClientConfig, peerURL string) (*etcdserverpb.Member, error) {
	return etcdutil.AddLearner(ctx, cc, peerURL)
}

func (etcdutilAPI) MemberPromote(ctx context.Context, cc etcdutil.ClientConfig, id uint64) error {
	return etcdutil.PromoteMember(ctx, cc, id)
}

func (etcdutilAPI) MemberRemove(ctx context.Context, cc etcdutil.ClientConfig, id uint64) error {
	return etcdutil.RemoveMember(ctx, cc, id)
}

func (etcdutilAPI) LeaderID(ctx context.Context, cc etcdutil.ClientConfig) (uint64, error) {
	return etcdutil.LeaderID(ctx, cc)
}

func (etcdutilAPI) ClusterHealth(ctx context.Context, cc etcdutil.ClientConfig) (etcdutil.Health, error) {
	return etcdutil.ClusterHealth(ctx, cc)
}

// isNotReadyForChange recognises etcd's refusals of a membership change that
// only mean "not now": its strict reconfiguration check wants every voting
// member connected and enough of them started, and a learner is promoted only
// once it has caught up with the leader. The original met these on
// every bootstrap and lost a tick each time; here they are waited out.
func isNotReadyForChange(err error) bool {
	for _, refusal := range []error{rpctypes.ErrUnhealthy, rpctypes.ErrMemberNotEnoughStarted, rpctypes.ErrMemberLearnerNotReady} {
		// The text check covers a refusal that reached us as a raw gRPC
		// status rather than as the client's typed error.
		if errors.Is(err, refusal) || strings.Contains(err.Error(), refusal.Error()) {
			return true
		}
	}
	return false
}

// memberTemplate is a member of this cluster without name or ID: namespace,
// TLS and DNS are properties of the cluster.
func (c *Cluster) memberTemplate(cl *api.EtcdCluster) etcdutil.Member {
	m := etcdutil.Member{
		Namespace:    c.namespace,
		ClusterName:  c.name,
		SecurePeer:   cl.Spec.TLS.IsSecurePeer(),
		SecureClient: cl.Spec.TLS.IsSecureClient(),
	}
	if cl.Spec.Pod != nil {
		m.ClusterDomain = cl.Spec.Pod.ClusterDomain
	}
	return m
}

// newMember names a new member "<cluster>-<10 random characters>", as the
// original did; the name is also its pod's and its PVC's.
func (c *Cluster) newMember(cl *api.EtcdCluster) *etcdutil.Member {
	m := c.memberTemplate(cl)
	m.Name = c.name + "-" + c.randomSuffix()
	return &m
}

func (c *Cluster) clientConfig(endpoints []string) etcdutil.ClientConfig {
	return etcdutil.ClientConfig{Endpoints: endpoints, TLS: c.tlsConfig}
}

// podExpectation is a created pod the lister has not shown yet (the
// ReplicaSet controller's "expectations").
type podExpectation struct {
	name     string
	deadline time.Time
}

// upgradeExpectation is a patched member pod whose container has not yet
// restarted on the new image and become Ready. Until then the lister may
// still show the old container as Ready, and taking down the next member
// would risk two being down at once.
type upgradeExpectation struct {
	name     string
	version  string
	restarts int32
	image    string
	deadline time.Time
}

// failedUpgrade is a member that stopped on the version it was upgraded to.
type failedUpgrade struct {
	member  string
	version string
}

// checkExpectations drops the expectations that are met or timed out.
func (c *Cluster) checkExpectations(pods *podSet) {
	now := c.now()
	if e := c.podExpect; e != nil {
		_, owned := pods.owned[e.name]
		_, terminating := pods.terminating[e.name]
		switch {
		case owned || terminating:
			c.podExpect = nil
		case now.After(e.deadline):
			c.log.Warnf("pod %s did not show up within %v; treating it as missing", e.name, c.cfg.ExpectationTimeout)
			c.podExpect = nil
		}
	}
	if e := c.upgradeExpect; e != nil {
		pod, ok := pods.owned[e.name]
		switch {
		case !ok || k8sutil.IsPodDead(pod):
			c.log.Warnf("member %s stopped after its upgrade to %s; halting the upgrade", e.name, e.version)
			c.failedUpgrade = &failedUpgrade{member: e.name, version: e.version}
			c.upgradeExpect = nil
		case restartedOn(pod, e) && k8sutil.IsPodReady(pod):
			c.log.Infof("member %s is ready on %s", e.name, e.image)
			c.upgradeExpect = nil
		case now.After(e.deadline):
			c.log.Warnf("member %s did not become ready on %s within %v", e.name, e.image, c.cfg.PendingTimeout)
			c.upgradeExpect = nil
		}
	}
}

// restartedOn tells whether the etcd container runs the image of the upgrade.
func restartedOn(pod *corev1.Pod, e *upgradeExpectation) bool {
	st := etcdContainerStatus(pod)
	return st != nil && (st.RestartCount > e.restarts || st.Image == e.image) && st.State.Running != nil
}

func etcdContainerStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == k8sutil.EtcdContainerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// ensurePVC creates a member's claim in PVC mode. An existing claim of that
// name is this member's from an earlier, interrupted try.
func (c *Cluster) ensurePVC(ctx context.Context, cl *api.EtcdCluster, name string) error {
	pvc := k8sutil.NewEtcdPVC(cl, name)
	if pvc == nil {
		return nil
	}
	_, err := c.cfg.KubeClient.CoreV1().PersistentVolumeClaims(c.namespace).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return kubeError(fmt.Sprintf("create PVC %s", name), err)
	}
	return nil
}

// createMemberPod creates the pod of member m (its PVC, if any, exists
// already) and expects it in the lister. members is the membership m joins,
// m included, for --initial-cluster.
func (c *Cluster) createMemberPod(ctx context.Context, cl *api.EtcdCluster, m *etcdutil.Member, members etcdutil.MemberSet, state, token string, opts ...k8sutil.PodOption) error {
	pod := k8sutil.NewEtcdPod(cl, m, members.PeerURLPairs(), state, token, opts...)
	if _, err := c.cfg.KubeClient.CoreV1().Pods(c.namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return kubeError(fmt.Sprintf("create pod of member %s", m.Name), err)
	}
	c.podExpect = &podExpectation{name: m.Name, deadline: c.now().Add(c.cfg.ExpectationTimeout)}
	return nil
}

func (c *Cluster) deletePod(ctx context.Context, name string) error {
	grace := podDeleteGracePeriod
	err := c.cfg.KubeClient.CoreV1().Pods(c.namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return kubeError(fmt.Sprintf("delete pod %s", name), err)
	}
	return nil
}

// deletePVC deletes a removed member's claim: a replacement is a new member
// with a new name and starts from an empty data directory anyway.
func (c *Cluster) deletePVC(ctx context.Context, cl *api.EtcdCluster, name string) error {
	if cl.Spec.Pod == nil || cl.Spec.Pod.PersistentVolumeClaimSpec == nil {
		return nil
	}
	err := c.cfg.KubeClient.CoreV1().PersistentVolumeClaims(c.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return kubeError(fmt.Sprintf("delete PVC %s", name), err)
	}
	return nil
}

// syncMembers re-reads the membership before a change, so that the change is
// decided on etcd's truth and every member's ID is known (the seed's is only
// known to etcd). If etcd disagrees with memory (a change made behind the
// operator's back, or an add whose reply was lost) etcd's view is adopted and
// changed is true: the caller stops and the next pass starts over from it.
func (c *Cluster) syncMembers(ctx context.Context, cl *api.EtcdCluster, v memberView) (changed bool, err error) {
	list, err := c.cfg.Etcd.MemberList(ctx, c.clientConfig(c.endpoints(v)))
	if err != nil {
		return false, etcdError("read the membership", err)
	}
	ms, err := etcdutil.MembersFromEtcd(list, c.memberTemplate(cl))
	if err != nil {
		return false, newPassError(reasonEtcdMembership, warnEtcdMembership, "read the membership", err)
	}
	changed = !ms.IsEqual(c.members)
	if changed {
		c.log.Warnf("etcd membership %s differs from the operator's %s; going by etcd's", ms, c.members)
	}
	c.members = ms
	return changed, nil
}

// etcdReadyForChange checks, before a member is added or upgraded, what etcd's
// strict reconfiguration check will: a leader, a working quorum, and every
// member started and answering.
func (c *Cluster) etcdReadyForChange(ctx context.Context, v memberView) (etcdutil.Health, error) {
	h, err := c.cfg.Etcd.ClusterHealth(ctx, c.clientConfig(c.endpoints(v)))
	if err != nil {
		return h, etcdError("check cluster health", err)
	}
	if !h.Healthy() {
		reason := "no leader"
		if h.ReadErr != nil {
			reason = h.ReadErr.Error()
		}
		return h, fmt.Errorf("%w: %s", errEtcdNotReady, reason)
	}
	for _, m := range h.Members {
		if m.Err != nil {
			return h, fmt.Errorf("%w: member %s (%x): %v", errEtcdNotReady, m.Name, m.ID, m.Err)
		}
	}
	return h, nil
}

// addOneMember adds one member. When the operator knows its own image the
// member joins pod first (join.go). Otherwise it is added as the original
// did: MemberAdd first, so that etcd knows the new member before it starts,
// then its pod with --initial-cluster-state=existing and the full
// --initial-cluster; the peers then look up its name before the pod exists,
// and the join waits out cluster DNS's cache of that failed lookup.
//
// Either way the MemberAdd is only tried when every member's pod is Ready and etcd reports itself
// healthy with every member answering. The original tried right after the
// previous member's pod started and lost a tick per member to etcd's
// "unhealthy cluster" refusal; here the pod's Ready event triggers the add.
func (c *Cluster) addOneMember(ctx context.Context, cl *api.EtcdCluster, v memberView, plan versionPlan) (time.Duration, error) {
	if c.joinsPodFirst() {
		return c.joinOneMember(ctx, cl, v, plan)
	}
	if proceed, requeue, err := c.readyToAdd(ctx, cl, v); !proceed {
		return requeue, err
	}

	m := c.newMember(cl)
	if c.refusedAdd != "" {
		// etcd refused this member a moment ago; its claim is kept for the next
		// try, since a claim deleted after binding leaves its volume Released
		// (a Retain volume is then lost to the cluster).
		m.Name = c.refusedAdd
	}
	podCluster := cl.DeepCopy()
	podCluster.Spec.Version = plan.newMembers
	// The PVC comes before MemberAdd: if it cannot be created, etcd has not
	// been told about a member that will never start.
	if err := c.ensurePVC(ctx, podCluster, m.Name); err != nil {
		return 0, err
	}
	added, err := c.cfg.Etcd.MemberAdd(ctx, c.clientConfig(c.endpoints(v)), m.PeerURL())
	if err != nil {
		if isNotReadyForChange(err) {
			c.refusedAdd = m.Name
			return c.waitOrFail(fmt.Errorf("%w: %v", errEtcdNotReady, err))
		}
		c.refusedAdd = ""
		if derr := c.deletePVC(ctx, cl, m.Name); derr != nil {
			c.log.WithError(derr).Warn("could not delete the PVC of a member that was not added")
		}
		return 0, etcdError(fmt.Sprintf("add member %s", m.Name), err)
	}
	c.refusedAdd = ""
	m.ID = added.ID
	c.members.Add(m)
	c.log.Infof("added member %s (%x) to etcd; membership %s", m.Name, m.ID, c.members)
	// Should the pod fail to be created, the member has no pod and the next
	// pass replaces it like any dead member.
	if err := c.createMemberPod(ctx, podCluster, m, c.members, k8sutil.ClusterStateExisting, ""); err != nil {
		return 0, err
	}
	c.event(corev1.EventTypeNormal, eventNewMemberAdded, fmt.Sprintf("New member %s added to cluster", m.Name))
	return c.cfg.MinPassInterval, nil
}

// untilConnectedLongEnough is how long until every member's etcd has run for
// etcdHealthInterval, counted from its container's start (a little before it
// connects, so an add may still be refused once, and is then retried).
func (c *Cluster) untilConnectedLongEnough(v memberView) time.Duration {
	if c.members.Size() <= 1 {
		// etcd counts itself as connected: a single member takes an add at once.
		return 0
	}
	var wait time.Duration
	now := c.now()
	for _, pod := range v.pods {
		st := etcdContainerStatus(pod)
		if st == nil || st.State.Running == nil {
			continue
		}
		if d := st.State.Running.StartedAt.Add(etcdHealthInterval).Sub(now); d > wait {
			wait = d
		}
	}
	return wait
}

// removeOneMember shrinks the cluster by one. The member is chosen so that
// availability suffers least:
//  1. a member that has to be replaced for an upgrade (its pod cannot take
//     the new image), once its replacement and every other member are Ready;
//  2. a member whose pod is not Ready;
//  3. a follower (the original could pick the leader, #1191, costing an
//     election);
//  4. the leader, only when it is the sole candidate.
func (c *Cluster) removeOneMember(ctx context.Context, cl *api.EtcdCluster, v memberView, plan versionPlan) (time.Duration, error) {
	if changed, err := c.syncMembers(ctx, cl, v); err != nil || changed {
		return c.cfg.MinPassInterval, err
	}
	ready := map[string]bool{}
	for _, n := range v.ready {
		ready[n] = true
	}
	var notReady []string
	for _, n := range c.members.Names() {
		if !ready[n] {
			notReady = append(notReady, n)
		}
	}

	var victim string
	switch {
	case len(plan.replace) > 0:
		victim = plan.replace[0]
		for _, n := range notReady {
			if n != victim {
				c.log.Debugf("waiting for %s to be ready before removing the replaced member %s", n, victim)
				return 0, nil
			}
		}
	case len(notReady) > 0:
		victim = notReady[0]
	default:
		leader, err := c.cfg.Etcd.LeaderID(ctx, c.clientConfig(c.endpoints(v)))
		if err != nil {
			return 0, etcdError("find the leader", err)
		}
		for _, n := range c.members.Names() {
			if c.members[n].ID != leader {
				victim = n
				break
			}
		}
		if victim == "" {
			victim = c.members.Names()[0]
		}
	}
	m := c.members[victim]
	c.log.Infof("removing member %s to reach size %d", victim, cl.Spec.Size)
	if err := c.removeMember(ctx, cl, v, m, false); err != nil {
		return c.waitOrFail(err)
	}
	return c.cfg.MinPassInterval, nil
}

// removeMember removes m from etcd, then deletes its pod and PVC. If the
// deletions fail, the pod is no member any more and a later pass deletes it.
// dead adds the original's "Replacing Dead Member" event, in its order: once
// etcd has let the member go, before "Member Removed".
func (c *Cluster) removeMember(ctx context.Context, cl *api.EtcdCluster, v memberView, m *etcdutil.Member, dead bool) error {
	if m.ID == 0 {
		return newPassError(reasonEtcdMembership, warnEtcdMembership, "remove member "+m.Name, errors.New("its etcd ID is unknown"))
	}
	if err := c.cfg.Etcd.MemberRemove(ctx, c.clientConfig(c.endpoints(v)), m.ID); err != nil {
		if isNotReadyForChange(err) {
			return fmt.Errorf("%w: %v", errEtcdNotReady, err)
		}
		return etcdError(fmt.Sprintf("remove member %s", m.Name), err)
	}
	c.members.Remove(m.Name)
	c.log.Infof("removed member %s (%x) from etcd; membership %s", m.Name, m.ID, c.members)
	if dead {
		c.event(corev1.EventTypeNormal, eventReplacingDeadMember, fmt.Sprintf("The dead member %s is being replaced", m.Name))
	}
	c.event(corev1.EventTypeNormal, eventMemberRemoved, fmt.Sprintf("Existing member %s removed from the cluster", m.Name))
	if err := c.deletePod(ctx, m.Name); err != nil {
		return err
	}
	return c.deletePVC(ctx, cl, m.Name)
}
