package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdctlPath is where the etcd images keep etcdctl. They have no shell, so
// etcdctl is always exec'd directly, never through `sh -c`.
const EtcdctlPath = "/usr/local/bin/etcdctl"

// Client TLS files of a member: the server certificate is also a client
// certificate (gen-certs.sh gives it clientAuth), which lets the suite run etcdctl
// over https inside a member whose own cert is the only one mounted.
const (
	memberServerTLSDir = "/etc/etcdtls/member/server-tls"
	ClientTLSMountDir  = "/etc/etcd-client-tls"
)

// MemberTLSArgs are etcdctl's TLS flags for use inside a member pod of a TLS cluster.
var MemberTLSArgs = []string{
	"--cacert=" + memberServerTLSDir + "/server-ca.crt",
	"--cert=" + memberServerTLSDir + "/server.crt",
	"--key=" + memberServerTLSDir + "/server.key",
}

// ClientTLSArgs are etcdctl's TLS flags for a pod that mounts a client secret
// (etcd-client.crt, etcd-client.key, etcd-client-ca.crt) at ClientTLSMountDir.
var ClientTLSArgs = []string{
	"--cacert=" + ClientTLSMountDir + "/etcd-client-ca.crt",
	"--cert=" + ClientTLSMountDir + "/etcd-client.crt",
	"--key=" + ClientTLSMountDir + "/etcd-client.key",
}

// ClientURL is the cluster's client service as pods of its namespace reach it.
func ClientURL(cluster string, secure bool) string {
	scheme := "http"
	if secure {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s-client:2379", scheme, cluster)
}

// etcdctlTimeouts keep a call against a sick cluster from hanging a test.
var etcdctlTimeouts = []string{"--dial-timeout=5s", "--command-timeout=10s"}

// EtcdctlExec runs etcdctl in a pod's etcd container with `kubectl exec`.
func (f *Framework) EtcdctlExec(ctx context.Context, ns, pod string, args ...string) (string, error) {
	full := append([]string{"exec", "-n", ns, pod, "-c", "etcd", "--", EtcdctlPath}, etcdctlTimeouts...)
	return f.Kubectl(ctx, append(full, args...)...)
}

// Etcdctl runs etcdctl from a Ready member of the cluster against its client
// service, the path every client of the cluster takes. TLS clusters use the member's
// server certificate as client certificate.
func (f *Framework) Etcdctl(ctx context.Context, ns, cluster string, secure bool, args ...string) (string, error) {
	pods, err := f.ClusterPods(ctx, ns, cluster)
	if err != nil {
		return "", err
	}
	ready := ReadyPods(pods)
	if len(ready) == 0 {
		return "", fmt.Errorf("no Ready pod of %s/%s to run etcdctl in: %s", ns, cluster, DescribePods(pods))
	}
	full := []string{"--endpoints=" + ClientURL(cluster, secure)}
	if secure {
		full = append(full, MemberTLSArgs...)
	}
	return f.EtcdctlExec(ctx, ns, ready[0].Name, append(full, args...)...)
}

// PutAndGet writes key=value through the client service and reads it back,
// retrying within timeout: the service may briefly point at a member that is
// going away.
func (f *Framework) PutAndGet(ctx context.Context, ns, cluster string, secure bool, key, value string, timeout time.Duration) error {
	return WaitFor(ctx, timeout, time.Second, fmt.Sprintf("etcdctl put/get %s through %s", key, ClientURL(cluster, secure)),
		func(ctx context.Context) (bool, string, error) {
			if _, err := f.Etcdctl(ctx, ns, cluster, secure, "put", key, value); err != nil {
				return false, err.Error(), nil
			}
			return f.getEquals(ctx, ns, cluster, secure, key, value)
		})
}

// ExpectValue reads key through the client service until it reads value; reading
// anything else, or nothing, fails after timeout.
func (f *Framework) ExpectValue(ctx context.Context, ns, cluster string, secure bool, key, value string, timeout time.Duration) error {
	return WaitFor(ctx, timeout, time.Second, fmt.Sprintf("etcdctl get %s = %q through %s", key, value, ClientURL(cluster, secure)),
		func(ctx context.Context) (bool, string, error) {
			return f.getEquals(ctx, ns, cluster, secure, key, value)
		})
}

func (f *Framework) getEquals(ctx context.Context, ns, cluster string, secure bool, key, value string) (bool, string, error) {
	out, err := f.Etcdctl(ctx, ns, cluster, secure, "get", key, "--print-value-only")
	if err != nil {
		return false, err.Error(), nil
	}
	got := strings.TrimSpace(out)
	return got == value, fmt.Sprintf("get %s -> %q", key, got), nil
}

// Member is one entry of `etcdctl member list -w json`.
type Member struct {
	ID         uint64   `json:"ID"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	IsLearner  bool     `json:"isLearner"`
}

// MemberList is etcd's own view of the membership.
func (f *Framework) MemberList(ctx context.Context, ns, cluster string, secure bool) ([]Member, error) {
	out, err := f.Etcdctl(ctx, ns, cluster, secure, "member", "list", "-w", "json")
	if err != nil {
		return nil, err
	}
	var resp struct {
		Members []Member `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		return nil, fmt.Errorf("parse member list %q: %w", out, err)
	}
	return resp.Members, nil
}

// Leader asks every member who leads, through `endpoint status --cluster`, and
// returns the leader's member entry.
func (f *Framework) Leader(ctx context.Context, ns, cluster string, secure bool) (Member, error) {
	members, err := f.MemberList(ctx, ns, cluster, secure)
	if err != nil {
		return Member{}, err
	}
	out, err := f.Etcdctl(ctx, ns, cluster, secure, "endpoint", "status", "--cluster", "-w", "json")
	if err != nil {
		return Member{}, err
	}
	var statuses []struct {
		Endpoint string `json:"Endpoint"`
		Status   struct {
			Leader uint64 `json:"leader"`
		} `json:"Status"`
	}
	if err := json.Unmarshal([]byte(out), &statuses); err != nil {
		return Member{}, fmt.Errorf("parse endpoint status %q: %w", out, err)
	}
	leaders := map[uint64]bool{}
	for _, s := range statuses {
		leaders[s.Status.Leader] = true
	}
	if len(leaders) != 1 {
		return Member{}, fmt.Errorf("members disagree on the leader: %s", out)
	}
	for _, m := range members {
		if leaders[m.ID] {
			return m, nil
		}
	}
	return Member{}, fmt.Errorf("leader is not in the member list %+v: %s", members, out)
}

// EtcdctlPod runs etcdctl in a throwaway pod of the given etcd image: the way to
// talk to a cluster with credentials no member has mounted. With Secret set, that
// secret is mounted at ClientTLSMountDir.
type EtcdctlPod struct {
	Namespace string
	Image     string
	Secret    string
	Args      []string
}

// RunEtcdctlPod runs the pod to completion and returns its log and whether etcdctl
// exited 0. The pod is deleted afterwards.
func (f *Framework) RunEtcdctlPod(ctx context.Context, p EtcdctlPod) (string, bool, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: UniqueName("etcdctl"), Labels: map[string]string{"app": "e2e-etcdctl"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  new(false),
			TerminationGracePeriodSeconds: new(int64(0)),
			Containers: []corev1.Container{{
				Name:            "etcdctl",
				Image:           p.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         append(append([]string{EtcdctlPath}, etcdctlTimeouts...), p.Args...),
			}},
		},
	}
	if p.Secret != "" {
		pod.Spec.Volumes = []corev1.Volume{{
			Name:         "client-tls",
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: p.Secret}},
		}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "client-tls", MountPath: ClientTLSMountDir, ReadOnly: true}}
	}
	pods := f.Kube.CoreV1().Pods(p.Namespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "", false, fmt.Errorf("create etcdctl pod: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	}()
	var phase corev1.PodPhase
	err := WaitFor(ctx, 2*time.Minute, Poll, "etcdctl pod "+pod.Name+" to finish", func(ctx context.Context) (bool, string, error) {
		got, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		phase = got.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, string(phase), nil
	})
	if err != nil {
		return "", false, err
	}
	raw, err := pods.GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return "", false, fmt.Errorf("logs of etcdctl pod %s: %w", pod.Name, err)
	}
	return string(raw), phase == corev1.PodSucceeded, nil
}
