package framework

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// KubernetesVersion is the Kubernetes release the local cluster builds
// (hack/local-cluster/lib.sh, K8S_VERSION); its kube-apiserver serves the
// tenants.
const KubernetesVersion = "v1.32.9"

// tenantAdminToken is the bearer token of the tenant's only user, a member of
// system:masters; AlwaysAllow would let anyone in anyway, the token only
// makes the requests authenticated, as a real client's are.
const tenantAdminToken = "tenant-admin-token"

// TenantAPIServer says how to run a kube-apiserver whose storage is an etcd
// cluster of the operator's: a tenant control plane, etcd's most demanding
// client (watch cache, many watches, compaction, leases).
type TenantAPIServer struct {
	// Endpoints are the etcd client URLs.
	Endpoints []string
	// ClientCert, ClientKey and CA are the PEM files of the operator's client
	// Secret (etcdutil.SecretClientCert, SecretClientKey, SecretClientCA), for
	// a cluster with client TLS; empty for plain http.
	ClientCert, ClientKey, CA []byte
	// BinDir holds kube-apiserver (default: KubeBinDir()).
	BinDir string
	// Dir receives the generated certificates, keys and the log (default: a new
	// temporary directory, removed by Stop).
	Dir string
	// Prefix is where the tenant keeps its objects in etcd (default: a prefix of
	// its own, so tenants on one cluster never meet).
	Prefix string
	// ReadyTimeout bounds the wait for /readyz (default 2 min: the apiserver
	// starts its post-start hooks and fills its watch cache first).
	ReadyTimeout time.Duration
}

// Tenant is a running kube-apiserver.
type Tenant struct {
	// Config reaches it as an administrator.
	Config *rest.Config
	// Prefix is its --etcd-prefix.
	Prefix string
	// Dir holds its files; LogFile its output.
	Dir, LogFile string

	removeDir bool
	cmd       *exec.Cmd
	exited    chan struct{}
}

// KubeBinDir is the directory of the Kubernetes binaries: $KUBE_BIN_DIR (make
// unit sets it), else that of $KUBECTL (the local cluster's env file sets
// it), else the local cluster's binary cache, where hack/kube-binaries.sh
// builds them.
func KubeBinDir() string {
	if dir := os.Getenv("KUBE_BIN_DIR"); dir != "" {
		return dir
	}
	if kubectl := os.Getenv("KUBECTL"); kubectl != "" {
		return filepath.Dir(kubectl)
	}
	return filepath.Join(ToolCacheDir(), "kubernetes-"+KubernetesVersion)
}

// StartTenantAPIServer starts kube-apiserver as a process of this host on a
// free loopback port, its storage at s.Endpoints, and returns once its
// /readyz answers ok. The process is not tied to ctx: Stop ends it.
func StartTenantAPIServer(ctx context.Context, s TenantAPIServer) (*Tenant, error) {
	if len(s.Endpoints) == 0 {
		return nil, fmt.Errorf("tenant apiserver: no etcd endpoints")
	}
	if s.BinDir == "" {
		s.BinDir = KubeBinDir()
	}
	bin := filepath.Join(s.BinDir, "kube-apiserver")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("tenant apiserver: %s is missing: run `bash hack/kube-binaries.sh` (it builds Kubernetes %s into the local cluster's cache, as `bash hack/local-cluster/up.sh` does), or set KUBE_BIN_DIR to the directory of a kube-apiserver",
			bin, KubernetesVersion)
	}
	if s.ReadyTimeout == 0 {
		s.ReadyTimeout = 2 * time.Minute
	}
	t := &Tenant{Prefix: s.Prefix, Dir: s.Dir, exited: make(chan struct{})}
	if t.Prefix == "" {
		t.Prefix = "/" + UniqueName("tenant")
	}
	if t.Dir == "" {
		dir, err := os.MkdirTemp("", "tenant-apiserver-")
		if err != nil {
			return nil, err
		}
		t.Dir, t.removeDir = dir, true
	}
	args, servingCert, err := tenantFiles(t.Dir, s)
	if err != nil {
		t.removeFiles()
		return nil, fmt.Errorf("tenant apiserver files: %w", err)
	}
	ports, err := etcdtest.Ports(1)
	if err != nil {
		t.removeFiles()
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	args = append(args,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports[0]),
		"--etcd-servers="+strings.Join(s.Endpoints, ","),
		"--etcd-prefix="+t.Prefix,
		"--storage-backend=etcd3",
		"--authorization-mode=AlwaysAllow",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.0.0.0/24",
	)
	t.LogFile = filepath.Join(t.Dir, "kube-apiserver.log")
	logf, err := os.Create(t.LogFile)
	if err != nil {
		t.removeFiles()
		return nil, err
	}
	t.cmd = exec.Command(bin, args...)
	t.cmd.Stdout, t.cmd.Stderr = logf, logf
	if err := t.cmd.Start(); err != nil {
		logf.Close()
		t.removeFiles()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		_ = t.cmd.Wait()
		logf.Close()
		close(t.exited)
	}()
	t.Config = &rest.Config{
		Host:            "https://" + addr,
		BearerToken:     tenantAdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: servingCert},
		// Writes in flight when etcd stops must end with an error the
		// workload counts, not hang it.
		Timeout: 15 * time.Second,
		// The workload paces itself; client-go's default limit (5 per second)
		// would make it measure the client instead of the server.
		QPS: -1,
	}
	if err := t.waitReady(ctx, s.ReadyTimeout); err != nil {
		tail := t.Stop()
		return nil, fmt.Errorf("%w\nkube-apiserver log (tail):\n%s", err, tail)
	}
	return t, nil
}

// tenantFiles writes the files the apiserver needs into dir and returns the
// flags naming them and the serving certificate (the client's CA).
func tenantFiles(dir string, s TenantAPIServer) (args []string, servingCert []byte, err error) {
	write := func(name string, data []byte) (string, error) {
		path := filepath.Join(dir, name)
		return path, os.WriteFile(path, data, 0o600)
	}
	cert, key, err := selfSignedServingCert()
	if err != nil {
		return nil, nil, err
	}
	saKey, err := newECKeyPEM()
	if err != nil {
		return nil, nil, err
	}
	files := []struct{ flag, name string }{
		{"--tls-cert-file", "serving.crt"},
		{"--tls-private-key-file", "serving.key"},
		{"--service-account-key-file", "sa.key"},
		{"--service-account-signing-key-file", "sa.key"},
		{"--token-auth-file", "tokens.csv"},
	}
	contents := map[string][]byte{
		"serving.crt": cert,
		"serving.key": key,
		"sa.key":      saKey,
		"tokens.csv":  []byte(tenantAdminToken + ",tenant-admin,tenant-admin,system:masters\n"),
	}
	if len(s.ClientCert) > 0 || len(s.ClientKey) > 0 || len(s.CA) > 0 {
		if len(s.ClientCert) == 0 || len(s.ClientKey) == 0 || len(s.CA) == 0 {
			return nil, nil, fmt.Errorf("etcd client TLS needs %s, %s and %s; got only some", etcdutil.SecretClientCert, etcdutil.SecretClientKey, etcdutil.SecretClientCA)
		}
		files = append(files,
			struct{ flag, name string }{"--etcd-certfile", etcdutil.SecretClientCert},
			struct{ flag, name string }{"--etcd-keyfile", etcdutil.SecretClientKey},
			struct{ flag, name string }{"--etcd-cafile", etcdutil.SecretClientCA})
		contents[etcdutil.SecretClientCert] = s.ClientCert
		contents[etcdutil.SecretClientKey] = s.ClientKey
		contents[etcdutil.SecretClientCA] = s.CA
	}
	args = append(args, "--cert-dir="+dir)
	for _, f := range files {
		path, err := write(f.name, contents[f.name])
		if err != nil {
			return nil, nil, err
		}
		args = append(args, f.flag+"="+path)
	}
	return args, cert, nil
}

// selfSignedServingCert is a certificate for 127.0.0.1 and localhost that is
// its own CA.
func selfSignedServingCert() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "tenant-apiserver"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// newECKeyPEM is a fresh private key, the service-account token signer.
func newECKeyPEM() ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// waitReady polls /readyz until it answers ok, the process exits, or timeout
// passes.
func (t *Tenant) waitReady(ctx context.Context, timeout time.Duration) error {
	client, err := tenantHTTPClient(t.Config)
	if err != nil {
		return err
	}
	return WaitFor(ctx, timeout, 250*time.Millisecond, "the tenant apiserver's /readyz at "+t.Config.Host, func(ctx context.Context) (bool, string, error) {
		select {
		case <-t.exited:
			return false, "", fmt.Errorf("kube-apiserver exited: %v", t.cmd.ProcessState)
		default:
		}
		ok, seen := readyz(ctx, client, t.Config)
		return ok, seen, nil
	})
}

// tenantHTTPClient is a plain HTTP client with cfg's TLS and token, for
// /readyz.
func tenantHTTPClient(cfg *rest.Config) (*http.Client, error) {
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}, nil
}

// readyz asks the apiserver whether it is ready; when it is not, seen says
// why (its failing checks).
func readyz(ctx context.Context, client *http.Client, cfg *rest.Config) (ok bool, seen string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/readyz", nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return true, ""
	}
	body := make([]byte, 2048)
	n, _ := resp.Body.Read(body)
	return false, fmt.Sprintf("%s: %s", resp.Status, FilterLines(string(body[:n]), "[-]"))
}

// Stop kills the apiserver, waits for it, and returns the tail of its log;
// the directory it made is removed.
func (t *Tenant) Stop() string {
	if t.cmd != nil && t.cmd.Process != nil {
		_ = t.cmd.Process.Kill()
		select {
		case <-t.exited:
		case <-time.After(10 * time.Second):
		}
	}
	tail := t.LogTail(4000)
	t.removeFiles()
	return tail
}

// LogTail is the last n bytes of the apiserver's output.
func (t *Tenant) LogTail(n int) string {
	out, err := os.ReadFile(t.LogFile)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}

func (t *Tenant) removeFiles() {
	if t.removeDir {
		_ = os.RemoveAll(t.Dir)
	}
}
