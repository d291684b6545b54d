package checker

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// member is one etcd server process on loopback ports.
type member struct {
	name, peerURL, clientURL string
	args                     []string
	cmd                      *exec.Cmd
	out                      *etcdtest.Output
	done                     chan struct{}
}

type etcdCluster struct {
	members []*member
}

// startEtcd starts an n-member cluster and waits until every member serves.
func startEtcd(t *testing.T, n int) *etcdCluster {
	t.Helper()
	bin := filepath.Join(etcdtest.BinDir36(t, "the checker is tested against a real etcd", "etcd"), "etcd")
	c := &etcdCluster{}
	var initial []string
	for i := range n {
		m := &member{name: fmt.Sprintf("m%d", i), peerURL: "http://" + etcdtest.FreeAddr(t), clientURL: "http://" + etcdtest.FreeAddr(t)}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			m.kill()
		}
	})
	for _, m := range c.members {
		m.args = []string{bin, "--name=" + m.name, "--data-dir=" + filepath.Join(t.TempDir(), m.name),
			"--listen-peer-urls=" + m.peerURL, "--initial-advertise-peer-urls=" + m.peerURL,
			"--listen-client-urls=" + m.clientURL, "--advertise-client-urls=" + m.clientURL,
			"--initial-cluster=" + strings.Join(initial, ","), "--initial-cluster-state=new",
			"--initial-cluster-token=checker-test", "--log-level=warn"}
		m.start(t)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range c.members {
		for {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			_, err := cli.Status(ctx, m.clientURL)
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s does not serve: %v\n%s", m.name, err, m.out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return c
}

func (c *etcdCluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// leader is the member that leads, asked of the first member that answers.
func (c *etcdCluster) leader(t *testing.T) *member {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, m := range c.members {
		st, err := cli.Status(t.Context(), m.clientURL)
		if err != nil {
			continue
		}
		for _, l := range c.members {
			s, err := cli.Status(t.Context(), l.clientURL)
			if err == nil && s.Header.MemberId == st.Leader {
				return l
			}
		}
	}
	t.Fatal("no member knows a leader")
	return nil
}

// start runs the member's etcd, again on the same data after a kill.
func (m *member) start(t *testing.T) {
	t.Helper()
	m.out = &etcdtest.Output{}
	m.cmd = exec.Command(m.args[0], m.args[1:]...)
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", m.name, err)
	}
	done := make(chan struct{})
	m.done = done
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(done) }(m.cmd)
}

func (m *member) kill() {
	if m.cmd != nil && m.cmd.Process != nil {
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}
