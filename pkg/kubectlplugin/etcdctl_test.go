package kubectlplugin

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// etcdPod is a member pod whose etcd container has the given arguments,
// mounting the given secrets (volume name = secret name) under /s/<name>.
func etcdPod(args []string, secrets ...string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "example-m0"}}
	c := corev1.Container{Name: "etcd", Command: []string{"/usr/local/bin/etcd"}, Args: args}
	for _, s := range secrets {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: s, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: s, MountPath: "/s/" + s})
	}
	pod.Spec.Containers = []corev1.Container{{Name: "check-dns"}, c}
	return pod
}

func TestEtcdctlCommand(t *testing.T) {
	plain := &api.EtcdCluster{}
	tlsCluster := &api.EtcdCluster{Spec: api.ClusterSpec{TLS: &api.TLSPolicy{Static: &api.StaticTLS{
		OperatorSecret: "op-tls", Member: &api.MemberSecret{ServerSecret: "server-tls"}}}}}
	serverFlags := []string{"--advertise-client-urls=https://example-m0.example.team-a.svc:2379", "--trusted-ca-file=/srv/server-ca.crt",
		"--cert-file=/srv/server.crt", "--key-file=/srv/server.key"}
	tests := []struct {
		name    string
		cluster *api.EtcdCluster
		pod     *corev1.Pod
		args    []string
		want    []string
		err     string
	}{
		{"a plain cluster: the member's own client URL", plain,
			etcdPod([]string{"--name=example-m0", "--advertise-client-urls=http://example-m0.example.team-a.svc:2379"}), []string{"member", "list"},
			[]string{"/usr/local/bin/etcdctl", "--endpoints=http://example-m0.example.team-a.svc:2379", "member", "list"}, ""},
		{"TLS with the operator's certificate mounted", tlsCluster, etcdPod(serverFlags, "op-tls", "server-tls"), []string{"endpoint", "status"},
			[]string{"/usr/local/bin/etcdctl", "--endpoints=https://example-m0.example.team-a.svc:2379", "--cacert=/srv/server-ca.crt",
				"--cert=/s/op-tls/etcd-client.crt", "--key=/s/op-tls/etcd-client.key", "endpoint", "status"}, ""},
		{"TLS without it: the member's server certificate", tlsCluster, etcdPod(serverFlags, "server-tls"), []string{"get", "k"},
			[]string{"/usr/local/bin/etcdctl", "--endpoints=https://example-m0.example.team-a.svc:2379", "--cacert=/srv/server-ca.crt",
				"--cert=/srv/server.crt", "--key=/srv/server.key", "get", "k"}, ""},
		{"the user's flags come last and win", plain, etcdPod([]string{"--advertise-client-urls=http://a:2379,http://b:2379"}),
			[]string{"--endpoints=http://c:2379", "get", "k"},
			[]string{"/usr/local/bin/etcdctl", "--endpoints=http://a:2379", "--endpoints=http://c:2379", "get", "k"}, ""},
		{"a pod without an etcd container", plain, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, nil, nil, "has no etcd container"},
		{"TLS flags missing", tlsCluster, etcdPod([]string{"--advertise-client-urls=https://a:2379"}), nil, nil, "names no --cert-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EtcdctlCommand(tt.cluster, tt.pod, tt.args)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("command\n%q, %v\nwant\n%q", got, err, tt.want)
			}
		})
	}
}

type recordedExec struct {
	pod, container string
	command        []string
	stdin          bool
}

type fakeExecutor struct{ calls []recordedExec }

func (f *fakeExecutor) Exec(_ context.Context, _, pod, container string, command []string, streams genericiooptions.IOStreams) error {
	f.calls = append(f.calls, recordedExec{pod: pod, container: container, command: command, stdin: streams.In != nil})
	return nil
}

func TestEtcdctlRunsInAMemberOfTheCluster(t *testing.T) {
	podWith := func(name string) *corev1.Pod {
		p := memberPodOf(&api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: ns, UID: "uid-example"}}, name)
		p.Spec.Containers = []corev1.Container{{Name: "etcd", Args: []string{"--advertise-client-urls=http://" + name + ".example:2379"}}}
		return p
	}
	tests := []struct {
		name string
		args []string
		want recordedExec
		err  string
	}{
		{"the first running member", []string{"etcdctl", "example", "-n", ns, "--", "member", "list"},
			recordedExec{"example-a", "etcd", []string{etcdctlPath, "--endpoints=http://example-a.example:2379", "member", "list"}, false}, ""},
		{"the member asked for, with stdin", []string{"etcdctl", "example", "--member", "example-b", "-i", "-n", ns, "--", "put", "k"},
			recordedExec{"example-b", "etcd", []string{etcdctlPath, "--endpoints=http://example-b.example:2379", "put", "k"}, true}, ""},
		{"flags after -- are etcdctl's", []string{"etcdctl", "example", "-n", ns, "--", "get", "--prefix", "/", "-w", "json"},
			recordedExec{"example-a", "etcd", []string{etcdctlPath, "--endpoints=http://example-a.example:2379", "get", "--prefix", "/", "-w", "json"}, false}, ""},
		{"another cluster's pod is refused", []string{"etcdctl", "example", "--member", "other-m0", "-n", ns, "--", "member", "list"},
			recordedExec{}, "not a member of EtcdCluster example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newKubeFixture(t, nil, podWith("example-a"), podWith("example-b"))
			// The fixture's example-m* pods are pending here: the first
			// running member is example-a.
			for _, n := range []string{"example-m0", "example-m1", "example-m2"} {
				p, _ := f.kube.CoreV1().Pods(ns).Get(t.Context(), n, metav1.GetOptions{})
				p.Status.Phase = corev1.PodPending
				if _, err := f.kube.CoreV1().Pods(ns).Update(t.Context(), p, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			exec := &fakeExecutor{}
			f.plugin.Executor = exec
			_, _, err := cliRun(t, f.plugin, tt.args...)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || len(exec.calls) > 0 {
					t.Fatalf("err = %v, exec %v; want %q and no exec", err, exec.calls, tt.err)
				}
				return
			}
			if err != nil || len(exec.calls) != 1 {
				t.Fatalf("err %v, exec calls %v", err, exec.calls)
			}
			got := exec.calls[0]
			if got.pod != tt.want.pod || got.container != tt.want.container || got.stdin != tt.want.stdin || !slices.Equal(got.command, tt.want.command) {
				t.Fatalf("exec %+v, want %+v", got, tt.want)
			}
		})
	}
}
