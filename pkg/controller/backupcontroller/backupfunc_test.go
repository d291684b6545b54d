package backupcontroller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

func awsSecret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name}, Data: data}
}

func startEtcd(t *testing.T) *backuptest.Etcd {
	t.Helper()
	e, err := backuptest.StartEtcd(backuptest.EtcdOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func startS3(t *testing.T) *backuptest.S3 {
	t.Helper()
	srv, err := backuptest.StartS3(nil, "backups")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// startVersityGW is a versitygw process with the bucket "backups", and its store.
func startVersityGW(t *testing.T) (*backuptest.VersityGW, backup.Store) {
	t.Helper()
	ctx := t.Context()
	vgw, err := backuptest.StartVersityGW(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vgw.Close)
	if err := vgw.CreateBucket(ctx, "backups"); err != nil {
		t.Fatal(err)
	}
	store, err := s3store.New(vgw.StoreConfig("backups"))
	if err != nil {
		t.Fatal(err)
	}
	return vgw, store
}

func deadEndpoint(t *testing.T) string {
	t.Helper()
	ep, err := backuptest.DeadEndpoint()
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// s3Backup is an EtcdBackup of endpoints into the test S3 server.
func s3Backup(name string, srv *backuptest.S3, endpoints ...string) *api.EtcdBackup {
	eb := newBackup(name, 0)
	eb.Spec.EtcdEndpoints = endpoints
	eb.Spec.S3 = &api.S3BackupSource{Path: "backups/clusters/" + name, AWSSecret: "aws", Endpoint: srv.URL, ForcePathStyle: true}
	return eb
}

// TestBackupThroughTheControllerIntoS3 runs the whole path: controller, secrets, a
// real etcd with one dead endpoint next to it, gofakes3; then checks the stored
// object against the status and opens it as the database it is.
func TestBackupThroughTheControllerIntoS3(t *testing.T) {
	e := startEtcd(t)
	const keys = 250
	if err := e.Fill(context.Background(), "/registry/", keys, 2048); err != nil {
		t.Fatal(err)
	}
	srv := startS3(t)
	kube := kubefake.NewSimpleClientset(awsSecret("aws", backuptest.AWSSecretData()))
	backuper := &Backuper{Secrets: kube.CoreV1(), DialTimeout: time.Second}

	eb := s3Backup("real", srv, deadEndpoint(t), e.Endpoint)
	f := newFixture(t, []*api.EtcdBackup{eb}, withBackupFunc(backuper.Backup))
	st := f.waitStatus("real", "succeeded", func(s api.BackupStatus) bool { return s.Succeeded || s.Reason != "" })
	if !st.Succeeded {
		t.Fatalf("backup failed: %s", st.Reason)
	}
	if st.BackupPath != "backups/clusters/real" || st.EtcdRevision < keys+1 || !strings.HasPrefix(st.EtcdVersion, "3.5.") {
		t.Fatalf("status %+v", st)
	}

	store, err := s3store.New(srv.StoreConfig("backups"))
	if err != nil {
		t.Fatal(err)
	}
	rc, _, err := store.Get(context.Background(), "clusters/real")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(body)) != st.BackupSize {
		t.Errorf("stored %d bytes, status says %d", len(body), st.BackupSize)
	}
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != st.SHA256 {
		t.Errorf("stored sha256 %x, status says %s", sum, st.SHA256)
	}
	n, err := backuptest.CheckSnapshot(t.TempDir(), body)
	if err != nil {
		t.Fatalf("not a valid snapshot: %v", err)
	}
	if n != keys {
		t.Fatalf("snapshot holds %d revisions of keys, want %d", n, keys)
	}
}

// hangingEndpoint accepts connections and never answers, like a member that is
// wedged; only a deadline gets a client out.
func hangingEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	return "http://" + ln.Addr().String()
}

func TestBackuperFailures(t *testing.T) {
	e := startEtcd(t)
	srv := startS3(t)
	good := backuptest.AWSSecretData()
	secrets := []*corev1.Secret{
		awsSecret("aws", good),
		awsSecret("aws-noregion", map[string][]byte{"credentials": good["credentials"]}),
		awsSecret("aws-empty", map[string][]byte{}),
		awsSecret("tls-half", map[string][]byte{api.CliCertFile: []byte("x")}),
	}
	dead := deadEndpoint(t)

	tests := []struct {
		name      string
		change    func(*api.EtcdBackup)
		want      []string
		permanent bool
	}{
		{
			name:   "missing secret",
			change: func(eb *api.EtcdBackup) { eb.Spec.S3.AWSSecret = "nope" },
			want:   []string{"secret ns/nope (spec.s3.awsSecret) not found"},
		},
		{
			name:      "secret without a region",
			change:    func(eb *api.EtcdBackup) { eb.Spec.S3.AWSSecret = "aws-noregion" },
			want:      []string{"the AWS config in secret ns/aws-noregion has no region for profile default; add `region = ...`"},
			permanent: true,
		},
		{
			name:      "secret without keys",
			change:    func(eb *api.EtcdBackup) { eb.Spec.S3.AWSSecret = "aws-empty" },
			want:      []string{"secret ns/aws-empty has no region"},
			permanent: true,
		},
		{
			name:   "unreachable store",
			change: func(eb *api.EtcdBackup) { eb.Spec.S3.Endpoint = dead },
			want:   []string{"s3://backups/clusters/case"},
		},
		{
			name:      "empty endpoints",
			change:    func(eb *api.EtcdBackup) { eb.Spec.EtcdEndpoints = nil },
			want:      []string{"no etcd endpoints"},
			permanent: true,
		},
		{
			name:   "unreachable etcd",
			change: func(eb *api.EtcdBackup) { eb.Spec.EtcdEndpoints = []string{dead} },
			want:   []string{"none of the etcd endpoints [" + dead + "] answered"},
		},
		{
			name:   "missing TLS secret",
			change: func(eb *api.EtcdBackup) { eb.Spec.ClientTLSSecret = "etcd-client-tls" },
			want:   []string{"secret ns/etcd-client-tls (spec.clientTLSSecret) not found"},
		},
		{
			name:      "TLS secret without its keys",
			change:    func(eb *api.EtcdBackup) { eb.Spec.ClientTLSSecret = "tls-half" },
			want:      []string{"secret ns/tls-half (spec.clientTLSSecret)", "etcd-client-ca.crt, etcd-client.key"},
			permanent: true,
		},
		{
			name: "timeout",
			change: func(eb *api.EtcdBackup) {
				eb.Spec.EtcdEndpoints = []string{hangingEndpoint(t)}
				eb.Spec.BackupPolicy = &api.BackupPolicy{TimeoutInSecond: 1}
			},
			want: []string{"the backup did not finish within 1s (spec.backupPolicy.timeoutInSecond)"},
		},
	}
	kube := kubefake.NewSimpleClientset()
	for _, s := range secrets {
		if err := kube.Tracker().Add(s); err != nil {
			t.Fatal(err)
		}
	}
	b := &Backuper{Secrets: kube.CoreV1(), DialTimeout: 2 * time.Second}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eb := s3Backup("case", srv, e.Endpoint)
			tc.change(eb)
			start := time.Now()
			_, err := b.Backup(context.Background(), eb, false)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if got := failure.IsPermanent(err); got != tc.permanent {
				t.Errorf("permanent = %v, want %v", got, tc.permanent)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestBackuperPeriodicNamesAndPrunes(t *testing.T) {
	e := startEtcd(t)
	srv := startS3(t)
	kube := kubefake.NewSimpleClientset(awsSecret("aws", backuptest.AWSSecretData()))
	at := time.Date(2024, 2, 3, 4, 5, 6, 0, time.UTC)
	b := &Backuper{Secrets: kube.CoreV1(), Now: func() time.Time { return at }}
	eb := s3Backup("periodic", srv, e.Endpoint)
	eb.Spec.BackupPolicy = &api.BackupPolicy{BackupIntervalInSecond: 60, MaxBackups: 1}
	var last string
	for i := range 2 {
		if err := e.Fill(context.Background(), "/p"+string(rune('a'+i))+"/", 1, 1); err != nil {
			t.Fatal(err)
		}
		at = at.Add(time.Minute)
		res, err := b.Backup(context.Background(), eb, false)
		if err != nil {
			t.Fatal(err)
		}
		want := "backups/" + backup.PeriodicKey("clusters/periodic", res.Revision, at)
		if res.Path != want {
			t.Fatalf("path %q, want %q", res.Path, want)
		}
		last = res.Key
	}
	store, _ := s3store.New(srv.StoreConfig("backups"))
	objs, err := store.List(context.Background(), "clusters/periodic")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Key != last {
		t.Fatalf("left %+v, want only %s (maxBackups 1)", objs, last)
	}
}

// A backup that asks for the operator's cloud identity where the operator does
// not lend it fails with a reason that says who can change that, and a Warning,
// without reaching for the store in any other way.
func TestBackupAskingForAnIdentityNotLentIsRefused(t *testing.T) {
	kube := kubefake.NewSimpleClientset(awsSecret("aws", backuptest.AWSSecretData()))
	var lend storage.CloudIdentity
	lend.Operator = "etcd-backup-operator"
	if err := lend.Set("other-team"); err != nil {
		t.Fatal(err)
	}
	backuper := &Backuper{Secrets: kube.CoreV1(), DialTimeout: time.Second, CloudIdentity: lend}
	eb := newBackup("identity", 0)
	eb.Spec.EtcdEndpoints = []string{deadEndpoint(t)}
	eb.Spec.S3 = &api.S3BackupSource{Path: "backups/identity", Endpoint: "http://127.0.0.1:1", ForcePathStyle: true,
		CredentialSource: api.CredentialSourceOperatorServiceAccount}
	f := newFixture(t, []*api.EtcdBackup{eb}, withBackupFunc(backuper.Backup))
	st := f.waitStatus("identity", "a reason", func(s api.BackupStatus) bool { return s.Reason != "" })
	const want = "spec.s3.credentialSource OperatorServiceAccount: etcd-backup-operator does not lend its cloud identity to namespace " +
		testNamespace + "; its administrator lends it with -cloud-identity-namespaces=" + testNamespace
	if st.Succeeded || !strings.Contains(st.Reason, want) {
		t.Fatalf("status %+v, want a reason containing %q", st, want)
	}
	eventually(t, "a Warning event with the reason", func() bool {
		for _, e := range f.events.list() {
			if strings.HasPrefix(e, corev1.EventTypeWarning+" "+ReasonBackupFailed) && strings.Contains(e, want) {
				return true
			}
		}
		return false
	})
}
