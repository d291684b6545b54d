//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// quorumReportTimeout is "within about a minute": the operator hears of dead pods
// from its pod informer at once, and its tick is 8 s.
const quorumReportTimeout = 75 * time.Second

// survivorHold is how long the surviving member must be left alone after the quorum
// loss was reported.
const survivorHold = 20 * time.Second

// TestQuorumLossIsReportedAndNothingIsDeleted: with 2 of 3 members gone, etcd can no
// longer change its membership and the survivor's data may be all that is left. The
// original kept saying Running/Available and logged "lost quorum" forever
// (original-measured.md, e). The cluster must say so in its
// status and a Warning event, and the operator must not delete the survivor.
func TestQuorumLossIsReportedAndNothingIsDeleted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("quorum")
	created := createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))

	survivorName := pods[2]
	survivor, err := f.Kube.CoreV1().Pods(opNS).Get(ctx, survivorName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, victim := range pods[:2] {
		if err := f.KillPod(ctx, opNS, victim); err != nil {
			t.Fatal(err)
		}
	}
	killed := time.Now()
	t.Logf("killed %v, left %s", pods[:2], survivorName)

	var reported *api.EtcdCluster
	err = framework.WaitFor(ctx, quorumReportTimeout, framework.Poll, "condition Available=False (LostQuorum or NoMembersRunning)",
		func(ctx context.Context) (bool, string, error) {
			cl, err := f.GetCluster(ctx, opNS, name)
			if err != nil {
				return false, err.Error(), nil
			}
			c := framework.StatusCondition(cl, api.ClusterConditionAvailable)
			if c != nil && c.Status == corev1.ConditionFalse && (c.Reason == "LostQuorum" || c.Reason == "NoMembersRunning") {
				reported = cl
				return true, "", nil
			}
			return false, framework.DescribeStatus(cl), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("quorum loss reported %.1fs after the kill: %s", time.Since(killed).Seconds(), framework.DescribeStatus(reported))
	if reported.Status.Reason == "" {
		t.Errorf("status.reason is empty; it must say what is wrong and what to do")
	}

	err = framework.WaitFor(ctx, 30*time.Second, framework.Poll, "a Warning event LostQuorum or NoMembersRunning on the cluster",
		func(ctx context.Context) (bool, string, error) {
			evs, err := f.Kube.CoreV1().Events(opNS).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
				"involvedObject.name": name, "involvedObject.uid": string(created.UID), "type": corev1.EventTypeWarning,
			}.String()})
			if err != nil {
				return false, err.Error(), nil
			}
			var seen []string
			for _, e := range evs.Items {
				if e.Reason == "LostQuorum" || e.Reason == "NoMembersRunning" {
					return true, "", nil
				}
				seen = append(seen, e.Reason)
			}
			return false, fmt.Sprintf("warning events: %v", seen), nil
		})
	if err != nil {
		t.Error(err)
	}

	// Nothing else may go: the survivor keeps running, the services stay.
	err = framework.Holds(ctx, survivorHold, framework.Poll, "the survivor "+survivorName+" and both services to stay",
		func(ctx context.Context) (bool, string, error) {
			p, err := f.Kube.CoreV1().Pods(opNS).Get(ctx, survivorName, metav1.GetOptions{})
			if err != nil {
				return false, "survivor: " + err.Error(), nil
			}
			if p.UID != survivor.UID || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				return false, fmt.Sprintf("survivor uid %s (was %s), deletionTimestamp %v, phase %s", p.UID, survivor.UID, p.DeletionTimestamp, p.Status.Phase), nil
			}
			for _, svc := range []string{name, name + "-client"} {
				if _, err := f.Kube.CoreV1().Services(opNS).Get(ctx, svc, metav1.GetOptions{}); err != nil {
					return false, "service " + svc + ": " + err.Error(), nil
				}
			}
			return true, "", nil
		})
	if err != nil {
		t.Error(err)
	}
	cl, err := f.GetCluster(ctx, opNS, name)
	if err != nil {
		t.Fatal(err)
	}
	if c := framework.StatusCondition(cl, api.ClusterConditionAvailable); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("the Available condition went back to %+v although quorum is still lost", c)
	}
	if !strings.Contains(strings.ToLower(cl.Status.Reason), "quorum") && !strings.Contains(strings.ToLower(cl.Status.Reason), "no member") {
		t.Errorf("status.reason %q does not mention the quorum loss", cl.Status.Reason)
	}
}
