package tlsissue

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// TestCARotationKeepsAClusterServing carries out the ordered steps of a CA
// rotation of issued TLS on three real etcd processes whose certificates
// this package makes, the secrets laid out as the kubelet lays out a secret
// volume (every member mounts the same peer and server secrets):
//
//	a. a new CA; the trusted CA of members and clients becomes old+new;
//	b. each member restarted in turn (etcd reads its CA files at start);
//	c. the leaves issued again from the new CA, in place, no restart;
//	d. the old CA dropped from the bundle; each member restarted in turn.
//
// After every step and every restart the cluster serves writes through each
// member (a member that restarted commits through its peers, so its peer
// handshakes work both ways), acknowledged writes are all there, and at the
// end a client of the old CA is refused while one of the new works.
func TestCARotationKeepsAClusterServing(t *testing.T) {
	t.Parallel()
	for _, v := range etcdtest.SupportedReleases {
		t.Run("etcd "+v.Version, func(t *testing.T) {
			t.Parallel()
			rotateCA(t, filepath.Join(v.BinDir(t, "a CA rotation is shown to keep a real cluster serving on every supported etcd version", "etcd"), "etcd"))
		})
	}
}

func rotateCA(t *testing.T, bin string) {
	now := time.Now()
	cluster := Cluster{Name: "rot", Namespace: "ns"}
	old, err := NewCA("old CA", now)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *CA, k Kind) map[string][]byte {
		t.Helper()
		data, err := ca.Issue(k, cluster, now, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	peer, server, client := issue(old, Peer), issue(old, Server), issue(old, Client)
	vol := &secretFiles{t: t, dir: t.TempDir()}
	vol.swap(peer, server)
	c := startTLSCluster(t, bin, vol, 3)
	written := &ackedWrites{}
	c.serves("before the rotation", clientTLS(t, client), written)

	// a. Trust both: the leaves stay, the CA files of every secret hold
	// old+new.
	next, err := NewCA("new CA", now)
	if err != nil {
		t.Fatal(err)
	}
	both := Bundle(old.CertPEM, next.CertPEM)
	vol.swap(Peer.Trusting(peer, both), Server.Trusting(server, both))
	client = Client.Trusting(client, both)
	c.serves("a: the bundle trusts both CAs", clientTLS(t, client), written)

	// b. Each member restarted, one at a time, to read the bundle.
	for _, m := range c.members {
		c.restart(m)
		c.serves("b: "+m.name+" restarted trusting both CAs", clientTLS(t, client), written)
	}

	// c. The leaves from the new CA, in place; both sides trust both CAs.
	peer, server = Peer.Trusting(issue(next, Peer), both), Server.Trusting(issue(next, Server), both)
	vol.swap(peer, server)
	oldClient := client
	client = Client.Trusting(issue(next, Client), both)
	c.serves("c: leaves of the new CA, a client of the new CA", clientTLS(t, client), written)
	c.serves("c: leaves of the new CA, a client of the old CA", clientTLS(t, oldClient), written)

	// d. The old CA dropped; each member restarted again.
	vol.swap(Peer.Trusting(peer, next.CertPEM), Server.Trusting(server, next.CertPEM))
	client = Client.Trusting(client, next.CertPEM)
	for _, m := range c.members {
		c.restart(m)
		c.serves("d: "+m.name+" restarted trusting the new CA only", clientTLS(t, client), written)
	}

	written.allThere(t, c.members[0].clientURL, clientTLS(t, client))
	for _, m := range c.members {
		cfg := etcdutil.ClientConfig{TLS: clientTLS(t, oldClient), DialTimeout: time.Second, RequestTimeout: 2 * time.Second}
		if _, err := etcdutil.EndpointStatus(t.Context(), cfg, m.clientURL); err == nil {
			t.Errorf("%s still serves a client of the old CA after the rotation", m.name)
		}
	}
}

// secretFiles lays out the peer and server secrets as one secret volume
// each would be: every version in its own directory, reached through a
// link that an update swaps at once, so that a certificate and its key
// always change together.
type secretFiles struct {
	t       *testing.T
	dir     string
	version int
}

func (v *secretFiles) path(key string) string { return filepath.Join(v.dir, "current", key) }

func (v *secretFiles) swap(secrets ...map[string][]byte) {
	v.t.Helper()
	v.version++
	name := fmt.Sprintf("v%d", v.version)
	if err := os.Mkdir(filepath.Join(v.dir, name), 0o700); err != nil {
		v.t.Fatal(err)
	}
	for _, data := range secrets {
		for k, b := range data {
			if err := os.WriteFile(filepath.Join(v.dir, name, k), b, 0o600); err != nil {
				v.t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(v.dir, "current.tmp")
	if err := os.Symlink(name, tmp); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "current")); err != nil {
		v.t.Fatal(err)
	}
}

// etcdProcess is one etcd process of a test cluster.
type etcdProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *etcdtest.Output
}

// run starts bin with args, its output kept for failure messages; name is
// the member's, for them.
func (p *etcdProcess) run(t *testing.T, name, bin string, args ...string) {
	t.Helper()
	p.log = &etcdtest.Output{}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p.done = make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
}

// kill stops the process and waits for it; killing a stopped one does
// nothing.
func (p *etcdProcess) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}

// certificateFlags are etcd's flags for the peer and server certificates
// of the volume, each side asking its peers and clients for one.
func (v *secretFiles) certificateFlags() []string {
	return []string{
		"--peer-client-cert-auth=true", "--peer-trusted-ca-file=" + v.path(etcdutil.SecretPeerCA),
		"--peer-cert-file=" + v.path(etcdutil.SecretPeerCert), "--peer-key-file=" + v.path(etcdutil.SecretPeerKey),
		"--client-cert-auth=true", "--trusted-ca-file=" + v.path(etcdutil.SecretServerCA),
		"--cert-file=" + v.path(etcdutil.SecretServerCert), "--key-file=" + v.path(etcdutil.SecretServerKey),
	}
}

type tlsMember struct {
	name, dir, peerURL, clientURL string
	etcdProcess
}

type tlsCluster struct {
	t       *testing.T
	bin     string
	vol     *secretFiles
	initial string
	members []*tlsMember
}

// startTLSCluster starts n members with peer and client TLS from vol, the
// flags of the operator's pods, and waits until each one serves.
func startTLSCluster(t *testing.T, bin string, vol *secretFiles, n int) *tlsCluster {
	t.Helper()
	c := &tlsCluster{t: t, bin: bin, vol: vol}
	ports := etcdtest.FreePorts(t, 2*n)
	var pairs []string
	for i := range n {
		m := &tlsMember{
			name:      fmt.Sprintf("m%d", i),
			dir:       filepath.Join(t.TempDir(), fmt.Sprintf("m%d", i)),
			peerURL:   fmt.Sprintf("https://127.0.0.1:%d", ports[2*i]),
			clientURL: fmt.Sprintf("https://127.0.0.1:%d", ports[2*i+1]),
		}
		c.members = append(c.members, m)
		pairs = append(pairs, m.name+"="+m.peerURL)
	}
	c.initial = strings.Join(pairs, ",")
	t.Cleanup(func() {
		for _, m := range c.members {
			c.stop(m)
		}
	})
	for _, m := range c.members {
		c.start(m)
	}
	return c
}

func (c *tlsCluster) start(m *tlsMember) {
	c.t.Helper()
	v := c.vol
	m.run(c.t, m.name, c.bin, append(v.certificateFlags(),
		"--name="+m.name, "--data-dir="+m.dir,
		"--listen-peer-urls="+m.peerURL, "--initial-advertise-peer-urls="+m.peerURL,
		"--listen-client-urls="+m.clientURL, "--advertise-client-urls="+m.clientURL,
		"--initial-cluster="+c.initial, "--initial-cluster-state=new",
		"--initial-cluster-token=tlsissue-rotation-test", "--log-level=warn",
		"--unsafe-no-fsync=true",
	)...)
}

func (c *tlsCluster) stop(m *tlsMember) { m.kill() }

// restart stops m and starts it again on its data: it reads its CA files
// anew.
func (c *tlsCluster) restart(m *tlsMember) {
	c.t.Helper()
	c.stop(m)
	c.start(m)
}

// ackedWrites are the keys whose writes etcd acknowledged.
type ackedWrites struct {
	mu   sync.Mutex
	keys []string
}

func (w *ackedWrites) add(k string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keys = append(w.keys, k)
}

// serves waits until every member serves a write made through it and read
// back linearizably through the next, with cfg; every write is kept for
// allThere.
func (c *tlsCluster) serves(stage string, cfg *tls.Config, written *ackedWrites) {
	c.t.Helper()
	for i, m := range c.members {
		readVia := c.members[(i+1)%len(c.members)]
		key := fmt.Sprintf("%s/%s", stage, m.name)
		deadline := time.Now().Add(60 * time.Second)
		var last error
		for {
			select {
			case <-m.done:
				c.t.Fatalf("%s: %s exited: %s", stage, m.name, m.log.Tail(2000))
			default:
			}
			if last = putAndRead(c.t, cfg, m.clientURL, readVia.clientURL, key); last == nil {
				written.add(key)
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("%s: a write through %s read back through %s: %v\n%s log: %s", stage, m.name, readVia.name, last, m.name, m.log.Tail(2000))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// putAndRead writes key through the member at via and reads it back
// linearizably through the one at readVia, with client TLS cfg.
func putAndRead(t *testing.T, cfg *tls.Config, via, readVia, key string) error {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	w, err := clientv3.New(clientv3.Config{Endpoints: []string{via}, TLS: cfg, DialTimeout: 2 * time.Second, Context: ctx})
	if err != nil {
		return err
	}
	defer w.Close()
	if _, err := w.Put(ctx, key, "v"); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	r, err := clientv3.New(clientv3.Config{Endpoints: []string{readVia}, TLS: cfg, DialTimeout: 2 * time.Second, Context: ctx})
	if err != nil {
		return err
	}
	defer r.Close()
	resp, err := r.Get(ctx, key)
	switch {
	case err != nil:
		return fmt.Errorf("get: %w", err)
	case len(resp.Kvs) != 1:
		return fmt.Errorf("%s not found through %s after it was acknowledged", key, readVia)
	}
	return nil
}

// allThere checks, through the member at endpoint, that every acknowledged
// write is still there.
func (w *ackedWrites) allThere(t *testing.T, endpoint string, cfg *tls.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: cfg, DialTimeout: 2 * time.Second, Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, k := range w.keys {
		resp, err := cl.Get(ctx, k)
		if err != nil || len(resp.Kvs) != 1 {
			t.Errorf("acknowledged write %s lost (%v)", k, err)
		}
	}
	if len(w.keys) == 0 {
		t.Error("no write was acknowledged")
	}
}

func clientTLS(t *testing.T, data map[string][]byte) *tls.Config {
	t.Helper()
	cert, key, ca := Client.Keys()
	cfg, err := etcdutil.NewTLSConfig(data[cert], data[key], data[ca])
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
