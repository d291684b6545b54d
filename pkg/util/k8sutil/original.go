package k8sutil

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The member pods of coreos/etcd-operator v0.9.4, as its newEtcdPod made
// them: restartPolicy Never, one init container check-dns (busybox), the
// etcd container with the command line split on spaces and exec probes
// running etcdctl through /bin/sh, the data on volume etcd-data mounted at
// /var/etcd, the TLS secrets at the paths this operator also uses. This
// operator's pods restart their containers (restartPolicy Always) and probe
// over HTTP, or, for etcd 3.2, run a wait-membership container: the two
// layouts never meet in one pod.

// IsOriginalPod tells whether pod has the original operator's layout. It
// looks for the marks of that layout only, so that a pod of this operator
// (or a look-alike of neither) is never taken for one.
func IsOriginalPod(pod *corev1.Pod) bool {
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || len(pod.Spec.InitContainers) != 1 ||
		pod.Spec.InitContainers[0].Name != DNSCheckContainerName {
		return false
	}
	etcd := EtcdContainer(pod)
	if etcd == nil || len(etcd.Command) == 0 || etcd.Command[0] != "/usr/local/bin/etcd" {
		return false
	}
	probe := etcd.LivenessProbe
	return probe != nil && probe.Exec != nil && slices.Contains(probe.Exec.Command, "/bin/sh")
}

// OriginalLayoutProblem says what of an original pod this operator cannot
// adopt safely, "" when nothing: the member's name, data directory and
// URLs must be the ones it would give the member (clientURL and peerURL,
// built from the spec in force), and the pod must serve TLS exactly when
// the spec says so; otherwise the operator would dial the member wrongly or
// misjudge its data.
func OriginalLayoutProblem(pod *corev1.Pod, peerURL, clientURL string, securePeer, secureClient bool) string {
	etcd := EtcdContainer(pod)
	flags := map[string]string{}
	for _, arg := range etcd.Command[1:] {
		if k, v, ok := strings.Cut(arg, "="); ok {
			flags[k] = v
		}
	}
	if got := flags["--peer-client-cert-auth"] == "true"; got != securePeer {
		return fmt.Sprintf("pod %s has peer TLS %s, spec.TLS %s", pod.Name, onOff(got), onOff(securePeer))
	}
	if got := flags["--client-cert-auth"] == "true"; got != secureClient {
		return fmt.Sprintf("pod %s has client TLS %s, spec.TLS %s", pod.Name, onOff(got), onOff(secureClient))
	}
	want := []struct{ flag, value string }{
		{"--name", pod.Name},
		{"--data-dir", EtcdDataDir},
		{"--initial-advertise-peer-urls", peerURL},
		{"--advertise-client-urls", clientURL},
	}
	for _, w := range want {
		if got := flags[w.flag]; got != w.value {
			return fmt.Sprintf("pod %s runs etcd with %s=%s, not %s", pod.Name, w.flag, got, w.value)
		}
	}
	if !mountsData(pod, etcd) {
		return fmt.Sprintf("pod %s does not mount volume %s at %s", pod.Name, EtcdDataVolumeName, EtcdDataMountDir)
	}
	return ""
}

// mountsData tells whether the etcd container mounts the data volume where
// the data directory is.
func mountsData(pod *corev1.Pod, etcd *corev1.Container) bool {
	for _, m := range etcd.VolumeMounts {
		if m.Name == EtcdDataVolumeName && m.MountPath == EtcdDataMountDir {
			return slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == EtcdDataVolumeName })
		}
	}
	return false
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
