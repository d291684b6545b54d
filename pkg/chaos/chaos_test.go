package chaos

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels}}
}

func TestPlanForLevel(t *testing.T) {
	if _, ok := PlanForLevel(-1); ok {
		t.Fatal("level -1 must disable chaos")
	}
	if p, ok := PlanForLevel(1); !ok || p.MaxKills != 1 || p.Delay != time.Minute {
		t.Fatalf("level 1: %+v", p)
	}
	if p, ok := PlanForLevel(2); !ok || p.MaxKills != 5 || p.Delay != 0 {
		t.Fatalf("level 2: %+v", p)
	}
}

func TestKillsOnlyEtcdPods(t *testing.T) {
	etcd := map[string]string{"app": "etcd"}
	kube := fake.NewSimpleClientset(pod("a", etcd), pod("b", etcd), pod("operator", map[string]string{"app": "operator"}))
	killSome(context.Background(), kube, "ns", 5, rand.New(rand.NewPCG(1, 2)), logrus.NewEntry(logrus.New()))
	left, _ := kube.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	names := map[string]bool{}
	for _, p := range left.Items {
		names[p.Name] = true
	}
	if !names["operator"] {
		t.Fatal("a pod without app=etcd was killed")
	}
	if len(left.Items) == 3 {
		t.Fatal("no etcd pod was killed")
	}
}

func TestRunStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Run(ctx, fake.NewSimpleClientset(), "ns", Plan{Interval: time.Millisecond, KillProbability: 1, MaxKills: 1},
			rand.New(rand.NewPCG(1, 2)), logrus.NewEntry(logrus.New()))
		close(done)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}
