package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// A tenant apiserver on an etcd 3.5 serves writers and an informer: every
// acknowledged change reaches the informer, in order, and /readyz stays ok.
func TestTenantAPIServerOnEtcdLosesNoAcknowledgedChange(t *testing.T) {
	t.Parallel()
	etcd := startEtcdProcess(t)
	tenant := startTenant(t, etcd.clientURL)

	r, err := RunTenantLoad(t.Context(), tenant.Config, TenantLoad{Scenario: "steady", Duration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TENANT steady: %s", r)
	if !r.Passed() {
		t.Errorf("the informer does not show what was acknowledged: %s\n%s", r, strings.Join(r.Examples, "\n"))
	}
	if r.Acked == 0 {
		t.Errorf("no write was acknowledged: %s", r)
	}
	if r.ReadyzFailures > 0 {
		t.Errorf("/readyz failed with etcd up all along: %s\nkube-apiserver log:\n%s", r, tenant.LogTail(4000))
	}
}

// etcd stopped for a few seconds and started again on its data, under a
// tenant apiserver at work: writes fail while it is down, but no change the
// apiserver acknowledged is lost, and the informer catches up on all of them.
func TestTenantAPIServerOverEtcdRestartLosesNoAcknowledgedChange(t *testing.T) {
	t.Parallel()
	etcd := startEtcdProcess(t)
	tenant := startTenant(t, etcd.clientURL)

	const downFor = 5 * time.Second
	fault := make(chan error, 1)
	go func() {
		fault <- func() error {
			if err := sleepCtx(t, 5*time.Second); err != nil {
				return err
			}
			etcd.kill()
			if err := sleepCtx(t, downFor); err != nil {
				return err
			}
			return etcd.start()
		}()
	}()
	r, err := RunTenantLoad(t.Context(), tenant.Config, TenantLoad{Scenario: "etcd-restart", Duration: 20 * time.Second})
	if ferr := <-fault; ferr != nil {
		t.Fatalf("restart etcd: %v", ferr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TENANT etcd-restart: %s", r)
	if !r.Passed() {
		t.Errorf("the informer does not show what was acknowledged: %s\n%s\nkube-apiserver log:\n%s", r, strings.Join(r.Examples, "\n"), tenant.LogTail(4000))
	}
	if r.Acked == 0 {
		t.Errorf("no write was acknowledged: %s", r)
	}
	// The outage must have been seen, or the test proved nothing about it.
	if r.ReadyzFailures == 0 {
		t.Errorf("/readyz never failed while etcd was down for %s: %s", downFor, r)
	}
}

// A tenant apiserver reaches an etcd that requires client certificates with
// the certificate, key and CA of the operator's client Secret.
func TestTenantAPIServerOnEtcdWithClientTLS(t *testing.T) {
	t.Parallel()
	pki := etcdtest.NewPKI(t)
	etcd := startEtcdProcessWith(t, &pki)
	tenant, err := StartTenantAPIServer(t.Context(), TenantAPIServer{
		Endpoints:  []string{etcd.clientURL},
		ClientCert: pki.ClientCert, ClientKey: pki.ClientKey, CA: pki.CA,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tenant.Stop() })

	r, err := RunTenantLoad(t.Context(), tenant.Config, TenantLoad{Scenario: "client-tls", Duration: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TENANT client-tls: %s", r)
	if !r.Passed() || r.Acked == 0 {
		t.Errorf("the tenant over client TLS: %s\n%s", r, strings.Join(r.Examples, "\n"))
	}
}

// A tenant given only part of the client Secret is refused before it starts,
// with the files it lacks named.
func TestTenantAPIServerWithPartOfTheClientSecretIsRefused(t *testing.T) {
	_, err := StartTenantAPIServer(t.Context(), TenantAPIServer{Endpoints: []string{"https://127.0.0.1:2379"}, CA: []byte("ca")})
	if err == nil || !strings.Contains(err.Error(), "etcd client TLS needs") {
		t.Errorf("a tenant with the CA alone: %v, want the files it lacks named", err)
	}
}

// startTenant starts a tenant apiserver on endpoint, stopped when the test
// ends, its log kept in the test's output if the test fails.
func startTenant(t *testing.T, endpoint string) *Tenant {
	t.Helper()
	tenant, err := StartTenantAPIServer(t.Context(), TenantAPIServer{Endpoints: []string{endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tail := tenant.Stop()
		if t.Failed() {
			t.Logf("kube-apiserver log (tail):\n%s", tail)
		}
	})
	return tenant
}

// sleepCtx waits d, or less if the test ends first.
func sleepCtx(t *testing.T, d time.Duration) error {
	select {
	case <-t.Context().Done():
		return t.Context().Err()
	case <-time.After(d):
		return nil
	}
}

// etcdProcess is a one-member etcd 3.5 as a child process, which a test can
// kill and start again on the same data and ports, as a crashed member comes
// back.
type etcdProcess struct {
	t                  *testing.T
	bin, dir           string
	clientURL, peerURL string
	cmd                *exec.Cmd
	log                *etcdtest.Output
	done               chan struct{}
	// pki, when set, makes etcd serve clients over TLS and require their
	// certificates, as the operator's members do with client TLS.
	pki    *etcdtest.PKI
	pkiDir string
}

func startEtcdProcess(t *testing.T) *etcdProcess {
	t.Helper()
	return startEtcdProcessWith(t, nil)
}

// startEtcdProcessWith starts an etcd serving clients with pki's server
// certificate, or plain http when pki is nil.
func startEtcdProcessWith(t *testing.T, pki *etcdtest.PKI) *etcdProcess {
	t.Helper()
	dir := etcdtest.BinDir35(t, "the tenant apiserver tests run etcd 3.5 as a process", "etcd")
	ports := etcdtest.FreePorts(t, 2)
	e := &etcdProcess{
		t:         t,
		bin:       filepath.Join(dir, "etcd"),
		dir:       filepath.Join(t.TempDir(), "etcd"),
		clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		pki:       pki,
	}
	if pki != nil {
		e.clientURL = strings.Replace(e.clientURL, "http://", "https://", 1)
		e.pkiDir = t.TempDir()
		for name, data := range map[string][]byte{"ca.crt": pki.CA, "server.crt": pki.ServerCert, "server.key": pki.ServerKey} {
			if err := os.WriteFile(filepath.Join(e.pkiDir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(e.kill)
	if err := e.start(); err != nil {
		t.Fatal(err)
	}
	return e
}

// start runs etcd on e's data directory and waits until it serves.
func (e *etcdProcess) start() error {
	e.log = &etcdtest.Output{}
	e.cmd = exec.Command(e.bin,
		"--name=tenant", "--data-dir="+e.dir,
		"--listen-client-urls="+e.clientURL, "--advertise-client-urls="+e.clientURL,
		"--listen-peer-urls="+e.peerURL, "--initial-advertise-peer-urls="+e.peerURL,
		"--initial-cluster=tenant="+e.peerURL, "--log-level=warn")
	if e.pki != nil {
		e.cmd.Args = append(e.cmd.Args, "--client-cert-auth",
			"--trusted-ca-file="+filepath.Join(e.pkiDir, "ca.crt"),
			"--cert-file="+filepath.Join(e.pkiDir, "server.crt"),
			"--key-file="+filepath.Join(e.pkiDir, "server.key"))
	}
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	if err := e.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", e.bin, err)
	}
	done := make(chan struct{})
	e.done = done
	go func() {
		_ = e.cmd.Wait()
		close(done)
	}()
	client := &http.Client{Timeout: 2 * time.Second}
	if e.pki != nil {
		tr, err := e.clientTransport()
		if err != nil {
			return err
		}
		client.Transport = tr
	}
	return WaitFor(e.t.Context(), 30*time.Second, 100*time.Millisecond, "etcd to serve at "+e.clientURL, func(ctx context.Context) (bool, string, error) {
		select {
		case <-done:
			return false, "", fmt.Errorf("etcd exited: %s", e.log.Tail(2000))
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.clientURL+"/health", nil)
		if err != nil {
			return false, "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, string(body), nil
	})
}

// clientTransport presents the PKI's client certificate and trusts its CA.
func (e *etcdProcess) clientTransport() (*http.Transport, error) {
	cert, err := tls.X509KeyPair(e.pki.ClientCert, e.pki.ClientKey)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.pki.CA)
	return &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}}, nil
}

// kill ends etcd at once, as a crash does; killing a dead one is a no-op.
func (e *etcdProcess) kill() {
	if e.cmd == nil || e.cmd.Process == nil {
		return
	}
	_ = e.cmd.Process.Kill()
	<-e.done
}
