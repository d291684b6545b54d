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

// annotate sets the one annotation key of the cluster to value with a merge
// patch, so that the spec and other annotations changed meanwhile are kept,
// and returns the cluster as stored.
func (p *Plugin) annotate(ctx context.Context, namespace, name, key, value string) (*api.EtcdCluster, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err != nil {
		return nil, err
	}
	c, err := p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("set annotation %s of %s/%s: %w", key, namespace, name, err)
	}
	return c, nil
}

// issuedCluster reads the cluster, refusing one whose TLS the operator
// does not issue: it holds no key to sign certificates of another TLS.
func (p *Plugin) issuedCluster(ctx context.Context, namespace, name, refusal string) (*api.EtcdCluster, error) {
	c, err := p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get EtcdCluster %s/%s: %w", namespace, name, err)
	}
	if !c.Spec.TLS.IsIssued() {
		return nil, fmt.Errorf("etcdcluster %s/%s does not have spec.TLS.issued: %s", namespace, name, refusal)
	}
	return c, nil
}

// RotateCertificates asks the operator to renew every certificate it issued
// for the cluster now: it sets the cluster's rotate-certificates annotation
// to at, a value it has not had, which the operator acts on once (one
// secret at a time, while the cluster is healthy) and records in
// status.certificatesRotated. It returns the cluster as stored.
func (p *Plugin) RotateCertificates(ctx context.Context, w io.Writer, namespace, name string, at time.Time) (*api.EtcdCluster, error) {
	// Certificates of the user's own are renewed by whoever issues them.
	if _, err := p.issuedCluster(ctx, namespace, name, "the operator renews only the certificates it issues; renew static certificates as docs/user-guide/tls.md#renewing-static-certificates says"); err != nil {
		return nil, err
	}
	value := at.UTC().Format(time.RFC3339Nano)
	c, err := p.annotate(ctx, namespace, name, api.RotateCertificatesAnnotation, value)
	if err != nil {
		return nil, err
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

// RotateCA asks the operator to rotate the cluster's CA of issued TLS: it
// sets the rotate-ca annotation to at, a value it has not had, which the
// operator carries out once, in ordered steps (both CAs trusted, members
// restarted, certificates issued again, the old CA dropped, members
// restarted again), shown in status.caRotation. A rotation under way is
// not interrupted: the new value is carried out after it. It returns the
// cluster as stored.
func (p *Plugin) RotateCA(ctx context.Context, w io.Writer, namespace, name string, at time.Time) (*api.EtcdCluster, error) {
	before, err := p.issuedCluster(ctx, namespace, name, "the operator rotates only the CA of the certificates it issues; rotate the CA of static certificates as docs/user-guide/tls.md#a-ca-in-ordered-steps says")
	if err != nil {
		return nil, err
	}
	if ref := before.Spec.TLS.Issued.IssuerRef; ref != nil {
		return nil, fmt.Errorf("etcdcluster %s/%s takes its certificates from cert-manager %s %s, whose CA is rotated there: see docs/user-guide/tls.md#certificates-from-cert-manager", namespace, name, ref.WithDefaults().Kind, ref.Name)
	}
	value := at.UTC().Format(time.RFC3339Nano)
	c, err := p.annotate(ctx, namespace, name, api.RotateCAAnnotation, value)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "etcdcluster %s/%s: rotation of its CA asked (%s: %s). The operator makes a new CA, has every member trust both, issues every certificate again from the new CA and drops the old one, restarting each member twice, one at a time while every member is ready; `kubectl etcd certs %s` shows where it is, and status.caRotation.lastRotation says %s once done\n",
		namespace, name, api.RotateCAAnnotation, value, name, value)
	if r := before.Status.CARotation; r != nil && r.Step != "" {
		fmt.Fprintf(w, "etcdcluster %s/%s has rotation %s under way at step %s: it is carried out to its end first, then this one\n", namespace, name, r.Rotation, r.Step)
	}
	if c.Spec.Paused {
		fmt.Fprintf(w, "etcdcluster %s/%s is paused: nothing is rotated until `kubectl etcd resume %s`\n", namespace, name, name)
	}
	fmt.Fprintf(w, "applications using secret %s read it again after the new CA is trusted and after their certificate is issued again: docs/user-guide/tls.md#rotating-the-ca-of-issued-tls\n", c.Spec.TLS.Secrets(name).Client)
	return c, nil
}

func (c *cli) rotateCACommand() *cobra.Command {
	var out *objectPrinter
	cmd := c.clusterCommand("rotate-ca", "Have the operator rotate the CA of the certificates it issues (spec.TLS.issued)",
		`Sets annotation `+api.RotateCAAnnotation+` of the cluster to the time, which asks the
operator to replace the cluster's CA in ordered steps: a new CA beside the old one, trusted
by every certificate Secret; every member restarted, one at a time while every member is
ready, to read both; every certificate issued again from the new CA; the old CA dropped and
every member restarted again. A member on an emptyDir is replaced rather than restarted.
`+"`kubectl etcd certs CLUSTER`"+` and status.caRotation show where the rotation is;
status.caRotation.lastRotation is the annotation's value once it is done.`,
		func(cmd *cobra.Command, p *Plugin, namespace, name string) error {
			cluster, err := p.RotateCA(cmd.Context(), out.sentences(c.streams.Out), namespace, name, time.Now())
			if err != nil {
				return err
			}
			return out.print(cluster, c.streams.Out)
		})
	out = addObjectPrinter(cmd, "annotated")
	return cmd
}
