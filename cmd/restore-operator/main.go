// Command etcd-restore-operator replaces EtcdClusters with clusters seeded from
// verified backups, as EtcdRestore resources ask. The same binary is the seed
// pod's download step, `etcd-restore-operator fetch-backup ...`, and runs its
// restore step, `etcd-restore-operator restore-datadir ...`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/controller/restorecontroller"
	"github.com/openetcd/etcd-operator/pkg/crds"
	"github.com/openetcd/etcd-operator/pkg/generated/informers/externalversions"
	"github.com/openetcd/etcd-operator/pkg/operatorrun"
	"github.com/openetcd/etcd-operator/pkg/restore"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

const (
	binary = restore.Binary
	// lockName is the original's leader-election lock name: a Lease, or the
	// original's Endpoints lock when the role allows only that.
	lockName = "etcd-restore-operator"
	// shutdownTimeout bounds the wait for workers to stop; well inside a pod's
	// default 30 s termination grace period.
	shutdownTimeout = 20 * time.Second
)

type options struct {
	logLevel       operatorrun.LogLevel
	logFormat      operatorrun.LogFormat
	createCRD      bool
	clusterWide    bool
	listenAddr     string
	kubeconfig     string
	printVersion   bool
	workers        int
	fetchImage     string
	restoreTimeout time.Duration
	cloudIdentity  storage.CloudIdentity
}

// parseFlags reads the original's flags (single or double dash) plus the new ones.
func parseFlags(args []string, output io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet(binary, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.BoolVar(&o.createCRD, "create-crd", true, "create or update the EtcdRestore CRD at startup; with false, apply example/crd yourself and a namespaced Role is enough")
	fs.BoolVar(&o.clusterWide, "cluster-wide", false, "run the EtcdRestores of every namespace that carry the annotation "+api.ScopeAnnotation+": "+api.ScopeClusterWide+", instead of the unannotated ones of the operator's own namespace (MY_POD_NAMESPACE)")
	fs.StringVar(&o.listenAddr, "listen-addr", "0.0.0.0:8082", "address of the HTTP server for /healthz, /readyz and /metrics (backups are served on port "+strconv.Itoa(restore.BackupServerPort)+")")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file, to run outside a cluster (default: the pod's service account)")
	fs.BoolVar(&o.printVersion, "version", false, "print the version and exit")
	o.logLevel = operatorrun.DefaultLogLevel()
	fs.Var(&o.logLevel, "log-level", operatorrun.LogLevelUsage)
	o.logFormat = operatorrun.DefaultLogFormat()
	fs.Var(&o.logFormat, "log-format", operatorrun.LogFormatUsage)
	fs.IntVar(&o.workers, "workers", 4, "EtcdRestores processed at once (1..64)")
	fs.StringVar(&o.fetchImage, "fetch-image", "", "image of the seed pod's fetch-backup step (default: this operator's own image, read from its pod)")
	fs.DurationVar(&o.restoreTimeout, "restore-timeout", restore.DefaultTimeout,
		"how long the hand-over may take, from deleting the old cluster to the restored one available at full size, before the restore is Failed; also bounds reading the backup through")
	o.cloudIdentity.Operator = binary
	fs.Var(&o.cloudIdentity, storage.CloudIdentityFlag, "namespaces whose EtcdRestores may reach their store with this operator's own cloud identity (credentialSource: OperatorServiceAccount): a comma-separated list, or * for every namespace it watches; empty lends it to none. Whoever may create one in such a namespace may reach whatever that identity may (docs/user-guide/backup-cloud-identity.md)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v (the only subcommands are %s, %s and %s, as the first argument)", fs.Args(), restore.FetchSubcommand, restore.RestoreDataDirSubcommand, restore.ReplaySubcommand)
	}
	switch {
	case o.workers < 1 || o.workers > 64:
		return o, fmt.Errorf("-workers must be between 1 and 64, not %d", o.workers)
	case o.restoreTimeout < time.Minute:
		return o, fmt.Errorf("-restore-timeout must be at least 1m, not %v", o.restoreTimeout)
	}
	return o, nil
}

func main() {
	ctx, cancel := operatorrun.SignalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, operatorrun.NewLogger(binary))
	cancel()
	os.Exit(code)
}

// run is the whole binary; it returns the exit code. Lost leadership ends it with 1
// so that the Deployment restarts it as a standby; SIGTERM (ctx) ends it with 0
// after the Lease was released. `fetch-backup`, `restore-datadir` or
// `replay-archive` as the first argument runs one of the seed pod's steps instead.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, log *logrus.Entry) int {
	if len(args) > 0 && args[0] == restore.FetchSubcommand {
		return fetchBackup(ctx, args[1:], getenv, log.Logger.Out)
	}
	if len(args) > 0 && args[0] == restore.RestoreDataDirSubcommand {
		return restoreDataDir(ctx, args[1:], log.Logger.Out)
	}
	if len(args) > 0 && args[0] == restore.ReplaySubcommand {
		return replayArchive(ctx, args[1:], getenv, log.Logger.Out)
	}
	var opts options
	parse := func() (bool, error) {
		var err error
		opts, err = parseFlags(args, log.Logger.Out)
		if err == nil {
			operatorrun.ConfigureLogger(log, opts.logLevel, opts.logFormat)
		}
		return opts.printVersion, err
	}
	return operatorrun.Run(ctx, binary, parse, getenv, stdout, log, func(ctx context.Context, id operatorrun.Identity) error {
		return serve(ctx, opts, id, log)
	})
}

func serve(ctx context.Context, opts options, id operatorrun.Identity, log *logrus.Entry) error {
	watched := k8sutil.WatchedNamespace(id.Namespace, opts.clusterWide)
	log.Infof("%s %s (git %s) in namespace %s, restoring in %s", binary, operatorrun.Version, operatorrun.GitSHA, id.Namespace,
		map[bool]string{true: "all namespaces", false: "namespace " + id.Namespace}[opts.clusterWide])
	log.Infof("its own cloud identity (credentialSource: %s) is lent to %s", api.CredentialSourceOperatorServiceAccount, opts.cloudIdentity.Describe())

	base, ctx, err := operatorrun.Start(ctx, binary, opts.kubeconfig, opts.listenAddr, id, log)
	if err != nil {
		return err
	}
	defer base.Stop()
	clients, srv, proc, recorder := base.Clients, base.Server, base.Process, base.Recorder
	base.ReportLackingPermissions(ctx, needs(id.Namespace, watched, opts.createCRD))

	fetchImage, pullPolicy, err := setUpSelf(ctx, clients, id, opts.fetchImage, log)
	if err != nil {
		return err
	}
	metrics := restore.NewMetrics(srv.Registry)

	lead := func(ctx context.Context) {
		if opts.createCRD {
			crd := operatorrun.CRDForRole(ctx, clients.Kube, crds.EtcdRestore(), watched, log)
			if !crds.InstallUntilDone(ctx, clients.APIExt, crd, log) {
				return
			}
		}
		open := restore.StoreOpener(clients.Kube.CoreV1(), opts.cloudIdentity)
		// Seeds download from the leader only: it serves while it leads.
		ln, err := net.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", restore.BackupServerPort))
		if err != nil {
			proc.Fail(fmt.Errorf("listen for the backup server: %w", err))
			return
		}
		// The flow tells the backup server the restores' tokens.
		tokens := restore.NewTokens()
		h := &restore.BackupHandler{Client: clients.Etcd, Tokens: tokens, Namespace: id.Namespace, ClusterWide: opts.clusterWide, Open: open, Log: log.WithField("pkg", "backup-server")}
		proc.Go(ctx, "backup server", func(ctx context.Context) error { return restore.ServeBackups(ctx, ln, h) })

		factory := externalversions.NewSharedInformerFactoryWithOptions(clients.Etcd, 0, externalversions.WithNamespace(watched))
		flow := restore.NewFlow(restore.Config{
			Kube:              clients.Kube,
			Etcd:              clients.Etcd,
			Recorder:          recorder,
			Log:               log,
			Metrics:           metrics,
			OperatorNamespace: id.Namespace,
			ClusterWide:       opts.clusterWide,
			FetchImage:        fetchImage,
			FetchPullPolicy:   pullPolicy,
			Timeout:           opts.restoreTimeout,
			Open:              open,
			Tokens:            tokens,
		})
		restores := factory.Etcd().V1beta2().EtcdRestores()
		ctrl := restorecontroller.New(restorecontroller.Config{
			Informer:    restores,
			Flow:        flow,
			Log:         log,
			ClusterWide: opts.clusterWide,
			Recorder:    recorder,
		})
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		// Labelled the leader only now: the CRD established, the cache synced,
		// the backup server listening and knowing the tokens of the restores
		// in progress. The Service sends seeds to the labelled pod only.
		working := func() {
			all, err := restores.Lister().List(labels.Everything())
			if err != nil {
				log.Warnf("list the EtcdRestores in the cache: %v", err)
			}
			flow.LoadTokens(ctx, all)
			base.Leadership.Working(ctx)
		}
		if err := ctrl.Run(ctx, opts.workers, working); err != nil && ctx.Err() == nil {
			log.WithError(err).Error("controller stopped")
		}
	}
	// proc waits for lead to return, so that a SIGTERM ends every worker before the
	// process exits.
	return proc.RunAsLeader(base.LeaderConfig(lockName), shutdownTimeout, lead)
}

// setUpSelf reads the operator's own pod: its image is the seed's fetch image
// (unless -fetch-image names one), and its labels select it for the
// etcd-restore-operator Service, which is created or corrected here, before
// leader election, as the original did. Without its pod (running outside a
// cluster) the operator still works if -fetch-image is given, but the Service is
// then up to the user.
func setUpSelf(ctx context.Context, clients *operatorrun.Clients, id operatorrun.Identity, fetchImage string, log *logrus.Entry) (string, corev1.PullPolicy, error) {
	self, err := operatorrun.OwnPod(ctx, clients.Kube, id, operatorrun.OwnPodTimeout)
	if err != nil {
		if fetchImage == "" {
			return "", "", fmt.Errorf("%w; without its pod the operator knows neither the image for the seed's fetch step (give it with -fetch-image) nor what its Service should select", err)
		}
		log.Warnf("%v; using -fetch-image=%s, and leaving Service %s/%s alone: seeds reach the backup server only if it routes to this process on port %d",
			err, fetchImage, id.Namespace, restore.ServiceName, restore.BackupServerPort)
		return fetchImage, corev1.PullIfNotPresent, nil
	}
	policy := corev1.PullIfNotPresent
	if fetchImage == "" {
		if fetchImage, policy, err = operatorrun.ImageOf(self, binary); err != nil {
			return "", "", err
		}
	}
	// Without the right to label the leader's pod, the Service selects every
	// replica rather than none.
	leaderLabel := operatorrun.LeaderLabel
	if missing, err := operatorrun.Missing(ctx, clients.Kube, operatorrun.LeaderLabelRule(id.Namespace)); err != nil || len(missing) > 0 {
		leaderLabel = ""
		log.Warnf("Service %s/%s selects every replica, standbys too, not only the leader's pod: the role may not %s (%v)",
			id.Namespace, restore.ServiceName, operatorrun.LeaderLabelRule(id.Namespace), err)
	}
	svc, err := restore.NewService(id.Namespace, self, leaderLabel)
	if err != nil {
		return "", "", err
	}
	if err := operatorrun.RetryFor(ctx, operatorrun.OwnPodTimeout, func() error { return restore.EnsureService(ctx, clients.Kube, svc) }); err != nil {
		return "", "", fmt.Errorf("the seed pods download backups through Service %s/%s: %w", id.Namespace, restore.ServiceName, err)
	}
	log.Infof("Service %s/%s selects %v; seed pods fetch with image %s", id.Namespace, restore.ServiceName, svc.Spec.Selector, fetchImage)
	return fetchImage, policy, nil
}

// needs are the permissions the operator uses besides its leader-election
// lock (see operatorrun.ChooseLock) and what happens without each; they are
// what example/rbac grants. watched is "" with -cluster-wide.
func needs(ns, watched string, createCRD bool) []operatorrun.Need {
	rule := func(group, resource, ns string, verbs ...string) operatorrun.Rule {
		return operatorrun.Rule{Group: group, Resource: resource, Verbs: verbs, Namespace: ns}
	}
	out := []operatorrun.Need{
		{Rule: rule(api.GroupName, "etcdrestores", watched, "get", "list", "watch", "update"), Without: "no EtcdRestore is run"},
		{Rule: rule(api.GroupName, "etcdrestores/status", watched, "update"), Without: "status is written with an update of the object; where the CRD serves the status subresource that stores nothing, and each restore keeps its progress in annotation " + restore.StatusAnnotation},
		{Rule: rule(api.GroupName, "etcdclusters", watched, "get", "create", "update", "delete"), Without: "the cluster to restore cannot be replaced"},
		{Rule: rule(api.GroupName, "etcdclusters/status", watched, "update"), Without: "where the CRD serves the status subresource, the restored cluster's first status (phase Running, status.recovery) is not stored; etcd-operator adopts its seed all the same"},
		{Rule: rule(api.GroupName, "etcdbackups", watched, "list"), Without: "a backup cannot be matched with the EtcdBackup that stored it"},
		{Rule: rule("", "pods", watched, "get", "list", "create"), Without: "the seed member cannot be created"},
		{Rule: rule("", "persistentvolumeclaims", watched, "list", "create"), Without: "a seed with spec.pod.persistentVolumeClaimSpec cannot get its claim"},
		{Rule: rule("", "services", watched, "get", "create", "update"), Without: "the restored cluster's services are not there before its seed looks its name up, and its client Service does not keep the old cluster IP"},
		operatorrun.SecretsNeed(watched, "restores cannot read their storage credentials or encryption key (said in their status)"),
		{Rule: rule("", "secrets", watched, "create"), Without: "each restore keeps the token its seed shows the backup server in annotation " + restore.TokenAnnotation + ", readable by whoever may read the EtcdRestore, and the server serves it only to the seed pod's address"},
		operatorrun.EventsNeed(watched),
		{Rule: rule("", "pods", ns, "get"), Without: "the operator cannot read its own pod: give -fetch-image, and make Service " + restore.ServiceName + " yourself"},
		{Rule: rule("", "services", ns, "get", "create", "update"), Without: "seeds cannot reach the backup server through Service " + restore.ServiceName},
		operatorrun.LeaderLabelNeed(ns, "Service "+restore.ServiceName+" selects every replica, so a seed sent to a standby must retry"),
	}
	if createCRD {
		out = append(out, operatorrun.CRDNeed())
	}
	return out
}
