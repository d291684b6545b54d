package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// CertsReport is what `kubectl etcd certs` shows, and prints with -o json
// or yaml.
type CertsReport struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	// Certificates are those of the peer, server and operator secrets, in
	// that order, each leaf before its CAs.
	Certificates []CertificateReport `json:"certificates"`
	// Unread are the secrets that could not be read, and why.
	Unread []string `json:"unread,omitempty"`
	// IssuedBy says who issues the certificates: the operator's own CA, a
	// cert-manager issuer, or the user (static TLS).
	IssuedBy string `json:"issuedBy,omitempty"`
	// CARotation is the cluster's status.caRotation under issued TLS: the
	// CA and where its rotation is, as the operator last read them.
	CARotation *api.CARotationStatus `json:"caRotation,omitempty"`
}

// CertificateReport is one certificate and its state at the time of the
// report: valid, expires soon (as the operator warns), expired or not yet
// valid.
type CertificateReport struct {
	etcdutil.Certificate
	State string `json:"state"`
}

// certState is a certificate's state at now, in the operator's words.
func certState(c etcdutil.Certificate, now time.Time) string {
	switch {
	case now.Before(c.NotBefore):
		return "not yet valid"
	case !now.Before(c.NotAfter):
		return "expired"
	case etcdutil.ExpiresSoon(c, now):
		return "expires soon"
	}
	return "valid"
}

// Certificates prints every certificate of the cluster's TLS secrets with
// its expiry and issuer, as a table (output "", or "wide" with the names
// each certificate carries), or as "json" or "yaml". It reads the secrets
// through the Kubernetes API: what the operator reads, not what a member
// has loaded.
func (p *Plugin) Certificates(ctx context.Context, w io.Writer, namespace, name, output string, now time.Time) error {
	switch output {
	case "", "wide", "json", "yaml":
	default:
		return fmt.Errorf("--output %q: certs prints wide, json or yaml", output)
	}
	c, err := p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get EtcdCluster %s/%s: %w", namespace, name, err)
	}
	r := CertsReport{Cluster: name, Namespace: namespace, Certificates: []CertificateReport{}}
	tlsp := c.Spec.TLS
	if !tlsp.IsSecurePeer() && !tlsp.IsSecureClient() {
		if output == "" || output == "wide" {
			_, err := fmt.Fprintf(w, "etcdcluster %s/%s has no TLS: spec.TLS names no secrets\n", namespace, name)
			return err
		}
		return printDocument(w, r, output)
	}
	read := func(secret string, mk func(string, map[string][]byte) etcdutil.CertSecret) *etcdutil.CertSecret {
		if secret == "" {
			return nil
		}
		s, err := p.Kube.CoreV1().Secrets(namespace).Get(ctx, secret, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			r.Unread = append(r.Unread, fmt.Sprintf("secret %s does not exist", secret))
			return nil
		case err != nil:
			r.Unread = append(r.Unread, fmt.Sprintf("secret %s: %v", secret, err))
			return nil
		}
		cs := mk(secret, s.Data)
		return &cs
	}
	secrets := tlsp.Secrets(name)
	peer, server := read(secrets.Peer, etcdutil.PeerSecret), read(secrets.Server, etcdutil.ServerSecret)
	operator := read(secrets.Operator, etcdutil.OperatorSecret)
	for _, cert := range etcdutil.ListCertificates(peer, server, operator) {
		r.Certificates = append(r.Certificates, CertificateReport{Certificate: cert, State: certState(cert, now)})
	}
	switch {
	case tlsp.FromCertManager():
		ref := tlsp.Issued.IssuerRef.WithDefaults()
		r.IssuedBy = fmt.Sprintf("cert-manager %s %s (%s), copied by the operator from the secrets <certificate>-cert-manager", ref.Kind, ref.Name, ref.Group)
	case tlsp.IsIssued():
		r.IssuedBy = "the operator, from CA secret " + secrets.CA
		r.CARotation = c.Status.CARotation
	case tlsp.Mode() != "":
		r.IssuedBy = "the user (static TLS): renewed by hand"
	}
	if output == "json" || output == "yaml" {
		return printDocument(w, r, output)
	}
	return r.table(w, output == "wide", now)
}

// printDocument prints v as indented JSON or as YAML.
func printDocument(w io.Writer, v any, output string) error {
	if output == "json" {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func (r CertsReport) table(w io.Writer, wide bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "SECRET\tKEY\tSUBJECT\tISSUER\tSERIAL\tNOT AFTER\tLEFT\tSTATE"
	if wide {
		header += "\tNAMES"
	}
	fmt.Fprintln(tw, header)
	for _, c := range r.Certificates {
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", c.Secret, c.Key, orDash(c.Subject), orDash(c.Issuer), c.Serial,
			c.NotAfter.UTC().Format(time.RFC3339), daysLeft(c.NotAfter.Sub(now)), c.State)
		if wide {
			line += "\t" + orDash(strings.Join(append(append([]string{}, c.DNSNames...), c.IPs...), ","))
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, u := range r.Unread {
		fmt.Fprintf(w, "not read: %s\n", u)
	}
	if r.IssuedBy != "" {
		fmt.Fprintf(w, "issued by: %s\n", r.IssuedBy)
	}
	if r.CARotation != nil {
		fmt.Fprintln(w)
		caRotationLines(w, r.CARotation, now)
	}
	return nil
}

// caSteps says what each step of a CA rotation does, in the words of the
// TLS guide's four steps.
var caSteps = map[string]string{
	"trust-both": "steps 1-2 of 4: the certificate secrets trust the old and the new CA, then each member restarts to read both",
	"reissue":    "step 3 of 4: every certificate is issued again from the new CA",
	"trust-new":  "step 4 of 4: the certificate secrets trust the new CA alone, then each member restarts again",
}

// caRotationLines prints the CA and where its rotation is, from the
// cluster's status.caRotation.
func caRotationLines(w io.Writer, r *api.CARotationStatus, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	ca := func(c *api.CACertificate) string {
		if c == nil {
			return "-"
		}
		return fmt.Sprintf("%s, serial %s, expires %s (%s left)", orDash(c.Subject), c.Serial, c.NotAfter.UTC().Format(time.RFC3339), daysLeft(c.NotAfter.Sub(now)))
	}
	when := func(t *metav1.Time) string {
		if t == nil {
			return "not recorded"
		}
		return t.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(tw, "CA:\t%s\n", ca(r.CA))
	if r.MadeByOperator {
		fmt.Fprintf(tw, "  made by:\tthe operator, which rotates it unasked from %s\n", when(r.AutoRotateAt))
	} else if r.CA != nil {
		fmt.Fprintf(tw, "  made by:\tnot the operator: rotated only when asked (`kubectl etcd rotate-ca`)\n")
	}
	if r.Step == "" {
		fmt.Fprintf(tw, "CA rotation:\tnone under way\n")
	} else {
		what := caSteps[r.Step]
		if what == "" {
			what = "a step this plugin does not know"
		}
		by := ""
		if r.Unasked {
			by = " (begun by the operator as the CA nears its expiry)"
		}
		fmt.Fprintf(tw, "CA rotation:\t%s, began %s%s\n", r.Rotation, when(r.Started), by)
		fmt.Fprintf(tw, "  step:\t%s since %s (%s)\n", r.Step, when(r.StepStarted), what)
		fmt.Fprintf(tw, "  old CA:\t%s\n", ca(r.OldCA))
		fmt.Fprintf(tw, "  new CA:\t%s\n", ca(r.NewCA))
	}
	if r.LastRotation != "" {
		fmt.Fprintf(tw, "Last CA rotation:\t%s, ended %s\n", r.LastRotation, when(r.LastRotated))
	}
	tw.Flush()
}

// daysLeft is d in whole days, or hours under two days: how far an expiry
// is, as a person plans a renewal.
func daysLeft(d time.Duration) string {
	if d < 2*24*time.Hour && d > -2*24*time.Hour {
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func (c *cli) certsCommand() *cobra.Command {
	var output string
	cmd := c.clusterCommand("certs", "Every certificate of the cluster's TLS secrets: expiry, issuer, state",
		`Every certificate of the cluster's TLS secrets (peer, server and operator secrets:
each leaf and each CA of a bundle) with its subject, issuer, serial, expiry, the time
left and its state: valid, expires soon (when the operator warns), expired or not yet
valid. It reads the Secrets through the Kubernetes API.
-o wide adds the names each certificate carries; -o json and -o yaml print the same as
a document.`,
		func(cmd *cobra.Command, p *Plugin, namespace, name string) error {
			return p.Certificates(cmd.Context(), c.streams.Out, namespace, name, output, time.Now())
		})
	cmd.Flags().StringVarP(&output, "output", "o", "", "wide, json or yaml")
	return cmd
}
