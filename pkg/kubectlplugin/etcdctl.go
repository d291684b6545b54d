package kubectlplugin

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// etcdctlPath is where etcd's images keep etcdctl. They have no shell, so
// etcdctl is exec'd directly.
const etcdctlPath = "/usr/local/bin/etcdctl"

// EtcdctlCommand is the command line that runs etcdctl in the member's etcd
// container against that member: the member's own advertised client URL,
// and for a TLS cluster the files the pod mounts. The client certificate is
// the operator's when the pod mounts the operatorSecret, otherwise the
// member's server certificate, which etcd accepts as a client certificate
// when it allows client authentication (as certificates made for etcd
// usually do). The user's args come last, so they can override any flag.
func EtcdctlCommand(cluster *api.EtcdCluster, pod *corev1.Pod, args []string) ([]string, error) {
	etcd := k8sutil.EtcdContainer(pod)
	if etcd == nil {
		return nil, fmt.Errorf("pod %s has no %s container", pod.Name, k8sutil.EtcdContainerName)
	}
	flags := map[string]string{}
	for _, a := range append(append([]string{}, etcd.Command...), etcd.Args...) {
		if k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok && strings.HasPrefix(a, "--") {
			flags[k] = v
		}
	}
	endpoint := strings.Split(flags["advertise-client-urls"], ",")[0]
	if endpoint == "" {
		return nil, fmt.Errorf("the etcd container of %s has no --advertise-client-urls", pod.Name)
	}
	cmd := []string{etcdctlPath, "--endpoints=" + endpoint}
	if strings.HasPrefix(endpoint, "https://") {
		cert, key := flags["cert-file"], flags["key-file"]
		if dir := mountOfSecret(pod, etcd, operatorSecretName(cluster)); dir != "" {
			cert, key = path.Join(dir, etcdutil.SecretClientCert), path.Join(dir, etcdutil.SecretClientKey)
		}
		if cert == "" || key == "" || flags["trusted-ca-file"] == "" {
			return nil, fmt.Errorf("the etcd container of %s serves TLS but names no --cert-file, --key-file and --trusted-ca-file", pod.Name)
		}
		cmd = append(cmd, "--cacert="+flags["trusted-ca-file"], "--cert="+cert, "--key="+key)
	}
	return append(cmd, args...), nil
}

func operatorSecretName(cluster *api.EtcdCluster) string {
	if !cluster.Spec.TLS.IsSecureClient() {
		return ""
	}
	return cluster.Spec.TLS.Secrets(cluster.Name).Operator
}

// mountOfSecret is where the container mounts the secret named name ("":
// nowhere).
func mountOfSecret(pod *corev1.Pod, c *corev1.Container, name string) string {
	if name == "" {
		return ""
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName != name {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				return m.MountPath
			}
		}
	}
	return ""
}

// Etcdctl runs etcdctl with args in the etcd container of member (the
// first running member when empty), with the cluster's client TLS flags.
func (p *Plugin) Etcdctl(ctx context.Context, streams genericiooptions.IOStreams, namespace, name, member string, args []string) error {
	cluster, err := p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get EtcdCluster %s/%s: %w", namespace, name, err)
	}
	var pod *corev1.Pod
	if member != "" {
		if pod, err = p.memberPod(ctx, cluster, member); err != nil {
			return err
		}
	} else {
		pods, err := p.memberPods(ctx, cluster)
		if err != nil {
			return err
		}
		for i := range pods {
			if pods[i].Status.Phase == corev1.PodRunning {
				pod = &pods[i]
				break
			}
		}
		if pod == nil {
			return fmt.Errorf("%s/%s has no running member pod", namespace, name)
		}
	}
	cmd, err := EtcdctlCommand(cluster, pod, args)
	if err != nil {
		return err
	}
	return p.Executor.Exec(ctx, namespace, pod.Name, k8sutil.EtcdContainerName, cmd, streams)
}

func (c *cli) etcdctlCommand() *cobra.Command {
	var member string
	var stdin bool
	cmd := &cobra.Command{
		Use:   "etcdctl CLUSTER -- ARGS...",
		Short: "Run etcdctl in a member's etcd container, with the cluster's TLS flags",
		Long: `Run etcdctl inside the etcd container of a member (--member, or the first
running one) against that member, as kubectl exec does (needs create on
pods/exec). For a TLS cluster the certificate files the pod mounts are
passed; flags of your own after -- come last and win.`,
		Example: `  kubectl etcd etcdctl example -- member list -w table
  kubectl etcd etcdctl example --member example-abc -- endpoint status -w table
  kubectl etcd etcdctl example -- get --prefix /registry --keys-only`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return fmt.Errorf("etcdctl takes the EtcdCluster's name, then -- and etcdctl's arguments (kubectl etcd etcdctl CLUSTER -- member list)")
			}
			return nil
		},
		ValidArgsFunction: c.completeClusterThenMember(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, namespace, err := c.connect(c.kube)
			if err != nil {
				return err
			}
			streams := c.streams
			if !stdin {
				streams.In = nil
			}
			return p.Etcdctl(cmd.Context(), streams, namespace, args[0], member, args[1:])
		},
	}
	cmd.Flags().StringVar(&member, "member", "", "the member (pod name) to run etcdctl in")
	cmd.Flags().BoolVarP(&stdin, "stdin", "i", false, "pass stdin to etcdctl (etcdctl put KEY reads the value from it)")
	return cmd
}
