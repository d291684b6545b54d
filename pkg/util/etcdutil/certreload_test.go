package etcdutil

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// TestRenewedServerCertificateIsServedWithoutRestart shows what renewing a
// static certificate by hand relies on, on every etcd minor version the
// operator runs: a member's secret volume is updated by the kubelet in
// place (a new directory of files, swapped in under the ..data link), and
// etcd reads its certificate files again for each new connection, so a
// renewed certificate from the same CA is served to new clients without a
// restart, while connections made before keep working. A CA added to the
// trusted bundle, on the other hand, is trusted only once etcd restarts.
func TestRenewedServerCertificateIsServedWithoutRestart(t *testing.T) {
	t.Parallel()
	const why = "renewed certificates are shown to be served without a restart on every supported etcd version"
	for _, v := range etcdtest.SupportedReleases {
		t.Run("etcd "+v.Version, func(t *testing.T) {
			t.Parallel()
			bin := filepath.Join(v.BinDir(t, why, "etcd"), "etcd")
			ca := etcdtest.NewCA(t, "cluster CA")
			client, clientKey := etcdtest.Issue(t, ca.Cert, ca.Key, &x509.Certificate{SerialNumber: big.NewInt(3), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			cfg, err := NewTLSConfig(client, clientKey, ca.PEM)
			if err != nil {
				t.Fatal(err)
			}
			volume := newSecretVolume(t)
			cert, key := ca.ServerCert(t, 0x100)
			volume.update(map[string][]byte{"ca.crt": ca.PEM, "server.crt": cert, "server.key": key})

			c := (&processCluster{t: t, bin: bin, tlsDir: volume.dir, tls: cfg}).startAll(1)
			m := c.members[0]
			before, old := servedSerial(t, m.clientURL, cfg)
			defer old.Close()
			if before != "100" {
				t.Fatalf("served serial %s, want 100", before)
			}

			cert, key = ca.ServerCert(t, 0x200)
			volume.update(map[string][]byte{"ca.crt": ca.PEM, "server.crt": cert, "server.key": key})
			after, conn := servedSerial(t, m.clientURL, cfg)
			conn.Close()
			if after != "200" {
				t.Errorf("a new connection after the renewal is served serial %s, want the renewed 200", after)
			}
			select {
			case <-m.done:
				t.Fatalf("etcd exited: %s", m.log.Tail(2000))
			default:
			}
			// The connection made before the renewal still carries
			// requests; a fresh client works with the renewed certificate.
			if err := old.SetDeadline(time.Now().Add(shortRequest)); err != nil {
				t.Fatal(err)
			}
			if _, err := fmt.Fprintf(old, "GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
				t.Errorf("the connection made before the renewal: %v", err)
			} else if n, err := old.Read(make([]byte, 64)); n == 0 {
				t.Errorf("the connection made before the renewal does not answer: %v", err)
			}
			if _, err := EndpointStatus(t.Context(), ClientConfig{TLS: cfg, DialTimeout: shortDial, RequestTimeout: shortRequest}, m.clientURL); err != nil {
				t.Errorf("a new client after the renewal: %v", err)
			}

			// A CA added to the trusted bundle is not: etcd reads its
			// trusted CA file once, at start, so a client of a new CA is
			// refused until the member restarts (the reason a CA is renewed
			// in ordered steps, with a restart of each member between).
			next := etcdtest.NewCA(t, "next CA")
			volume.update(map[string][]byte{"ca.crt": append(append([]byte{}, ca.PEM...), next.PEM...), "server.crt": cert, "server.key": key})
			nextClient, nextKey := etcdtest.Issue(t, next.Cert, next.Key, &x509.Certificate{SerialNumber: big.NewInt(4), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			nextCfg, err := NewTLSConfig(nextClient, nextKey, ca.PEM)
			if err != nil {
				t.Fatal(err)
			}
			nextClientCfg := ClientConfig{TLS: nextCfg, DialTimeout: shortDial, RequestTimeout: shortRequest}
			if _, err := EndpointStatus(t.Context(), nextClientCfg, m.clientURL); err == nil {
				t.Error("a client of a CA added to the trusted bundle is served before a restart: the docs' CA steps can drop their restarts")
			}
			c.stop(m)
			c.start(m, m.name+"="+m.peerURL, "new")
			c.waitServing(m)
			if _, err := EndpointStatus(t.Context(), nextClientCfg, m.clientURL); err != nil {
				t.Errorf("a client of a CA added to the trusted bundle, after a restart: %v", err)
			}
		})
	}
}

// servedSerial connects to the https endpoint url and returns the serial of
// the certificate the server presents, in hexadecimal, and the connection.
func servedSerial(t *testing.T, url string, cfg *tls.Config) (string, *tls.Conn) {
	t.Helper()
	conn, err := tls.Dial("tcp", url[len("https://"):], cfg)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	return fmt.Sprintf("%x", conn.ConnectionState().PeerCertificates[0].SerialNumber), conn
}

// secretVolume lays files out as the kubelet does in a secret volume: each
// version in its own directory, the ..data link pointing at the current
// one, and each key a link through ..data, so that an update swaps every
// file at once.
type secretVolume struct {
	t       *testing.T
	dir     string
	version int
}

func newSecretVolume(t *testing.T) *secretVolume {
	return &secretVolume{t: t, dir: t.TempDir()}
}

func (v *secretVolume) update(files map[string][]byte) {
	v.t.Helper()
	v.version++
	name := fmt.Sprintf("..v%d", v.version)
	if err := os.Mkdir(filepath.Join(v.dir, name), 0o700); err != nil {
		v.t.Fatal(err)
	}
	for k, data := range files {
		if err := os.WriteFile(filepath.Join(v.dir, name, k), data, 0o600); err != nil {
			v.t.Fatal(err)
		}
		link := filepath.Join(v.dir, k)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				v.t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(name, tmp); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		v.t.Fatal(err)
	}
}
