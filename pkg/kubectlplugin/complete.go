package kubectlplugin

import (
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// completeClusterThenMember completes the EtcdClusters of the namespace as
// the first argument and, when withMember, the cluster's member pods as
// the second. Completion must never fail loudly: any error completes
// nothing.
func (c *cli) completeClusterThenMember(withMember bool) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 1 || (len(args) == 1 && !withMember) {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		p, namespace, err := c.connect(c.kube)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		if len(args) == 0 {
			list, err := p.Etcd.EtcdV1beta2().EtcdClusters(namespace).List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, cl := range list.Items {
				names = append(names, cl.Name)
			}
		} else {
			cluster, err := p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Get(cmd.Context(), args[0], metav1.GetOptions{})
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			pods, err := p.memberPods(cmd.Context(), cluster)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, pod := range pods {
				names = append(names, pod.Name)
			}
		}
		var out []string
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
