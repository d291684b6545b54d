//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/crds"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// TestKubectlExplainsEveryKindAndGetShowsReadiness asks the real apiserver
// what kubectl shows: `kubectl explain` describes the fields of the three
// kinds with their Go doc comments, the short names resolve, and `kubectl get
// etcd` shows READY 3/3 and AVAILABLE True for a running cluster, whose status
// has a role, ID, version and database size per member.
func TestKubectlExplainsEveryKindAndGetShowsReadiness(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, crd := range []*apiextv1.CustomResourceDefinition{crds.EtcdCluster(), crds.EtcdBackup(), crds.EtcdRestore()} {
		if err := crds.Install(ctx, f.APIExt, crd, logrus.NewEntry(logrus.New())); err != nil {
			t.Fatal(err)
		}
	}

	// The apiserver publishes a CRD's OpenAPI a moment after it changes.
	for field, want := range map[string]string{
		"etcdcluster.spec.pod":              "BusyboxImage is the image of the DNS init container.",
		"etcdcluster.spec.pod.tolerations":  "Tolerations let member pods run on tainted nodes",
		"etcdcluster.status.memberDetails":  "Role is Leader, Follower, Learner",
		"etcd.status.readyMembers":          `ReadyMembers is "ready/size", like 2/3`,
		"etcdbk.spec.s3":                    "ForcePathStyle addresses buckets",
		"etcdbackup.status.Reason":          "The capital R is the original's JSON key.",
		"etcdrs.spec.etcdCluster":           "which must equal the EtcdRestore's",
		"etcdrestore.status.completionTime": "when it completed or failed",
	} {
		err := framework.WaitFor(ctx, dataTimeout, framework.Poll, "kubectl explain "+field+" to say "+want, func(ctx context.Context) (bool, string, error) {
			out, err := f.Kubectl(ctx, "explain", field)
			if err != nil {
				return false, err.Error(), nil
			}
			return strings.Contains(strings.Join(strings.Fields(out), " "), want), out, nil
		})
		if err != nil {
			t.Error(err)
		}
	}

	name := framework.UniqueName("kubectl")
	createCluster(t, framework.NewCluster(name, 3, "3.5.21"))
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	// The details of the member that joined last come with a later pass.
	err := framework.WaitFor(ctx, changeTimeout, framework.Poll, "status.memberDetails of "+name+": a leader, two followers, each with ID, version and DB size",
		func(ctx context.Context) (bool, string, error) {
			cl, err := f.GetCluster(ctx, opNS, name)
			if err != nil {
				return false, err.Error(), nil
			}
			roles := map[api.MemberRole]int{}
			for _, m := range cl.Status.MemberDetails {
				if m.ID == "" || m.Version != "3.5.21" || m.DBSize <= 0 {
					return false, fmt.Sprintf("%+v", cl.Status.MemberDetails), nil
				}
				roles[m.Role]++
			}
			return roles[api.MemberRoleLeader] == 1 && roles[api.MemberRoleFollower] == 2, fmt.Sprintf("%+v", cl.Status.MemberDetails), nil
		})
	if err != nil {
		t.Error(err)
	}

	// Available turns True in the same status write as the third member.
	var row string
	err = framework.WaitFor(ctx, changeTimeout, framework.Poll, "kubectl get etcd "+name+" to show 3/3 True", func(ctx context.Context) (bool, string, error) {
		out, err := f.Kubectl(ctx, "get", "etcd", "-n", opNS, name)
		if err != nil {
			return false, err.Error(), nil
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			return false, out, nil
		}
		header, fields := strings.Fields(lines[0]), strings.Fields(lines[1])
		if strings.Join(header, " ") != "NAME READY AVAILABLE VERSION PHASE AGE" {
			return false, out, fmt.Errorf("kubectl get etcd prints the columns %v", header)
		}
		row = lines[1]
		return len(fields) == 6 && fields[1] == "3/3" && fields[2] == "True" && fields[3] == "3.5.21" && fields[4] == "Running", out, nil
	})
	if err != nil {
		t.Error(err)
	}
	t.Logf("kubectl get etcd: %s", row)
	if out, err := f.Kubectl(ctx, "get", "etcd", "-n", opNS, name, "-o", "wide"); err != nil || !strings.Contains(out, "LEADER") {
		t.Errorf("kubectl get etcd -o wide shows no LEADER column (%v):\n%s", err, out)
	}
	for _, short := range []string{"etcdbk", "etcdrs"} {
		if out, err := f.Kubectl(ctx, "get", short, "-n", opNS); err != nil {
			t.Errorf("kubectl get %s: %v\n%s", short, err, out)
		}
	}
}
