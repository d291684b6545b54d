package k8sutil

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// originalLikePod is a member pod as coreos/etcd-operator v0.9.4 made it
// (its newEtcdPod), for member name of c, with extra etcd flags.
func originalLikePod(c *v1beta2.EtcdCluster, name string, extra ...string) *corev1.Pod {
	m := newTestMember(c, name)
	cmd := "/usr/local/bin/etcd --data-dir=/var/etcd/data --name=" + name + " --initial-advertise-peer-urls=" + m.PeerURL() +
		" --listen-peer-urls=http://0.0.0.0:2380 --listen-client-urls=http://0.0.0.0:2379 --advertise-client-urls=" + m.ClientURL() +
		" --initial-cluster=" + name + "=" + m.PeerURL() + " --initial-cluster-state=new --initial-cluster-token=t"
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-ec", "ETCDCTL_API=3 etcdctl endpoint status"}}}}
	p := &corev1.Pod{Spec: corev1.PodSpec{
		RestartPolicy:  corev1.RestartPolicyNever,
		InitContainers: []corev1.Container{{Name: "check-dns", Image: "busybox:1.28.0-glibc"}},
		Containers: []corev1.Container{{
			Name: "etcd", Command: append(strings.Split(cmd, " "), extra...),
			VolumeMounts:  []corev1.VolumeMount{{Name: "etcd-data", MountPath: "/var/etcd"}},
			LivenessProbe: probe, ReadinessProbe: probe,
		}},
		Volumes: []corev1.Volume{{Name: "etcd-data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}}
	p.Name = name
	return p
}

func TestIsOriginalPod(t *testing.T) {
	c := newTestCluster()
	m := newTestMember(c, testSeed)
	restoreSeed := NewEtcdPod(c, m, c.Spec.Version, nil, ClusterStateNew, "", WithRestartPolicy(corev1.RestartPolicyNever))
	restoreSeed.Spec.InitContainers = append(restoreSeed.Spec.InitContainers, corev1.Container{Name: "fetch-backup"})
	for _, tt := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"a pod the original made is recognized", originalLikePod(c, testSeed), true},
		{"this operator's seed is not the original's", NewEtcdPod(c, m, c.Spec.Version, nil, ClusterStateNew, ""), false},
		{"this operator's pod for etcd 3.2 (exec probes) is not the original's", NewEtcdPod(c, m, "3.2.32", nil, ClusterStateNew, ""), false},
		{"the restore operator's seed (restartPolicy Never) is not the original's", restoreSeed, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsOriginalPod(tt.pod); got != tt.want {
				t.Errorf("IsOriginalPod = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOriginalLayoutProblem(t *testing.T) {
	c := newTestCluster()
	m := newTestMember(c, testSeed)
	otherDir := originalLikePod(c, testSeed)
	otherDir.Spec.Containers[0].Command[1] = "--data-dir=/var/etcd/other"
	for _, tt := range []struct {
		name               string
		pod                *corev1.Pod
		peerTLS, clientTLS bool
		want               string
	}{
		{name: "the original's plain pod under a plain spec is adoptable", pod: originalLikePod(c, testSeed)},
		{name: "peer TLS the spec does not ask for is refused", pod: originalLikePod(c, testSeed, "--peer-client-cert-auth=true"), want: "has peer TLS on, spec.TLS off"},
		{name: "client TLS the spec asks for and the pod lacks is refused", pod: originalLikePod(c, testSeed), clientTLS: true, want: "has client TLS off, spec.TLS on"},
		{name: "another data directory is refused", pod: otherDir, want: "--data-dir=/var/etcd/other, not /var/etcd/data"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := OriginalLayoutProblem(tt.pod, m.PeerURL(), m.ClientURL(), tt.peerTLS, tt.clientTLS)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("OriginalLayoutProblem = %q, want %q", got, tt.want)
			}
		})
	}
}
