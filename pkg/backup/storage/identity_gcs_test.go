package storage

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// isolateGoogle clears every source of application default credentials but
// the metadata server, which the test plays.
func isolateGoogle(t *testing.T) {
	t.Helper()
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CLOUDSDK_CONFIG", home)
}

// gcsBehindAuth is fake-gcs-server behind a proxy that lets through only
// requests that carry token, which fake-gcs-server itself does not check.
func gcsBehindAuth(t *testing.T, token string) (endpoint string, refused *atomic.Int32) {
	t.Helper()
	srv, err := backuptest.StartGCS("backups")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	refused = &atomic.Int32{}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			refused.Add(1)
			http.Error(w, `{"error":{"code":401,"message":"no or wrong token"}}`, http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front.URL, refused
}

// GKE Workload Identity: the GKE metadata server answers the pod's token
// requests for the Google service account its ServiceAccount is bound to. The
// client libraries find it through GCE_METADATA_HOST, here an HTTP server that
// plays it.
func TestGCSWithGKEWorkloadIdentity(t *testing.T) {
	isolateGoogle(t)
	const token = "ya29.gke-workload-identity"
	endpoint, refused := gcsBehindAuth(t, token)
	var served atomic.Int32
	metadata := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "no Metadata-Flavor", http.StatusForbidden)
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/instance/service-accounts/default/token"):
			served.Add(1)
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": token, "expires_in": 3600, "token_type": "Bearer"})
		case strings.HasSuffix(r.URL.Path, "/project/project-id"):
			_, _ = w.Write([]byte("my-project"))
		case strings.HasSuffix(r.URL.Path, "/instance/service-accounts/default/email"):
			_, _ = w.Write([]byte("etcd-backup@my-project.iam.gserviceaccount.com"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer metadata.Close()
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(metadata.URL, "http://"))

	spec := &api.BackupSpec{StorageType: api.BackupStorageTypeGCS, BackupSource: api.BackupSource{GCS: &api.GCSBackupSource{
		Path: "backups/etcd.backup", Endpoint: endpoint, CredentialSource: api.CredentialSourceOperatorServiceAccount}}}
	store, loc, err := ForBackup(context.Background(), fake.NewSimpleClientset().CoreV1(), lending(t, "ns"), "ns", spec)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, store, loc.Key)
	if served.Load() == 0 || refused.Load() != 0 {
		t.Fatalf("tokens served by the metadata server: %d, requests refused by the store: %d", served.Load(), refused.Load())
	}

	// The emulator's endpoint without the opt-in is reached without
	// credentials, as before, and the proxy refuses it: the token above came
	// from the opt-in, not from the endpoint.
	spec.GCS.CredentialSource = ""
	plain, loc, err := ForBackup(context.Background(), fake.NewSimpleClientset().CoreV1(), CloudIdentity{}, "ns", spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := plain.Put(context.Background(), loc.Key, strings.NewReader("x")); err == nil || refused.Load() == 0 {
		t.Fatalf("a store without the opt-in was let in: %v", err)
	}
}

func TestGCSWithoutAnIdentityIsReportedAtOpen(t *testing.T) {
	isolateGoogle(t)
	metadata := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no service account for this pod", http.StatusNotFound)
	}))
	defer metadata.Close()
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(metadata.URL, "http://"))
	spec := &api.BackupSpec{StorageType: api.BackupStorageTypeGCS, BackupSource: api.BackupSource{GCS: &api.GCSBackupSource{
		Path: "backups/etcd.backup", CredentialSource: api.CredentialSourceOperatorServiceAccount}}}
	_, _, err := ForBackup(context.Background(), fake.NewSimpleClientset().CoreV1(), lending(t, "*"), "ns", spec)
	if err == nil || !strings.Contains(err.Error(), "spec.gcs.credentialSource OperatorServiceAccount: the operator's Google identity") {
		t.Fatalf("error %v", err)
	}
	if failure.IsPermanent(err) {
		t.Fatalf("a missing identity is Permanent, so it is never retried: %v", err)
	}
}
