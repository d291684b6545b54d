// Command cert-manager-controller runs cert-manager's own controllers for
// Certificates issued by SelfSigned and CA Issuers and ClusterIssuers, so the
// end-to-end tests can ask for certificates the way users of cert-manager do.
//
// It exists because the Go module proxy serves cert-manager's main module
// (github.com/cert-manager/cert-manager, with every controller under
// pkg/controller) but not the module of its controller binary
// (cmd/controller), and there is no registry to pull quay.io's image from.
// This is a small main of our own over the main module's public packages:
// build.sh builds it and writes its image; deploy.sh runs it on the local
// cluster. It lives in a module of its own (go.mod beside it), so this
// repository's module never depends on cert-manager.
//
// What it leaves out of the real controller: ACME, Vault and Venafi issuers,
// the ingress and Gateway shims, CertificateSigningRequests, the metrics and
// health servers, leader election (one replica), and the webhook (nothing
// defaults or validates the resources beyond their CRDs' schemas).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The issuer kinds the Issuer and ClusterIssuer controllers set up (they
	// register themselves with pkg/issuer when imported).
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// controllers are the ones run, by the names they register in
// controller.Known() when their package is imported: a Certificate's whole
// life (trigger, key, request, issuing, readiness, old requests pruned), the
// approval of its CertificateRequests (without it they stay unapproved and
// no signer looks at them), the two signers, and the issuers' Ready
// conditions.
var controllers = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	approver.ControllerName,
	crca.CRControllerName,
	crselfsigned.CRControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

// The defaults of cert-manager's controller configuration
// (internal/apis/config/controller/v1alpha1/defaults.go), which is internal
// to its module.
const (
	apiQPS                   = 20
	apiBurst                 = 50
	requestMinimumBackoff    = time.Hour
	requestMaximumBackoff    = 32 * time.Hour
	defaultConcurrentWorkers = 5
)

// copiedAnnotationPrefixes: a Certificate's annotations its
// CertificateRequests get, all but kubectl's, Flux's and Argo CD's.
var copiedAnnotationPrefixes = []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file; empty: the in-cluster configuration")
	resourceNamespace := flag.String("cluster-resource-namespace", "cert-manager",
		"the namespace of the Secrets ClusterIssuers refer to (a CA ClusterIssuer's key pair)")
	workers := flag.Int("workers", defaultConcurrentWorkers, "workers per controller")
	klog.InitFlags(flag.CommandLine)
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *resourceNamespace, *workers); err != nil {
		klog.ErrorS(err, "cert-manager-controller stopped")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// run builds the controllers, starts the informers they asked for, and
// returns when ctx ends or a controller fails.
func run(ctx context.Context, kubeconfig, resourceNamespace string, workers int) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   apiQPS,
		KubernetesAPIBurst: apiBurst,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace: resourceNamespace,
		},
		CertificateOptions: controller.CertificateOptions{
			CopiedAnnotationPrefixes:                 copiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: requestMinimumBackoff,
			CertificateRequestMaximumBackoffDuration: requestMaximumBackoff,
		},
	})
	if err != nil {
		return fmt.Errorf("controller context: %w", err)
	}
	// The informer factories are shared by every Context the factory builds;
	// this one is for starting them.
	base, err := factory.Build()
	if err != nil {
		return fmt.Errorf("controller context: %w", err)
	}

	g, ctx := errgroup.WithContext(ctx)
	known := controller.Known()
	for name := range known {
		if !slices.Contains(controllers, name) {
			klog.InfoS("not running controller", "controller", name)
		}
	}
	for _, name := range controllers {
		newController, ok := known[name]
		if !ok {
			return fmt.Errorf("controller %s is not registered", name)
		}
		c, err := newController(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		klog.InfoS("starting controller", "controller", name)
		g.Go(func() error {
			if err := c.Run(workers, ctx); err != nil {
				return fmt.Errorf("controller %s: %w", name, err)
			}
			return nil
		})
	}
	// Started after the controllers were built: building one is what asks a
	// factory for the informers it needs.
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	klog.InfoS("cert-manager controllers running", "clusterResourceNamespace", resourceNamespace,
		"controllers", controllers, "workers", workers)

	err = g.Wait()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	return err
}
