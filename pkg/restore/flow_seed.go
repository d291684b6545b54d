package restore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
)

// The seed: the restored cluster's first member, made from the backup, and
// the hand-over of the cluster to etcd-operator once it runs.

// ensureSeed creates the seed pod (and its PVC) once the restored cluster's phase
// says Running, and records it in the plan. It returns the seed, or nil once
// etcd-operator has taken the cluster over and replaced the seed like any member.
func (f *Flow) ensureSeed(ctx context.Context, er *api.EtcdRestore, plan *Plan, cl *api.EtcdCluster, token restoreToken) (*corev1.Pod, error) {
	seedName := SeedMemberName(cl.Name, er.UID)
	pods, err := f.cfg.Kube.CoreV1().Pods(er.Namespace).List(ctx, metav1.ListOptions{LabelSelector: k8sutil.ClusterSelector(cl.Name).String()})
	if err != nil {
		return nil, fmt.Errorf("list pods of %s/%s: %w", er.Namespace, cl.Name, err)
	}
	var seed *corev1.Pod
	var others []string
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case !k8sutil.IsOwnedBy(p, cl):
		case p.Name == seedName:
			seed = p
		default:
			others = append(others, p.Name)
		}
	}
	if seed != nil {
		return seed, f.recordSeed(ctx, er, plan, seedName)
	}
	if plan.Seed != "" && !cl.Spec.Paused {
		return nil, nil // handed over; the seed was replaced since
	}
	// Creating the seed is safe only while etcd-operator cannot have bootstrapped
	// the cluster on its own: it is paused, or its phase already says Running.
	if len(others) > 0 || !cl.Spec.Paused && cl.Status.Phase != api.ClusterPhaseRunning {
		return nil, failure.Permanent(fmt.Errorf("EtcdCluster %s was unpaused before the restore created its seed (phase %q, member pods %v): it does not hold the backup's data",
			cl.Name, cl.Status.Phase, others))
	}
	defaulted := cl.WithDefaults()
	if cl.Status.Phase == api.ClusterPhaseNone {
		if err := f.setRestoredStatus(ctx, cl, recoveryRecord(er, plan, defaulted.Spec.Version)); err != nil {
			return nil, err
		}
	}
	// The seed's DNS check must not look its name up before the headless service
	// exists: CoreDNS caches that first NXDOMAIN for the zone TTL (30 s on kubeadm
	// clusters), and etcd-operator's first pass over the new cluster may come after
	// the seed. The service is the one etcd-operator would create, owned by the
	// restored cluster, so it adopts it as its own.
	peer := k8sutil.NewPeerService(defaulted)
	if _, err := f.cfg.Kube.CoreV1().Services(er.Namespace).Create(ctx, peer, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service %s/%s for the seed: %w", er.Namespace, peer.Name, err)
	}
	if err := f.adoptClientService(ctx, er, defaulted); err != nil {
		return nil, err
	}
	if pvc := k8sutil.NewEtcdPVC(defaulted, seedName, defaulted.Spec.Version); pvc != nil {
		if _, err := f.cfg.Kube.CoreV1().PersistentVolumeClaims(er.Namespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create PVC %s/%s of the seed: %w", er.Namespace, seedName, err)
		}
	}
	cfg := SeedConfig{
		Cluster:         cl,
		RestoreName:     er.Name,
		MemberName:      seedName,
		BackupURL:       BackupURL(f.cfg.ServiceName, f.cfg.OperatorNamespace, defaulted.Spec.Pod.ClusterDomain, er.Namespace, er.Name),
		Backup:          plan.Backup,
		FetchImage:      f.cfg.FetchImage,
		FetchPullPolicy: f.cfg.FetchPullPolicy,
		FetchTimeout:    f.cfg.Timeout,
		KeySecret:       keySecretOf(plan),
		Point:           plan.Point,
		ArchiveURL:      ArchiveURL(f.cfg.ServiceName, f.cfg.OperatorNamespace, defaulted.Spec.Pod.ClusterDomain, er.Namespace, er.Name),
	}
	if token.onRestore {
		cfg.Token = string(token.value)
	} else {
		cfg.TokenSecret = TokenSecretName(er.UID)
	}
	pod := NewSeedPod(cfg)
	seed, err = f.cfg.Kube.CoreV1().Pods(er.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		seed, err = f.cfg.Kube.CoreV1().Pods(er.Namespace).Get(ctx, seedName, metav1.GetOptions{})
	} else if err == nil {
		f.event(er, corev1.EventTypeNormal, ReasonSeedCreated,
			fmt.Sprintf("created seed pod %s: it fetches backup %s and restores it before etcd starts", seedName, plan.Backup.Path))
		f.logFor(er).Infof("created seed pod %s", seedName)
	}
	if err != nil {
		return nil, fmt.Errorf("create seed pod %s/%s: %w", er.Namespace, seedName, err)
	}
	return seed, f.recordSeed(ctx, er, plan, seedName)
}

// recordSeed writes the seed's name into the plan, once.
func (f *Flow) recordSeed(ctx context.Context, er *api.EtcdRestore, plan *Plan, name string) error {
	if plan.Seed == name {
		return nil
	}
	plan.Seed = name
	return f.writePlan(ctx, er, plan)
}

// setRestoredStatus writes the re-created cluster's first status through the
// status subresource: phase Running, the hand-over signal of pkg/cluster (see
// adoptPhase there), which then never bootstraps the cluster itself, and
// recovery, the record of the last disaster recovery (see recoveryRecord),
// which etcd-operator keeps from then on. Both are written in one write, while
// the phase is still unset: an operator restarted in between writes them
// again, and none overwrites what etcd-operator has written since.
func (f *Flow) setRestoredStatus(ctx context.Context, cl *api.EtcdCluster, recovery *api.RecoveryStatus) error {
	_, err := f.clusters.Change(ctx, cl.Namespace, cl.Name, cl.UID, func(st *api.ClusterStatus) {
		if st.Phase == api.ClusterPhaseNone {
			st.Phase = api.ClusterPhaseRunning
			if recovery != nil {
				st.Recovery = recovery
			}
		}
	})
	if err != nil && !errors.Is(err, statusutil.ErrStatusNotStored) {
		return fmt.Errorf("set the phase of EtcdCluster %s/%s to Running: %w", cl.Namespace, cl.Name, err)
	}
	return nil
}

// unpause hands the cluster over to etcd-operator.
func (f *Flow) unpause(ctx context.Context, er *api.EtcdRestore, cl *api.EtcdCluster) (*api.EtcdCluster, error) {
	clusters := f.cfg.Etcd.EtcdV1beta2().EtcdClusters(cl.Namespace)
	out := cl
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := clusters.Get(ctx, cl.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != cl.UID || !cur.Spec.Paused {
			out = cur
			return nil
		}
		cur.Spec.Paused = false
		out, err = clusters.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("unpause EtcdCluster %s/%s: %w", cl.Namespace, cl.Name, err)
	}
	f.logFor(er).Infof("unpaused EtcdCluster %s", cl.Name)
	return out, nil
}

// progress tells whether the restored cluster is complete, a seed that cannot
// work any more (a permanent error), or what is still awaited.
func (f *Flow) progress(cl *api.EtcdCluster, seed *corev1.Pod) (string, error) {
	ready := len(cl.Status.Members.Ready)
	available := false
	for _, c := range cl.Status.Conditions {
		if c.Type == api.ClusterConditionAvailable && c.Status == corev1.ConditionTrue {
			available = true
		}
	}
	if ready == cl.Spec.Size && available {
		return "", nil
	}
	if seed == nil {
		return fmt.Sprintf("waiting for etcd-operator to grow the restored cluster: %d of %d members ready, Available %v", ready, cl.Spec.Size, available), nil
	}
	if msg := seedFailure(seed); msg != "" && ready == 0 {
		return "", failure.Permanent(fmt.Errorf("seed pod %s failed: %s", seed.Name, msg))
	}
	if seed.Status.Phase == corev1.PodPending || seed.Status.Phase == "" {
		return fmt.Sprintf("waiting for seed pod %s to restore the backup and start: %s", seed.Name, describePending(seed)), nil
	}
	return fmt.Sprintf("waiting for etcd-operator to grow the restored cluster: %d of %d members ready, Available %v", ready, cl.Spec.Size, available), nil
}

// seedFailure says why the seed pod ended, if it did.
func seedFailure(p *corev1.Pod) string {
	if p.Status.Phase != corev1.PodFailed {
		return ""
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			msg := strings.TrimSpace(t.Message)
			if msg == "" {
				msg = t.Reason
			}
			return fmt.Sprintf("container %s exited with code %d: %s", cs.Name, t.ExitCode, msg)
		}
	}
	if p.Status.Message != "" {
		return p.Status.Message
	}
	return "the pod failed (" + p.Status.Reason + ")"
}

// describePending says which step a pending seed is at.
func describePending(p *corev1.Pod) string {
	for _, cs := range p.Status.InitContainerStatuses {
		switch {
		case cs.State.Running != nil:
			return "init container " + cs.Name + " running"
		case cs.State.Waiting != nil:
			w := cs.State.Waiting
			if w.Message != "" {
				return fmt.Sprintf("init container %s waiting (%s: %s)", cs.Name, w.Reason, w.Message)
			}
			return fmt.Sprintf("init container %s waiting (%s)", cs.Name, w.Reason)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return "not scheduled: " + c.Message
		}
	}
	return "pending"
}

// keySecretOf names the Secret with the key of the plan's backup, if it is
// encrypted: the plan's source, as verified, not the restore's spec today.
func keySecretOf(plan *Plan) string {
	if !plan.Backup.Encrypted || plan.Source.Encryption == nil {
		return ""
	}
	return plan.Source.Encryption.KeySecret
}

// createClientService makes the restored cluster's client Service on the old
// Service's cluster IP, before the cluster itself: long-lived clients resolved
// the name to that address, and with a new one they wait for minutes on an
// address nothing answers any more. It is made first, nobody's, because
// etcd-operator makes the Service (on a new address) as soon as it sees the
// cluster, and uses one that nobody owns as it is; adoptClientService gives it
// to the cluster. An address taken meanwhile (the apiserver says Invalid) gives
// way to etcd-operator's Service on a new one.
func (f *Flow) createClientService(ctx context.Context, er *api.EtcdRestore, cl *api.EtcdCluster, clusterIP string) error {
	if clusterIP == "" {
		return nil
	}
	svc := k8sutil.NewClientService(cl)
	svc.OwnerReferences = nil
	svc.Spec.ClusterIP = clusterIP
	svc.Spec.ClusterIPs = []string{clusterIP}
	_, err := f.cfg.Kube.CoreV1().Services(cl.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsInvalid(err):
		f.logFor(er).WithFields(logrus.Fields{"service": svc.Name, "clusterIP": clusterIP}).WithError(err).
			Warn("the old client Service's cluster IP is not free: the restored one gets a new address, and clients must resolve the name again")
		return nil
	}
	return fmt.Errorf("create service %s/%s: %w", cl.Namespace, svc.Name, err)
}

// adoptClientService makes the client Service made before the cluster the
// restored cluster's own, so that it goes with the cluster; one missing is
// made as etcd-operator would make it.
func (f *Flow) adoptClientService(ctx context.Context, er *api.EtcdRestore, cl *api.EtcdCluster) error {
	services := f.cfg.Kube.CoreV1().Services(cl.Namespace)
	name := k8sutil.ClientServiceName(cl.Name)
	svc, err := services.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = services.Create(ctx, k8sutil.NewClientService(cl), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create service %s/%s: %w", cl.Namespace, name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get service %s/%s: %w", cl.Namespace, name, err)
	}
	if metav1.GetControllerOfNoCopy(svc) != nil {
		return nil // etcd-operator's, or the old cluster's still going
	}
	svc = svc.DeepCopy()
	svc.OwnerReferences = append(svc.OwnerReferences, k8sutil.AsOwner(cl))
	if _, err := services.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("give service %s/%s to the restored cluster: %w", cl.Namespace, name, err)
	}
	f.logFor(er).WithField("clusterIP", svc.Spec.ClusterIP).Infof("service %s, on the old cluster IP, given to the restored cluster", name)
	return nil
}
