package restore

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
)

// inProgress is a restore in phase Restoring whose plan pins key at size bytes.
func inProgress(namespace, name, key string, size int64, srv *backuptest.S3) *api.EtcdRestore {
	er := newRestore(name, key, srv)
	er.Namespace = namespace
	er.Spec.EtcdCluster.Name = name
	plan := &Plan{Source: er.Spec, Backup: VerifiedBackup{Path: testBucket + "/" + key, Size: size, SHA256: sha256Hex(snapshot)}}
	raw, err := plan.encode()
	if err != nil {
		panic(err)
	}
	er.UID = types.UID(namespace + "-" + name)
	er.Annotations = map[string]string{PlanAnnotation: raw, PlanMACAnnotation: planMAC(testToken, raw)}
	er.Status.Phase = api.RestorePhaseRestoring
	return er
}

// testToken is every test restore's token; tokenSecrets holds it for restores.
var testToken = []byte("0123456789abcdef0123456789abcdef")

func tokenSecrets(restores []k8sruntime.Object) []k8sruntime.Object {
	var out []k8sruntime.Object
	for _, o := range restores {
		er, ok := o.(*api.EtcdRestore)
		if !ok {
			continue
		}
		s, err := newTokenSecret(er)
		if err != nil {
			panic(err)
		}
		s.Data[TokenKey] = testToken
		out = append(out, s)
	}
	return out
}

func withPhase(er *api.EtcdRestore, p api.RestorePhase) *api.EtcdRestore {
	er.Status.Phase = p
	return er
}

// serveBackups starts the handler for an operator in opNamespace.
func serveBackups(t *testing.T, clusterWide bool, open OpenFunc, restores ...k8sruntime.Object) string {
	t.Helper()
	if open == nil {
		open = StoreOpener(kubefake.NewSimpleClientset(awsSecretObject()).CoreV1())
	}
	h := &BackupHandler{Client: fake.NewSimpleClientset(restores...), Kube: kubefake.NewSimpleClientset(tokenSecrets(restores)...),
		Namespace: testNamespace, ClusterWide: clusterWide, Open: open, Log: testLog(t)}
	mux := http.NewServeMux()
	mux.Handle(BackupPathPrefix, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// get asks as the seed does, with the restore's token.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	return getWith(t, url, "Bearer "+string(testToken))
}

func getWith(t *testing.T, url, authorization string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func TestBackupServerServesRestoresInProgressOnly(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	size := int64(len(snapshot))
	base := serveBackups(t, false, nil,
		inProgress(testNamespace, "running", "good.db", size, srv),
		withPhase(inProgress(testNamespace, "done", "good.db", size, srv), api.RestorePhaseCompleted),
		withPhase(inProgress(testNamespace, "failed", "good.db", size, srv), api.RestorePhaseFailed),
		withPhase(inProgress(testNamespace, "checking", "good.db", size, srv), api.RestorePhaseFetching),
		inProgress(testNamespace, "resized", "good.db", size+1, srv),
		inProgress(testNamespace, "vanished", "gone.db", size, srv),
		inProgress("elsewhere", "running", "good.db", size, srv),
		clusterWide(inProgress(testNamespace, "annotated", "good.db", size, srv)),
	)
	tests := []struct {
		name, path string
		code       int
		body       string
	}{
		{"the original's short form", "/v1/backup/running", http.StatusOK, ""},
		{"namespace and name", "/v1/backup/ns/running", http.StatusOK, ""},
		{"unknown restore", "/v1/backup/nobody", http.StatusNotFound, "no EtcdRestore ns/nobody"},
		{"completed restore", "/v1/backup/done", http.StatusNotFound, "is Completed"},
		{"failed restore", "/v1/backup/ns/failed", http.StatusNotFound, "is Failed"},
		{"restore still checking its backup", "/v1/backup/checking", http.StatusNotFound, "is Fetching"},
		{"another namespace without -cluster-wide", "/v1/backup/elsewhere/running", http.StatusNotFound, "only in namespace ns"},
		{"a restore for a cluster-wide operator", "/v1/backup/annotated", http.StatusNotFound, "other kind of restore operator"},
		{"backup replaced since verified", "/v1/backup/resized", http.StatusConflict, "replaced during the restore"},
		{"backup deleted since verified", "/v1/backup/vanished", http.StatusGone, "deleted after it was verified"},
		{"no name", "/v1/backup/", http.StatusNotFound, "use /v1/backup/"},
		{"too deep", "/v1/backup/a/b/c", http.StatusNotFound, "use /v1/backup/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, base+tc.path)
			if code != tc.code {
				t.Fatalf("GET %s = %d %q, want %d", tc.path, code, body, tc.code)
			}
			if tc.code == http.StatusOK {
				if !bytes.Equal(body, snapshot) {
					t.Fatalf("served %d bytes that differ from the %d-byte backup", len(body), len(snapshot))
				}
				return
			}
			if !strings.Contains(string(body), tc.body) {
				t.Errorf("body %q does not contain %q", body, tc.body)
			}
		})
	}

	resp, err := http.Post(base+"/v1/backup/running", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST = %d, want 405", resp.StatusCode)
	}
}

func clusterWide(er *api.EtcdRestore) *api.EtcdRestore {
	er.Annotations[api.ScopeAnnotation] = api.ScopeClusterWide
	return er
}

func TestBackupServerClusterWideServesEveryNamespace(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	secret := awsSecretObject()
	secret.Namespace = "elsewhere"
	open := StoreOpener(kubefake.NewSimpleClientset(secret).CoreV1())
	size := int64(len(snapshot))
	base := serveBackups(t, true, open,
		clusterWide(inProgress("elsewhere", "running", "good.db", size, srv)),
		inProgress("elsewhere", "namespaced", "good.db", size, srv))
	code, body := get(t, base+"/v1/backup/elsewhere/running")
	if code != http.StatusOK || !bytes.Equal(body, snapshot) {
		t.Fatalf("GET = %d (%d bytes)", code, len(body))
	}
	// Without the annotation, a namespaced operator of that namespace runs it.
	if code, body := get(t, base+"/v1/backup/elsewhere/namespaced"); code != http.StatusNotFound || !strings.Contains(string(body), "other kind of restore operator") {
		t.Fatalf("GET of an unannotated restore = %d %q", code, body)
	}
}

// gatedStore serves one object whose second half is held back until release is
// closed, so a test can see whether the first half reaches the client before the
// store has sent everything: a handler that buffered the object could not.
type gatedStore struct {
	backup.Store
	data    []byte
	release chan struct{}
}

func (s *gatedStore) Get(context.Context, string) (io.ReadCloser, int64, error) {
	half := len(s.data) / 2
	return io.NopCloser(io.MultiReader(bytes.NewReader(s.data[:half]), &gated{r: bytes.NewReader(s.data[half:]), release: s.release})), int64(len(s.data)), nil
}

type gated struct {
	r       io.Reader
	release chan struct{}
}

func (g *gated) Read(p []byte) (int, error) {
	<-g.release
	return g.r.Read(p)
}

func TestBackupServerStreams(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	store := &gatedStore{data: data, release: make(chan struct{})}
	open := func(context.Context, string, *api.RestoreSpec) (backup.Store, storage.Location, error) {
		return store, storage.Location{Bucket: testBucket, Key: "big.db"}, nil
	}
	base := serveBackups(t, false, open, inProgress(testNamespace, "big", "big.db", int64(len(data)), nil))

	// Headers and the first half must arrive while the store still holds back
	// the second half.
	type result struct {
		resp  *http.Response
		first []byte
		err   error
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/backup/big", nil)
		req.Header.Set("Authorization", "Bearer "+string(testToken))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		first := make([]byte, 64<<10)
		_, err = io.ReadFull(resp.Body, first)
		got <- result{resp: resp, first: first, err: err}
	}()
	var r result
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		close(store.release)
		t.Fatal("nothing reached the client before the whole object was read from the store: the handler buffers it")
	}
	close(store.release)
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer func() { _ = r.resp.Body.Close() }()
	if r.resp.StatusCode != http.StatusOK || r.resp.ContentLength != int64(len(data)) {
		t.Fatalf("status %d, content length %d", r.resp.StatusCode, r.resp.ContentLength)
	}
	rest, err := io.ReadAll(r.resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(r.first, rest...), data) {
		t.Fatal("the streamed object differs")
	}
}

func TestBackupServerStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- ServeBackups(ctx, ln, &BackupHandler{Client: fake.NewSimpleClientset(), Kube: kubefake.NewSimpleClientset(), Namespace: testNamespace, Log: testLog(t)})
	}()
	code, _ := get(t, "http://"+ln.Addr().String()+"/v1/backup/none")
	if code != http.StatusNotFound {
		t.Fatalf("GET = %d", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ServeBackups did not return after its context ended")
	}
}

func TestBackupServerServesOnlyWhoPresentsTheRestoresToken(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	base := serveBackups(t, false, nil, inProgress(testNamespace, "running", "good.db", int64(len(snapshot)), srv))
	for _, tc := range []struct{ name, authorization string }{
		{"no token", ""},
		{"a wrong token", "Bearer " + strings.Repeat("x", len(testToken))},
		{"a prefix of the token", "Bearer " + string(testToken[:8])},
		{"the token in another scheme", "Basic " + string(testToken)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := getWith(t, base+"/v1/backup/running", tc.authorization)
			if code != http.StatusUnauthorized || bytes.Contains(body, snapshot) {
				t.Fatalf("GET = %d %q, want 401", code, body)
			}
		})
	}
	if code, _ := get(t, base+"/v1/backup/running"); code != http.StatusOK {
		t.Fatalf("GET with the token = %d", code)
	}
}

func TestBackupServerRefusesATokenSecretTheRestoreDoesNotOwn(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	er := inProgress(testNamespace, "running", "good.db", int64(len(snapshot)), srv)
	planted, err := newTokenSecret(er)
	if err != nil {
		t.Fatal(err)
	}
	planted.OwnerReferences = nil
	planted.Data[TokenKey] = testToken
	h := &BackupHandler{Client: fake.NewSimpleClientset(er), Kube: kubefake.NewSimpleClientset(planted), Namespace: testNamespace,
		Open: StoreOpener(kubefake.NewSimpleClientset(awsSecretObject()).CoreV1()), Log: testLog(t)}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	if code, body := get(t, ts.URL+"/v1/backup/running"); code != http.StatusNotFound {
		t.Fatalf("GET with a token from a planted Secret = %d %q, want 404", code, body)
	}
}

func TestBackupServerRefusesAnAlteredPlan(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	secretData := []byte("another object of the bucket, not for the seed")
	putObject(t, store, "other.db", secretData)
	er := inProgress(testNamespace, "running", "good.db", int64(len(snapshot)), srv)
	// Whoever may edit the EtcdRestore points its plan at another object.
	plan, _, err := PlanOf(er)
	if err != nil {
		t.Fatal(err)
	}
	plan.Backup.Path = testBucket + "/other.db"
	plan.Backup.Size = int64(len(secretData))
	raw, err := plan.encode()
	if err != nil {
		t.Fatal(err)
	}
	altered := er.DeepCopy()
	altered.Annotations[PlanAnnotation] = raw
	unsigned := er.DeepCopy()
	unsigned.Name, unsigned.UID = "unsigned", "ns-unsigned"
	delete(unsigned.Annotations, PlanMACAnnotation)
	base := serveBackups(t, false, nil, altered, unsigned)
	for _, path := range []string{"/v1/backup/running", "/v1/backup/unsigned"} {
		code, body := get(t, base+path)
		if code != http.StatusForbidden || bytes.Contains(body, secretData) {
			t.Fatalf("GET %s = %d %q, want 403", path, code, body)
		}
	}
}
