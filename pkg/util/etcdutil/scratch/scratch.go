// Package scratch restores an etcd snapshot as a restore does, with etcd's
// own restore code (etcdutl's), and serves it from an etcd member embedded in
// this process: a throwaway copy of a cluster, to replay changes onto and to
// read back. The member listens on the loopback interface only, on ports the
// kernel chooses, so nothing outside the process's network namespace (the
// pod) reaches it and no port of the host is taken for long.
package scratch

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Limits of the scratch member. Its requests are bounded by the largest
// value a cluster may hold, not by etcd's defaults: a replay sends each
// archived change as the cluster took it, whatever the cluster's own
// --max-request-bytes was. The quota is etcd's largest suggested backend,
// so that a replay onto a large snapshot does not raise the space alarm.
const (
	maxRequestBytes   = 64 << 20
	quotaBackendBytes = 8 << 30
	startTimeout      = time.Minute
)

// The member's name, and the peer URL it is recorded with: a placeholder,
// since one member never calls a peer, and it listens on a port chosen when
// it starts.
const (
	memberName = "scratch"
	peerURL    = "http://127.0.0.1:2380"
)

// Options say where and how a scratch member runs.
type Options struct {
	// Dir is where its data directory is made ("" is the system's temporary
	// directory); it needs room for the snapshot restored and what is
	// replayed onto it.
	Dir string
	// Log receives etcd's own log; nil discards it (errors are returned).
	Log *zap.Logger
}

// Member is a scratch etcd member serving a restored snapshot.
type Member struct {
	// Client is a client of the member; Close closes it.
	Client *clientv3.Client
	etcd   *embed.Etcd
	dir    string
}

// Start restores the snapshot file at snapshotPath (etcd's snapshot, its
// sha256 trailer included: the restore checks it) into a new data directory
// under opts.Dir, starts an embedded member on it and waits until it serves.
// The caller closes the member, which removes the directory; on an error
// nothing is left running or on disk.
func Start(ctx context.Context, snapshotPath string, opts Options) (m *Member, err error) {
	lg := opts.Log
	if lg == nil {
		lg = zap.NewNop()
	}
	// etcd ends the process on what it cannot go on with (a logger's Fatal
	// calls os.Exit, even a discarding logger's). Here that is a scratch copy
	// failing, not this process: Fatal panics instead, and start recovers.
	lg = lg.WithOptions(zap.WithFatalHook(zapcore.WriteThenPanic))
	parent, err := os.MkdirTemp(opts.Dir, "scratch-etcd-*")
	if err != nil {
		return nil, fmt.Errorf("create a directory to restore the snapshot in (it needs room for the restored database): %w", err)
	}
	m = &Member{dir: parent}
	defer func() {
		if err != nil {
			_ = m.Close()
			m = nil
		}
	}()
	// etcd panics on a database it cannot read (a damaged lease record,
	// say) while it restores it or builds the server, in this goroutine: the
	// snapshot's failure, not this process's. What etcd had started by then
	// (its raft loop, the open database) is not stopped: a snapshot that
	// fails so costs a little memory until the process restarts.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("etcd failed on the restored snapshot: %v", r)
		}
	}()
	dataDir := filepath.Join(parent, "data")
	if err := snapshot.NewV3(lg).Restore(snapshot.RestoreConfig{
		SnapshotPath:        snapshotPath,
		Name:                memberName,
		OutputDataDir:       dataDir,
		PeerURLs:            []string{peerURL},
		InitialCluster:      memberName + "=" + peerURL,
		InitialClusterToken: memberName,
	}); err != nil {
		return m, fmt.Errorf("restore the snapshot with etcd's restore: %w", err)
	}
	if err := m.start(ctx, dataDir, lg); err != nil {
		return m, err
	}
	return m, nil
}

// start starts the member on dataDir, then its client.
func (m *Member) start(ctx context.Context, dataDir string, lg *zap.Logger) error {
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg := embed.NewConfig()
	cfg.Name = memberName
	cfg.Dir = dataDir
	cfg.ListenClientUrls = []url.URL{loopback}
	cfg.AdvertiseClientUrls = []url.URL{loopback}
	cfg.ListenPeerUrls = []url.URL{loopback}
	peer, err := url.Parse(peerURL)
	if err != nil {
		return err
	}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = memberName + "=" + peerURL
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	cfg.MaxRequestBytes = maxRequestBytes
	cfg.MaxTxnOps = 1 << 16
	cfg.QuotaBackendBytes = quotaBackendBytes
	// A copy thrown away at the end: nothing needs to survive a crash, and
	// fsync would only slow the replay.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd on the restored snapshot: %w", err)
	}
	m.etcd = e
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return fmt.Errorf("etcd stopped before it served the restored snapshot: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("etcd did not serve the restored snapshot: %w", ctx.Err())
	case <-time.After(startTimeout):
		return fmt.Errorf("etcd did not serve the restored snapshot within %v", startTimeout)
	}
	endpoint := "http://" + e.Clients[0].Addr().String()
	m.Client, err = clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		MaxCallSendMsgSize: maxRequestBytes + 1<<20})
	if err != nil {
		return fmt.Errorf("connect to the scratch etcd: %w", err)
	}
	return nil
}

// Close stops the member and removes its directory.
func (m *Member) Close() error {
	if m.Client != nil {
		_ = m.Client.Close()
	}
	if m.etcd != nil {
		m.etcd.Close()
	}
	if err := os.RemoveAll(m.dir); err != nil {
		return fmt.Errorf("remove the scratch etcd's directory: %w", err)
	}
	return nil
}
