package etcdutil

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestTimeoutsNameTheirCause: a call that times out
// says why, where the etcd client only says "context deadline exceeded".
func TestTimeoutsNameTheirCause(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	ownCA, err := NewTLSConfig(pki.clientCertPEM, pki.clientKeyPEM, pki.caPEM)
	if err != nil {
		t.Fatal(err)
	}
	// A TLS server whose certificate comes from another CA than the one
	// the client trusts.
	strange := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(strange.Close)

	tests := []struct {
		name string
		cfg  ClientConfig
		want string
	}{
		{"a member name that does not resolve",
			ClientConfig{Endpoints: []string{"http://example-abcdefghij.example.default.svc.invalid:2379"}},
			"does not resolve"},
		{"a port nothing listens on",
			ClientConfig{Endpoints: []string{deadEndpoint(t)}},
			"connection refused"},
		{"a name reached at its address, where nothing listens: the name is not looked up",
			ClientConfig{Endpoints: []string{strings.Replace(deadEndpoint(t), "127.0.0.1", "m0.nowhere.invalid", 1)},
				Addresses: map[string]string{"m0.nowhere.invalid": "127.0.0.1"}},
			"connection refused"},
		{"a server certificate from another CA",
			ClientConfig{Endpoints: []string{strings.Replace(strange.URL, "https://127.0.0.1", "https://localhost", 1)}, TLS: ownCA},
			"TLS handshake failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.DialTimeout, tc.cfg.RequestTimeout = shortDial, shortRequest
			_, err := ListMembers(t.Context(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want the cause %q", err, tc.want)
			}
		})
	}
}

func TestDiagnoseEndpointReadsTheURLFirst(t *testing.T) {
	for ep, want := range map[string]string{
		"http://[::1":           "is not a URL",
		"example-client:2379":   "is not a client URL",
		"ftp://example:2379":    "is not a client URL",
		"https://:2379/nothing": "is not a client URL",
	} {
		if got := DiagnoseEndpoint(t.Context(), ep, nil); !strings.Contains(got, want) {
			t.Errorf("DiagnoseEndpoint(%q) = %q, want %q", ep, got, want)
		}
	}
}

func TestNoLeaderIsNamed(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, nil)
	c.members[1].stop()
	c.members[2].stop()
	cfg := ClientConfig{Endpoints: c.endpoints(c.members[1], c.members[2]), DialTimeout: shortDial, RequestTimeout: shortRequest}
	// The survivor steps down once it misses its peers for an election
	// timeout; until then a request may still time out for lack of quorum
	// with a leader it believes in.
	poll(t, 30*time.Second, "a member list to fail with the cause", func() (bool, string) {
		_, err := ListMembers(t.Context(), cfg)
		return err != nil && strings.Contains(err.Error(), "no leader"), fmt.Sprintf("error %v", err)
	})
}
