//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestNoSpaceIsRecoveredByTheOperator fills a cluster's tiny quota with
// history (three keys overwritten with 100 KiB values), until etcd raises the
// NOSPACE alarm and takes no write. The operator reports it (condition
// NoSpace, a Warning event), compacts, defragments every member (the leader
// last), disarms the alarm once there is room, and says so in events; writes
// work again. Without it the cluster stays read-only until someone runs
// etcdctl by hand, and every member drops out of the client Service (its
// /health fails).
func TestNoSpaceIsRecoveredByTheOperator(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("nospace-op")
	cl := framework.NewCluster(name, 3, "3.5.21")
	quota := resource.MustParse("2Mi")
	cl.Spec.Maintenance = &api.MaintenancePolicy{Quota: &quota}
	createCluster(t, cl)
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))

	fillUntilNoSpace(t, opNS, pods[0])
	sawCondition := waitNoSpaceRecovered(t, opNS, name, pods[0])
	if !sawCondition {
		t.Log("the NoSpace condition was not seen (the recovery was faster than the poll)")
	}
	waitReady(t, opNS, name, 3, changeTimeout)
}

// fillUntilNoSpace overwrites three keys with 100 KiB values through pod's etcd
// until the quota is exhausted and etcd refuses writes with NOSPACE.
func fillUntilNoSpace(t *testing.T, ns, pod string) {
	t.Helper()
	value := strings.Repeat("v", 100<<10)
	var lastErr error
	for i := 0; i < 60; i++ {
		_, lastErr = f.EtcdctlExec(t.Context(), ns, pod, "--endpoints=http://localhost:2379", "put", fmt.Sprintf("/e2e/fill/%d", i%3), value)
		if lastErr != nil {
			break
		}
	}
	if lastErr == nil || !strings.Contains(lastErr.Error(), "database space exceeded") {
		t.Fatalf("filling the quota did not end with NOSPACE (last error: %v)", lastErr)
	}
}

// waitNoSpaceRecovered waits until a put through pod's etcd works again after
// the NOSPACE alarm, and for the operator's events of the recovery on the
// cluster (owed: by default NoSpace, Compacted, Defragmented and
// NoSpaceDisarmed). It tells whether the NoSpace condition was seen on the
// way.
func waitNoSpaceRecovered(t *testing.T, ns, name, pod string, owed ...string) (sawCondition bool) {
	t.Helper()
	ctx := t.Context()
	err := framework.WaitFor(ctx, changeTimeout, framework.Poll, "the operator to recover the space and writes to work again",
		func(ctx context.Context) (bool, string, error) {
			cl, err := f.GetCluster(ctx, ns, name)
			if err != nil {
				return false, "", nil
			}
			if c := framework.StatusCondition(cl, api.ClusterConditionNoSpace); c != nil && c.Status == corev1.ConditionTrue {
				sawCondition = true
				return false, c.Message, nil
			}
			_, err = f.EtcdctlExec(ctx, ns, pod, "--endpoints=http://localhost:2379", "put", "/e2e/after", "written")
			if err != nil {
				return false, "put: " + lastLine(err.Error()), nil
			}
			return true, "", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	events, err := f.Kubectl(ctx, "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+name, "-o", "custom-columns=REASON:.reason")
	if err != nil {
		t.Fatal(err)
	}
	if len(owed) == 0 {
		owed = []string{"NoSpace", "Compacted", "Defragmented", "NoSpaceDisarmed"}
	}
	for _, want := range owed {
		if !strings.Contains(events, want) {
			t.Errorf("no %s event on the cluster; events:\n%s", want, events)
		}
	}
	return sawCondition
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}
