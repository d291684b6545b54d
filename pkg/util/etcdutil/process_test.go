package etcdutil

import (
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// processMember is one etcd server running as a child process.
type processMember struct {
	name, peerURL, clientURL, dir string
	cmd                           *exec.Cmd
	log                           *etcdtest.Output
	done                          chan struct{}
}

// processCluster is an etcd cluster of child processes on loopback ports.
type processCluster struct {
	t   testing.TB
	bin string
	env []string
	// fsync: the members sync their writes to disk, as in production; the
	// tests leave it off, a benchmark whose figures depend on the disk
	// turns it on.
	fsync   bool
	members []*processMember
	// tlsDir, when set, holds the server.crt, server.key and ca.crt the
	// members serve clients with over https, requiring client certificates
	// (the flags of the operator's pods); tls is the clients' config.
	tlsDir string
	tls    *tls.Config
}

// startProcessCluster starts n members of the etcd binary bin, all at once,
// and waits until each one serves. env ("ETCD_MAX_LEARNERS=2") is added to
// the environment of every member, those that join later included.
func startProcessCluster(t testing.TB, bin string, n int, env ...string) *processCluster {
	t.Helper()
	return (&processCluster{t: t, bin: bin, env: env}).startAll(n)
}

// startAll starts n members of c, as startProcessCluster does.
func (c *processCluster) startAll(n int) *processCluster {
	t := c.t
	t.Helper()
	t.Cleanup(func() {
		for _, m := range c.members {
			c.stop(m)
		}
	})
	var pairs []string
	for i := range n {
		m := c.newMember(fmt.Sprintf("p%d", i))
		pairs = append(pairs, m.name+"="+m.peerURL)
	}
	for _, m := range c.members {
		c.start(m, strings.Join(pairs, ","), "new")
	}
	for _, m := range c.members {
		c.waitServing(m)
	}
	return c
}

// newMember picks the URLs and data directory of a member called name, not
// started yet; it is stopped with the cluster.
func (c *processCluster) newMember(name string) *processMember {
	c.t.Helper()
	m := &processMember{name: name, dir: filepath.Join(c.t.TempDir(), name)}
	// The ports of members not started yet are free again: a port is taken
	// only if no other member has it.
	for taken := true; taken; {
		ports := freePorts(c.t, 2)
		m.peerURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		m.clientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		if c.tlsDir != "" {
			m.clientURL = fmt.Sprintf("https://127.0.0.1:%d", ports[1])
		}
		taken = slices.ContainsFunc(c.members, func(o *processMember) bool {
			return o.peerURL == m.peerURL || o.peerURL == m.clientURL || o.clientURL == m.peerURL || o.clientURL == m.clientURL
		})
	}
	c.members = append(c.members, m)
	return m
}

// start runs m with --initial-cluster-state state: "new" for the members
// that create the cluster, "existing" for one that joins it.
func (c *processCluster) start(m *processMember, initialCluster, state string) {
	c.t.Helper()
	m.log = &etcdtest.Output{}
	m.cmd = exec.Command(c.bin,
		"--name="+m.name, "--data-dir="+m.dir,
		"--listen-peer-urls="+m.peerURL, "--initial-advertise-peer-urls="+m.peerURL,
		"--listen-client-urls="+m.clientURL, "--advertise-client-urls="+m.clientURL,
		"--initial-cluster="+initialCluster, "--initial-cluster-state="+state,
		"--initial-cluster-token=etcdutil-process-test", "--log-level=warn",
	)
	if !c.fsync {
		// As in the embedded tests: durability does not matter here, and
		// fsync dominates raft on a loaded machine.
		m.cmd.Args = append(m.cmd.Args, "--unsafe-no-fsync=true")
	}
	if c.tlsDir != "" {
		m.cmd.Args = append(m.cmd.Args, "--client-cert-auth=true", "--trusted-ca-file="+filepath.Join(c.tlsDir, "ca.crt"),
			"--cert-file="+filepath.Join(c.tlsDir, "server.crt"), "--key-file="+filepath.Join(c.tlsDir, "server.key"))
	}
	m.cmd.Env = append(os.Environ(), c.env...)
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", m.name, err)
	}
	m.done = make(chan struct{})
	go func() {
		_ = m.cmd.Wait()
		close(m.done)
	}()
}

// stop kills the member and waits for it; stopping a stopped one is a no-op.
func (c *processCluster) stop(m *processMember) {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	<-m.done
}

func (c *processCluster) waitServing(m *processMember) {
	c.t.Helper()
	poll(c.t, startTimeout, m.name+" serves clients", func() (bool, string) {
		select {
		case <-m.done:
			c.t.Fatalf("%s exited: %s", m.name, m.log.Tail(2000))
		default:
		}
		_, err := EndpointStatus(c.t.Context(), ClientConfig{TLS: c.tls, DialTimeout: shortDial, RequestTimeout: shortRequest}, m.clientURL)
		return err == nil, fmt.Sprint(err)
	})
}

func (c *processCluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// waitFor polls a cluster-wide condition with a generous deadline.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	poll(t, 30*time.Second, what, cond)
}

// TestDowngradeFrom36 drives etcd's downgrade API on a real 3.6 cluster:
// validate, enable (the cluster version and the storage drop to 3.5),
// cancel, enable again, and then every member restarted on an etcd 3.5
// server (the embedded one) on its own data, leader last; the downgrade
// ends by itself when the last 3.6 member is gone.
func TestDowngradeFrom36(t *testing.T) {
	t.Parallel()
	c := startProcessCluster(t, filepath.Join(etcdtest.BinDir36(t, "etcd "+etcdtest.Version36+" is needed to test what only a 3.6 cluster does", "etcd"), "etcd"), 3)
	ctx := t.Context()
	cfg := ClientConfig{Endpoints: c.endpoints()}
	waitHealthy(t, cfg, 3)

	// A new cluster decides its version, then migrates its storage to it.
	waitFor(t, "the cluster version and every member's storage reach 3.6", func() (bool, string) {
		h, err := ClusterHealth(ctx, cfg)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range h.Members {
			if !strings.HasPrefix(m.Version, "3.6.") || m.StorageVersion != "3.6.0" || m.Downgrade.Enabled || m.DBSizeQuota != 2<<30 {
				return false, fmt.Sprintf("%s: version %q, storage %q, downgrade %+v, quota %d", m.Name, m.Version, m.StorageVersion, m.Downgrade, m.DBSizeQuota)
			}
		}
		cv, err := ClusterVersion(ctx, cfg)
		return cv == "3.6.0", fmt.Sprintf("cluster version %q, %v", cv, err)
	})

	if _, err := DowngradeValidate(ctx, cfg, "3.4"); err == nil {
		t.Fatal("validating a downgrade by two minor versions succeeded")
	}
	// etcd answers with the cluster version's major.minor.
	if cv, err := DowngradeValidate(ctx, cfg, "3.5"); err != nil || cv != "3.6" {
		t.Fatalf("DowngradeValidate(3.5) = %q, %v; want the cluster version 3.6", cv, err)
	}
	// etcd 3.6 accepts a cancel with nothing to cancel (3.5 refuses it).
	if _, err := DowngradeCancel(ctx, cfg); err != nil {
		t.Fatalf("cancelling with no downgrade enabled = %v, want nil on 3.6", err)
	}

	enable := func() {
		t.Helper()
		if _, err := DowngradeEnable(ctx, cfg, "v3.5"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "every member runs the 3.5 protocol and storage", func() (bool, string) {
			h, err := ClusterHealth(ctx, cfg)
			if err != nil {
				return false, err.Error()
			}
			for _, m := range h.Members {
				if m.Downgrade != (DowngradeInfo{Enabled: true, TargetVersion: "3.5.0"}) || m.StorageVersion != "3.5.0" {
					return false, fmt.Sprintf("%s: downgrade %+v, storage %q", m.Name, m.Downgrade, m.StorageVersion)
				}
			}
			cv, err := ClusterVersion(ctx, cfg)
			return cv == "3.5.0", fmt.Sprintf("cluster version %q, %v", cv, err)
		})
	}
	enable()
	if _, err := DowngradeCancel(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cancelled downgrade is off on every member and the cluster back at 3.6", func() (bool, string) {
		h, err := ClusterHealth(ctx, cfg)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range h.Members {
			if m.Downgrade.Enabled {
				return false, m.Name + " still has the downgrade enabled"
			}
		}
		cv, err := ClusterVersion(ctx, cfg)
		return cv == "3.6.0", fmt.Sprintf("cluster version %q, %v", cv, err)
	})

	enable()
	leader, err := LeaderID(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	order := make([]*processMember, 0, len(c.members))
	var leaderMember *processMember
	for _, m := range c.members {
		st, err := EndpointStatus(ctx, cfg, m.clientURL)
		if err != nil {
			t.Fatal(err)
		}
		if st.Header.MemberId == leader {
			leaderMember = m
			continue
		}
		order = append(order, m)
	}
	for _, m := range append(order, leaderMember) {
		c.stop(m)
		tm := &testMember{name: m.name, peerURL: m.peerURL, clientURL: m.clientURL, dir: m.dir}
		var pairs []string
		for _, o := range c.members {
			pairs = append(pairs, o.name+"="+o.peerURL)
		}
		e, err := startEmbedded(t, tm, strings.Join(pairs, ","), "existing", nil, nil)
		if err != nil {
			t.Fatalf("start %s on etcd 3.5 after the downgrade was enabled: %v", m.name, err)
		}
		t.Cleanup(e.Close)
		tm.etcd = e
		waitReady(t, tm)
		waitHealthy(t, cfg, 3)
	}
	waitFor(t, "the finished downgrade leaves a 3.5 cluster", func() (bool, string) {
		h, err := ClusterHealth(ctx, cfg)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range h.Members {
			if !strings.HasPrefix(m.Version, "3.5.") {
				return false, fmt.Sprintf("%s runs %s", m.Name, m.Version)
			}
		}
		cv, err := ClusterVersion(ctx, cfg)
		return cv == "3.5.0", fmt.Sprintf("cluster version %q, %v", cv, err)
	})
}
