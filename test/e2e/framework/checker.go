package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/test/checker"
)

// CheckerBinary is where the operator image keeps the linearizability checker.
const CheckerBinary = "/usr/local/bin/etcd-checker"

// checkerResultPrefix starts the checker's result line (cmd/etcd-checker).
const checkerResultPrefix = "RESULT "

// CheckerPod is a run of etcd-checker as a pod beside a cluster, against its client
// service: the way any client in the cluster reaches etcd.
type CheckerPod struct {
	Namespace, Cluster, Scenario string
	// Duration of the workload.
	Duration time.Duration
	// Settle bounds the final read-back (default 4 min).
	Settle time.Duration
}

// Checker is a started checker pod.
type Checker struct {
	f    *Framework
	ns   string
	Name string
}

func (f *Framework) operatorImage() string {
	if f.Env.OperatorImage != "" {
		return f.Env.OperatorImage
	}
	return "openetcd/etcd-operator:v0.1.0"
}

// StartChecker creates the checker pod and returns once its workload runs.
func (f *Framework) StartChecker(ctx context.Context, p CheckerPod) (*Checker, error) {
	if p.Settle == 0 {
		p.Settle = 4 * time.Minute
	}
	name := UniqueName("checker")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "e2e-etcd-checker"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  new(false),
			TerminationGracePeriodSeconds: new(int64(0)),
			Containers: []corev1.Container{{
				Name:            "checker",
				Image:           f.operatorImage(),
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{CheckerBinary,
					"-endpoints=" + ClientURL(p.Cluster, false),
					"-scenario=" + p.Scenario,
					"-duration=" + p.Duration.String(),
					"-settle=" + p.Settle.String(),
					"-visualization=/tmp/history.html",
				},
			}},
		},
	}
	pods := f.Kube.CoreV1().Pods(p.Namespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create checker pod: %w", err)
	}
	c := &Checker{f: f, ns: p.Namespace, Name: name}
	err := WaitFor(ctx, 2*time.Minute, Poll, "checker pod "+name+" to start its workload", func(ctx context.Context) (bool, string, error) {
		got, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if got.Status.Phase == corev1.PodFailed || got.Status.Phase == corev1.PodSucceeded {
			log, _ := c.Log(ctx)
			return false, "", fmt.Errorf("checker pod %s ended at once (%s): %s", name, got.Status.Phase, log)
		}
		if got.Status.Phase != corev1.PodRunning {
			return false, string(got.Status.Phase), nil
		}
		log, err := c.Log(ctx)
		return err == nil && strings.Contains(log, "workload started"), "running, no workload yet", nil
	})
	if err != nil {
		c.Delete()
		return nil, err
	}
	return c, nil
}

// Log is the pod's output so far.
func (c *Checker) Log(ctx context.Context) (string, error) {
	raw, err := c.f.Kube.CoreV1().Pods(c.ns).GetLogs(c.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	return string(raw), err
}

// Wait waits for the checker to end and returns its result and its log.
func (c *Checker) Wait(ctx context.Context, timeout time.Duration) (checker.Result, string, error) {
	var r checker.Result
	pods := c.f.Kube.CoreV1().Pods(c.ns)
	err := WaitFor(ctx, timeout, Poll, "checker pod "+c.Name+" to finish", func(ctx context.Context) (bool, string, error) {
		got, err := pods.Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed, string(got.Status.Phase), nil
	})
	log, lerr := c.Log(ctx)
	if err != nil {
		return r, log, err
	}
	if lerr != nil {
		return r, log, fmt.Errorf("log of checker pod %s: %w", c.Name, lerr)
	}
	for _, line := range strings.Split(log, "\n") {
		if rest, ok := strings.CutPrefix(line, checkerResultPrefix); ok {
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				return r, log, fmt.Errorf("parse the checker's result %q: %w", rest, err)
			}
			return r, log, nil
		}
	}
	return r, log, fmt.Errorf("checker pod %s printed no result", c.Name)
}

// Delete removes the pod.
func (c *Checker) Delete() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = c.f.Kube.CoreV1().Pods(c.ns).Delete(ctx, c.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
}
