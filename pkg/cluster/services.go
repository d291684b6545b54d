package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// budgetOutOfDate says why the cluster's PodDisruptionBudget has to be made,
// changed or deleted, "" when it is what spec.size calls for: a quorum of
// members kept through voluntary disruptions, no budget for one member.
func budgetOutOfDate(s *snapshot) string {
	if !s.budgetsManaged {
		return ""
	}
	want := k8sutil.NewDisruptionBudget(s.spec)
	switch {
	case want == nil && s.budget != nil:
		return "a single member has no disruption budget"
	case want == nil:
		return ""
	case s.budget == nil:
		return fmt.Sprintf("keep %s members available through voluntary disruptions", want.Spec.MinAvailable)
	case s.budget.Spec.MinAvailable == nil || *s.budget.Spec.MinAvailable != *want.Spec.MinAvailable:
		return fmt.Sprintf("keep %s members available (spec.size changed)", want.Spec.MinAvailable)
	}
	return ""
}

func (c *Cluster) createServices(ctx context.Context, s *snapshot) outcome {
	created := false
	for _, svc := range []*corev1.Service{k8sutil.NewPeerService(s.spec), k8sutil.NewClientService(s.spec)} {
		missing := false
		for _, name := range s.missingServices {
			missing = missing || name == svc.Name
		}
		if !missing {
			continue
		}
		_, err := c.cfg.KubeClient.CoreV1().Services(c.namespace).Create(ctx, svc, metav1.CreateOptions{})
		switch {
		case err == nil:
			created = true
			c.log.Infof("created service %s", svc.Name)
		case apierrors.IsAlreadyExists(err):
		default:
			return outcome{err: kubeError("create service "+svc.Name, err)}
		}
	}
	return outcome{requeue: c.followUp(created)}
}

// syncBudget makes the cluster's PodDisruptionBudget what spec.size calls for.
func (c *Cluster) syncBudget(ctx context.Context, s *snapshot) outcome {
	budgets := c.cfg.KubeClient.PolicyV1().PodDisruptionBudgets(c.namespace)
	want := k8sutil.NewDisruptionBudget(s.spec)
	switch {
	case want == nil:
		err := budgets.Delete(ctx, s.budget.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return outcome{err: kubeError("delete the PodDisruptionBudget", err)}
		}
	case s.budget == nil:
		_, err := budgets.Create(ctx, want, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return outcome{err: kubeError("create the PodDisruptionBudget", err)}
		}
		if err == nil {
			c.log.Infof("created PodDisruptionBudget %s: minAvailable %s", want.Name, want.Spec.MinAvailable)
			return outcome{requeue: c.followUp(true)}
		}
	default:
		pdb := s.budget.DeepCopy()
		pdb.Spec.MinAvailable = want.Spec.MinAvailable
		if _, err := budgets.Update(ctx, pdb, metav1.UpdateOptions{}); err != nil {
			return outcome{err: kubeError("update the PodDisruptionBudget", err)}
		}
	}
	return outcome{requeue: c.followUp(false)}
}

// followUp is when the pass after a step of the cluster's own setup runs:
// at once after the step wrote something the next pass reads from the
// informers, which have it within milliseconds, since every pause before a
// new cluster's members start adds to how long it takes to start; paced as
// any pass otherwise (the informer is behind and the step found its object
// there already), so that an informer that lags cannot spin the loop.
func (c *Cluster) followUp(wrote bool) time.Duration {
	if wrote {
		return setupFollowUp
	}
	return c.cfg.MinPassInterval
}

// setupFollowUp is the wait before the pass after a setup step that wrote
// something: only long enough for the informer to deliver it.
const setupFollowUp = 20 * time.Millisecond
