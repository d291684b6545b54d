// Command etcd-backup-operator takes the backups that EtcdBackup resources ask for.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sirupsen/logrus"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/controller/backupcontroller"
	"github.com/openetcd/etcd-operator/pkg/crds"
	"github.com/openetcd/etcd-operator/pkg/generated/informers/externalversions"
	"github.com/openetcd/etcd-operator/pkg/operatorrun"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

const (
	binary = "etcd-backup-operator"
	// lockName is the original's leader-election lock name: a Lease, or the
	// original's Endpoints lock when the role allows only that.
	lockName = "etcd-backup-operator"
	// shutdownTimeout bounds the wait for running backups to abort; well inside a
	// pod's default 30 s termination grace period.
	shutdownTimeout = 20 * time.Second
)

type options struct {
	logLevel             operatorrun.LogLevel
	logFormat            operatorrun.LogFormat
	createCRD            bool
	clusterWide          bool
	listenAddr           string
	kubeconfig           string
	printVersion         bool
	workers              int
	maxConcurrentBackups int
	verifyDir            string
	cloudIdentity        storage.CloudIdentity
}

// parseFlags reads the original's flags (single or double dash) plus the new ones.
func parseFlags(args []string, output io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet(binary, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.BoolVar(&o.createCRD, "create-crd", true, "create or update the EtcdBackup CRD at startup; with false, apply example/crd yourself and a namespaced Role is enough")
	fs.BoolVar(&o.clusterWide, "cluster-wide", false, "watch EtcdBackups in every namespace instead of only the operator's own (MY_POD_NAMESPACE)")
	fs.StringVar(&o.listenAddr, "listen-addr", "0.0.0.0:8081", "address of the HTTP server for /healthz, /readyz and /metrics")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file, to run outside a cluster (default: the pod's service account)")
	fs.BoolVar(&o.printVersion, "version", false, "print the version and exit")
	o.logLevel = operatorrun.DefaultLogLevel()
	fs.Var(&o.logLevel, "log-level", operatorrun.LogLevelUsage)
	o.logFormat = operatorrun.DefaultLogFormat()
	fs.Var(&o.logFormat, "log-format", operatorrun.LogFormatUsage)
	fs.IntVar(&o.workers, "workers", 4, "EtcdBackups processed at once by the workqueue (1..64)")
	fs.IntVar(&o.maxConcurrentBackups, "max-concurrent-backups", backupcontroller.DefaultMaxConcurrentBackups,
		"snapshots streamed at once, one-shot and periodic together; each holds about 32 MiB of upload buffers")
	fs.StringVar(&o.verifyDir, "verify-dir", os.TempDir(),
		"directory for the temporary copy of a backup being verified (EtcdBackup spec.verify), and for an archive drill's snapshot and the scratch etcd it restores; needs room for one snapshot per concurrent backup, two for a drill")
	o.cloudIdentity.Operator = binary
	fs.Var(&o.cloudIdentity, storage.CloudIdentityFlag, "namespaces whose EtcdBackups may reach their store with this operator's own cloud identity (credentialSource: OperatorServiceAccount): a comma-separated list, or * for every namespace it watches; empty lends it to none. Whoever may create one in such a namespace may reach whatever that identity may (docs/user-guide/backup-cloud-identity.md)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	switch {
	case o.workers < 1 || o.workers > 64:
		return o, fmt.Errorf("-workers must be between 1 and 64, not %d", o.workers)
	case o.maxConcurrentBackups < 1:
		return o, fmt.Errorf("-max-concurrent-backups must be at least 1, not %d", o.maxConcurrentBackups)
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
// after the Lease was released.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, log *logrus.Entry) int {
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
	log.Infof("%s %s (git %s) in namespace %s, watching %s", binary, operatorrun.Version, operatorrun.GitSHA, id.Namespace,
		map[bool]string{true: "all namespaces", false: "namespace " + id.Namespace}[opts.clusterWide])
	log.Infof("its own cloud identity (credentialSource: %s) is lent to %s", api.CredentialSourceOperatorServiceAccount, opts.cloudIdentity.Describe())

	base, ctx, err := operatorrun.Start(ctx, binary, opts.kubeconfig, opts.listenAddr, id, log)
	if err != nil {
		return err
	}
	defer base.Stop()
	clients, srv, proc, recorder := base.Clients, base.Server, base.Process, base.Recorder
	base.ReportLackingPermissions(ctx, needs(id.Namespace, watched, opts.createCRD))
	metrics := backupcontroller.NewMetrics(srv.Registry)

	lead := func(ctx context.Context) {
		if opts.createCRD {
			crd := operatorrun.CRDForRole(ctx, clients.Kube, crds.EtcdBackup(), watched, log)
			if !crds.InstallUntilDone(ctx, clients.APIExt, crd, log) {
				return
			}
		}
		factory := externalversions.NewSharedInformerFactoryWithOptions(clients.Etcd, 0, externalversions.WithNamespace(watched))
		backuper := &backupcontroller.Backuper{Secrets: clients.Kube.CoreV1(), Clusters: clients.Etcd,
			ClusterWide: opts.clusterWide, VerifyDir: opts.verifyDir, CloudIdentity: opts.cloudIdentity, Log: log}
		ctrl := backupcontroller.New(backupcontroller.Config{
			Client:               clients.Etcd,
			Informer:             factory.Etcd().V1beta2().EtcdBackups(),
			Recorder:             recorder,
			Metrics:              metrics,
			Backup:               backuper.Backup,
			Archive:              backuper.Archive,
			PruneArchive:         backuper.PruneArchive,
			DrillArchive:         backuper.DrillArchive,
			Log:                  log,
			MaxConcurrentBackups: opts.maxConcurrentBackups,
			ClusterWide:          opts.clusterWide,
		})
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		// Labelled the leader only now: the CRD established, the cache synced.
		if err := ctrl.Run(ctx, opts.workers, func() { base.Leadership.Working(ctx) }); err != nil && ctx.Err() == nil {
			log.WithError(err).Error("controller stopped")
		}
	}
	// proc waits for lead to return, so that a SIGTERM ends every backup goroutine
	// before the process exits.
	return proc.RunAsLeader(base.LeaderConfig(lockName), shutdownTimeout, lead)
}

// needs are the permissions the operator uses besides its leader-election
// lock (see operatorrun.ChooseLock) and what happens without each; they are
// what example/rbac grants. watched is "" with -cluster-wide.
func needs(ns, watched string, createCRD bool) []operatorrun.Need {
	out := []operatorrun.Need{
		{Rule: operatorrun.Rule{Group: api.GroupName, Resource: "etcdbackups", Verbs: []string{"get", "list", "watch", "update"}, Namespace: watched},
			Without: "no EtcdBackup is run, and periodic ones keep their finalizer"},
		{Rule: operatorrun.Rule{Group: api.GroupName, Resource: "etcdbackups/status", Verbs: []string{"update"}, Namespace: watched},
			Without: "status cannot be written through the status subresource"},
		operatorrun.SecretsNeed(watched, "backups cannot read their storage credentials, encryption key or client TLS secret (said in their status)"),
		{Rule: operatorrun.Rule{Group: api.GroupName, Resource: "etcdclusters", Verbs: []string{"get"}, Namespace: watched},
			Without: "backups that name their cluster with spec.clusterName fail (said in their status)"},
		operatorrun.EventsNeed(watched),
		{Rule: operatorrun.Rule{Resource: "pods", Verbs: []string{"get"}, Namespace: ns},
			Without: "the events on the operator's own pod (leadership, missing permissions) lack its UID, so kubectl describe pod does not list them"},
		operatorrun.LeaderLabelNeed(ns, ""),
	}
	if createCRD {
		out = append(out, operatorrun.CRDNeed())
	}
	return out
}
