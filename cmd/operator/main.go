// Command etcd-operator runs etcd clusters described by EtcdCluster resources.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/chaos"
	"github.com/openetcd/etcd-operator/pkg/cluster"
	"github.com/openetcd/etcd-operator/pkg/controller"
	"github.com/openetcd/etcd-operator/pkg/crds"
	"github.com/openetcd/etcd-operator/pkg/operatorrun"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
)

const binary = "etcd-operator"

type options struct {
	logLevel          operatorrun.LogLevel
	logFormat         operatorrun.LogFormat
	listenAddr        string
	createCRD         bool
	clusterWide       bool
	chaosLevel        int
	printVersion      bool
	gcInterval        time.Duration
	kubeconfig        string
	reconcileInterval time.Duration
	pendingTimeout    time.Duration
	joinImage         string
	profiling         bool
}

// parseFlags reads the original's flags (single or double dash) plus the new ones.
func parseFlags(args []string, output io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet(binary, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.listenAddr, "listen-addr", "0.0.0.0:8080", "address of the HTTP server for /readyz, /healthz and /metrics")
	fs.BoolVar(&o.createCRD, "create-crd", true, "create or update the EtcdCluster CRD at startup; with false, apply example/crd yourself and a namespaced Role is enough")
	fs.BoolVar(&o.clusterWide, "cluster-wide", false, "manage EtcdClusters in every namespace that carry the annotation etcd.database.coreos.com/scope=clusterwide")
	fs.IntVar(&o.chaosLevel, "chaos-level", -1, "testing only: 1 or 2 kills etcd pods in the operator's namespace at random")
	fs.BoolVar(&o.printVersion, "version", false, "print the version and exit")
	o.logLevel = operatorrun.DefaultLogLevel()
	fs.Var(&o.logLevel, "log-level", operatorrun.LogLevelUsage)
	o.logFormat = operatorrun.DefaultLogFormat()
	fs.Var(&o.logFormat, "log-format", operatorrun.LogFormatUsage)
	fs.DurationVar(&o.gcInterval, "gc-interval", 10*time.Minute, "accepted for compatibility with the original, which never used it; no effect")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file, to run outside a cluster (default: the pod's service account)")
	fs.DurationVar(&o.reconcileInterval, "reconcile-interval", 8*time.Second, "tick of each cluster's reconcile loop; pod events wake it earlier")
	fs.DurationVar(&o.pendingTimeout, "pending-timeout", 5*time.Minute, "a member pod Pending for longer is replaced")
	fs.StringVar(&o.joinImage, "join-image", "", "image with the etcd-operator binary, for the init container that holds a joining member back until it is added (default: this operator's own image, read from its pod)")
	fs.BoolVar(&o.profiling, "profiling", false, "serve Go's runtime profiles (go tool pprof) under /debug/pprof/ on -listen-addr; they show the process's internals to whoever reaches the port")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	switch {
	case o.chaosLevel != -1 && o.chaosLevel != 1 && o.chaosLevel != 2:
		return o, fmt.Errorf("-chaos-level must be -1 (off), 1 or 2, not %d", o.chaosLevel)
	case o.reconcileInterval <= 0:
		return o, errors.New("-reconcile-interval must be positive")
	case o.pendingTimeout <= 0:
		return o, errors.New("-pending-timeout must be positive")
	}
	return o, nil
}

func main() {
	ctx, cancel := operatorrun.SignalContext(context.Background())
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, operatorrun.NewLogger(binary))
	cancel()
	os.Exit(code)
}

// run is the whole binary; it returns the exit code.
//
// `wait-membership` as the first argument runs a joining member's init
// container instead (see k8sutil.MembershipWait).
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, log *logrus.Entry) int {
	if len(args) > 0 && args[0] == k8sutil.MembershipWaitSubcommand {
		return waitMembership(ctx, args[1:], log)
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
	log.Infof("%s %s (git %s) in namespace %s, cluster-wide=%v", binary, operatorrun.Version, operatorrun.GitSHA, id.Namespace, opts.clusterWide)
	if opts.gcInterval != 10*time.Minute {
		log.Warn("-gc-interval has no effect: Kubernetes garbage collection removes what deleted clusters owned")
	}
	base, ctx, err := operatorrun.Start(ctx, binary, opts.kubeconfig, opts.listenAddr, id, log)
	if err != nil {
		return err
	}
	defer base.Stop()
	clients, srv, proc, recorder := base.Clients, base.Server, base.Process, base.Recorder
	if opts.profiling {
		srv.ServeProfiles()
	}
	base.ReportLackingPermissions(ctx, needs(id.Namespace, opts))
	join, err := joinImage(ctx, clients, id, opts.joinImage, log)
	if err != nil {
		return err
	}

	// The clusters' passes change nothing unless this process still holds the
	// Lease by its own clock: a leader thawed after a standby took over must
	// not act on its old view (operatorrun.Fence).
	fence := operatorrun.NewFence()
	ctrl := controller.New(controller.Config{
		Namespace:   id.Namespace,
		ClusterWide: opts.clusterWide,
		KubeClient:  clients.Kube,
		EtcdClient:  clients.Etcd,
		Recorder:    recorder,
		Registerer:  srv.Registry,
		Cluster: cluster.Config{
			ReconcileInterval: opts.reconcileInterval,
			PendingTimeout:    opts.pendingTimeout,
			MembershipWait:    join,
			MayAct:            fence.Held,
			Dynamic:           clients.Dynamic,
		},
		Log: log.WithField("pkg", "controller"),
	})
	lead := func(ctx context.Context) {
		if opts.createCRD {
			crd := operatorrun.CRDForRole(ctx, clients.Kube, crds.EtcdCluster(), k8sutil.WatchedNamespace(id.Namespace, opts.clusterWide), log)
			if !crds.InstallUntilDone(ctx, clients.APIExt, crd, log) {
				return
			}
		}
		if plan, ok := chaos.PlanForLevel(opts.chaosLevel); ok {
			log.Warnf("chaos level %d: etcd pods in %s will be killed at random", opts.chaosLevel, id.Namespace)
			go func() {
				_ = failure.Safely(log, "the chaos monkey", func() {
					chaos.Run(ctx, clients.Kube, id.Namespace, plan, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0)), log)
				})
			}()
		}
		if err := ctrl.Run(ctx, func() { base.Leadership.Working(ctx) }); err != nil && ctx.Err() == nil {
			log.WithError(err).Error("controller stopped")
		}
	}
	// Bounds the wait for the clusters' loops to stop, so that a SIGTERM ends them
	// before the process exits; well inside a pod's default 30 s termination grace
	// period.
	const shutdownTimeout = 20 * time.Second
	election := base.LeaderConfig(binary)
	election.Fence = fence
	return proc.RunAsLeader(election, shutdownTimeout, lead)
}

// joinImage is the image of joining members' wait-membership init container:
// -join-image, or else the operator's own. Without either (the operator runs
// outside a cluster) it cannot run clusters: a member added before its pod
// exists makes every peer cache the failed lookup of its name, and every join
// waits that cache out, so that old way is gone.
func joinImage(ctx context.Context, clients *operatorrun.Clients, id operatorrun.Identity, image string, log *logrus.Entry) (k8sutil.MembershipWait, error) {
	if image != "" {
		return k8sutil.MembershipWait{Image: image, PullPolicy: corev1.PullIfNotPresent}, nil
	}
	self, err := operatorrun.OwnPod(ctx, clients.Kube, id, operatorrun.OwnPodTimeout)
	if err == nil {
		var w k8sutil.MembershipWait
		if w.Image, w.PullPolicy, err = operatorrun.ImageOf(self, binary); err == nil {
			log.Infof("joining members wait for their membership with image %s", w.Image)
			return w, nil
		}
	}
	return k8sutil.MembershipWait{}, fmt.Errorf("the image of joining members' wait-membership init container is unknown (%v): run the operator in a pod, whose own image is used, or give -join-image with an image holding the %s binary", err, binary)
}

// needs are the permissions the operator uses besides its leader-election
// lock (see operatorrun.ChooseLock) and what happens without each; they are
// what example/rbac grants.
func needs(ns string, opts options) []operatorrun.Need {
	watched := k8sutil.WatchedNamespace(ns, opts.clusterWide)
	rule := func(group, resource string, verbs ...string) operatorrun.Rule {
		return operatorrun.Rule{Group: group, Resource: resource, Verbs: verbs, Namespace: watched}
	}
	out := []operatorrun.Need{
		{Rule: rule(api.GroupName, "etcdclusters", "get", "list", "watch", "update"), Without: "no EtcdCluster is run"},
		{Rule: rule(api.GroupName, "etcdclusters/status", "update"), Without: "status cannot be written through the status subresource"},
		{Rule: rule("", "pods", "get", "list", "watch", "create", "patch", "delete"), Without: "member pods cannot be watched, created, upgraded or replaced"},
		{Rule: rule("", "services", "get", "list", "watch", "create"), Without: "clusters get no client or peer service"},
		{Rule: rule("", "persistentvolumeclaims", "list", "watch", "create", "patch", "delete"), Without: "members cannot get or keep their claims"},
		{Rule: rule("policy", "poddisruptionbudgets", "list", "watch", "create", "update", "delete"), Without: "clusters get no PodDisruptionBudget, so a drain can take a quorum of members at once, until the rule is added (asked again every " + statusutil.ReprobeInterval.String() + ")"},
		{Rule: rule(api.GroupName, "etcdrestores", "list", "create", "delete"), Without: "a cluster that lost every member's data is not restored from its newest backup (said in its status.reason)"},
		{Rule: rule(api.GroupName, "etcdbackups", "list"), Without: "a cluster that lost every member's data cannot find its newest backup (said in its status.reason)"},
		operatorrun.SecretsNeed(watched, "TLS clusters cannot read their secrets (said in their status.reason)"),
		{Rule: rule("", "secrets", "create", "update"), Without: "clusters with spec.TLS.issued get no certificates and wait, or have their certificates expire unrenewed (said in their status.reason)"},
		{Rule: rule(api.CertManagerGroup, "certificates", "get", "create", "update"), Without: "clusters whose certificates a cert-manager issuer issues (spec.TLS.issued.issuerRef) get none and wait (said in their status.reason)"},
		{Rule: rule(api.CertManagerGroup, "certificates/status", "update"), Without: "a rotation asked for of certificates a cert-manager issuer issues is not carried out (said in the cluster's status.reason)"},
		operatorrun.EventsNeed(watched),
		{Rule: operatorrun.Rule{Resource: "pods", Verbs: []string{"get"}, Namespace: ns}, Without: "the operator cannot read its own pod for its image: give -join-image"},
		operatorrun.LeaderLabelNeed(ns, ""),
	}
	if opts.clusterWide {
		// Cluster-scoped: a namespaced Role cannot grant it, so only the
		// cluster-wide operator, which runs under a ClusterRole, is told it
		// lacks it. Any operator reads nodes when its role lets it.
		out = append(out, operatorrun.Need{Rule: operatorrun.Rule{Resource: "nodes", Verbs: []string{"get"}},
			Without: "the zones of members' nodes are unknown, so a zone holding a quorum of members is not told (members sharing a node still are)"},
			operatorrun.Need{Rule: operatorrun.Rule{Resource: "persistentvolumes", Verbs: []string{"get"}},
				Without: "a member whose local volume went with a node lost for good is not replaced: it waits for its node (said in its cluster's status.reason)"})
	}
	if opts.createCRD {
		out = append(out, operatorrun.CRDNeed())
	}
	return out
}
