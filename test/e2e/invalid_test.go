//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/yaml"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2/apitest"
	"github.com/openetcd/etcd-operator/pkg/crds"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// invalidReportTimeout bounds how long the operator may take to report an admitted
// but invalid spec: its informer delivers the object within a second.
const invalidReportTimeout = time.Minute

// TestInvalidResourcesAreRejectedOrReported runs the shared table of invalid
// resources (pkg/apis/etcd/v1beta2/testdata/invalid.yaml) against the real
// apiserver with `kubectl create`: what the CRD schema can catch must be refused
// with the table's message; what only Go validation catches must be admitted and
// then reported by the operator in status.reason and a Warning event InvalidSpec,
// without a single pod being created.
func TestInvalidResourcesAreRejectedOrReported(t *testing.T) {
	t.Parallel()
	cases, err := apitest.LoadInvalid()
	if err != nil {
		t.Fatal(err)
	}
	ensureBackupRestoreCRDs(t)
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			obj := c.Object(opNS)
			meta := obj["metadata"].(map[string]any)
			if meta["name"] == apitest.DefaultName {
				// Unique names let the cases run in parallel in one namespace.
				meta["name"] = fmt.Sprintf("invalid-%d-%s", i, framework.UniqueName("x")[2:])
			}
			name := meta["name"].(string)
			manifest, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			if c.SchemaError != "" {
				expectRejected(t, c, name, string(manifest))
				return
			}
			if c.Kind != api.EtcdClusterResourceKind {
				t.Fatalf("case %q: an admitted invalid %s has no check in the e2e suite yet; add one (status and events of that kind)", c.Name, c.Kind)
			}
			expectReported(t, c, name, string(manifest))
		})
	}
}

// expectRejected: `kubectl create` fails with the table's message and nothing is stored.
func expectRejected(t *testing.T, c apitest.InvalidCase, name, manifest string) {
	ctx := t.Context()
	out, err := f.KubectlStdin(ctx, manifest, "create", "-f", "-")
	if err == nil {
		// Remove what should never have been admitted.
		_, _ = f.Kubectl(context.Background(), "delete", "-n", opNS, strings.ToLower(c.Kind)+".etcd.database.coreos.com", name, "--wait=false")
		t.Fatalf("kubectl create admitted the invalid %s (%s); want it refused with %q\nmanifest:\n%s", c.Kind, strings.TrimSpace(out), c.SchemaError, manifest)
	}
	msg := err.Error()
	if ce, ok := errors.AsType[*framework.CommandError](err); ok {
		msg = ce.Stderr
	}
	if !strings.Contains(msg, c.SchemaError) {
		t.Errorf("kubectl create refused the %s, but its message lacks %q:\n%s", c.Kind, c.SchemaError, msg)
	}
}

// expectReported: the cluster is admitted, then the operator writes the problem in
// status.reason, emits a Warning event InvalidSpec, and creates no pod.
func expectReported(t *testing.T, c apitest.InvalidCase, name, manifest string) {
	ctx := t.Context()
	watchCluster(t, framework.DumpTarget{Namespace: opNS, Cluster: name, OperatorNamespace: opNS})
	if _, err := f.KubectlStdin(ctx, manifest, "create", "-f", "-"); err != nil {
		t.Fatalf("kubectl create refused %q, which the table says the schema admits: %v", c.Name, err)
	}
	created, err := f.GetCluster(ctx, opNS, name)
	if err != nil {
		t.Fatal(err)
	}
	err = framework.WaitFor(ctx, invalidReportTimeout, framework.Poll, "status.reason to report the invalid spec",
		func(ctx context.Context) (bool, string, error) {
			cl, err := f.GetCluster(ctx, opNS, name)
			if err != nil {
				return false, err.Error(), nil
			}
			return strings.Contains(cl.Status.Reason, c.GoError), framework.DescribeStatus(cl), nil
		})
	if err != nil {
		t.Errorf("%v (want a reason containing %q)", err, c.GoError)
	}
	err = framework.WaitFor(ctx, invalidReportTimeout, framework.Poll, "a Warning event InvalidSpec on the cluster",
		func(ctx context.Context) (bool, string, error) {
			evs, err := f.Kube.CoreV1().Events(opNS).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
				"involvedObject.name": name, "involvedObject.uid": string(created.UID),
			}.String()})
			if err != nil {
				return false, err.Error(), nil
			}
			var seen []string
			for _, e := range evs.Items {
				if e.Type == corev1.EventTypeWarning && e.Reason == "InvalidSpec" {
					if !strings.Contains(e.Message, c.GoError) {
						return false, "", fmt.Errorf("event InvalidSpec says %q, which lacks %q", e.Message, c.GoError)
					}
					return true, "", nil
				}
				seen = append(seen, e.Type+"/"+e.Reason)
			}
			return false, fmt.Sprintf("events: %v", seen), nil
		})
	if err != nil {
		t.Error(err)
	}
	pods, err := f.ClusterPods(ctx, opNS, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) > 0 {
		t.Errorf("pods were created for an invalid spec: %s", framework.DescribePods(pods))
	}
}

// ensureBackupRestoreCRDs makes sure the apiserver knows EtcdBackup and
// EtcdRestore, whose cases are in the table too. The etcd-operator only installs
// EtcdCluster; the other two come from their own operators or, as docs/user-guide/install.md says
// for installs without them, from example/crd/.
func ensureBackupRestoreCRDs(t *testing.T) {
	ctx := t.Context()
	// Installed, or updated when the cluster holds another version (the
	// shared local cluster keeps the definitions of earlier runs), so that
	// the table meets this tree's rules.
	log := logrus.NewEntry(logrus.New())
	for _, crd := range []*apiextv1.CustomResourceDefinition{crds.EtcdBackup(), crds.EtcdRestore()} {
		if err := crds.Install(ctx, f.APIExt, crd, log); err != nil {
			t.Fatal(err)
		}
	}
}
