package backuptest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/openetcd/etcd-operator/pkg/backup/absstore"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// Azurite's well-known development account, the same in every installation.
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// AzuriteVersion is what hack/azurite.sh installs by default.
const AzuriteVersion = "3.37.0"

// howToGetAzurite is appended to every failure to find or start Azurite.
const howToGetAzurite = "Azurite (the Azure Storage emulator) comes from npm: run `bash hack/azurite.sh` " +
	"(needs node and npm: apt-get install npm) and set AZURITE_BLOB to the path it prints, or run `make unit`, which does both"

// AzuriteBinary finds azurite-blob: $AZURITE_BLOB, the copy hack/azurite.sh
// installs into the tool cache, or one on PATH.
func AzuriteBinary() (string, error) {
	return toolBinary("AZURITE_BLOB", filepath.Join("etcd-operator-local", "tools", "azurite-"+AzuriteVersion, "node_modules", ".bin", "azurite-blob"),
		"azurite-blob", howToGetAzurite)
}

// Azurite is an azurite-blob process serving one account on a loopback port.
type Azurite struct {
	// URL is the account's blob service URL.
	URL string
	cmd *exec.Cmd
	out *etcdtest.Output
	// client reaches an https Azurite; nil is the SDK's default.
	client *http.Client

	done    chan struct{}
	waitErr error
}

// StartAzurite runs azurite-blob on a loopback port with its data under dir, waits
// until it answers and creates the given containers. The caller closes it.
func StartAzurite(ctx context.Context, dir string, containers ...string) (*Azurite, error) {
	return StartAzuriteOn(ctx, "127.0.0.1", dir, containers...)
}

// StartAzuriteOn is StartAzurite listening on host, e.g. the address by which
// pods of a local cluster reach the machine the tests run on.
func StartAzuriteOn(ctx context.Context, host, dir string, containers ...string) (*Azurite, error) {
	return startAzuriteWithContainers(ctx, host, dir, nil, containers)
}

func startAzuriteWithContainers(ctx context.Context, host, dir string, tlsFiles *AzuriteTLS, containers []string) (*Azurite, error) {
	bin, err := AzuriteBinary()
	if err != nil {
		return nil, err
	}
	a, err := startOnFreePort(dir, "azurite", "EADDRINUSE", func(dir string) (*Azurite, error) { return startAzurite(ctx, bin, host, dir, tlsFiles) })
	if err != nil {
		return nil, err
	}
	if err := a.CreateContainers(ctx, containers...); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// AzuriteTLS is how StartAzuriteOAuth serves https.
type AzuriteTLS struct {
	// CertFile and KeyFile are PEM files of a certificate for 127.0.0.1.
	CertFile, KeyFile string
	// Client trusts that certificate; CreateContainers uses it.
	Client *http.Client
}

// StartAzuriteOAuth is StartAzurite serving https and accepting Microsoft
// Entra bearer tokens besides the account key (--oauth basic: Azurite checks a
// token's issuer, audience and lifetime, not its signature, and only over
// https).
func StartAzuriteOAuth(ctx context.Context, dir string, tlsFiles AzuriteTLS, containers ...string) (*Azurite, error) {
	return startAzuriteWithContainers(ctx, "127.0.0.1", dir, &tlsFiles, containers)
}

func startAzurite(ctx context.Context, bin, host, dir string, tlsFiles *AzuriteTLS) (*Azurite, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(host, fmt.Sprint(ports[0]))
	a := &Azurite{URL: "http://" + addr + "/" + AzuriteAccount, out: &etcdtest.Output{}, done: make(chan struct{})}
	// --skipApiVersionCheck: the SDK may speak a newer API version than this
	// Azurite knows; the operations the store uses are old.
	args := []string{"--blobHost", host, "--blobPort", fmt.Sprint(ports[0]),
		"--location", dir, "--silent", "--skipApiVersionCheck", "--disableTelemetry"}
	if tlsFiles != nil {
		a.URL = "https://" + addr + "/" + AzuriteAccount
		a.client = tlsFiles.Client
		args = append(args, "--cert", tlsFiles.CertFile, "--key", tlsFiles.KeyFile, "--oauth", "basic")
	}
	a.cmd = exec.Command(bin, args...)
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w; %s", bin, err, howToGetAzurite)
	}
	go func() { a.waitErr = a.cmd.Wait(); close(a.done) }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			return a, nil
		}
		select {
		case <-a.done:
			return nil, fmt.Errorf("azurite-blob exited (%v) before it listened on %s:\n%s", a.waitErr, addr, a.out.String())
		case <-ctx.Done():
			a.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			a.Close()
			return nil, fmt.Errorf("azurite-blob does not listen on %s after a minute:\n%s", addr, a.out.String())
		}
	}
}

// CreateContainers creates containers in the development account.
func (a *Azurite) CreateContainers(ctx context.Context, containers ...string) error {
	if len(containers) == 0 {
		return nil
	}
	cred, err := azblob.NewSharedKeyCredential(AzuriteAccount, AzuriteKey)
	if err != nil {
		return err
	}
	var opts *azblob.ClientOptions
	if a.client != nil {
		opts = &azblob.ClientOptions{ClientOptions: policy.ClientOptions{Transport: a.client}}
	}
	c, err := azblob.NewClientWithSharedKeyCredential(a.URL+"/", cred, opts)
	if err != nil {
		return err
	}
	for _, name := range containers {
		if _, err := c.CreateContainer(ctx, name, nil); err != nil {
			return fmt.Errorf("create container %s in Azurite: %w", name, err)
		}
	}
	return nil
}

// StoreConfig is an absstore configuration for one container of this server.
func (a *Azurite) StoreConfig(container string) absstore.Config {
	return absstore.Config{Container: container, Account: AzuriteAccount, Key: AzuriteKey, Endpoint: a.URL}
}

// ABSSecretData is the data of an ABS secret that works with this server
// (the endpoint goes in the spec).
func ABSSecretData() map[string][]byte {
	return map[string][]byte{"storage-account": []byte(AzuriteAccount), "storage-key": []byte(AzuriteKey)}
}

// Output is what the server printed, for a failing test's log.
func (a *Azurite) Output() string { return a.out.String() }

// Close stops the server and waits for it.
func (a *Azurite) Close() {
	if a.cmd.Process != nil {
		_ = a.cmd.Process.Kill()
	}
	<-a.done
}
