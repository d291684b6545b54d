package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// etcdProcess is one single-member etcd server on loopback ports.
type etcdProcess struct {
	clientURL string
	cmd       *exec.Cmd
	out       *etcdtest.Output
	done      chan struct{}
}

func startEtcdProcess(t *testing.T, bin, name, dataDir string) *etcdProcess {
	t.Helper()
	peer, client := "http://"+etcdtest.FreeAddr(t), "http://"+etcdtest.FreeAddr(t)
	p := &etcdProcess{clientURL: client, out: &etcdtest.Output{}, done: make(chan struct{})}
	// On a data directory that exists (a restored one) etcd ignores the
	// --initial-* flags: the membership is the one the restore wrote.
	p.cmd = exec.Command(bin, "--name="+name, "--data-dir="+dataDir,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--initial-cluster="+name+"="+peer, "--initial-cluster-state=new",
		"--log-level=warn", "--unsafe-no-fsync=true")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *etcdProcess) stop() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// client waits until the member serves a linearizable read and returns a client.
func (p *etcdProcess) client(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.clientURL}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		_, err := cli.Get(ctx, "health")
		cancel()
		if err == nil {
			return cli
		}
		select {
		case <-p.done:
			t.Fatalf("etcd exited: %s", p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd does not serve: %v\n%s", err, p.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A cluster goes on after its backup; then it is lost and restored from that
// backup with the seed's own restore command. Its clients must never see
// revisions go back: a write to the restored cluster gets a revision above every
// one the lost cluster gave, and a watch resumed from where the lost cluster
// was (what clientv3 does by itself after a reconnect) is told that history is
// compacted, instead of waiting for revisions the restored cluster counts again
// and then receiving other writes under them.
func TestRestoredRevisionsGoPastTheLostCluster(t *testing.T) {
	dir := etcdtest.BinDir36(t, "the restore is tested with the real etcd and etcdutl "+etcdtest.Version36, "etcd", "etcdutl")
	ctx := t.Context()

	old := startEtcdProcess(t, filepath.Join(dir, "etcd"), "old", filepath.Join(t.TempDir(), "old"))
	cli := old.client(t)
	if _, err := cli.Put(ctx, "/k/backed-up", "1"); err != nil {
		t.Fatal(err)
	}
	snap, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "latest.backup")
	f, err := os.Create(backup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, snap); err != nil {
		t.Fatal(err)
	}
	_ = snap.Close()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var lastRev int64
	for i := range 50 {
		resp, err := cli.Put(ctx, fmt.Sprintf("/k/after-%d", i), "1")
		if err != nil {
			t.Fatal(err)
		}
		lastRev = resp.Header.Revision
	}
	old.stop()

	// The seed's restore step, as the pod runs it, on this machine's paths.
	m := &etcdutil.Member{Name: "example-seed", Namespace: "ns", ClusterName: "example"}
	cmd, _ := restoreCommand(etcdtest.Version36, m, "token")
	volume := t.TempDir()
	restored, staging := filepath.Join(volume, "data"), filepath.Join(volume, "data.restoring")
	for i, arg := range cmd {
		switch {
		case i == 0:
			cmd[i] = filepath.Join(dir, filepath.Base(arg))
		case arg == BackupFile:
			cmd[i] = backup
		case arg == "--data-dir="+restoreStagingDir:
			cmd[i] = "--data-dir=" + staging
		}
	}
	step := DataDirArgs{DataDir: restored, StagingDir: staging, Tool: cmd}
	var out bytes.Buffer
	if err := RestoreDataDir(ctx, step, &out); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd, " "), err, out.String())
	}

	restoredEtcd := startEtcdProcess(t, filepath.Join(dir, "etcd"), m.Name, restored)
	cli = restoredEtcd.client(t)
	got, err := cli.Get(ctx, "/k/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != 1 || string(got.Kvs[0].Key) != "/k/backed-up" {
		t.Fatalf("the restored cluster holds %d keys under /k/, want exactly the backed-up one", len(got.Kvs))
	}
	put, err := cli.Put(ctx, "/k/new", "1")
	if err != nil {
		t.Fatal(err)
	}
	if put.Header.Revision <= lastRev {
		t.Errorf("a write to the restored cluster got revision %d, not above the lost cluster's %d: its clients see revisions go back", put.Header.Revision, lastRev)
	}

	// The bound only keeps a failing test from hanging: a watch of a future
	// revision never ends by itself.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, ok := <-cli.Watch(wctx, "/k/", clientv3.WithPrefix(), clientv3.WithRev(lastRev+1))
	switch {
	case !ok || wctx.Err() != nil:
		t.Errorf("a watch resumed from revision %d, where the lost cluster was, got nothing: it waits for revisions the restored cluster counts again", lastRev+1)
	case resp.CompactRevision == 0 || !errors.Is(resp.Err(), rpctypes.ErrCompacted):
		t.Errorf("a watch resumed from revision %d got %d event(s) (first at revision %d) and error %v, want the history reported compacted",
			lastRev+1, len(resp.Events), firstRevision(resp), resp.Err())
	}

	// The pod started afresh later (see datadir.go): the step runs again,
	// the backup long gone, and etcd comes back on the member's own data.
	restoredEtcd.stop()
	if err := os.Remove(backup); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := RestoreDataDir(ctx, step, &out); err != nil {
		t.Fatalf("the restore step run again: %v\n%s", err, out.String())
	}
	cli = startEtcdProcess(t, filepath.Join(dir, "etcd"), m.Name, restored).client(t)
	if again, err := cli.Get(ctx, "/k/new"); err != nil || len(again.Kvs) != 1 {
		t.Errorf("after the restore step ran again, the member lost a write made after the restore: %v", err)
	}
}

func firstRevision(resp clientv3.WatchResponse) int64 {
	if len(resp.Events) == 0 {
		return 0
	}
	return resp.Events[0].Kv.ModRevision
}

func TestRestoreBumpsTheRevisionWhereTheToolCan(t *testing.T) {
	m := &etcdutil.Member{Name: "example-seed", Namespace: "ns", ClusterName: "example"}
	for version, want := range map[string]bool{
		"3.2.32": false, "3.3.27": false, "3.4.23": false,
		"3.5.9": false, "3.5.10": true, "v3.5.21": true, "3.5.35": true, "3.5.10-rc.0": true,
		"3.6.0": true, "3.6.6": true, "3.7.0": true, "not-a-version": false,
	} {
		cmd, _ := restoreCommand(version, m, "token")
		args := strings.Join(cmd, " ")
		bumps := strings.Contains(args, fmt.Sprintf("--bump-revision=%d", RevisionBump))
		marks := strings.Contains(args, "--mark-compacted")
		if bumps != want || marks != want {
			t.Errorf("%s: restore %q: bump %v, mark compacted %v; want both %v", version, args, bumps, marks, want)
		}
	}
}
