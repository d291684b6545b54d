// Command kubectl-etcd is a kubectl plugin (`kubectl etcd ...`) for day-2
// care of the etcd clusters etcd-operator runs. It uses the caller's own
// kubeconfig and RBAC and reaches members through port-forwards on the API
// server (see pkg/kubectlplugin for why).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
	"github.com/openetcd/etcd-operator/pkg/kubectlplugin"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/operatorrun"
)

const usage = `kubectl etcd: day-2 care of the etcd clusters etcd-operator runs.

Usage:
  kubectl etcd status CLUSTER                 members, roles, versions, DB size and in use, alarms, last backup
  kubectl etcd defrag CLUSTER [--member POD]  defragment every member (followers first, leader last after
                                              moving leadership away), or one member
  kubectl etcd snapshot CLUSTER -o FILE       save a snapshot of the most up-to-date member to FILE
  kubectl etcd move-leader CLUSTER [--to POD] hand leadership to POD, or to the most caught-up follower
  kubectl etcd compact CLUSTER                compact the key history up to the current revision
  kubectl etcd disarm CLUSTER                 disarm NOSPACE alarms once compact and defrag made room

Flags (before or after the arguments):
`

// options are the flags every command takes.
type options struct {
	kubeconfig, context, namespace string
	cert, key, cacert              string
	timeout                        time.Duration
	member, to, output             string
	version                        bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, command, positional, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if o.version {
		fmt.Fprintf(stdout, "kubectl-etcd %s (%s)\n", operatorrun.Version, operatorrun.GitSHA)
		return nil
	}
	if len(positional) != 1 {
		return fmt.Errorf("%s takes one argument, the EtcdCluster's name (see kubectl etcd --help)", command)
	}
	name := positional[0]
	p, namespace, err := newPlugin(o)
	if err != nil {
		return err
	}
	switch command {
	case "status":
		return p.Status(ctx, stdout, namespace, name)
	case "defrag":
		return p.Defragment(ctx, stdout, namespace, name, o.member)
	case "snapshot":
		if o.output == "" {
			return errors.New("snapshot needs -o FILE")
		}
		return p.Snapshot(ctx, stdout, namespace, name, o.output)
	case "move-leader":
		return p.MoveLeader(ctx, stdout, namespace, name, o.to)
	case "compact":
		return p.Compact(ctx, stdout, namespace, name)
	case "disarm":
		return p.DisarmNoSpace(ctx, stdout, namespace, name)
	}
	return fmt.Errorf("unknown command %q (see kubectl etcd --help)", command)
}

// parseArgs reads the command and its flags. kubectl users put flags after
// the arguments as often as before them (`kubectl etcd status c -n ns`), so
// flags and arguments may be mixed.
func parseArgs(args []string, stderr io.Writer) (o options, command string, positional []string, err error) {
	fs := flag.NewFlagSet("kubectl etcd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context to use")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the EtcdCluster (default: the context's)")
	fs.StringVar(&o.namespace, "n", "", "shorthand for --namespace")
	fs.StringVar(&o.cert, "cert", "", "client certificate for a TLS cluster (default: the cluster's operatorSecret)")
	fs.StringVar(&o.key, "key", "", "key of --cert")
	fs.StringVar(&o.cacert, "cacert", "", "CA of the members' server certificates, with --cert")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound of each etcd request (a defragmentation has its own, longer one)")
	fs.StringVar(&o.member, "member", "", "defrag: only this member (pod name)")
	fs.StringVar(&o.to, "to", "", "move-leader: the member (pod name) to lead")
	fs.StringVar(&o.output, "o", "", "snapshot: the file to write")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return o, "", nil, err
		}
		rest = fs.Args()
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		rest = rest[1:]
	}
	if o.version {
		return o, "", nil, nil
	}
	if len(positional) == 0 {
		fs.Usage()
		return o, "", nil, errors.New("no command given")
	}
	return o, positional[0], positional[1:], nil
}

// newPlugin builds clients from the user's kubeconfig, as kubectl would.
func newPlugin(o options) (*kubectlplugin.Plugin, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{
		CurrentContext: o.context,
		Context:        clientcmdapi.Context{Namespace: strings.TrimSpace(o.namespace)},
	})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	namespace, _, err := loader.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig namespace: %w", err)
	}
	cfg.UserAgent = "kubectl-etcd/" + operatorrun.Version
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	etcd, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	p := &kubectlplugin.Plugin{
		Kube:      kube,
		Etcd:      etcd,
		Forwarder: kubectlplugin.APIServerForwarder{Config: cfg, Client: kube},
		Timeout:   o.timeout,
	}
	if o.cert != "" || o.key != "" || o.cacert != "" {
		if p.ClientTLS, err = tlsFromFiles(o.cert, o.key, o.cacert); err != nil {
			return nil, "", err
		}
	}
	return p, namespace, nil
}

// tlsFromFiles reads the user's own client certificate. All three files go
// together: a TLS cluster needs a client certificate, and its members'
// certificates come from the cluster's own CA.
func tlsFromFiles(cert, key, ca string) (*tls.Config, error) {
	files := [][2]string{{"cert", cert}, {"key", key}, {"cacert", ca}}
	for _, f := range files {
		if f[1] == "" {
			return nil, fmt.Errorf("--%s is needed with --cert, --key and --cacert", f[0])
		}
	}
	var pems [3][]byte
	for i, f := range files {
		b, err := os.ReadFile(f[1])
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", f[0], err)
		}
		pems[i] = b
	}
	return etcdutil.NewTLSConfig(pems[0], pems[1], pems[2])
}
