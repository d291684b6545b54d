package operatorrun

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

func TestIdentityFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr []string
	}{
		{"both set", map[string]string{EnvPodNamespace: "ns", EnvPodName: "op-1"}, nil},
		{"namespace missing", map[string]string{EnvPodName: "op-1"}, []string{"MY_POD_NAMESPACE is not set"}},
		{"name missing", map[string]string{EnvPodNamespace: "ns"}, []string{"MY_POD_NAME is not set"}},
		{"both missing, both reported", nil, []string{"MY_POD_NAMESPACE is not set", "MY_POD_NAME is not set"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, err := IdentityFromEnv(func(k string) string { return tc.env[k] })
			if len(tc.wantErr) == 0 {
				if err != nil || id.Namespace != "ns" || id.PodName != "op-1" {
					t.Fatalf("got %+v, %v", id, err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "downward API") {
					t.Fatalf("error %q does not explain %q", err, want)
				}
			}
		})
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestServerReadiness(t *testing.T) {
	srv, err := NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.Run(ctx) }()
	base := "http://" + srv.Addr()
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d", code)
	}
	if code, _ := get(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before ready = %d", code)
	}
	srv.SetUnreadyReason("add the rule X")
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready: add the rule X") {
		t.Fatalf("/readyz with a reason = %d %q", code, body)
	}
	srv.SetUnreadyReason("")
	if _, body := get(t, base+"/readyz"); strings.TrimSpace(body) != "not ready" {
		t.Fatalf("/readyz after the reason was cleared = %q", body)
	}
	srv.SetReady(true)
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz when ready = %d", code)
	}
	if code, body := get(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics = %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestServerServesProfilesOnlyWhenAsked(t *testing.T) {
	for _, asked := range []bool{false, true} {
		srv, err := NewServer("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if asked {
			srv.ServeProfiles()
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- srv.Run(ctx) }()
		code, body := get(t, "http://"+srv.Addr()+"/debug/pprof/goroutine?debug=1")
		served := code == http.StatusOK && strings.Contains(body, "goroutine profile")
		if served != asked {
			t.Errorf("profiles asked for: %v; /debug/pprof/goroutine = %d %.80q", asked, code, body)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestServerReportsAPortInUse(t *testing.T) {
	srv, err := NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.listener.Close()
	if _, err := NewServer(srv.Addr()); err == nil {
		t.Fatal("a second server on the same port started")
	}
}

func TestRunAsLeaderHoldsAndReleasesTheLease(t *testing.T) {
	kube := grant(fake.NewClientset(), "leases")
	ctx, cancel := context.WithCancel(context.Background())
	led := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- RunAsLeader(ctx, LeaderConfig{Kube: kube, Namespace: "ns", LockName: "etcd-operator", Identity: "op-1",
			Log: logrus.NewEntry(logrus.New())}, func(ctx context.Context) {
			close(led)
			<-ctx.Done()
		})
	}()
	select {
	case <-led:
	case <-time.After(10 * time.Second):
		t.Fatal("never became the leader")
	}
	lease, err := kube.CoordinationV1().Leases("ns").Get(context.Background(), "etcd-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "op-1" {
		t.Fatalf("holder %v", lease.Spec.HolderIdentity)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("clean shutdown returned %v", err)
	}
	lease, _ = kube.CoordinationV1().Leases("ns").Get(context.Background(), "etcd-operator", metav1.GetOptions{})
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == "op-1" {
		t.Fatal("the Lease was not released on shutdown")
	}
}

func TestEventSchemeKnowsOurKinds(t *testing.T) {
	s := EventScheme()
	for _, obj := range []runtime.Object{&api.EtcdCluster{}, &api.EtcdBackup{}, &api.EtcdRestore{}, &corev1.Pod{}} {
		if _, _, err := s.ObjectKinds(obj); err != nil {
			t.Errorf("%T: %v", obj, err)
		}
	}
}

func TestImageOfIsTheImageRunningTheBinary(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "sidecar", Image: "proxy:1"},
		{Name: "operator", Image: "openetcd/etcd-operator:v0.1.0", ImagePullPolicy: corev1.PullNever,
			Command: []string{"etcd-restore-operator", "--create-crd=true"}},
	}}}
	img, policy, err := ImageOf(pod, "etcd-restore-operator")
	if err != nil || img != "openetcd/etcd-operator:v0.1.0" || policy != corev1.PullNever {
		t.Fatalf("ImageOf = %s, %s, %v; want the container running the binary", img, policy, err)
	}
	pod.Spec.Containers = pod.Spec.Containers[:1]
	if img, policy, _ := ImageOf(pod, "etcd-restore-operator"); img != "proxy:1" || policy != corev1.PullIfNotPresent {
		t.Errorf("without a recognisable container the first one is used with IfNotPresent, got %s %s", img, policy)
	}
	pod.Spec.Containers = nil
	if _, _, err := ImageOf(pod, "etcd-restore-operator"); err == nil {
		t.Error("a pod without containers gave an image")
	}
}

func TestOwnPod(t *testing.T) {
	id := Identity{Namespace: "ops", PodName: "etcd-operator-1"}
	kube := fake.NewSimpleClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "etcd-operator-1"}})
	if p, err := OwnPod(t.Context(), kube, id, time.Second); err != nil || p.Name != id.PodName {
		t.Fatalf("OwnPod = %v, %v", p, err)
	}
	// A pod that does not exist is not waited for.
	_, err := OwnPod(t.Context(), kube, Identity{Namespace: "ops", PodName: "gone"}, time.Hour)
	if err == nil || !strings.Contains(err.Error(), "ops/gone") || !strings.Contains(err.Error(), EnvPodName) {
		t.Fatalf("OwnPod of a missing pod = %v, want an error naming it and %s", err, EnvPodName)
	}
}

func TestLogLevel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want logrus.Level
		ok   bool
	}{
		{"debug", logrus.DebugLevel, true},
		{"info", logrus.InfoLevel, true},
		{"warn", logrus.WarnLevel, true},
		{"WARNING", logrus.WarnLevel, true},
		{"error", logrus.ErrorLevel, true},
		{"trace", 0, false},
		{"panic", 0, false},
		{"loud", 0, false},
	} {
		l := DefaultLogLevel()
		err := l.Set(tc.in)
		if (err == nil) != tc.ok || tc.ok && l.Level != tc.want {
			t.Errorf("Set(%q) = %v, level %v; want ok=%v level %v", tc.in, err, l.Level, tc.ok, tc.want)
		}
		if !tc.ok && l.Level != logrus.InfoLevel {
			t.Errorf("a refused Set(%q) changed the level to %v", tc.in, l.Level)
		}
	}
}
