package checker

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// notEtcd is an HTTP/2 server without TLS that answers every request with
// 404 and no content type: what a gRPC client meets when its connection
// reaches a server that is not etcd's.
func notEtcd(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
	}), ReadHeaderTimeout: 5 * time.Second}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func TestTheLogNamesTheAddressEachConnectionReached(t *testing.T) {
	t.Parallel()
	c := startEtcd(t, 1)
	member := strings.TrimPrefix(c.endpoints()[0], "http://")
	stranger := notEtcd(t)

	log, hook := test.NewNullLogger()
	rem := newRemotes()
	ans := newAnswers(logrus.NewEntry(log), rem)
	for id, tc := range []struct {
		addr    string
		answers bool
	}{
		{member, true},
		{stranger, false},
	} {
		cli, err := newClient(Config{Endpoints: []string{"http://" + tc.addr}}, rem)
		if err != nil {
			t.Fatal(err)
		}
		if tc.answers {
			ans.learn(t.Context(), cli)
		}
		w := worker{id: id, cli: cli, cfg: &Config{Clients: 2, OpTimeout: 5 * time.Second}, answers: ans}
		ctx, cancel := w.opCtx(t.Context())
		resp, err := cli.Get(ctx, "/remotes")
		cancel()
		w.noteErr(err)
		if got := err == nil; got != tc.answers {
			t.Fatalf("client %d at %s: answered %v (err %v), want %v", id, tc.addr, got, err, tc.answers)
		}
		if err == nil {
			w.answered(t.Context(), resp.Header)
		}
		cli.Close()
	}
	ans.flush()

	var lines []string
	for _, e := range hook.AllEntries() {
		lines = append(lines, e.Message)
	}
	got := strings.Join(lines, "\n")
	t.Logf("the log:\n%s", got)
	for _, want := range []string{
		"connection client 0: answered by member m0 (",
		") at " + member,
		"connection client 1: failed at " + stranger + ": ",
		"404",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the log has no %q:\n%s", want, got)
		}
	}
}
