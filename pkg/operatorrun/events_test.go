package operatorrun

import (
	"context"
	"fmt"
	"testing"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// eventedCluster is an EtcdCluster as the cluster package hands it to the
// recorder: with its kind set.
func eventedCluster() *api.EtcdCluster {
	return &api.EtcdCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.SchemeGroupVersion.String(), Kind: api.EtcdClusterResourceKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "example", UID: "uid-1"},
	}
}

// settledEvents waits until the events in the API stop changing and returns
// them: the broadcaster sends in the background.
func settledEvents(t *testing.T, kube *fake.Clientset) []corev1.Event {
	t.Helper()
	var last []corev1.Event
	stableSince := time.Now()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		l, err := kube.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !sameEvents(l.Items, last) {
			last, stableSince = l.Items, time.Now()
			continue
		}
		if time.Since(stableSince) > 2*time.Second {
			return last
		}
	}
	t.Fatalf("the events kept changing for 20 s; last %d", len(last))
	return nil
}

func sameEvents(a, b []corev1.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Count != b[i].Count || a[i].Message != b[i].Message {
			return false
		}
	}
	return true
}

// A CA rotation, a rolling upgrade or a repair tells each of its steps as an
// event on the EtcdCluster; a long-lived cluster tells many more over its life.
// Every step must reach kubectl describe as it was told, whatever was told
// before it: client-go's defaults pass 25 events about one object and then one
// every five minutes, and merge a reason's messages after ten.
func TestEveryStepOfALongChangeReachesTheAPIAsTold(t *testing.T) {
	kube := fake.NewSimpleClientset()
	rec, stop := NewEventRecorder(kube, "etcd-operator", "op-1", logrus.NewEntry(logrus.New()))
	defer stop()
	cl := eventedCluster()
	var want []string
	// What a cluster said before: members added, a version upgraded.
	for i := 0; i < 20; i++ {
		msg := fmt.Sprintf("added member example-%d", i)
		rec.Event(cl, corev1.EventTypeNormal, "MemberAdded", msg)
		want = append(want, msg)
	}
	// A change of many steps told afterwards.
	for i := 0; i < 20; i++ {
		msg := fmt.Sprintf("CA rotation step %d", i)
		rec.Event(cl, corev1.EventTypeNormal, "CARotation", msg)
		want = append(want, msg)
	}
	got := map[string]bool{}
	for _, e := range settledEvents(t, kube) {
		got[e.Message] = true
	}
	for _, m := range want {
		if !got[m] {
			t.Errorf("event %q did not reach the API as told; got %d events: %v", m, len(got), got)
		}
	}
}

// A reason told without end (a pass that fails the same way for hours) is
// still bounded, and does not silence the others.
func TestAnEndlessReasonIsBoundedAndSilencesNoOther(t *testing.T) {
	kube := fake.NewSimpleClientset()
	rec, stop := NewEventRecorder(kube, "etcd-operator", "op-1", logrus.NewEntry(logrus.New()))
	defer stop()
	cl := eventedCluster()
	for i := 0; i < 1000; i++ {
		rec.Event(cl, corev1.EventTypeWarning, "Failing", fmt.Sprintf("attempt %d failed", i))
	}
	rec.Event(cl, corev1.EventTypeWarning, "MemberReplaced", "replaced member example-0")
	var failing int32
	var other bool
	for _, e := range settledEvents(t, kube) {
		switch e.Reason {
		case "Failing":
			failing += e.Count
		case "MemberReplaced":
			other = true
		}
	}
	if failing > EventBurstPerReason+5 {
		t.Errorf("%d of 1000 events of one reason reached the API; want about %d", failing, EventBurstPerReason)
	}
	if failing < 10 {
		t.Errorf("only %d events of the endless reason reached the API", failing)
	}
	if !other {
		t.Error("the endless reason silenced another")
	}
}
