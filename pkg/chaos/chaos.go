// Package chaos kills etcd member pods on purpose, for testing how clusters heal. It
// runs only when the operator is started with -chaos-level 1 or 2.
package chaos

import (
	"context"
	"math/rand/v2"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Plan is how hard the monkeys hit.
type Plan struct {
	// Delay before the first kill.
	Delay time.Duration
	// Interval between rounds; each round kills with probability KillProbability.
	Interval        time.Duration
	KillProbability float64
	// MaxKills per round.
	MaxKills int
}

// PlanForLevel is the original's two levels: 1 kills at most one pod every 30 s with
// probability 0.5 after a minute; 2 kills up to five from the start.
func PlanForLevel(level int) (Plan, bool) {
	switch level {
	case 1:
		return Plan{Delay: time.Minute, Interval: 30 * time.Second, KillProbability: 0.5, MaxKills: 1}, true
	case 2:
		return Plan{Interval: 30 * time.Second, KillProbability: 0.5, MaxKills: 5}, true
	}
	return Plan{}, false
}

// Run kills etcd pods (label app=etcd) in namespace until ctx is done.
func Run(ctx context.Context, kube kubernetes.Interface, namespace string, plan Plan, rnd *rand.Rand, log *logrus.Entry) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(plan.Delay):
	}
	ticker := time.NewTicker(plan.Interval)
	defer ticker.Stop()
	for {
		if rnd.Float64() < plan.KillProbability {
			killSome(ctx, kube, namespace, plan.MaxKills, rnd, log)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func killSome(ctx context.Context, kube kubernetes.Interface, namespace string, max int, rnd *rand.Rand, log *logrus.Entry) {
	pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: api.LabelApp + "=" + api.LabelAppValue})
	if err != nil {
		log.WithError(err).Warn("chaos: list pods")
		return
	}
	if len(pods.Items) == 0 {
		return
	}
	n := 1 + rnd.IntN(max)
	for _, i := range rnd.Perm(len(pods.Items))[:min(n, len(pods.Items))] {
		p := pods.Items[i]
		if err := kube.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			log.WithError(err).Warnf("chaos: delete pod %s", p.Name)
			continue
		}
		log.Infof("chaos: killed pod %s", p.Name)
	}
}
