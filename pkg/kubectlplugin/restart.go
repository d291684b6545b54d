package kubectlplugin

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// memberPod returns the pod of member of cluster, and refuses any pod that
// is not one: a name of another cluster, or a pod that merely carries the
// cluster's labels without being owned by it, is never touched.
func (p *Plugin) memberPod(ctx context.Context, cluster *api.EtcdCluster, member string) (*corev1.Pod, error) {
	pod, err := p.Kube.CoreV1().Pods(cluster.Namespace).Get(ctx, member, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %w", cluster.Namespace, member, err)
	}
	if pod.Labels[api.LabelClusterName] != cluster.Name || !k8sutil.IsOwnedBy(pod, cluster) {
		return nil, fmt.Errorf("pod %s/%s is not a member of EtcdCluster %s (see `kubectl etcd status %s` for its members)",
			cluster.Namespace, member, cluster.Name, cluster.Name)
	}
	return pod, nil
}

// Restart deletes the pod of one member so that the operator starts it
// again: in place on its claim (same member, same data) when the cluster
// keeps its data on claims, or as a replacement member otherwise (an
// emptyDir goes with its pod). A paused cluster is refused: its operator
// would not start the member again.
func (p *Plugin) Restart(ctx context.Context, w io.Writer, namespace, name, member string) error {
	cluster, err := p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get EtcdCluster %s/%s: %w", namespace, name, err)
	}
	if cluster.Spec.Paused {
		return fmt.Errorf("%s/%s is paused, and its operator would not start %s again: `kubectl etcd resume %s` first", namespace, name, member, name)
	}
	pod, err := p.memberPod(ctx, cluster, member)
	if err != nil {
		return err
	}
	// The UID precondition deletes this pod only, not a newer one of the
	// same name the operator may have made meanwhile.
	uid := pod.UID
	if err := p.Kube.CoreV1().Pods(namespace).Delete(ctx, member, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		return fmt.Errorf("delete pod %s/%s: %w", namespace, member, err)
	}
	fmt.Fprintf(w, "pod %s/%s deleted\n", namespace, member)
	if claim := claimOf(pod); claim != "" {
		fmt.Fprintf(w, "the operator restarts %s in place: a new pod of the same name on claim %s, the same member ID and data (event Member Restarted)\n",
			member, claim)
	} else {
		fmt.Fprintf(w, "%s kept its data in an emptyDir, gone with the pod: the operator removes the member and adds a new one, which receives the data from the leader\n",
			member)
	}
	fmt.Fprintf(w, "follow it with `kubectl etcd status %s -n %s` or `kubectl get pods -n %s -l %s=%s -w`\n",
		name, namespace, namespace, api.LabelClusterName, name)
	return nil
}

// claimOf is the claim that holds the member's data and outlives its pod
// ("": the data is in an emptyDir).
func claimOf(pod *corev1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name == k8sutil.EtcdDataVolumeName && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

func (c *cli) restartCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "restart CLUSTER MEMBER",
		Short: "Delete one member's pod so that the operator starts it again",
		Long: `Delete the pod of one member (a pod name from kubectl etcd status) so that the
operator starts it again: in place on its claim when the cluster has
pod.persistentVolumeClaimSpec, otherwise as a new member that receives the
data from the leader. Only a member pod of that cluster is deleted, and a
paused cluster is refused.`,
		Args:              exactArgs(2, "the EtcdCluster's name and a member (pod name)"),
		ValidArgsFunction: c.completeClusterThenMember(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, namespace, err := c.connect(c.kube)
			if err != nil {
				return err
			}
			return p.Restart(cmd.Context(), c.streams.Out, namespace, args[0], args[1])
		},
	}
}
