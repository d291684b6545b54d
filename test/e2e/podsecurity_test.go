//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/restore"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// ownRoleOperators are the three operators as this test installs them: each
// with its own service account and Role (create_role.sh --operator), its
// example Deployment, and the port and request counter of its /metrics.
var ownRoleOperators = []struct {
	name, deployment, port, counter string
}{
	{"etcd-operator", "example/deployment.yaml", "8080", "etcd_operator_kubernetes_requests_total"},
	{"etcd-backup-operator", "example/etcd-backup-operator/deployment.yaml", "8081", "etcd_backup_operator_kubernetes_requests_total"},
	{"etcd-restore-operator", "example/etcd-restore-operator/deployment.yaml", "8082", "etcd_restore_operator_kubernetes_requests_total"},
}

// grantedButRare are verbs the operators' roles grant that the flow of
// TestRestrictedNamespaceRunsOperatorAndMembers (a cluster created, backed up
// and restored) need not use, each with the path that uses it. Any other verb
// granted and not used fails the test: it is a right nobody needs.
var grantedButRare = map[string]map[string]string{
	"etcd-operator": {
		"patch pods":                    "upgrades and pod-policy changes patch a member pod",
		"delete pods":                   "a dead or surplus member is replaced or removed",
		"create persistentvolumeclaims": "members on claims (spec.pod.persistentVolumeClaimSpec); this cluster has none",
		"patch persistentvolumeclaims":  "members on claims: a claim's owner is moved to its new pod",
		"delete persistentvolumeclaims": "a removed member's claim",
		"update poddisruptionbudgets":   "a resized cluster's budget",
		"delete poddisruptionbudgets":   "a cluster scaled to one member",
		"get secrets":                   "TLS clusters; this one is plain",
		"create secrets":                "clusters with spec.TLS.issued: their CA and certificates; this one is plain",
		"update secrets":                "clusters with spec.TLS.issued: certificates renewed in place; this one is plain",
		"get certificates":              "clusters whose certificates a cert-manager issuer issues (spec.TLS.issued.issuerRef); this one is plain",
		"create certificates":           "spec.TLS.issued.issuerRef: the cluster's four cert-manager Certificates",
		"update certificates":           "spec.TLS.issued.issuerRef: a Certificate set back to what the cluster asks for, or marked for a rotation",
		"update certificates/status":    "spec.TLS.issued.issuerRef: a rotation asked for, through the Issuing condition",
		"update etcdclusters":           "status written with the object when the CRD serves no status subresource (the original's hand-made CRD)",
		"get etcdclusters":              "a status write that conflicted re-reads the cluster; the status subresource answering NotFound",
		"list etcdrestores":             "disaster recovery: no member's data left, the cluster is restored from its newest backup",
		"create etcdrestores":           "disaster recovery",
		"delete etcdrestores":           "disaster recovery, again: the finished EtcdRestore of an earlier one makes way",
		"list etcdbackups":              "disaster recovery: the newest backup of the cluster",
		"patch events":                  "an event repeated within minutes is counted up by a patch",
	},
	"etcd-backup-operator": {
		"update etcdbackups": "the finalizer of a periodic backup (this one is one-shot); status with the object on the original's CRD",
		"get etcdclusters":   "spec.clusterName: the cluster's client Service and TLS secret (this backup names endpoints)",
		"patch events":       "an event repeated within minutes is counted up by a patch",
	},
	"etcd-restore-operator": {
		"create persistentvolumeclaims": "seeds on claims; this cluster has none",
		"update services":               "that Service corrected (labels of an older Deployment) or given the new pod as owner",
		"patch events":                  "an event repeated within minutes is counted up by a patch",
	},
}

// Requests the operators make that no Role grants, because every
// authenticated user may make them (system:basic-user, system:discovery).
var grantedToEveryone = map[string]bool{
	"create selfsubjectaccessreviews": true, // what the role lacks, asked at start
	"get other":                       true, // discovery, /version
}

// TestRestrictedNamespaceRunsOperatorAndMembers: in a namespace that enforces
// Pod Security "restricted", the three operators, each under a service account
// and a Role of its own (create_role.sh --operator --namespaced), start from
// their example Deployments; a 3-member cluster whose spec.pod.securityContext
// runs as non-root comes up, members joining through their check-dns and
// wait-membership init containers on read-only root filesystems; it is backed
// up and restored, the seed fetching with its token and restoring with every
// capability dropped. Then the requests each operator made (its request
// counter) are held to its Role: every verb used is granted, and every verb
// granted was used or is in grantedButRare with the reason it was not.
func TestRestrictedNamespaceRunsOperatorAndMembers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "restricted")
	nsObj, err := f.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if _, err := f.Kube.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseRestores(t, ns) })
	t.Cleanup(func() {
		if t.Failed() {
			dump(t.Context(), t, framework.DumpTarget{Namespace: ns, OperatorNamespace: ns})
		}
	})
	if _, err := f.Kubectl(ctx, "apply", "-f", f.Env.Path("example", "crd")+"/"); err != nil {
		t.Fatal(err)
	}
	for _, op := range ownRoleOperators {
		if _, err := f.Run(ctx, framework.Cmd{Name: "bash", Args: []string{f.Env.Path("example", "rbac", "create_role.sh"),
			"--operator=" + op.name, "--namespaced", "--namespace=" + ns, "--service-account=" + op.name,
			"--role-name=" + op.name, "--role-binding-name=" + op.name}}); err != nil {
			t.Fatalf("create_role.sh --operator=%s: %v", op.name, err)
		}
		deployExampleOperator(t, ns, f.Env.Path(strings.Split(op.deployment, "/")...),
			"s/- --create-crd=true/- --create-crd=false/",
			`s/^    spec:$/    spec:\n      serviceAccountName: `+op.name+`/`)
	}

	name := framework.UniqueName("psa")
	cl := framework.NewCluster(name, 3, "3.5.21")
	cl.Spec.Pod = &api.PodPolicy{SecurityContext: &corev1.PodSecurityContext{
		RunAsNonRoot: new(true),
		RunAsUser:    new(int64(65532)),
		RunAsGroup:   new(int64(65532)),
		FSGroup:      new(int64(65532)),
	}}
	createClusterIn(t, ns, ns, cl)
	_, oldPods := waitReady(t, ns, name, 3, bootstrapTimeout(3))

	// Backed up, then restored: the seed and its restore step are restricted too.
	const keys = 50
	putKeys(t, ns, name, "/e2e/before/", keys)
	bucket := "e2e-restricted"
	srv := startS3Server(t, bucket)
	secretName := createS3Secret(t, ns, srv)
	key := "backups/" + name + ".db"
	backUp(t, ns, name, srv, bucket, key, secretName)
	putKeys(t, ns, name, "/e2e/after/", 1)
	if err := f.CreateFromExample(ctx, ns, f.Env.Path("example", "etcd-restore-operator", "restore_cr_minio.yaml"),
		"s/name: example-etcd-cluster$/name: "+name+"/",
		"s|path: etcd-backups/example-etcd-cluster.backup|path: "+bucket+"/"+key+"|",
		"s/awsSecret: minio/awsSecret: "+secretName+"/",
		"s|endpoint: http://minio.minio.svc:9000|endpoint: "+srv.Endpoint+"|"); err != nil {
		t.Fatal(err)
	}
	waitRestore(t, ns, name, restoreTimeout, api.RestorePhaseCompleted)
	waitReady(t, ns, name, 3, changeTimeout, oldPods...)
	if n := countKeys(t, ns, name, "/e2e/"); n != keys {
		t.Errorf("%d keys after the restore, want the %d backed up", n, keys)
	}
	er, err := f.Etcd.EtcdV1beta2().EtcdRestores(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Kube.CoreV1().Secrets(ns).Get(ctx, restore.TokenSecretName(er.UID), metav1.GetOptions{}); err != nil {
		t.Errorf("the restore's token Secret: %v", err)
	}

	for _, op := range ownRoleOperators {
		t.Run(op.name+" uses exactly what its Role grants", func(t *testing.T) {
			used := requestsOf(t, ns, op.name, op.port, op.counter)
			granted := roleVerbs(t, op.name)
			var problems []string
			for _, k := range slices.Sorted(maps.Keys(used)) {
				if !granted[k] && !grantedToEveryone[k] {
					problems = append(problems, fmt.Sprintf("used %q (%v times), which the Role does not grant", k, used[k]))
				}
			}
			for _, k := range slices.Sorted(maps.Keys(granted)) {
				if _, ok := used[k]; ok {
					if why, rare := grantedButRare[op.name][k]; rare {
						t.Logf("%q, listed as rare (%s), was used this time", k, why)
					}
					continue
				}
				if _, rare := grantedButRare[op.name][k]; !rare {
					problems = append(problems, fmt.Sprintf("the Role grants %q, which was not used and is not listed in grantedButRare", k))
				}
			}
			t.Logf("used: %v", used)
			for _, p := range problems {
				t.Error(p)
			}
		})
	}
}

var requestLabels = regexp.MustCompile(`(resource|verb)="([^"]*)"`)

// requestsOf reads an operator's request counter from its /metrics through
// the apiserver's pod proxy: "verb resource" and how often.
func requestsOf(t *testing.T, ns, deployment, port, counter string) map[string]float64 {
	t.Helper()
	pods, err := f.DeploymentPods(t.Context(), ns, deployment)
	if err != nil || len(pods) != 1 {
		t.Fatalf("pods of %s: %d, %v", deployment, len(pods), err)
	}
	raw, err := f.Kube.CoreV1().RESTClient().Get().
		AbsPath("/api/v1/namespaces", ns, "pods", pods[0].Name+":"+port, "proxy", "metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("read the metrics of %s: %v", deployment, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, counter+"{") {
			continue
		}
		labels, value, _ := strings.Cut(line, "} ")
		kv := map[string]string{}
		for _, m := range requestLabels.FindAllStringSubmatch(labels, -1) {
			kv[m[1]] = m[2]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err == nil && v > 0 {
			out[kv["verb"]+" "+kv["resource"]] += v
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s in the metrics of %s", counter, deployment)
	}
	return out
}

// roleVerbs are the "verb resource" pairs example/rbac/<operator>/role-template.yaml grants.
func roleVerbs(t *testing.T, operator string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(f.Env.Path("example", "rbac", operator, "role-template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				out[v+" "+res] = true
			}
		}
	}
	return out
}
