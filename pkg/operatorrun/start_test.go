package operatorrun

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// writeKubeconfig points a kubeconfig at url.
func writeKubeconfig(t *testing.T, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + url + `"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStartServesMetricsWithTheRequestCounter(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"}}`))
	}))
	defer api.Close()
	log := logrus.New()
	log.SetOutput(io.Discard)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	base, pctx, err := Start(ctx, "etcd-operator", writeKubeconfig(t, api.URL), "127.0.0.1:0", Identity{Namespace: "ns", PodName: "op"}, logrus.NewEntry(log))
	if err != nil {
		t.Fatal(err)
	}
	defer base.Stop()
	if base.Recorder == nil {
		t.Fatal("no event recorder")
	}
	if _, err := base.Clients.Kube.CoreV1().Pods("ns").Get(t.Context(), "p", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + base.Server.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `etcd_operator_kubernetes_requests_total{resource="pods",verb="get"} 1`; !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %q", want)
	}
	base.Stop()
	if pctx.Err() == nil {
		t.Error("Stop left the process's context running")
	}
}

func TestStartSaysWhichAddressItCouldNotListenOn(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	log := logrus.New()
	log.SetOutput(io.Discard)
	_, _, err = Start(t.Context(), "etcd-operator", writeKubeconfig(t, "http://127.0.0.1:1"), busy.Addr().String(), Identity{}, logrus.NewEntry(log))
	if err == nil || !strings.Contains(err.Error(), "listen on "+busy.Addr().String()) {
		t.Fatalf("Start = %v, want the address it could not listen on", err)
	}
}
