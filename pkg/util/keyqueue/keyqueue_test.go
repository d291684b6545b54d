package keyqueue

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

func TestWorkersGetTheKeysOfTheInformersObjects(t *testing.T) {
	kube := fake.NewSimpleClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
	factory := informers.NewSharedInformerFactory(kube, 0)
	inf := factory.Core().V1().Pods().Informer()
	q := New("pods", workqueue.DefaultTypedControllerRateLimiter[string](), inf, quietLog())

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	factory.Start(ctx.Done())
	var mu sync.Mutex
	var keys []string
	got := make(chan struct{}, 10)
	synced := false
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, q, inf.HasSynced, "Pod", 2, func() { synced = true }, quietLog(), func(context.Context) bool {
			key, quit := q.Get()
			if quit {
				return false
			}
			defer q.Done(key)
			mu.Lock()
			keys = append(keys, key)
			mu.Unlock()
			got <- struct{}{}
			return true
		})
	}()
	<-got
	if err := kube.CoreV1().Pods("ns").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the deletion was not queued")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after a clean stop", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !synced || len(keys) != 2 || keys[0] != "ns/a" || keys[1] != "ns/a" {
		t.Fatalf("synced %v, keys %q; want the add and the delete of ns/a", synced, keys)
	}
}

func TestRunWithoutASyncedCacheSaysWhich(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	never := cache.InformerSynced(func() bool { return false })
	err := Run(ctx, q, never, "EtcdBackup", 1, nil, quietLog(), func(context.Context) bool { return false })
	if err == nil || !strings.Contains(err.Error(), "EtcdBackup cache did not sync") {
		t.Fatalf("Run = %v, want the EtcdBackup cache error", err)
	}
}

func TestAPanicEndsTheKeyNotTheWorker(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	q.Add("ns/bad")
	q.Add("ns/good")
	processed := make(chan string, 2)
	done := make(chan error, 1)
	go func() {
		// One worker: the good key can only be processed by the worker that
		// met the panic.
		done <- Run(ctx, q, func() bool { return true }, "EtcdBackup", 1, nil, quietLog(), func(context.Context) bool {
			key, quit := q.Get()
			if quit {
				return false
			}
			defer q.Done(key)
			if key == "ns/bad" {
				panic("a bug met by one object")
			}
			processed <- key
			return true
		})
	}()
	select {
	case key := <-processed:
		if key != "ns/good" {
			t.Errorf("processed %q", key)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not go on after the panic")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}
