package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// isolateAWS clears every source of AWS credentials the default chain reads,
// so that a test sees only the ones it sets: no shared files of the user
// running the tests, no instance metadata.
func isolateAWS(t *testing.T) {
	t.Helper()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS", "AWS_DEFAULT_REGION"} {
		t.Setenv(k, "")
		_ = os.Unsetenv(k)
	}
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_REGION", backuptest.Region)
}

// startVersityGW runs the S3 server the store tests use (hack/versitygw.sh) with
// one bucket.
func startVersityGW(t *testing.T) *backuptest.VersityGW {
	t.Helper()
	ctx := context.Background()
	gw, err := backuptest.StartVersityGW(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	if err := gw.CreateBucket(ctx, "backups"); err != nil {
		t.Fatal(err)
	}
	return gw
}

func s3IdentitySpec(endpoint string) *api.BackupSpec {
	return &api.BackupSpec{StorageType: api.BackupStorageTypeS3, BackupSource: api.BackupSource{S3: &api.S3BackupSource{
		Path: "backups/etcd.backup", Endpoint: endpoint, ForcePathStyle: true,
		CredentialSource: api.CredentialSourceOperatorServiceAccount,
	}}}
}

// roundTripVia opens the store of spec as the backup operator lending its
// identity to namespace ns, stores and reads back one object through it, and
// checks that the credentials came from where the test says (served counts
// what that place handed out).
func roundTripVia(t *testing.T, spec *api.BackupSpec, served *atomic.Int32, from string) {
	t.Helper()
	store, loc, err := ForBackup(context.Background(), fake.NewSimpleClientset().CoreV1(), lending(t, "ns"), "ns", spec)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, store, loc.Key)
	if served != nil && served.Load() == 0 {
		t.Fatalf("the credentials did not come from %s", from)
	}
}

// roundTrip stores and reads back one object, which versitygw accepts only
// signed with its own keys.
func roundTrip(t *testing.T, store backup.Store, key string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := store.Put(ctx, key, strings.NewReader("snapshot")); err != nil {
		t.Fatal(err)
	}
	rc, _, err := store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	if b, err := io.ReadAll(rc); err != nil || string(b) != "snapshot" {
		t.Fatalf("read back %q, %v", b, err)
	}
}

// The default chain's first provider: keys in the environment.
func TestS3WithTheOperatorsKeysFromItsEnvironment(t *testing.T) {
	gw := startVersityGW(t)
	isolateAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", backuptest.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", backuptest.SecretAccessKey)
	roundTripVia(t, s3IdentitySpec(gw.URL), nil, "")
}

// EKS Pod Identity: the agent on the node serves credentials at
// AWS_CONTAINER_CREDENTIALS_FULL_URI to whoever shows the token in
// AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE. Here an HTTP server plays the agent.
func TestS3WithEKSPodIdentity(t *testing.T) {
	gw := startVersityGW(t)
	isolateAWS(t)
	const token = "pod-identity-token"
	var served atomic.Int32
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != token {
			http.Error(w, "wrong token", http.StatusForbidden)
			return
		}
		served.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]string{
			"AccessKeyId":     backuptest.AccessKeyID,
			"SecretAccessKey": backuptest.SecretAccessKey,
			"Expiration":      time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		})
	}))
	defer agent.Close()
	tokenFile := filepath.Join(t.TempDir(), "eks-pod-identity-token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", agent.URL+"/v1/credentials")
	t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", tokenFile)

	roundTripVia(t, s3IdentitySpec(gw.URL), &served, "the Pod Identity agent")
}

// IRSA: the SDK exchanges the projected ServiceAccount token in
// AWS_WEB_IDENTITY_TOKEN_FILE for AWS_ROLE_ARN's credentials with STS. Here an
// HTTP server plays STS (AWS_ENDPOINT_URL_STS) and hands out versitygw's keys.
func TestS3WithIRSA(t *testing.T) {
	gw := startVersityGW(t)
	isolateAWS(t)
	const jwt = "projected-serviceaccount-token"
	const role = "arn:aws:iam::111122223333:role/etcd-backup"
	var served atomic.Int32
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.Form.Get("Action") != "AssumeRoleWithWebIdentity" || r.Form.Get("WebIdentityToken") != jwt || r.Form.Get("RoleArn") != role {
			http.Error(w, fmt.Sprintf("unexpected request %v", r.Form), http.StatusBadRequest)
			return
		}
		served.Add(1)
		w.Header().Set("Content-Type", "text/xml")
		_, _ = fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>%s</AccessKeyId>
      <SecretAccessKey>%s</SecretAccessKey>
      <Expiration>%s</Expiration>
    </Credentials>
    <AssumedRoleUser><Arn>%s/session</Arn><AssumedRoleId>AROA:session</AssumedRoleId></AssumedRoleUser>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>`, backuptest.AccessKeyID, backuptest.SecretAccessKey, time.Now().Add(time.Hour).UTC().Format(time.RFC3339), role)
	}))
	defer sts.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(jwt), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ROLE_ARN", role)
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", tokenFile)
	t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)

	store, loc, err := ForRestore(context.Background(), fake.NewSimpleClientset().CoreV1(), lending(t, "*"), "ns", &api.RestoreSpec{
		BackupStorageType: api.BackupStorageTypeS3,
		RestoreSource: api.RestoreSource{S3: &api.S3RestoreSource{Path: "backups/restored.backup", Endpoint: gw.URL, ForcePathStyle: true,
			CredentialSource: api.CredentialSourceOperatorServiceAccount}},
	})
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, store, loc.Key)
	if served.Load() == 0 {
		t.Fatal("the credentials did not come from STS")
	}
}

// An operator without an AWS identity says so when the store is opened, and
// the failure is retried: the identity may be being set up.
func TestS3WithoutAnIdentityIsReportedAtOpen(t *testing.T) {
	isolateAWS(t)
	_, _, err := ForBackup(context.Background(), fake.NewSimpleClientset().CoreV1(), lending(t, "ns"), "ns", s3IdentitySpec("http://127.0.0.1:1"))
	if err == nil || !strings.Contains(err.Error(), "spec.s3.credentialSource OperatorServiceAccount: the operator's AWS identity: the SDK's default chain found no credentials") {
		t.Fatalf("error %v", err)
	}
	if failure.IsPermanent(err) {
		t.Fatalf("a missing identity is Permanent, so it is never retried: %v", err)
	}

	t.Setenv("AWS_ACCESS_KEY_ID", backuptest.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", backuptest.SecretAccessKey)
	t.Setenv("AWS_REGION", "")
	_ = os.Unsetenv("AWS_REGION")
	_, _, err = ForBackup(context.Background(), fake.NewSimpleClientset().CoreV1(), lending(t, "ns"), "ns", s3IdentitySpec("http://127.0.0.1:1"))
	if err == nil || !strings.Contains(err.Error(), "names no AWS region: set AWS_REGION") {
		t.Fatalf("without a region: %v", err)
	}
}

// The operator's keys are in its environment, yet a namespace it does not lend
// its identity to is refused before they are looked at.
func TestS3OptInWhereTheIdentityIsNotLentIsRefused(t *testing.T) {
	isolateAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", backuptest.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", backuptest.SecretAccessKey)
	_, _, err := ForBackup(context.Background(), fake.NewSimpleClientset().CoreV1(), lending(t, "other"), "ns", s3IdentitySpec("http://127.0.0.1:1"))
	if err == nil || !strings.Contains(err.Error(), "does not lend its cloud identity to namespace ns") || !failure.IsPermanent(err) {
		t.Fatalf("error %v", err)
	}
}

// A bucket in another region than the pod's: spec.s3.region signs for the
// bucket's region, which versitygw checks, whatever AWS_REGION says.
func TestS3RegionOfTheBucketWinsOverThePods(t *testing.T) {
	gw := startVersityGW(t)
	isolateAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", backuptest.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", backuptest.SecretAccessKey)
	t.Setenv("AWS_REGION", "eu-central-1")
	spec := s3IdentitySpec(gw.URL)
	store, loc, err := ForBackup(context.Background(), fake.NewSimpleClientset().CoreV1(), lending(t, "ns"), "ns", spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Put(context.Background(), loc.Key, strings.NewReader("x")); err == nil {
		t.Fatal("versitygw took a request signed for another region; this test would prove nothing")
	}
	spec.S3.Region = backuptest.Region
	roundTripVia(t, spec, nil, "")

	// Without any region in the environment, the spec's is enough.
	t.Setenv("AWS_REGION", "")
	_ = os.Unsetenv("AWS_REGION")
	roundTripVia(t, spec, nil, "")
}
