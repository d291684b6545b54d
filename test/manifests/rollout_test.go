package manifests

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/openetcd/etcd-operator/pkg/operatorrun"
	"github.com/openetcd/etcd-operator/pkg/restore"
)

// checkRollsOneNewPodFirst: a rolling update starts a new pod, which becomes
// Ready as a standby, before it stops the old one, whose leadership passes
// over when it releases its lock on SIGTERM. With maxUnavailable above zero a
// single replica would be stopped first and nothing would lead meanwhile; with
// Recreate an image that does not start would leave no operator at all.
func checkRollsOneNewPodFirst(t *testing.T, what string, d appsv1.Deployment) {
	t.Helper()
	s := d.Spec.Strategy
	if s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil ||
		s.RollingUpdate.MaxSurge == nil || s.RollingUpdate.MaxSurge.String() != "1" ||
		s.RollingUpdate.MaxUnavailable == nil || s.RollingUpdate.MaxUnavailable.String() != "0" {
		t.Errorf("%s: strategy %+v (rollingUpdate %+v), want RollingUpdate with maxSurge 1 and maxUnavailable 0", what, s.Type, s.RollingUpdate)
	}
	probe := d.Spec.Template.Spec.Containers[0].ReadinessProbe
	if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/readyz" {
		t.Errorf("%s: readiness probe %+v, want /readyz, which standbys pass", what, probe)
	}
}

func TestExampleDeploymentsStartTheNewPodBeforeStoppingTheOld(t *testing.T) {
	for _, file := range []string{"deployment.yaml", "etcd-backup-operator/deployment.yaml", "etcd-restore-operator/deployment.yaml"} {
		var d appsv1.Deployment
		readYAML(t, &d, "example", file)
		checkRollsOneNewPodFirst(t, "example/"+file, d)
	}
}

func TestChartDeploymentsStartTheNewPodBeforeStoppingTheOld(t *testing.T) {
	r := render(t)
	for _, name := range operatorNames {
		var d appsv1.Deployment
		r.decode(t, "Deployment", relName(name), &d)
		checkRollsOneNewPodFirst(t, "the chart's "+name, d)
	}
}

// The restore operator makes its Service from its own pod: made from a pod
// of the example Deployment or the chart's, it sends seeds to the leader's pod
// only, whichever revision it runs, and never to a standby, which is Ready
// too but does not serve backups.
func TestRestoreServiceSelectsOnlyTheLeadersPod(t *testing.T) {
	var example appsv1.Deployment
	readYAML(t, &example, "example", "etcd-restore-operator", "deployment.yaml")
	var chart appsv1.Deployment
	render(t).decode(t, "Deployment", relName("etcd-restore-operator"), &chart)
	for what, d := range map[string]appsv1.Deployment{"example/etcd-restore-operator/deployment.yaml": example, "the chart": chart} {
		pod := func(name, hash string, leader bool) *corev1.Pod {
			l := labels.Merge(d.Spec.Template.Labels, labels.Set{"pod-template-hash": hash})
			if leader {
				l[operatorrun.LeaderLabel] = "true"
			}
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "etcd-system", Name: name, Labels: l}}
		}
		// The Service as the new revision's standby makes it, the old
		// revision's pod leading.
		oldLeader, newStandby := pod("old", "5d9f7", true), pod("new", "7c6b8", false)
		svc, err := restore.NewService("etcd-system", newStandby, operatorrun.LeaderLabel)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		if !sel.Matches(labels.Set(oldLeader.Labels)) {
			t.Errorf("%s: the Service (selector %v) does not select the leader's pod %v", what, sel, oldLeader.Labels)
		}
		if sel.Matches(labels.Set(newStandby.Labels)) {
			t.Errorf("%s: the Service (selector %v) selects a standby %v", what, sel, newStandby.Labels)
		}
		if once := labels.Set(pod("new", "7c6b8", true).Labels); !sel.Matches(once) {
			t.Errorf("%s: the Service (selector %v) does not select the new pod once it leads %v", what, sel, once)
		}
	}
}
