package restore

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// keptInAnnotation moves er's status into StatusAnnotation, as the flow keeps
// it when the server does not store it.
func keptInAnnotation(er *api.EtcdRestore) *api.EtcdRestore {
	raw, err := json.Marshal(er.Status)
	if err != nil {
		panic(err)
	}
	if er.Annotations == nil {
		er.Annotations = map[string]string{}
	}
	er.Annotations[StatusAnnotation] = string(raw)
	er.Status = api.RestoreStatus{}
	return er
}

func withPhase(er *api.EtcdRestore, p api.RestorePhase) *api.EtcdRestore {
	er.Status.Phase = p
	return er
}

// serveBackups starts the handler for an operator in testNamespace that finds
// restores in the API and knows the tokens of those it runs.
func serveBackups(t *testing.T, clusterWide bool, open OpenFunc, restores ...k8sruntime.Object) string {
	t.Helper()
	var known []*api.EtcdRestore
	for _, o := range restores {
		if er, ok := o.(*api.EtcdRestore); ok && api.IsManagedBy(er, clusterWide) {
			known = append(known, er)
		}
	}
	return newBackupServer(t, clusterWide, open, known, restores...).url
}

// backupServer is a running BackupHandler and the fake clientsets behind it,
// whose Actions() are the API calls its requests made.
type backupServer struct {
	url  string
	etcd *fake.Clientset
	// kube holds the store's credentials.
	kube *kubefake.Clientset
}

// newBackupServer serves the restores stored in the API, knowing the tokens of
// known (as the restore flow tells the handler about the restores it runs). A
// nil open reads the store's credentials from the handler's kube clientset.
func newBackupServer(t *testing.T, clusterWide bool, open OpenFunc, known []*api.EtcdRestore, stored ...k8sruntime.Object) *backupServer {
	t.Helper()
	b := &backupServer{
		etcd: fake.NewSimpleClientset(stored...),
		kube: kubefake.NewSimpleClientset(awsSecretObject()),
	}
	if open == nil {
		open = StoreOpener(b.kube.CoreV1(), storage.CloudIdentity{})
	}
	tokens := NewTokens()
	for _, er := range known {
		tokens.remember(er, restoreToken{value: testToken})
	}
	h := &BackupHandler{Client: b.etcd, Tokens: tokens,
		Namespace: testNamespace, ClusterWide: clusterWide, Open: open, Log: testLog(t)}
	mux := http.NewServeMux()
	mux.Handle(BackupPathPrefix, h)
	mux.Handle(ArchivePathPrefix, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

// apiCalls are the API calls made since the last ClearActions.
func (b *backupServer) apiCalls() []string {
	var out []string
	for _, a := range append(b.etcd.Actions(), b.kube.Actions()...) {
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}

// get asks as the seed does, with the restore's token.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	return getWith(t, url, "Bearer "+string(testToken))
}

func getWith(t *testing.T, url, authorization string) (int, []byte) {
	t.Helper()
	code, _, body := request(t, url, authorization)
	return code, body
}

// request is a GET with the Authorization header given ("" for none).
func request(t *testing.T, url, authorization string) (int, http.Header, []byte) {
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
	return resp.StatusCode, resp.Header, body
}

func TestBackupServerServesTheVerifiedBackupOfARestoreInProgress(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	size := int64(len(snapshot))
	base := serveBackups(t, false, nil,
		inProgress(testNamespace, "running", "good.db", size, srv),
		inProgress(testNamespace, "resized", "good.db", size+1, srv),
		inProgress(testNamespace, "vanished", "gone.db", size, srv),
		keptInAnnotation(inProgress(testNamespace, "kept", "good.db", size, srv)),
	)
	tests := []struct {
		name, path string
		code       int
		body       string
	}{
		{"the original's short form", "/v1/backup/running", http.StatusOK, ""},
		{"namespace and name", "/v1/backup/ns/running", http.StatusOK, ""},
		{"in progress by the status kept in its annotation", "/v1/backup/kept", http.StatusOK, ""},
		{"backup replaced since verified", "/v1/backup/resized", http.StatusConflict, "replaced during the restore"},
		{"backup deleted since verified", "/v1/backup/vanished", http.StatusGone, "deleted after it was verified"},
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

// Every request the server does not serve gets the same answer, byte for byte,
// so that it tells a client nothing about which restores exist, in which
// namespace, or where they stand; and only a request that carries a restore's
// token may cost calls to the API server, whose client the operator shares
// with everything else it does.
func TestBackupServerRefusesEveryoneAlikeAndAsksTheAPIOnlyForATokenHolder(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	size := int64(len(snapshot))
	restore := func(namespace, name string, phase api.RestorePhase) *api.EtcdRestore {
		return withPhase(inProgress(namespace, name, "good.db", size, srv), phase)
	}
	running := restore(testNamespace, "running", api.RestorePhaseRestoring)
	done := restore(testNamespace, "done", api.RestorePhaseCompleted)
	failed := restore(testNamespace, "failed", api.RestorePhaseFailed)
	checking := restore(testNamespace, "checking", api.RestorePhaseFetching)
	deleted := restore(testNamespace, "deleted", api.RestorePhaseRestoring)
	recreated := restore(testNamespace, "recreated", api.RestorePhaseRestoring)
	successor := recreated.DeepCopy()
	successor.UID = "the-successor"
	b := newBackupServer(t, false, nil,
		[]*api.EtcdRestore{running, done, failed, checking, deleted, recreated},
		running, done, failed, checking, successor,
		restore("elsewhere", "running", api.RestorePhaseRestoring),
		clusterWide(restore(testNamespace, "annotated", api.RestorePhaseRestoring)))

	token := "Bearer " + string(testToken)
	wrong := "Bearer " + strings.Repeat("x", len(testToken))
	tests := []struct {
		name, path, authorization string
		// holdsToken: the request carries the restore's token, so it may
		// cost API calls.
		holdsToken bool
	}{
		{"a request without a token", "/v1/backup/running", "", false},
		{"a request with a wrong token", "/v1/backup/running", wrong, false},
		{"a request with a prefix of the token", "/v1/backup/running", "Bearer " + string(testToken[:8]), false},
		{"a request with the token in another scheme", "/v1/backup/running", "Basic " + string(testToken), false},
		{"a request with a wrong token for a completed restore", "/v1/backup/done", wrong, false},
		{"a request for a restore that does not exist", "/v1/backup/nobody", token, false},
		{"a request for a restore in another namespace than the operator's", "/v1/backup/elsewhere/running", token, false},
		{"a request for a restore a cluster-wide operator runs", "/v1/backup/annotated", token, false},
		{"a request without a restore's name", "/v1/backup/", token, false},
		{"a request with a path too deep", "/v1/backup/a/b/c", token, false},
		{"the token holder of a completed restore", "/v1/backup/done", token, true},
		{"the token holder of a failed restore", "/v1/backup/ns/failed", token, true},
		{"the token holder of a restore still verifying its backup", "/v1/backup/checking", token, true},
		{"the token holder of a restore deleted since", "/v1/backup/deleted", token, true},
		{"the token holder of a restore deleted and created again under its name", "/v1/backup/recreated", token, true},
	}
	type answer struct {
		code                                 int
		contentType, noSniff, authentication string
		body                                 string
	}
	var first *answer
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b.etcd.ClearActions()
			b.kube.ClearActions()
			code, header, body := request(t, b.url+tc.path, tc.authorization)
			got := answer{code, header.Get("Content-Type"), header.Get("X-Content-Type-Options"), header.Get("WWW-Authenticate"), string(body)}
			if code != http.StatusNotFound || bytes.Contains(body, snapshot) {
				t.Errorf("GET %s = %d %q, want 404, which the seed's fetch takes as final", tc.path, code, body)
			}
			if first == nil {
				first = &got
			} else if got != *first {
				t.Errorf("GET %s answered %+v, unlike the first refusal %+v", tc.path, got, *first)
			}
			if calls := b.apiCalls(); !tc.holdsToken && len(calls) > 0 {
				t.Errorf("GET %s without the restore's token made API calls %v", tc.path, calls)
			}
		})
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
	open := StoreOpener(kubefake.NewSimpleClientset(secret).CoreV1(), storage.CloudIdentity{})
	size := int64(len(snapshot))
	base := serveBackups(t, true, open,
		clusterWide(inProgress("elsewhere", "running", "good.db", size, srv)),
		inProgress("elsewhere", "namespaced", "good.db", size, srv))
	code, body := get(t, base+"/v1/backup/elsewhere/running")
	if code != http.StatusOK || !bytes.Equal(body, snapshot) {
		t.Fatalf("GET = %d (%d bytes)", code, len(body))
	}
	// Without the annotation, a namespaced operator of that namespace runs it.
	if code, body := get(t, base+"/v1/backup/elsewhere/namespaced"); code != http.StatusNotFound || string(body) != refusal {
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
		done <- ServeBackups(ctx, ln, &BackupHandler{Client: fake.NewSimpleClientset(), Tokens: NewTokens(), Namespace: testNamespace, Log: testLog(t)})
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

// A restarted operator has forgotten the tokens; it reads those of the restores
// in progress before it is ready, and only from Secrets the restores own.
func TestARestartedOperatorServesTheRestoresInProgressWithTheirTokens(t *testing.T) {
	srv, store := startS3(t)
	putObject(t, store, "good.db", snapshot)
	size := int64(len(snapshot))
	running := inProgress(testNamespace, "running", "good.db", size, srv)
	planted := inProgress(testNamespace, "planted", "good.db", size, srv)
	done := withPhase(inProgress(testNamespace, "done", "good.db", size, srv), api.RestorePhaseCompleted)
	restores := []k8sruntime.Object{running, planted, done}
	secrets := tokenSecrets(restores)
	// Someone made the Secret of planted's token to plant a token they know.
	secrets[1].(*corev1.Secret).OwnerReferences = nil
	kube := kubefake.NewSimpleClientset(append(secrets, awsSecretObject())...)
	etcd := fake.NewSimpleClientset(restores...)
	tokens := NewTokens()
	flow := NewFlow(Config{Kube: kube, Etcd: etcd, Log: testLog(t), OperatorNamespace: opNamespace, FetchImage: fetchImage, Tokens: tokens})
	flow.LoadTokens(context.Background(), []*api.EtcdRestore{running, planted, done})

	h := &BackupHandler{Client: etcd, Tokens: tokens, Namespace: testNamespace, Open: StoreOpener(kube.CoreV1(), storage.CloudIdentity{}), Log: testLog(t)}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	if code, body := get(t, ts.URL+"/v1/backup/running"); code != http.StatusOK || !bytes.Equal(body, snapshot) {
		t.Fatalf("GET of the restore in progress = %d (%d bytes), want the backup", code, len(body))
	}
	if code, body := get(t, ts.URL+"/v1/backup/planted"); code != http.StatusNotFound {
		t.Fatalf("GET with a token from a planted Secret = %d %q, want 404", code, body)
	}
	if _, _, ok := tokens.check(testNamespace, "done", string(testToken), ""); ok {
		t.Error("the token of an ended restore was read")
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
