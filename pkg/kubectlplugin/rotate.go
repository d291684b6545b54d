package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// RotateCertificates asks the operator to renew every certificate it issued
// for the cluster now: it sets the cluster's rotate-certificates annotation
// to at, a value it has not had, which the operator acts on once (one
// secret at a time, while the cluster is healthy) and records in
// status.certificatesRotated. It returns the cluster as stored.
func (p *Plugin) RotateCertificates(ctx context.Context, w io.Writer, namespace, name string, at time.Time) (*api.EtcdCluster, error) {
	c, err := p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get EtcdCluster %s/%s: %w", namespace, name, err)
	}
	if !c.Spec.TLS.IsIssued() {
		// Certificates of the user's own are renewed by whoever issues
		// them: the operator holds no key to sign new ones.
		return nil, fmt.Errorf("etcdcluster %s/%s does not have spec.TLS.issued: the operator renews only the certificates it issues; renew static certificates as docs/user-guide/tls.md#renewing-static-certificates says", namespace, name)
	}
	value := at.UTC().Format(time.RFC3339Nano)
	// A merge patch of the one annotation: the spec and other annotations
	// changed meanwhile are kept.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{api.RotateCertificatesAnnotation: value}}})
	if err != nil {
		return nil, err
	}
	c, err = p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("set annotation %s of %s/%s: %w", api.RotateCertificatesAnnotation, namespace, name, err)
	}
	fmt.Fprintf(w, "etcdcluster %s/%s: rotation of its certificates asked (%s: %s). The operator renews them from their CA one secret at a time while every member is ready; status.certificatesRotated says %s once done, and `kubectl etcd certs %s` shows the new expiries\n",
		namespace, name, api.RotateCertificatesAnnotation, value, value, name)
	if c.Spec.Paused {
		fmt.Fprintf(w, "etcdcluster %s/%s is paused: nothing is renewed until `kubectl etcd resume %s`\n", namespace, name, name)
	}
	return c, nil
}

func (c *cli) rotateCertsCommand() *cobra.Command {
	var out *objectPrinter
	cmd := c.clusterCommand("rotate-certs", "Have the operator renew the certificates it issued now (spec.TLS.issued)",
		`Sets annotation `+api.RotateCertificatesAnnotation+` of the cluster to the time, which
asks the operator to renew every certificate it issued (peer, server, operator and client
secrets) from the cluster's CA, in place, one secret at a time while every member is
ready. Members pick the new certificates up for new connections without a restart.
status.certificatesRotated is the annotation's value once every secret is renewed.
The CA itself is not renewed.`,
		func(cmd *cobra.Command, p *Plugin, namespace, name string) error {
			cluster, err := p.RotateCertificates(cmd.Context(), out.sentences(c.streams.Out), namespace, name, time.Now())
			if err != nil {
				return err
			}
			return out.print(cluster, c.streams.Out)
		})
	out = addObjectPrinter(cmd, "annotated")
	return cmd
}
