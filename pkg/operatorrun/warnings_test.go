package operatorrun

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// The clients NewClients builds hand the apiserver's warnings to the log once:
// a CRD that drops status draws a warning on every status write, and leader
// election's Endpoints reads one at every renewal.
func TestApiserverWarningsAreLoggedOnce(t *testing.T) {
	const deprecated = "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"
	for _, tc := range []struct {
		name string
		// warnings the apiserver answers the requests with, one request each.
		warnings []string
		// want are the messages logged, in order; explained: the line names
		// the CRD dropping status and the fix.
		want      []string
		explained bool
	}{{
		name:     "a CRD without status in its schema is explained once, however often status is written",
		warnings: []string{`unknown field "status"`, `unknown field "status"`, `unknown field "status"`, `unknown field "status"`},
		want:     []string{statusDroppedMessage}, explained: true,
	}, {
		name: "a CRD older than the operator, dropping some status fields, is explained once for all of them",
		warnings: []string{`unknown field "status.memberDetails[0].dbSizeInUse"`, `unknown field "status.memberDetails[1].dbSizeInUse"`,
			`unknown field "status.maintenance"`, `unknown field "status.memberDetails[0].dbSizeInUse"`},
		want: []string{statusDroppedMessage}, explained: true,
	}, {
		name:     "any other warning is logged once per text",
		warnings: []string{deprecated, `unknown field "spec.pod.newField"`, deprecated, deprecated, `unknown field "spec.pod.newField"`},
		want:     []string{"apiserver warning: " + deprecated, `apiserver warning: unknown field "spec.pod.newField"`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			next := make(chan string, len(tc.warnings))
			for _, w := range tc.warnings {
				next <- w
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case text := <-next:
					w.Header().Add("Warning", fmt.Sprintf("299 - %q", text))
				default:
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"kind":"EtcdCluster","apiVersion":"etcd.database.coreos.com/v1beta2","metadata":{"name":"example","namespace":"ns"}}`))
			}))
			defer srv.Close()
			logger, hook := logtest.NewNullLogger()
			clients, err := NewClients(writeKubeconfig(t, srv.URL), "etcd-operator", logrus.NewEntry(logger))
			if err != nil {
				t.Fatal(err)
			}
			cl := &api.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: "ns"}}
			for range tc.warnings {
				if _, err := clients.Etcd.EtcdV1beta2().EtcdClusters("ns").Update(t.Context(), cl, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, e := range hook.AllEntries() {
				if e.Level != logrus.WarnLevel {
					t.Errorf("warning logged at level %s: %s", e.Level, e.Message)
				}
				got = append(got, e.Message)
				if !tc.explained {
					continue
				}
				if w, _ := e.Data["warning"].(string); !strings.HasPrefix(w, `unknown field "status`) {
					t.Errorf("field warning = %q, want the apiserver's words", w)
				}
				if fix, _ := e.Data["fix"].(string); !strings.Contains(fix, "example/crd/") || !strings.Contains(fix, "-create-crd") {
					t.Errorf("field fix = %q, want the CRDs of example/crd/ or -create-crd", fix)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("logged %q, want %q", got, tc.want)
			}
		})
	}
}
