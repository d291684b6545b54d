//go:build e2e

package e2e

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestExampleClusterServesClientsThroughItsService follows README: `kubectl create
// -f example/example-etcd-cluster.yaml`, then a client talks to
// example-etcd-cluster-client:2379 from inside the cluster.
func TestExampleClusterServesClientsThroughItsService(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	file := f.Env.Path("example", "example-etcd-cluster.yaml")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var example api.EtcdCluster
	if err := yaml.UnmarshalStrict(raw, &example); err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	name, size, version := example.Name, example.Spec.Size, example.Spec.Version

	watchCluster(t, framework.DumpTarget{Namespace: opNS, Cluster: name, OperatorNamespace: opNS})
	if err := f.CreateFromExample(ctx, opNS, file); err != nil {
		t.Fatal(err)
	}
	cl, _ := waitReady(t, opNS, name, size, bootstrapTimeout(size))

	var e errs
	s := cl.Status
	e.check(s.Phase == api.ClusterPhaseRunning, "status.phase = %q, want Running", s.Phase)
	e.check(s.CurrentVersion == version, "status.currentVersion = %q, want %q", s.CurrentVersion, version)
	e.check(s.ServiceName == name+"-client", "status.serviceName = %q, want %q", s.ServiceName, name+"-client")
	e.check(s.ClientPort == 2379, "status.clientPort = %d, want 2379", s.ClientPort)
	e.check(s.Size == size, "status.size = %d, want %d", s.Size, size)
	e.check(s.TargetVersion == "", "status.targetVersion = %q, want empty after bootstrap", s.TargetVersion)
	avail := framework.StatusCondition(cl, api.ClusterConditionAvailable)
	e.check(avail != nil && avail.Status == corev1.ConditionTrue, "Available condition = %+v, want status True", avail)
	svc, err := f.Kube.CoreV1().Services(opNS).Get(ctx, name+"-client", metav1.GetOptions{})
	if err != nil {
		e.check(false, "client service: %v", err)
	} else {
		e.check(len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].Port == 2379, "client service ports = %+v, want one port 2379", svc.Spec.Ports)
	}
	e.report(t)

	if err := f.PutAndGet(ctx, opNS, name, false, "/e2e/example", "hello from "+t.Name(), dataTimeout); err != nil {
		t.Fatal(err)
	}
}
