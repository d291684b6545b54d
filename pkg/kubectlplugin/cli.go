package kubectlplugin

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
	"github.com/openetcd/etcd-operator/pkg/operatorrun"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// Connect builds the Plugin for one command from the standard kubectl
// flags, and names the namespace the command works in (the --namespace
// flag, else the kubeconfig context's).
type Connect func(*genericclioptions.ConfigFlags) (*Plugin, string, error)

// cli is the state the commands share: the standard kubectl flags and the
// etcd client flags, read when a command runs.
type cli struct {
	streams genericiooptions.IOStreams
	kube    *genericclioptions.ConfigFlags
	// connect is replaced in tests by one that returns fake clientsets.
	connect Connect

	timeout           time.Duration
	cert, key, cacert string
}

// NewCommand is `kubectl etcd`: every subcommand, the standard kubectl
// flags (--kubeconfig, --context, -n, --as, --token, --server,
// --request-timeout, ...) read through cli-runtime as kubectl reads them,
// and cobra's help and shell completion.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	c := &cli{streams: streams, kube: genericclioptions.NewConfigFlags(true)}
	c.connect = connectWithKubeconfig
	return c.command()
}

// newCommandWith is NewCommand with the clients chosen by the caller.
func newCommandWith(streams genericiooptions.IOStreams, connect Connect) *cobra.Command {
	c := &cli{streams: streams, kube: genericclioptions.NewConfigFlags(true), connect: connect}
	return c.command()
}

func (c *cli) command() *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-etcd",
		Short: "Day-2 care of the etcd clusters etcd-operator runs",
		Long: `kubectl etcd: day-2 care of the etcd clusters etcd-operator runs.

It works with your own kubeconfig and rights, like kubectl. Commands that
speak to etcd reach each member's client port through a port-forward on the
API server; the others use the Kubernetes API only.`,
		Annotations: map[string]string{
			// Help and usage say "kubectl etcd", as kubectl users type it.
			cobra.CommandDisplayNameAnnotation: "kubectl etcd",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(c.streams.In)
	root.SetOut(c.streams.Out)
	root.SetErr(c.streams.ErrOut)
	c.kube.AddFlags(root.PersistentFlags())

	root.AddGroup(
		&cobra.Group{ID: "etcd", Title: "Maintenance through etcd's API (port-forward):"},
		&cobra.Group{ID: "kube", Title: "Cluster care through the Kubernetes API:"},
	)
	for _, cmd := range []*cobra.Command{
		c.statusCommand(), c.defragCommand(), c.snapshotCommand(), c.moveLeaderCommand(), c.compactCommand(), c.disarmCommand(),
	} {
		cmd.GroupID = "etcd"
		c.addEtcdFlags(cmd)
		root.AddCommand(cmd)
	}
	for _, cmd := range []*cobra.Command{
		c.pauseCommand(true), c.pauseCommand(false), c.restartCommand(), c.logsCommand(), c.backupCommand(), c.etcdctlCommand(), c.reportCommand(), c.certsCommand(), c.rotateCertsCommand(), c.rotateCACommand(),
	} {
		cmd.GroupID = "kube"
		root.AddCommand(cmd)
	}
	root.AddCommand(c.versionCommand())
	// --version, as before the version command; without -v, which is
	// kubectl's log verbosity.
	root.Flags().Bool("version", false, "print the plugin's version")
	root.Version = operatorrun.Version
	root.SetVersionTemplate("kubectl-etcd {{.Version}} (" + operatorrun.GitSHA + ")\n")
	return root
}

// addEtcdFlags adds the flags of commands that speak to etcd itself.
func (c *cli) addEtcdFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.cert, "cert", "", "client certificate for a TLS cluster (default: the cluster's operatorSecret)")
	f.StringVar(&c.key, "key", "", "key of --cert")
	f.StringVar(&c.cacert, "cacert", "", "CA of the members' server certificates, with --cert")
	f.DurationVar(&c.timeout, "timeout", 10*time.Second, "bound of each etcd request (a defragmentation has its own, longer one)")
}

// plugin connects and applies the etcd client flags.
func (c *cli) plugin() (*Plugin, string, error) {
	p, namespace, err := c.connect(c.kube)
	if err != nil {
		return nil, "", err
	}
	p.Timeout = c.timeout
	if c.cert != "" || c.key != "" || c.cacert != "" {
		if p.ClientTLS, err = tlsFromFiles(c.cert, c.key, c.cacert); err != nil {
			return nil, "", err
		}
	}
	return p, namespace, nil
}

// connectWithKubeconfig builds clients from the standard kubectl flags.
func connectWithKubeconfig(flags *genericclioptions.ConfigFlags) (*Plugin, string, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	namespace, _, err := flags.ToRawKubeConfigLoader().Namespace()
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
	return &Plugin{
		Kube:      kube,
		Etcd:      etcd,
		Forwarder: APIServerForwarder{Config: cfg, Client: kube},
		Executor:  APIServerExecutor{Config: cfg, Client: kube},
	}, namespace, nil
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

// clusterCommand is a command whose only argument is an EtcdCluster's name.
func (c *cli) clusterCommand(use, short, long string, run func(cmd *cobra.Command, p *Plugin, namespace, name string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use + " CLUSTER",
		Short: short,
		Long:  long,
		Args:  exactArgs(1, "the EtcdCluster's name"),
		// Completion of the cluster's name.
		ValidArgsFunction: c.completeClusterThenMember(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, namespace, err := c.plugin()
			if err != nil {
				return err
			}
			return run(cmd, p, namespace, args[0])
		},
	}
}

// exactArgs is cobra.ExactArgs with an error that says what the arguments are.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%s takes %s, got %d argument(s) (see kubectl etcd %s --help)", cmd.Name(), what, len(args), cmd.Name())
		}
		return nil
	}
}

func (c *cli) statusCommand() *cobra.Command {
	var output string
	cmd := c.clusterCommand("status", "Members, roles, versions, DB size and in use, alarms, last backup",
		`Members, roles, versions, DB size and in use, alarms, and the last backup.
-o wide adds each member's raft term, raft index, applied index and revision;
-o json and -o yaml print the same as a document.`,
		func(cmd *cobra.Command, p *Plugin, namespace, name string) error {
			return p.StatusAs(cmd.Context(), c.streams.Out, namespace, name, output)
		})
	cmd.Flags().StringVarP(&output, "output", "o", "", "wide, json or yaml")
	return cmd
}

func (c *cli) defragCommand() *cobra.Command {
	var member string
	cmd := c.clusterCommand("defrag", "Defragment every member (leader last) or one member",
		`Defragment every member: followers first, then the leader after moving
leadership away. With --member, only that member. Refused while a member is
unreachable, since a member being defragmented serves nothing.`,
		func(cmd *cobra.Command, p *Plugin, namespace, name string) error {
			return p.Defragment(cmd.Context(), c.streams.Out, namespace, name, member)
		})
	cmd.Flags().StringVar(&member, "member", "", "only this member (pod name)")
	return cmd
}

func (c *cli) snapshotCommand() *cobra.Command {
	var file string
	cmd := c.clusterCommand("snapshot", "Save a snapshot of the most up-to-date member to a local file",
		`Save a snapshot of the most up-to-date member to --file. etcd's trailing
checksum is verified, and an interrupted snapshot leaves no file behind.`,
		func(cmd *cobra.Command, p *Plugin, namespace, name string) error {
			if cmd.Flags().Changed("output") {
				fmt.Fprintln(c.streams.ErrOut, "Flag --output (-o) has been deprecated, use --file; -o is the output format in kubectl")
			}
			if file == "" {
				return errors.New("snapshot needs --file FILE")
			}
			return p.Snapshot(cmd.Context(), c.streams.Out, namespace, name, file)
		})
	cmd.Flags().StringVar(&file, "file", "", "the file to write")
	// -o FILE was the flag before the plugin followed kubectl, where -o is
	// the output format: it still works, with a warning.
	cmd.Flags().StringVarP(&file, "output", "o", "", "the file to write")
	_ = cmd.Flags().MarkHidden("output")
	return cmd
}

func (c *cli) moveLeaderCommand() *cobra.Command {
	var to string
	cmd := c.clusterCommand("move-leader", "Hand leadership to a member, or to the most caught-up follower", "",
		func(cmd *cobra.Command, p *Plugin, namespace, name string) error {
			return p.MoveLeader(cmd.Context(), c.streams.Out, namespace, name, to)
		})
	cmd.Flags().StringVar(&to, "to", "", "the member (pod name) to lead")
	return cmd
}

func (c *cli) compactCommand() *cobra.Command {
	return c.clusterCommand("compact", "Compact the key history up to the current revision",
		"Compact the key history up to the current revision; defrag gives the space back.",
		func(cmd *cobra.Command, p *Plugin, namespace, name string) error {
			return p.Compact(cmd.Context(), c.streams.Out, namespace, name)
		})
}

func (c *cli) disarmCommand() *cobra.Command {
	return c.clusterCommand("disarm", "Disarm NOSPACE alarms once compact and defrag made room",
		"Disarm NOSPACE alarms once compact and defrag made room. CORRUPT alarms are left alone.",
		func(cmd *cobra.Command, p *Plugin, namespace, name string) error {
			return p.DisarmNoSpace(cmd.Context(), c.streams.Out, namespace, name)
		})
}

// clientVersion is what `kubectl etcd version -o json|yaml` prints, shaped
// like kubectl's own clientVersion.
type clientVersion struct {
	ClientVersion struct {
		GitVersion string `json:"gitVersion"`
		GitCommit  string `json:"gitCommit"`
		GoVersion  string `json:"goVersion"`
		Platform   string `json:"platform"`
	} `json:"clientVersion"`
}

func (c *cli) versionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Long: `Print the plugin's version: the one it was built with
(-ldflags "-X github.com/openetcd/etcd-operator/pkg/operatorrun.Version=...").`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var v clientVersion
			v.ClientVersion.GitVersion = operatorrun.Version
			v.ClientVersion.GitCommit = operatorrun.GitSHA
			v.ClientVersion.GoVersion = runtime.Version()
			v.ClientVersion.Platform = runtime.GOOS + "/" + runtime.GOARCH
			switch output {
			case "":
				fmt.Fprintf(c.streams.Out, "kubectl-etcd %s (%s)\n", operatorrun.Version, operatorrun.GitSHA)
				return nil
			case "json", "yaml":
				b, err := yaml.Marshal(v)
				if output == "json" {
					b, err = json.MarshalIndent(v, "", "  ")
					b = append(b, '\n')
				}
				if err != nil {
					return err
				}
				_, err = c.streams.Out.Write(b)
				return err
			}
			return fmt.Errorf("--output %q: version prints json or yaml", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	return cmd
}
