package tlsissue

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// TestTLSSwitchedOnAndOffKeepsAClusterServing carries out, on three real
// etcd processes that start without TLS, the stages by which the operator
// switches TLS on in a running cluster, one member at a time, and then
// back off:
//
//	certificates: peers still listen and advertise http, but hold the peer
//	  certificates (so that they can dial a peer that listens https);
//	  clients are served http and https on the one client port;
//	peers secure: each member's peer URL is updated to https in etcd and
//	  the member restarted listening https;
//	on: clients are served https alone.
//
// Off goes the same way back. In every stage one member is restarted on its
// data (a member on a claim) and the last one replaced by a new member with
// no data (a member on an emptyDir), as the operator does. After every
// restart and replacement the cluster serves a write through each member,
// read back through the next, with the clients each stage serves; at the
// end every acknowledged write is there.
func TestTLSSwitchedOnAndOffKeepsAClusterServing(t *testing.T) {
	t.Parallel()
	for _, v := range etcdtest.SupportedReleases {
		t.Run("etcd "+v.Version, func(t *testing.T) {
			t.Parallel()
			switchTLS(t, filepath.Join(v.BinDir(t, "switching TLS in a running cluster is shown on every supported etcd version", "etcd"), "etcd"))
		})
	}
}

// switchStage is the form a member runs in, as the operator's stages of
// switching TLS are.
type switchStage int

const (
	stagePlain switchStage = iota
	stageCertificates
	stagePeersSecure
	stageSecure
)

func (s switchStage) peerScheme() string {
	if s >= stagePeersSecure {
		return "https"
	}
	return "http"
}

// clientSchemes are the schemes the member serves clients with on its one
// client port.
func (s switchStage) clientSchemes() []string {
	switch s {
	case stagePlain:
		return []string{"http"}
	case stageSecure:
		return []string{"https"}
	}
	return []string{"http", "https"}
}

type switchMember struct {
	name, dir      string
	peerPort, port int
	stage          switchStage
	id             uint64
	etcdProcess
}

func (m *switchMember) peerURL() string {
	return fmt.Sprintf("%s://127.0.0.1:%d", m.stage.peerScheme(), m.peerPort)
}

func (m *switchMember) clientURL(scheme string) string {
	return fmt.Sprintf("%s://127.0.0.1:%d", scheme, m.port)
}

type switchCluster struct {
	t       *testing.T
	bin     string
	vol     *secretFiles
	members []*switchMember
	// secure is the clients' configuration for https.
	secure *tls.Config
	// replaced counts the members replaced, for new names.
	replaced int
}

func switchTLS(t *testing.T, bin string) {
	now := time.Now()
	ca, err := NewCA("switch CA", now)
	if err != nil {
		t.Fatal(err)
	}
	cluster := Cluster{Name: "switch", Namespace: "ns"}
	issue := func(k Kind) map[string][]byte {
		t.Helper()
		data, err := ca.Issue(k, cluster, now, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	vol := &secretFiles{t: t, dir: t.TempDir()}
	vol.swap(issue(Peer), issue(Server))
	secure := clientTLS(t, issue(Client))

	c := &switchCluster{t: t, bin: bin, vol: vol, secure: secure}
	c.startNew(3)
	written := &ackedWrites{}
	c.serves("plain", written, nil)

	// On: certificates, peers secure, then clients served https alone.
	c.stage(stageCertificates, written, secure)
	c.stage(stagePeersSecure, written, secure)
	c.stage(stageSecure, written, secure)
	for _, m := range c.members {
		if err := putAndRead(t, nil, m.clientURL("http"), m.clientURL("http"), "refused"); err == nil {
			t.Errorf("%s still serves a plain client once TLS is on", m.name)
		}
	}

	// Off: clients served both again, peers back to http, the certificates
	// dropped.
	c.stage(stagePeersSecure, written, secure)
	c.stage(stageCertificates, written, secure)
	c.stage(stagePlain, written, secure)
	written.allThere(t, c.members[0].clientURL("http"), nil)
}

// stage moves every member to stage s: the first ones restarted on their
// data, the last one replaced. A member's peer URL changes scheme in etcd
// before it restarts listening with the new one (its peers cannot reach it
// meanwhile, as during any restart).
func (c *switchCluster) stage(s switchStage, written *ackedWrites, secure *tls.Config) {
	c.t.Helper()
	began := time.Now()
	defer func() { c.t.Logf("stage %d reached in %.1f s", s, time.Since(began).Seconds()) }()
	last := len(c.members) - 1
	for _, m := range c.members[:last] {
		if m.stage.peerScheme() != s.peerScheme() {
			c.updatePeerURL(m, s)
		}
		c.stop(m)
		m.stage = s
		c.start(m, "", "")
		c.serves(fmt.Sprintf("stage %d: %s restarted", s, m.name), written, secure)
	}
	c.replace(last, s)
	c.serves(fmt.Sprintf("stage %d: member %d replaced", s, last), written, secure)
}

// updatePeerURL changes m's peer URL to the scheme of stage s in etcd,
// through another member.
func (c *switchCluster) updatePeerURL(m *switchMember, s switchStage) {
	c.t.Helper()
	via := c.other(m)
	cl := c.client(via)
	defer cl.Close()
	url := fmt.Sprintf("%s://127.0.0.1:%d", s.peerScheme(), m.peerPort)
	ctx, cancel := context.WithTimeout(c.t.Context(), 10*time.Second)
	defer cancel()
	if _, err := cl.MemberUpdate(ctx, m.id, []string{url}); err != nil {
		c.t.Fatalf("update the peer URL of %s to %s: %v", m.name, url, err)
	}
}

// replace removes member i from etcd, stops it, and adds a new member with
// no data in its place, in stage s.
func (c *switchCluster) replace(i int, s switchStage) {
	c.t.Helper()
	old := c.members[i]
	cl := c.client(c.other(old))
	defer cl.Close()
	// etcd refuses a change to its membership while a member restarted
	// a moment ago has not been connected long enough, as the operator
	// finds it: the change is tried again.
	c.retry("remove "+old.name, func(ctx context.Context) error {
		_, err := cl.MemberRemove(ctx, old.id)
		return err
	})
	c.stop(old)
	c.replaced++
	ports := etcdtest.FreePorts(c.t, 2)
	m := &switchMember{
		name: fmt.Sprintf("r%d", c.replaced), dir: filepath.Join(c.t.TempDir(), "data"),
		peerPort: ports[0], port: ports[1], stage: s,
	}
	var added *clientv3.MemberAddResponse
	c.retry("add "+m.name, func(ctx context.Context) (err error) {
		added, err = cl.MemberAdd(ctx, []string{m.peerURL()})
		return err
	})
	m.id = added.Member.ID
	c.members[i] = m
	var pairs []string
	for _, o := range c.members {
		pairs = append(pairs, o.name+"="+o.peerURL())
	}
	c.start(m, strings.Join(pairs, ","), "existing")
}

// retry calls fn until it succeeds, for a minute at most.
func (c *switchCluster) retry(what string, fn func(context.Context) error) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(c.t.Context(), 10*time.Second)
		err := fn(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			var logs []string
			for _, m := range c.members {
				logs = append(logs, m.name+": "+m.log.Tail(1500))
			}
			c.t.Fatalf("%s: %v\n%s", what, err, strings.Join(logs, "\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (c *switchCluster) other(m *switchMember) *switchMember {
	for _, o := range c.members {
		if o != m {
			return o
		}
	}
	c.t.Fatal("no other member")
	return nil
}

// client is a client of member m: https once it serves clients https
// alone, else http.
func (c *switchCluster) client(m *switchMember) *clientv3.Client {
	c.t.Helper()
	url, cfg := m.clientURL("http"), (*tls.Config)(nil)
	if m.stage == stageSecure {
		url, cfg = m.clientURL("https"), c.secure
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, TLS: cfg, DialTimeout: 2 * time.Second, Context: c.t.Context()})
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

func (c *switchCluster) startNew(n int) {
	c.t.Helper()
	ports := etcdtest.FreePorts(c.t, 2*n)
	var pairs []string
	for i := range n {
		m := &switchMember{
			name: fmt.Sprintf("m%d", i), dir: filepath.Join(c.t.TempDir(), "data"),
			peerPort: ports[2*i], port: ports[2*i+1],
		}
		c.members = append(c.members, m)
		pairs = append(pairs, m.name+"="+m.peerURL())
	}
	c.t.Cleanup(func() {
		for _, m := range c.members {
			c.stop(m)
		}
	})
	for _, m := range c.members {
		c.start(m, strings.Join(pairs, ","), "new")
	}
	cl := c.client(c.members[0])
	defer cl.Close()
	ctx, cancel := context.WithTimeout(c.t.Context(), 30*time.Second)
	defer cancel()
	resp, err := cl.MemberList(ctx)
	if err != nil {
		c.t.Fatalf("list members: %v", err)
	}
	for _, em := range resp.Members {
		for _, m := range c.members {
			if em.Name == m.name {
				m.id = em.ID
			}
		}
	}
}

// start runs m in its stage; initial and state are for a member without
// data (a member restarted on its data needs neither).
func (c *switchCluster) start(m *switchMember, initial, state string) {
	c.t.Helper()
	v := c.vol
	var listen []string
	for _, s := range m.stage.clientSchemes() {
		listen = append(listen, m.clientURL(s))
	}
	args := []string{
		"--name=" + m.name, "--data-dir=" + m.dir,
		"--listen-peer-urls=" + m.peerURL(), "--initial-advertise-peer-urls=" + m.peerURL(),
		"--listen-client-urls=" + strings.Join(listen, ","),
		"--advertise-client-urls=" + listen[0],
		"--initial-cluster-token=tlsissue-switch-test", "--log-level=warn",
		"--unsafe-no-fsync=true",
	}
	if initial != "" {
		args = append(args, "--initial-cluster="+initial, "--initial-cluster-state="+state)
	}
	if m.stage != stagePlain {
		args = append(args, v.certificateFlags()...)
	}
	m.run(c.t, m.name, c.bin, args...)
}

func (c *switchCluster) stop(m *switchMember) { m.kill() }

// serves waits until every member serves a write made through it and read
// back linearizably through the next, in every scheme both serve (secure
// is the client configuration for https); every write is kept.
func (c *switchCluster) serves(stage string, written *ackedWrites, secure *tls.Config) {
	c.t.Helper()
	for i, m := range c.members {
		readVia := c.members[(i+1)%len(c.members)]
		for _, scheme := range m.stage.clientSchemes() {
			if !slices.Contains(readVia.stage.clientSchemes(), scheme) {
				continue
			}
			// The client configuration is given for http too: etcd's
			// client uses it for https URLs only, as the operator relies
			// on while members advertise either scheme.
			cfg := secure
			key := fmt.Sprintf("%s/%s/%s", stage, m.name, scheme)
			deadline := time.Now().Add(60 * time.Second)
			for {
				select {
				case <-m.done:
					c.t.Fatalf("%s: %s exited: %s", stage, m.name, m.log.Tail(2000))
				default:
				}
				last := putAndRead(c.t, cfg, m.clientURL(scheme), readVia.clientURL(scheme), key)
				if last == nil {
					written.add(key)
					break
				}
				if time.Now().After(deadline) {
					c.t.Fatalf("%s: a write through %s read back through %s over %s: %v\n%s log: %s", stage, m.name, readVia.name, scheme, last, m.name, m.log.Tail(3000))
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
}
