package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
}

func startEtcdProcess(t *testing.T) *etcdProcess {
	t.Helper()
	dir := etcdtest.BinDir35(t, "the tenant apiserver tests run etcd 3.5 as a process", "etcd")
	ports := etcdtest.FreePorts(t, 2)
	e := &etcdProcess{
		t:         t,
		bin:       filepath.Join(dir, "etcd"),
		dir:       filepath.Join(t.TempDir(), "etcd"),
		clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
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

// kill ends etcd at once, as a crash does; killing a dead one is a no-op.
func (e *etcdProcess) kill() {
	if e.cmd == nil || e.cmd.Process == nil {
		return
	}
	_ = e.cmd.Process.Kill()
	<-e.done
}
