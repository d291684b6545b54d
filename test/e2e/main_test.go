//go:build e2e

// Package e2e is the end-to-end suite: the operator installed as README says, in a
// real Kubernetes, driven with kubectl and client-go the way users drive it. Run it
// with `make e2e` (hack/e2e.sh), or against an already prepared local cluster with
//
//	go test -tags e2e ./test/e2e/ -v -timeout 40m
//
// Every test but the install tests uses one operator, installed once in a shared
// namespace by TestMain, as the original suite did; each test names its clusters
// uniquely, so the tests run in parallel.
//
// Environment (hack/e2e.sh sets the first ones from the local cluster's env file):
//
//	KUBECONFIG, KUBECTL, NODE_IP  the cluster; read from E2E_ENV_FILE
//	                              (default /var/lib/etcd-operator-local/env) when unset
//	E2E_OPERATOR_IMAGE            run this operator image instead of the example's tag
//	E2E_ARTIFACTS                 where failure dumps go (default _output/e2e/artifacts)
//	E2E_KEEP_NAMESPACES=1         keep what failed tests created, for inspection
//	E2E_MEASURE=N                 TestMeasureLifecycle: N timed runs (run it alone)
//	E2E_BENCH, E2E_BENCH_SCALE    the bench's TestMeasureSpeed and TestMeasureScale
//	                              (hack/bench/run.sh sets them; see bench_test.go)
//	E2E_BENCH_ETCD, ETCD_BENCHMARK  the bench's TestMeasureEtcdBenchmark: etcd's
//	                              benchmark tool (see bench_etcd_test.go)
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

var (
	// f is the framework every test uses.
	f *framework.Framework
	// opNS is the shared operator's namespace; clusters managed by it live there.
	opNS string
)

// etcdClusterCRD is the definition the operator installs with --create-crd=true.
const etcdClusterCRD = "etcdclusters.etcd.database.coreos.com"

func TestMain(m *testing.M) {
	flag.Parse()
	// `go test -list` only lists: no cluster needed.
	if fl := flag.Lookup("test.list"); fl != nil && fl.Value.String() != "" {
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	start := time.Now()
	var err error
	if f, err = framework.New(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := checkPrerequisites(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	warnLeftovers(ctx)
	if opNS, err = f.CreateNamespace(ctx, "shared"); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	_, crdErr := f.APIExt.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, etcdClusterCRD, metav1.GetOptions{})
	existedBefore := crdErr == nil
	// E2E_OPERATOR_LOG_LEVEL=debug logs every pass's wait reasons, for
	// telling from a measurement where the time went.
	op, err := f.InstallOperator(ctx, opNS, framework.Install{LogLevel: os.Getenv("E2E_OPERATOR_LOG_LEVEL")})
	defer teardown(op)
	if err == nil {
		err = checkCRDInstalledByOperator(ctx, existedBefore)
	}
	if err == nil && f.Env.Nodes > 1 {
		err = f.KeepOnHostNode(ctx, opNS, framework.OperatorDeployment, 1)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: install the operator in %s as README says: %v\n", opNS, err)
		for _, s := range f.Dump(ctx, framework.DumpTarget{Namespace: opNS, OperatorNamespace: opNS}) {
			fmt.Fprintf(os.Stderr, "======== %s\n%s\n", s.Title, s.Body)
		}
		return 1
	}
	fmt.Printf("e2e: operator installed in namespace %s in %.1fs\n", opNS, time.Since(start).Seconds())
	return m.Run()
}

func teardown(op *framework.Operator) {
	if f.Env.KeepNamespaces {
		fmt.Printf("e2e: E2E_KEEP_NAMESPACES=1: leaving namespace %s and its RBAC behind\n", opNS)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if op != nil {
		if err := op.Uninstall(ctx, f); err != nil {
			fmt.Fprintf(os.Stderr, "e2e teardown: %v\n", err)
		}
	}
	if err := f.DeleteNamespace(ctx, opNS, 4*time.Minute); err != nil {
		fmt.Fprintf(os.Stderr, "e2e teardown: %v\n", err)
	}
}

// checkPrerequisites fails fast, with the command that fixes it, when the cluster
// is not one the suite can use: the local cluster has no registry, so every image
// must already be on the node.
func checkPrerequisites(ctx context.Context) error {
	if _, err := f.Kubectl(ctx, "get", "--raw", "/readyz"); err != nil {
		return fmt.Errorf("the apiserver is not ready (start the cluster with `sudo make local-up`): %w", err)
	}
	have, err := f.NodeImages(ctx)
	if err != nil {
		return fmt.Errorf("read the node's images: %w", err)
	}
	opImage := f.Env.OperatorImage
	if opImage == "" {
		opImage = "openetcd/etcd-operator:v0.1.0"
	}
	want := map[string]string{
		normalizeImage(opImage):                       "bash hack/build-image.sh && sudo bash hack/local-cluster/load-image.sh",
		normalizeImage(framework.EtcdImage("3.4.23")): "sudo make local-up (it imports the etcd images)",
		normalizeImage(framework.EtcdImage("3.5.21")): "sudo make local-up (it imports the etcd images)",
		normalizeImage(framework.EtcdImage("3.5.35")): "sudo make local-up (it imports the etcd images)",
		normalizeImage(framework.EtcdImage("3.6.6")):  "sudo make local-up (it imports the etcd images)",
		normalizeImage(framework.EtcdImage(newest36)): "sudo make local-up (it imports the etcd images)",
		normalizeImage(framework.EtcdImage(newest37)): "sudo make local-up (it imports the etcd images)",
		normalizeImage("busybox:1.28.0-glibc"):        "sudo make local-up (it imports busybox)",
	}
	var missing []string
	for img, fix := range want {
		if !have[img] {
			missing = append(missing, fmt.Sprintf("%s (get it with: %s)", img, fix))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("images missing on the node: %s", strings.Join(missing, "; "))
	}
	return nil
}

// normalizeImage spells a reference the way the node reports it.
func normalizeImage(ref string) string {
	first, _, hasSlash := strings.Cut(ref, "/")
	switch {
	case !hasSlash:
		return "docker.io/library/" + ref
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		return "docker.io/" + ref
	}
	return ref
}

// checkCRDInstalledByOperator checks that the operator, started with
// --create-crd=true, installed the EtcdCluster definition: it is Established and,
// when it did not exist before the operator started, the operator's own client is
// among its field managers. A definition left by an earlier run (CRDs are
// cluster-scoped and the suite never deletes them: other people's clusters may use
// them) can only be checked for being served.
func checkCRDInstalledByOperator(ctx context.Context, existedBefore bool) error {
	crd, err := f.APIExt.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, etcdClusterCRD, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the operator is Ready but its CRD is missing: %w", err)
	}
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
			established = true
		}
	}
	if !established {
		return fmt.Errorf("CRD %s is not Established: %+v", etcdClusterCRD, crd.Status.Conditions)
	}
	var managers []string
	for _, mf := range crd.ManagedFields {
		managers = append(managers, mf.Manager)
		if mf.Manager == framework.OperatorDeployment {
			fmt.Printf("e2e: CRD %s is Established and written by the operator (existed before: %v)\n", etcdClusterCRD, existedBefore)
			return nil
		}
	}
	if existedBefore {
		fmt.Printf("e2e: CRD %s existed before the operator started and is Established (field managers %v)\n", etcdClusterCRD, managers)
		return nil
	}
	return fmt.Errorf("CRD %s appeared but the operator is not among its writers (field managers %v)", etcdClusterCRD, managers)
}

// warnLeftovers mentions namespaces of earlier runs: an interrupted run (a killed
// go test skips its cleanups) leaves clusters that use the node's two cores. They
// are not deleted here, because they may be another run's in progress.
func warnLeftovers(ctx context.Context) {
	list, err := f.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: framework.NamespaceLabel})
	if err != nil || len(list.Items) == 0 {
		return
	}
	var names []string
	for _, ns := range list.Items {
		names = append(names, fmt.Sprintf("%s (%s old)", ns.Name, time.Since(ns.CreationTimestamp.Time).Round(time.Second)))
	}
	fmt.Printf("e2e: note: namespaces of other runs exist: %s; if no other run is going on, remove them with `hack/e2e.sh clean`\n", strings.Join(names, ", "))
}
