//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/test/e2e/framework"
)

// The tenant control plane (tenant_test.go) through the rest of a cluster's
// life: its operator restarted, backups taken, its quota exhausted and
// recovered, its serving certificates renewed.

// TestTenantControlPlaneThroughAnOperatorRestart: every pod of the operator
// is killed under a running tenant, and a follower right after, while the
// operator's new pod is still coming up. The new operator must take the
// cluster over from what etcd and Kubernetes show (with whatever the old one
// may have begun in its last moments) and replace the member, back to three
// ready; etcd does not need the operator to serve, so the tenant's informer
// must show every change its apiserver acknowledged, in order. The operator
// is the test's own, in its own namespace, so that killing it disturbs no
// other test.
func TestTenantControlPlaneThroughAnOperatorRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := newNamespace(t, "tenant-operator")
	installOperator(t, ns, framework.Install{})
	name := framework.UniqueName("tenant-operator")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, "3.5.21"))
	_, pods := waitReady(t, ns, name, 3, bootstrapTimeout(3))
	tenant := startTenantIn(t, ns, name, framework.TenantAPIServer{})

	const d = 90 * time.Second
	load := startTenantLoad(t, tenant, framework.TenantLoad{Scenario: "operator-restart-and-member-kill", Duration: d})
	pause(t, loadLead)
	// The follower is chosen before the operator goes: finding the leader
	// takes a few etcdctl calls, and the kill must land before the new
	// operator is up.
	leader, err := f.Leader(ctx, ns, name, false)
	if err != nil {
		t.Fatal(err)
	}
	victim := pods[0]
	if victim == leader.Name {
		victim = pods[1]
	}
	operators, err := f.DeploymentPods(ctx, ns, framework.OperatorDeployment)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range framework.LivePods(operators) {
		if err := f.KillPod(ctx, ns, p.Name); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.KillPod(ctx, ns, victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the operator (%d pods), then the follower %s", len(operators), victim)
	if err := f.WaitDeploymentReady(ctx, ns, framework.OperatorDeployment, 1, framework.OperatorReadyTimeout); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, name, 3, changeTimeout, victim)
	judgeTenantLoad(t, load, d+3*time.Minute)
}

// TestTenantControlPlaneThroughBackups: backups are taken of the cluster
// under a tenant while it writes, as a platform team backs up its hosted
// control planes: a one-shot EtcdBackup, then a periodic one every 5 s. The
// one-shot must succeed and hold the revision of a ConfigMap the tenant
// acknowledged before it was asked for; the periodic one must store backups
// of ever later revisions (the cluster went on taking writes between them);
// and the tenant's informer must show every change its apiserver
// acknowledged, in order: a snapshot streamed out of a member does not hold
// up or lose the tenant's writes.
func TestTenantControlPlaneThroughBackups(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bed := newBackupBed(t, "tenant-backup", false)
	ns, srv, bucket, secretName := bed.ns, bed.srv, bed.bucket, bed.secret

	name := framework.UniqueName("tenant-backup")
	createClusterIn(t, ns, ns, framework.NewCluster(name, 3, api.DefaultEtcdVersion))
	waitReady(t, ns, name, 3, bootstrapTimeout(3))
	tenant := startTenantIn(t, ns, name, framework.TenantAPIServer{})
	kube, err := kubernetes.NewForConfig(tenant.Config)
	if err != nil {
		t.Fatal(err)
	}

	const d = 90 * time.Second
	load := startTenantLoad(t, tenant, framework.TenantLoad{Scenario: "backups-while-writing", Duration: d})
	pause(t, loadLead)

	const marks = "backup-marks"
	tenantPut(t, kube, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: marks}})
	mark := tenantConfigMap(t, kube, marks, "before-the-backup")
	markRev, err := strconv.ParseInt(mark.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q of the tenant's ConfigMap: %v", mark.ResourceVersion, err)
	}
	once := backUp(t, ns, name, srv, bucket, "backups/"+name+".db", secretName)
	eb, err := f.Etcd.EtcdV1beta2().EtcdBackups(ns).Get(ctx, once, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if eb.Status.EtcdRevision < markRev {
		t.Errorf("the one-shot backup holds revision %d, older than the tenant's ConfigMap %s/%s acknowledged at %d before it was asked for",
			eb.Status.EtcdRevision, marks, mark.Name, markRev)
	}

	prefix := "periodic/" + name
	periodic := createBackupIn(t, ns, &api.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-periodic"},
		Spec: api.BackupSpec{
			EtcdEndpoints: []string{framework.ClientURL(name, false)},
			StorageType:   api.BackupStorageTypeS3,
			BackupSource: api.BackupSource{S3: &api.S3BackupSource{
				Path: bucket + "/" + prefix, AWSSecret: secretName, Endpoint: srv.Endpoint, ForcePathStyle: true,
			}},
			BackupPolicy: &api.BackupPolicy{BackupIntervalInSecond: periodicSeconds, MaxBackups: periodicKeep},
		},
	})
	// Every backup is seen: each lives for two intervals and the list runs every second.
	seen := &objectsSeen{at: map[string]time.Time{}}
	err = framework.WaitFor(ctx, time.Duration(periodicRounds+4)*periodicSeconds*time.Second+backupTimeout, time.Second,
		fmt.Sprintf("%d periodic backups under s3://%s/%s", periodicRounds, bucket, prefix),
		func(ctx context.Context) (bool, string, error) {
			objs, err := srv.List(ctx, bucket, prefix)
			if err != nil {
				return false, err.Error(), nil
			}
			seen.add(objs)
			return len(seen.order) >= periodicRounds, fmt.Sprintf("seen %d: %v", len(seen.order), seen.order), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	var revisions []int64
	for _, key := range seen.order {
		rev, ok := periodicRevision(prefix, key)
		if !ok {
			t.Fatalf("periodic backup %q is not named <path>_v<revision>_<time>", key)
		}
		revisions = append(revisions, rev)
	}
	for i := 1; i < len(revisions); i++ {
		if revisions[i] <= revisions[i-1] {
			t.Errorf("periodic backups at revisions %v: one is not later than the one before, though the tenant was writing", revisions)
			break
		}
	}
	t.Logf("periodic backups while the tenant wrote: %v (revisions %v)", seen.order, revisions)
	got, err := f.Etcd.EtcdV1beta2().EtcdBackups(ns).Get(ctx, periodic.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Status.Succeeded || got.Status.Reason != "" {
		t.Errorf("the periodic backup's status %+v: want the latest backup succeeded, without a reason", got.Status)
	}
	judgeTenantLoad(t, load, d+3*time.Minute)
}

// periodicRevision reads the revision out of a periodic backup's key,
// "<prefix>_v<revision>_<time>".
func periodicRevision(prefix, key string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, prefix+"_v")
	if !ok {
		return 0, false
	}
	revText, _, ok := strings.Cut(rest, "_")
	if !ok {
		return 0, false
	}
	rev, err := strconv.ParseInt(revText, 10, 64)
	return rev, err == nil
}

// tenantNoSpaceQuota is the quota of the NOSPACE scenario: large enough that
// the tenant's own writes (its apiserver's objects and the workload's
// history) leave room for the length of the test, so that the filler, not
// the workload, decides when the quota runs out, and that once the history
// is compacted and defragmented the live data is far under the 90 % the
// operator waits for before it disarms the alarm.
const tenantNoSpaceQuota = "8Mi"

// TestTenantControlPlaneThroughNoSpace: the cluster under a tenant runs out
// of space (a filler outside the tenant's prefix exhausts a small quota) and
// etcd raises the NOSPACE alarm: the tenant's creates and updates fail, and
// every member leaves the client Service (its /health fails), until the
// operator compacts the history to the current revision, defragments every
// member and disarms the alarm. The compaction also ends the tenant's
// watches on older revisions, so its watch cache and the informer list
// again. Through all of it the informer must show every change the
// apiserver acknowledged, in order; and after the alarm is disarmed a new
// workload's writes must be acknowledged again, none refused for space.
func TestTenantControlPlaneThroughNoSpace(t *testing.T) {
	t.Parallel()
	name := framework.UniqueName("tenant-nospace")
	cl := framework.NewCluster(name, 3, "3.5.21")
	quota := resource.MustParse(tenantNoSpaceQuota)
	cl.Spec.Maintenance = &api.MaintenancePolicy{Quota: &quota}
	createCluster(t, cl)
	_, pods := waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	tenant := startTenant(t, name, framework.TenantAPIServer{})

	const d = 120 * time.Second
	load := startTenantLoad(t, tenant, framework.TenantLoad{Scenario: "nospace-and-its-clearing", Duration: d})
	pause(t, loadLead)
	fillQuotaUntilNoSpace(t, opNS, pods[0])
	raised := time.Now()
	// A transaction of 1 MiB can meet the quota while the database is still
	// under the share of it the operator leaves room for: then nothing needs
	// defragmenting and the alarm is disarmed after the compaction, so no
	// Defragmented event is owed.
	waitNoSpaceRecovered(t, opNS, name, pods[0], "NoSpace", "Compacted", "NoSpaceDisarmed")
	t.Logf("writes work again %.1fs after the NOSPACE alarm", time.Since(raised).Seconds())
	waitReady(t, opNS, name, 3, changeTimeout)
	judgeTenantLoad(t, load, d+3*time.Minute)

	after := judgeTenantLoad(t, startTenantLoad(t, tenant, framework.TenantLoad{Scenario: "after-the-alarm", Namespace: "after-the-alarm", Duration: 30 * time.Second}), 3*time.Minute)
	for _, e := range after.Errors {
		if strings.Contains(e.Message, "database space exceeded") {
			t.Errorf("after the alarm was disarmed the tenant's writes were still refused for space %d times: %s", e.Count, e.Message)
		}
	}
}

// fillQuotaUntilNoSpace writes 128 KiB values under /e2e/fill/ through pod's
// etcd, eight to a transaction fed to etcdctl on its standard input (a value
// that large does not fit in one argument of exec), until etcd refuses one
// with NOSPACE. The same eight keys are overwritten each time: the quota
// fills with their history, which the operator's compaction frees.
func fillQuotaUntilNoSpace(t *testing.T, ns, pod string) {
	t.Helper()
	const putsPerFill, valueBytes, maxFills = 8, 128 << 10, 64
	value := strings.Repeat("v", valueBytes)
	var txn strings.Builder
	txn.WriteString("\n") // no compares
	for i := range putsPerFill {
		fmt.Fprintf(&txn, "put /e2e/fill/%d %s\n", i, value)
	}
	txn.WriteString("\n\n") // no failure branch
	for i := range maxFills {
		_, err := f.KubectlStdin(t.Context(), txn.String(), "exec", "-i", "-n", ns, pod, "-c", "etcd", "--",
			framework.EtcdctlPath, "--endpoints=http://localhost:2379", "--command-timeout=30s", "txn")
		if err == nil {
			continue
		}
		if strings.Contains(err.Error(), "database space exceeded") {
			t.Logf("NOSPACE after %d transactions of %d KiB", i, putsPerFill*valueBytes>>10)
			return
		}
		t.Fatalf("filling the quota: %v", err)
	}
	t.Fatalf("%d transactions of %d KiB and no NOSPACE with a quota of %s", maxFills, putsPerFill*valueBytes>>10, tenantNoSpaceQuota)
}

// TestTenantControlPlaneThroughServingCertificateRenewal: a cluster with
// issued TLS is asked for new certificates (the rotate-certificates
// annotation) under a tenant that reaches it over client TLS with the
// client certificate it was started with. Every certificate is renewed in
// place from the same CA and the members serve the renewed ones without a
// restart; the tenant's connections made before go on, and once every
// member serves its renewed certificate they are all ended, so that the
// tenant dials again and must accept the renewed serving certificates with
// its old client certificate. The informer of the workload across the
// renewal, and that of one after the connections were ended, must show
// every change the apiserver acknowledged, in order.
func TestTenantControlPlaneThroughServingCertificateRenewal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := framework.UniqueName("tenant-renew")
	cl := framework.NewCluster(name, 3, "3.6.16")
	cl.Spec.TLS = &api.TLSPolicy{Issued: &api.IssuedTLS{}}
	t.Cleanup(func() {
		_ = f.Kube.CoreV1().Secrets(opNS).Delete(context.WithoutCancel(ctx), name+"-ca", metav1.DeleteOptions{})
	})
	createCluster(t, cl)
	waitReady(t, opNS, name, 3, bootstrapTimeout(3))
	client, err := f.Kube.CoreV1().Secrets(opNS).Get(ctx, name+"-client-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tenant, fwd := startTenantForwarded(t, opNS, name, tenantWithClientSecret(client))
	serving := name + "-server-tls"
	before := secretCertSerial(t, opNS, serving, etcdutil.SecretServerCert)

	const d = 120 * time.Second
	load := startTenantLoad(t, tenant, framework.TenantLoad{Scenario: "serving-certificate-renewal", Duration: d})
	pause(t, loadLead)
	const rotation = "e2e-tenant-1"
	patch := `{"metadata":{"annotations":{"` + api.RotateCertificatesAnnotation + `":"` + rotation + `"}}}`
	if _, err := f.Kubectl(ctx, "-n", opNS, "patch", "etcd", name, "--type=merge", "-p", patch); err != nil {
		t.Fatal(err)
	}
	err = framework.WaitFor(ctx, changeTimeout, framework.Poll, "status.certificatesRotated "+rotation,
		func(ctx context.Context) (bool, string, error) {
			cl, err := f.GetCluster(ctx, opNS, name)
			if err != nil {
				return false, err.Error(), nil
			}
			return cl.Status.CertificatesRotated == rotation, framework.DescribeStatus(cl), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	renewed := secretCertSerial(t, opNS, serving, etcdutil.SecretServerCert)
	if renewed == before {
		t.Fatalf("secret %s still holds the serving certificate %s after the rotation", serving, before)
	}
	t.Logf("serving certificate renewed: serial %s, was %s", renewed, before)

	waitEveryMemberServes(t, opNS, name, clientTLSConfig(t, client), renewed)
	t.Logf("ended the tenant's %d connections to etcd once every member served the renewed certificate", fwd.DropConnections())
	judgeTenantLoad(t, load, d+3*time.Minute)
	judgeTenantLoad(t, startTenantLoad(t, tenant, framework.TenantLoad{Scenario: "after-the-renewal", Namespace: "after-the-renewal", Duration: 30 * time.Second}), 3*time.Minute)
}

// waitEveryMemberServes waits until every member of cluster ns/name
// serves the certificate of serial, dialled with dial: the kubelet updates
// the members' mounted Secret within about a minute, and until every member
// serves the renewed certificate, a new connection may still get the old
// one and would prove nothing.
func waitEveryMemberServes(t *testing.T, ns, name string, dial *tls.Config, serial string) {
	t.Helper()
	err := framework.WaitFor(t.Context(), changeTimeout, framework.Poll, "every member to serve the renewed certificate "+serial,
		func(ctx context.Context) (bool, string, error) {
			pods, err := f.ClusterPods(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			var serials []string
			for _, p := range framework.LivePods(pods) {
				served, err := servedCertSerial(ctx, net.JoinHostPort(p.Status.PodIP, "2379"), dial)
				if err != nil {
					served = err.Error()
				}
				serials = append(serials, p.Name+": "+served)
			}
			return len(serials) == 3 && !slices.ContainsFunc(serials, func(s string) bool { return !strings.HasSuffix(s, ": "+serial) }),
				strings.Join(serials, ", "), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// secretCertSerial is the serial number of the certificate under key in
// secret ns/name.
func secretCertSerial(t *testing.T, ns, name, key string) string {
	t.Helper()
	s, err := f.Kube.CoreV1().Secrets(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(s.Data[key])
	if block == nil {
		t.Fatalf("%s of secret %s is not PEM", key, name)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber.String()
}

// clientTLSConfig dials members with the client certificate of secret and
// checks their serving certificate against its CA, under the name
// "localhost", which issued serving certificates carry (a pod's IP they do
// not).
func clientTLSConfig(t *testing.T, secret *corev1.Secret) *tls.Config {
	t.Helper()
	cert, err := tls.X509KeyPair(secret.Data[etcdutil.SecretClientCert], secret.Data[etcdutil.SecretClientKey])
	if err != nil {
		t.Fatalf("client certificate of secret %s: %v", secret.Name, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(secret.Data[etcdutil.SecretClientCA]) {
		t.Fatalf("no CA certificate in %s of secret %s", etcdutil.SecretClientCA, secret.Name)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}
}

// servedCertSerial makes a new TLS connection to addr and returns the serial
// number of the certificate served on it.
func servedCertSerial(ctx context.Context, addr string, cfg *tls.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return "", fmt.Errorf("%s served no certificate", addr)
	}
	return certs[0].SerialNumber.String(), nil
}
