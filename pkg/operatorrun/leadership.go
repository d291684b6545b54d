package operatorrun

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/openetcd/etcd-operator/pkg/util/promutil"
)

// LeaderLabel, set to "true", marks the pod of the replica that leads once its
// work runs, so that what must reach the leader alone selects it: the restore
// operator's Service. /readyz cannot: standbys are Ready too, since a rolling
// update waits for the new pod to be Ready before it stops the old leader.
const LeaderLabel = "etcd.database.coreos.com/leader"

// labelTimeout bounds each label change, also the one made while shutting
// down, whose context is already done.
const labelTimeout = 5 * time.Second

// LeaderLabelRule is what labelling the leader's pod needs in ns.
func LeaderLabelRule(ns string) Rule {
	return Rule{Resource: "pods", Verbs: []string{"patch"}, Namespace: ns}
}

// Leadership shows which replica leads: the gauge <binary>_leader is 1 while
// this process holds the leader-election lock, and its pod carries LeaderLabel
// while its work runs. Only the leader carries the label: it is taken off when
// leadership ends, by the new leader from its predecessor's pod (a leader that
// crashed cannot take it off itself), and at start from the process's own pod
// (a container restarted after a crash).
//
// A role without patch on pods (LeaderLabelRule) leaves the pods unlabelled
// and is said once; the gauge and the rest work as before.
type Leadership struct {
	kube  kubernetes.Interface
	self  Identity
	log   *logrus.Entry
	gauge prometheus.Gauge

	// mu orders the label changes: a label set by the leader's work as it
	// stops must not land after the one taken off when leadership ended.
	mu      sync.Mutex
	leading bool
	// forbidden is set once a patch was refused, so that it is said once.
	forbidden bool
}

// NewLeadership registers the gauge, named after binary
// (etcd-backup-operator: etcd_backup_operator_leader), on reg.
func NewLeadership(kube kubernetes.Interface, self Identity, binary string, reg prometheus.Registerer, log *logrus.Entry) *Leadership {
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: strings.ReplaceAll(binary, "-", "_") + "_leader",
		Help: "1 while this replica holds the leader-election lock, 0 while it stands by.",
	})
	return &Leadership{kube: kube, self: self, log: log, gauge: promutil.Register(reg, gauge)}
}

// started is told that this process holds the lock, taken over from
// predecessor ("" when unknown): it takes the label off the predecessor's pod.
func (l *Leadership) started(ctx context.Context, predecessor string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ctx.Err() != nil {
		// Leadership ended before its work began; stopped may have run.
		return
	}
	l.leading = true
	l.gauge.Set(1)
	if predecessor != "" && predecessor != l.self.PodName && predecessor != resourcelock.UnknownLeader {
		l.unlabel(ctx, predecessor, "the previous leader's pod")
	}
}

// stopped is told that leadership ended: it takes the label off this pod.
func (l *Leadership) stopped(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leading = false
	l.gauge.Set(0)
	l.unlabel(ctx, l.self.PodName, "this pod, which no longer leads")
}

// unlabelSelf takes off the label a crashed run of this process left on its
// pod, before it contends.
func (l *Leadership) unlabelSelf(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unlabel(ctx, l.self.PodName, "this pod, left by a run that did not stop cleanly")
}

// Working labels this pod as the leader's: the leader's work calls it once it
// runs (caches synced; the restore operator's backup server listening). It
// does nothing once leadership ended.
func (l *Leadership) Working(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leading {
		return
	}
	if l.patch(ctx, l.self.PodName, "true") {
		l.log.Infof("labelled pod %s/%s %s=true", l.self.Namespace, l.self.PodName, LeaderLabel)
	}
}

// unlabel takes the label off pod if it carries it. It reads the pod first,
// so that a role without patch is only told when a label is there to remove.
func (l *Leadership) unlabel(ctx context.Context, pod, which string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), labelTimeout)
	defer cancel()
	p, err := l.kube.CoreV1().Pods(l.self.Namespace).Get(ctx, pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return
	case err != nil:
		l.log.Warnf("cannot read pod %s/%s to take label %s off %s: %v", l.self.Namespace, pod, LeaderLabel, which, err)
		return
	case p.Labels[LeaderLabel] == "":
		return
	}
	if l.patch(ctx, pod, nil) {
		l.log.Infof("took label %s off %s (%s/%s)", LeaderLabel, which, l.self.Namespace, pod)
	}
}

// patch sets the label on pod to value, or removes it (nil), and says whether
// it did.
func (l *Leadership) patch(ctx context.Context, pod string, value any) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), labelTimeout)
	defer cancel()
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{LeaderLabel: value}}})
	if err != nil {
		panic(err) // a map of strings always marshals
	}
	_, err = l.kube.CoreV1().Pods(l.self.Namespace).Patch(ctx, pod, types.MergePatchType, body, metav1.PatchOptions{})
	switch {
	case err == nil:
		return true
	case apierrors.IsNotFound(err):
	case apierrors.IsForbidden(err):
		if !l.forbidden {
			l.forbidden = true
			l.log.Warnf("the leader's pod is not labelled %s: the role lacks %s (%v)", LeaderLabel, LeaderLabelRule(l.self.Namespace), err)
		}
	default:
		l.log.Warnf("change label %s of pod %s/%s: %v", LeaderLabel, l.self.Namespace, pod, err)
	}
	return false
}

// holderLock remembers the last holder other than this process that its Get
// found, so that a new leader knows whose pod may still carry LeaderLabel.
type holderLock struct {
	resourcelock.Interface

	mu   sync.Mutex
	last string
}

func (l *holderLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil && rec != nil && rec.HolderIdentity != "" && rec.HolderIdentity != l.Identity() {
		l.mu.Lock()
		l.last = rec.HolderIdentity
		l.mu.Unlock()
	}
	return rec, raw, err
}

func (l *holderLock) previous() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}
