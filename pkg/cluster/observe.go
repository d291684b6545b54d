package cluster

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/tlsissue"
)

// observe takes the snapshot of a pass. It reads the informers' caches and
// the goroutine's records; withEtcd also asks etcd for every member's health
// and for the membership as the leader has it. Observations that fail become
// problems of the snapshot, so that decide can wait and the status say why.
func (c *Cluster) observe(ctx context.Context, withEtcd bool) (*snapshot, []problem) {
	var problems []problem
	st := c.status()
	s := &snapshot{
		now:             c.now(),
		pendingTimeout:  c.cfg.PendingTimeout,
		phase:           st.Phase,
		beingDeleted:    c.latest.DeletionTimestamp != nil,
		lastMembers:     append(slices.Clone(st.Members.Ready), st.Members.Unready...),
		status:          *st.DeepCopy(),
		created:         c.latest.CreationTimestamp.Time,
		etcdReadAt:      c.etcdReadAt,
		rotateRequest:   c.latest.Annotations[api.RotateCertificatesAnnotation],
		rotateCARequest: c.latest.Annotations[rotateCAAnnotation],
		holdClients:     c.latest.Annotations[api.HoldClientsAnnotation] == "true",
	}
	s.spec, s.specProblems = c.specInForce()
	if s.spec == nil {
		return s, problems
	}
	if err := c.observePods(s); err != nil {
		problems = append(problems, problemOf(err))
	}
	s.tlsSwitch = tlsSwitchOf(s.spec, s.pods, s.holdClients)
	if seen := runningPodsKey(s.pods); seen != c.podsSeen {
		c.clients.Close()
		c.podsSeen = seen
	}
	if err := c.observeServices(ctx, s); err != nil {
		problems = append(problems, problemOf(err))
	}
	if err := c.observeBudget(s); err != nil {
		problems = append(problems, problemOf(err))
	}
	c.takeRecords(s)
	c.observeZones(ctx, s)
	c.observeVolumeNodes(ctx, s)
	c.observeLostNodes(ctx, s)
	c.observePodNodes(ctx, s)
	if err := c.observeIssued(ctx, s); err != nil {
		problems = append(problems, problemOf(err))
	}
	if err := c.observeCertManager(ctx, s); err != nil {
		problems = append(problems, problemOf(err))
	}
	if err := c.loadTLS(ctx, s); err != nil {
		p := problemOf(err)
		s.tlsProblem = &p
	}
	s.certProblems, s.certs = c.checkCertificates(ctx, s)
	if s.issued != nil {
		for _, p := range s.issued.problems {
			s.certProblems = append(s.certProblems, newProblem(problemTLSCertificate, "TLS: %s", p))
		}
	}
	for _, p := range certManagerProblems(s) {
		s.certProblems = append(s.certProblems, newProblem(problemTLSCertificate, "TLS: %s", p))
	}
	s.membership = c.knownMembership.known()
	giveClientsOf(s.membership, *s.memberTemplate())
	if withEtcd && s.tlsProblem == nil {
		s.etcd = c.observeEtcd(ctx, s)
	}
	c.classify(s)
	return s, problems
}

// takeRecords brings the goroutine's records up to the pods and claims just
// observed, and copies them into the snapshot.
func (c *Cluster) takeRecords(s *snapshot) {
	s.everAvailable = everAvailable(s.status, len(s.pods)+len(s.terminating)+len(s.claims) > 0)
	c.settleExpectations(s.pods, s.terminating, s.spec.Spec.Version)
	s.podExpect, s.upgradeExpect, s.failedUpgrade = c.podExpect, c.upgradeExpect, c.failedUpgrade
	s.replaced = maps.Clone(c.replaced)
	s.recovering = c.recovering
	s.adoptionAnnounced = c.adoptionAnnounced
	s.windowRestarts = c.countWindowRestarts(s)
}

// classify derives the rest of the snapshot, then records what it shows of
// a quorum lost (which etcd's answer in this pass, if any, confirms).
func (c *Cluster) classify(s *snapshot) {
	s.classify()
	if s.membership == nil {
		return
	}
	c.noteQuorumLoss(s)
	if l := c.quorumLoss; l != nil {
		loss := *l
		s.quorumLoss = &loss
	}
}

// everAvailable tells from a status whether the cluster may ever have been
// available, that is whether clients may have stored data in it. The
// operator sets Available=False with reason NotYetAvailable until a quorum is
// first ready; any other Available condition, or a Running phase without one
// (a cluster of an older operator, or restored by the restore operator), may
// have served. A status without phase or condition is a new cluster's only
// while the cluster owns no pod or claim: with them, it is a status the
// server did not store before an operator restart (the original's roles),
// or a restore's hand-over, and the cluster may have served.
func everAvailable(st api.ClusterStatus, ownsObjects bool) bool {
	for _, cond := range st.Conditions {
		if cond.Type == api.ClusterConditionAvailable {
			return cond.Status == corev1.ConditionTrue || cond.Reason != reasonNotYetAvailable
		}
	}
	switch st.Phase {
	case api.ClusterPhaseRunning:
		return true
	case api.ClusterPhaseNone:
		return ownsObjects
	}
	return false
}

// observePods reads the cluster's pods and claims from the informers'
// caches. Pods and claims with the cluster's labels but another controller
// (a look-alike, or a leftover of a deleted cluster of the same name) are
// ignored: never counted, never deleted.
func (c *Cluster) observePods(s *snapshot) error {
	s.pods, s.terminating = map[string]*corev1.Pod{}, map[string]*corev1.Pod{}
	s.claims = map[string]*corev1.PersistentVolumeClaim{}
	pods, err := k8sutil.ClusterObjects[*corev1.Pod](c.cfg.Pods, c.namespace, c.name)
	if err != nil {
		return kubeError("list pods from the cache", err)
	}
	for _, p := range pods {
		switch {
		case !k8sutil.IsOwnedBy(p, c.latest):
		case k8sutil.IsBeingDeleted(p):
			// The API shows some pods being deleted as Pending.
			s.terminating[p.Name] = p
		default:
			s.pods[p.Name] = p
		}
	}
	if c.cfg.Claims == nil {
		s.claimsUnseen = true
		return nil
	}
	claims, err := k8sutil.ClusterObjects[*corev1.PersistentVolumeClaim](c.cfg.Claims, c.namespace, c.name)
	if err != nil {
		return kubeError("list claims from the cache", err)
	}
	for _, pvc := range claims {
		if k8sutil.IsOwnedBy(pvc, c.latest) && !k8sutil.IsBeingDeleted(pvc) {
			s.claims[pvc.Name] = pvc
		}
	}
	return nil
}

// observeServices finds which of the cluster's services are missing. An
// existing service is fine if this cluster owns it. One owned by another
// EtcdCluster of the same name is a leftover that garbage collection is about
// to delete (the restore operator deletes and re-creates the cluster): using
// it would leave the cluster without services moments later, so it is waited
// for. One that nobody owns was made by a user; it is used as it is.
func (c *Cluster) observeServices(ctx context.Context, s *snapshot) error {
	for _, name := range []string{k8sutil.PeerServiceName(c.name), k8sutil.ClientServiceName(c.name)} {
		svc, err := c.cfg.ServiceLister.Services(c.namespace).Get(name)
		if apierrors.IsNotFound(err) {
			// The cache only holds labelled services; a user's own
			// service of that name is read from the API.
			svc, err = c.cfg.KubeClient.CoreV1().Services(c.namespace).Get(ctx, name, metav1.GetOptions{})
		}
		switch {
		case apierrors.IsNotFound(err):
			s.missingServices = append(s.missingServices, name)
			continue
		case err != nil:
			return kubeError("read service "+name, err)
		}
		switch ref := metav1.GetControllerOfNoCopy(svc); {
		case k8sutil.IsOwnedBy(svc, c.latest):
		case ref != nil:
			s.serviceConflict = fmt.Sprintf("service %s belongs to %s %s (uid %s), not to this cluster; waiting for it to be deleted", name, ref.Kind, ref.Name, ref.UID)
		}
	}
	return nil
}

// observeBudget reads the cluster's PodDisruptionBudget from the cache.
func (c *Cluster) observeBudget(s *snapshot) error {
	if c.cfg.Budgets == nil {
		return nil
	}
	budgets := c.cfg.Budgets()
	if budgets == nil {
		return nil
	}
	s.budgetsManaged = true
	pdb, err := budgets.PodDisruptionBudgets(c.namespace).Get(c.name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return kubeError("read the PodDisruptionBudget from the cache", err)
	}
	if k8sutil.IsOwnedBy(pdb, c.latest) {
		s.budget = pdb
	}
	return nil
}

// loadTLS reads the operator's etcd client TLS secret, when the cluster
// serves clients over TLS and it has not been read yet or is due to be read
// again with the member secrets: a secret replaced by the user (a renewed or
// corrected certificate) is used, and judged, from the next read on, not
// after an operator restart. A secret that cannot be read again leaves the
// one in use. A missing or broken secret is a retried problem, not a
// failure: with cert-manager the secret routinely appears after the cluster
// (the original failed such a cluster for good).
func (c *Cluster) loadTLS(ctx context.Context, s *snapshot) error {
	cl, now := s.spec, s.now
	if !s.memberTemplate().SecureClient || c.tlsConfig != nil && !c.certs.due(now) {
		return nil
	}
	if s.issued != nil && slices.Contains(s.issued.missing, tlsissue.Operator) {
		// It is about to be issued: not a problem to report.
		return nil
	}
	if v := s.certManager; v != nil && !v.leaves[tlsissue.Operator].hasCopy {
		// It is about to be copied once cert-manager issues it.
		return nil
	}
	// Switching issued TLS off, members serve https until they move.
	names := cl.Spec.TLS.SecretsInUse(cl.Name)
	name := names.Operator
	secret, err := c.cfg.KubeClient.CoreV1().Secrets(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if c.tlsConfig != nil && c.certs.operator != nil && c.certs.operator.name == name {
			c.log.WithError(err).WithField("secret", name).Warn("read the operator's TLS secret again; the copy read before stays in use")
			return nil
		}
		field := names.Field + ".operatorSecret"
		if cl.Spec.TLS.IsIssued() {
			field = names.Field
		}
		what := fmt.Sprintf("read TLS secret %s (%s)", name, field)
		if apierrors.IsNotFound(err) {
			err = fmt.Errorf("not found; it needs %s, %s and %s; retrying until it exists",
				etcdutil.SecretClientCert, etcdutil.SecretClientKey, etcdutil.SecretClientCA)
		}
		return newPassError(problemTLSSecret, what, err)
	}
	if old := c.certs.operator; c.tlsConfig != nil && old != nil && old.name == name &&
		maps.EqualFunc(old.data, secret.Data, bytes.Equal) {
		return nil
	}
	cfg, err := etcdutil.TLSConfigFromSecretData(secret.Data)
	if err != nil {
		c.tlsConfig = nil
		return newPassError(problemTLSSecret, fmt.Sprintf("use TLS secret %s", name), err)
	}
	if c.tlsConfig != nil {
		c.log.WithField("secret", name).Info("the operator's TLS secret changed; etcd is dialled with it from now on")
		c.clients.Close()
	}
	c.tlsConfig = cfg
	c.certs.operator = &secretData{name: name, data: secret.Data}
	return nil
}

// observeEtcd asks etcd, through the running members, for every member's
// health, then for the membership from the leader only: etcd before 3.5
// answers member lists from the local member, which may not have applied
// the last change yet. A membership read from the leader is learnt; without
// a leader, the members' own lists say at least who is missing.
func (c *Cluster) observeEtcd(ctx context.Context, s *snapshot) *etcdView {
	tmpl := *s.memberTemplate()
	endpoints := runningVoterEndpoints(tmpl, s.membership, s.pods)
	if len(endpoints) == 0 {
		return &etcdView{err: fmt.Errorf("no member pod runs")}
	}
	h, err := c.cfg.Etcd.ClusterHealth(ctx, c.clientConfig(s, endpoints))
	if err != nil {
		// The operator secret may have been rotated: read it again.
		c.tlsConfig = nil
		c.clients.Close()
		return &etcdView{err: err}
	}
	c.etcdReadAt = c.now()
	for _, m := range h.Members {
		c.lastRevision = max(c.lastRevision, m.Revision)
	}
	view := &etcdView{health: h}
	leaderURL := ""
	for _, m := range h.Members {
		if m.ID == h.LeaderID && m.Err == nil {
			leaderURL = m.ClientURL
		}
	}
	if leaderURL == "" {
		if s.membership == nil {
			if ms, err := etcdutil.MembersFromEtcd(membersOf(h), tmpl); err == nil {
				s.membership = ms
			}
		}
		return view
	}
	list, err := c.cfg.Etcd.MemberList(ctx, c.clientConfig(s, []string{leaderURL}))
	if err != nil {
		return &etcdView{err: fmt.Errorf("read the membership from the leader: %w", err)}
	}
	ms, err := etcdutil.MembersFromEtcd(list, tmpl)
	if err != nil {
		return &etcdView{err: newPassError(problemEtcdMembership, "read the membership", err)}
	}
	if known := c.knownMembership.known(); known == nil || !ms.IsEqual(known) {
		c.log.Infof("membership read from the leader: %s", ms)
	}
	c.knownMembership.learn(ms)
	s.membership = ms
	view.confirmed = true
	if v, err := c.cfg.Etcd.ClusterVersion(ctx, c.clientConfig(s, []string{leaderURL})); err == nil {
		view.clusterVersion = v
	}
	return view
}

// runningVoterEndpoints are the client URLs to ask etcd through: the voting
// members whose pod runs, or every running pod while the membership is
// unknown.
func runningVoterEndpoints(tmpl etcdutil.Member, ms etcdutil.MemberSet, pods map[string]*corev1.Pod) []string {
	if ms == nil {
		return runningPodEndpoints(tmpl, pods)
	}
	var eps []string
	for _, name := range ms.Names() {
		if pod, ok := pods[name]; ok && pod.Status.Phase == corev1.PodRunning && !ms[name].IsLearner {
			eps = append(eps, ms[name].ClientURL())
		}
	}
	return eps
}

func membersOf(h etcdutil.Health) []*etcdserverpb.Member {
	out := make([]*etcdserverpb.Member, 0, len(h.Members))
	for _, m := range h.Members {
		out = append(out, &etcdserverpb.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, IsLearner: m.IsLearner})
	}
	return out
}

// runningPodsKey names the running pods with their UIDs and addresses: the
// etcd clients kept are good for as long as it stays the same.
func runningPodsKey(pods map[string]*corev1.Pod) string {
	var b strings.Builder
	for _, name := range sortedKeys(pods) {
		if p := pods[name]; p.Status.Phase == corev1.PodRunning {
			fmt.Fprintf(&b, "%s/%s/%s ", name, p.UID, p.Status.PodIP)
		}
	}
	return b.String()
}
