package kubectlplugin

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// SetPaused sets spec.paused of the cluster. A paused cluster is left alone
// by the operator: no member added, removed, replaced, upgraded or
// maintained until it is resumed. It returns the cluster as stored.
func (p *Plugin) SetPaused(ctx context.Context, w io.Writer, namespace, name string, paused bool) (*api.EtcdCluster, error) {
	c, err := p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get EtcdCluster %s/%s: %w", namespace, name, err)
	}
	verb := map[bool]string{true: "paused", false: "resumed"}[paused]
	if c.Spec.Paused == paused {
		fmt.Fprintf(w, "etcdcluster %s/%s is %s already\n", namespace, name, verb)
		return c, nil
	}
	// A merge patch of the one field: a concurrent change of another field
	// of the spec (a resize, an upgrade) is kept.
	patch := fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused)
	c, err = p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("set spec.paused of %s/%s: %w", namespace, name, err)
	}
	if paused {
		fmt.Fprintf(w, "etcdcluster %s/%s paused: the operator changes nothing in it (no member added, removed, replaced, upgraded or maintained) until `kubectl etcd resume %s`\n",
			namespace, name, name)
	} else {
		fmt.Fprintf(w, "etcdcluster %s/%s resumed: the operator manages it again\n", namespace, name)
	}
	return c, nil
}

func (c *cli) pauseCommand(paused bool) *cobra.Command {
	use, short := "pause", "Stop the operator from changing the cluster (spec.paused: true)"
	if !paused {
		use, short = "resume", "Let the operator manage the cluster again (spec.paused: false)"
	}
	var out *objectPrinter
	cmd := c.clusterCommand(use, short, "",
		func(cmd *cobra.Command, p *Plugin, namespace, name string) error {
			cluster, err := p.SetPaused(cmd.Context(), out.sentences(c.streams.Out), namespace, name, paused)
			if err != nil {
				return err
			}
			return out.print(cluster, c.streams.Out)
		})
	out = addObjectPrinter(cmd, use+"d")
	return cmd
}
