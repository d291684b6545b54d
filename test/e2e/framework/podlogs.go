package framework

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// ContainerLogRecorder keeps the log of every container of a cluster's pods that
// exits with an error while a test runs. The operator replaces a dead member within
// a second or two and the kubelet removes the containers of a deleted pod, so
// without it a failure dump would show that members died but never why. It watches
// the pods rather than polling them, to fetch a log before the pod is gone.
type ContainerLogRecorder struct {
	f       *Framework
	ns      string
	cluster string
	cancel  context.CancelFunc
	done    chan struct{}

	mu   sync.Mutex
	logs []string
	seen map[string]bool
	wg   sync.WaitGroup
}

// RecordFailedContainers starts recording; Stop ends it.
func (f *Framework) RecordFailedContainers(ns, cluster string) *ContainerLogRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &ContainerLogRecorder{f: f, ns: ns, cluster: cluster, cancel: cancel, done: make(chan struct{}), seen: map[string]bool{}}
	go r.run(ctx)
	return r
}

// run re-opens the watch whenever the apiserver closes it.
func (r *ContainerLogRecorder) run(ctx context.Context) {
	defer close(r.done)
	for ctx.Err() == nil {
		w, err := r.f.Kube.CoreV1().Pods(r.ns).Watch(ctx, metav1.ListOptions{LabelSelector: ClusterSelector(r.cluster)})
		if err != nil {
			if sleep(ctx, 2*time.Second) != nil {
				return
			}
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			if p, ok := ev.Object.(*corev1.Pod); ok {
				r.inspect(ctx, p)
			}
		}
		w.Stop()
	}
}

func (r *ContainerLogRecorder) inspect(ctx context.Context, p *corev1.Pod) {
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			r.record(ctx, p.Name, cs.Name, fmt.Sprintf("exit %d (%s) at %s", t.ExitCode, t.Reason, t.FinishedAt.Format(time.RFC3339)), false, cs.RestartCount, t.Message)
		}
		if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
			r.record(ctx, p.Name, cs.Name, fmt.Sprintf("previous run: exit %d (%s) at %s", t.ExitCode, t.Reason, t.FinishedAt.Format(time.RFC3339)), true, cs.RestartCount-1, t.Message)
		}
	}
}

// record fetches the log once per container run, in the background so that the
// watch keeps up.
func (r *ContainerLogRecorder) record(ctx context.Context, pod, container, what string, previous bool, run int32, message string) {
	key := fmt.Sprintf("%s/%s/%d", pod, container, run)
	r.mu.Lock()
	if r.seen[key] {
		r.mu.Unlock()
		return
	}
	r.seen[key] = true
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		opts := &corev1.PodLogOptions{Container: container, Previous: previous, Timestamps: true, TailLines: new(int64(40))}
		raw, err := r.f.Kube.CoreV1().Pods(r.ns).GetLogs(pod, opts).DoRaw(ctx)
		out := strings.TrimRight(string(raw), "\n")
		if err != nil {
			out = fmt.Sprintf("(log not available: %v)", err)
			if message != "" {
				out += "\ntermination message: " + message
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.logs = append(r.logs, fmt.Sprintf("---- %s container %s: %s\n%s", pod, container, what, out))
	}()
}

// Stop ends the recording.
func (r *ContainerLogRecorder) Stop() {
	r.cancel()
	<-r.done
	r.wg.Wait()
}

// Section is the recorded logs, for a failure dump.
func (r *ContainerLogRecorder) Section() Section {
	r.mu.Lock()
	defer r.mu.Unlock()
	body := "no container of the cluster exited with an error"
	if len(r.logs) > 0 {
		body = strings.Join(r.logs, "\n")
	}
	return Section{Title: "logs of containers that exited with an error during the test", Body: body}
}
