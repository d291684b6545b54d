package restore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// The replay step of a restore to a point: after restore-datadir put the
// snapshot into a directory of its own, `etcd-restore-operator
// replay-archive`, run from the etcd image like restore-datadir, starts that
// image's etcd on it, listening on the loopback interface only, applies the
// archive's changes up to the point, which it gets from the restore
// operator's backup server (the pod needs no store credentials), reads back
// every key they touch and compares them with what the restore operator
// found in the archive, stops etcd, and only then renames the directory to the
// member's data directory. The member's etcd starts on nothing else: a replay
// that fails or is cut short leaves no data directory, and the step fails the
// seed, which fails the restore.
//
// When the pod is started again from scratch (see datadir.go), a missing data
// directory means the replay never finished: fetch-backup fetches the
// snapshot again, restore-datadir restores it again into the replay
// directory, replacing what a replay cut short left, and the replay starts
// over.

// ReplaySubcommand is the replay step: `etcd-restore-operator replay-archive ...`.
const ReplaySubcommand = "replay-archive"

// Flags of the replay-archive subcommand.
const (
	ReplayFlagDataDir        = "data-dir"
	ReplayFlagReplayDir      = "replay-dir"
	ReplayFlagURL            = "url"
	ReplayFlagTokenFile      = "token-file"
	ReplayFlagKeyFile        = "key-file"
	ReplayFlagEtcd           = "etcd"
	ReplayFlagName           = "name"
	ReplayFlagAfter          = "after"
	ReplayFlagRevision       = "revision"
	ReplayFlagRevisionBump   = "revision-bump"
	ReplayFlagChunksSHA256   = "chunks-sha256"
	ReplayFlagKeys           = "keys"
	ReplayFlagKeysSHA256     = "keys-sha256"
	ReplayFlagNewest         = "newest"
	ReplayFlagQuotaBytes     = "quota-backend-bytes"
	ReplayFlagMaxRequest     = "max-request-bytes"
	ReplayFlagMaxTxnOps      = "max-txn-ops"
	ReplayFlagTimeout        = "timeout"
	ReplayFlagTerminationLog = "termination-log"
)

// ReplayArgs are the arguments of the replay-archive subcommand.
type ReplayArgs struct {
	// DataDir is the member's data directory: when it exists, the replay ran
	// in this pod before, and nothing is done. ReplayDir is where
	// restore-datadir put the snapshot; it becomes DataDir once replayed.
	DataDir, ReplayDir string
	// URL is the archive of the restore on the backup server (ArchiveURL).
	URL string
	// TokenFile holds the restore's token (or TokenEnv has it); KeyFile the
	// key of an encrypted archive.
	TokenFile, KeyFile string
	// Etcd is the etcd binary of the image; Name the member's name.
	Etcd, Name string
	// After is the revision the snapshot's name records; Revision the last
	// to apply. RevisionBump is what restore-datadir added to the snapshot's
	// revision (RevisionBump, or 0).
	After, Revision, RevisionBump int64
	// ChunksSHA256, Keys and KeysSHA256 are the PointPlan's: what the replay
	// must get and leave.
	ChunksSHA256 string
	Keys         int64
	KeysSHA256   string
	// Newest says that Revision is the newest change the backup holds
	// (pointInTime.latest): a snapshot that holds more than it was taken
	// after the archive's last change, and is newer still, so it is kept as
	// it is instead of refused.
	Newest bool
	// Limits are the cluster's bounds, which the replay's etcd takes
	// (replay_limits.go).
	Limits ReplayLimits
	// Timeout bounds the whole step.
	Timeout        time.Duration
	TerminationLog string
}

// Args is the command line after the subcommand's name.
func (a ReplayArgs) Args() []string {
	args := []string{
		"--" + ReplayFlagDataDir + "=" + a.DataDir,
		"--" + ReplayFlagReplayDir + "=" + a.ReplayDir,
		"--" + ReplayFlagURL + "=" + a.URL,
		"--" + ReplayFlagEtcd + "=" + a.Etcd,
		"--" + ReplayFlagName + "=" + a.Name,
		"--" + ReplayFlagAfter + "=" + strconv.FormatInt(a.After, 10),
		"--" + ReplayFlagRevision + "=" + strconv.FormatInt(a.Revision, 10),
		"--" + ReplayFlagRevisionBump + "=" + strconv.FormatInt(a.RevisionBump, 10),
		"--" + ReplayFlagChunksSHA256 + "=" + a.ChunksSHA256,
		"--" + ReplayFlagKeys + "=" + strconv.FormatInt(a.Keys, 10),
		"--" + ReplayFlagKeysSHA256 + "=" + a.KeysSHA256,
	}
	if a.TokenFile != "" {
		args = append(args, "--"+ReplayFlagTokenFile+"="+a.TokenFile)
	}
	if a.KeyFile != "" {
		args = append(args, "--"+ReplayFlagKeyFile+"="+a.KeyFile)
	}
	if a.Newest {
		args = append(args, "--"+ReplayFlagNewest)
	}
	for _, l := range []struct {
		flag string
		n    int64
	}{{ReplayFlagQuotaBytes, a.Limits.QuotaBackendBytes}, {ReplayFlagMaxRequest, a.Limits.MaxRequestBytes}, {ReplayFlagMaxTxnOps, a.Limits.MaxTxnOps}} {
		if l.n > 0 {
			args = append(args, "--"+l.flag+"="+strconv.FormatInt(l.n, 10))
		}
	}
	if a.Timeout > 0 {
		args = append(args, "--"+ReplayFlagTimeout+"="+a.Timeout.String())
	}
	return args
}

// Validate says what the arguments lack, all at once.
func (a ReplayArgs) Validate() error {
	var problems []error
	if a.DataDir == "" || a.ReplayDir == "" || a.DataDir == a.ReplayDir {
		problems = append(problems, fmt.Errorf("--%s and --%s are required, and differ", ReplayFlagDataDir, ReplayFlagReplayDir))
	}
	if a.URL == "" || a.Etcd == "" || a.Name == "" {
		problems = append(problems, fmt.Errorf("--%s, --%s and --%s are required", ReplayFlagURL, ReplayFlagEtcd, ReplayFlagName))
	}
	if a.After < 1 || a.Revision <= a.After {
		problems = append(problems, fmt.Errorf("--%s must be positive and --%s after it", ReplayFlagAfter, ReplayFlagRevision))
	}
	if !sha256RE.MatchString(a.ChunksSHA256) || !sha256RE.MatchString(a.KeysSHA256) {
		problems = append(problems, fmt.Errorf("--%s and --%s must be hex sha256 digests", ReplayFlagChunksSHA256, ReplayFlagKeysSHA256))
	}
	if err := errors.Join(problems...); err != nil {
		return fmt.Errorf("%s: %w", ReplaySubcommand, err)
	}
	return nil
}

// ArchiveManifest is what the backup server says of a restore's archive: the
// chunks the seed replays, in order.
type ArchiveManifest struct {
	After    int64           `json:"after"`
	Revision int64           `json:"revision"`
	Chunks   []ManifestChunk `json:"chunks"`
}

// ManifestChunk is one chunk of the manifest: its object name (under the
// archive's prefix), which carries its revisions, time and sha256.
type ManifestChunk struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// ReplayResult is what a replay did.
type ReplayResult struct {
	// SnapshotRevision is the revision the restored snapshot held (its
	// content may be a little newer than its name says).
	SnapshotRevision int64
	// SnapshotIsNewest is set when, restoring the newest change, the
	// snapshot held everything the archive has, or more: nothing was
	// replayed.
	SnapshotIsNewest bool
	archive.Replayed
	// Keys is how many keys were read back and found as the archive says.
	Keys int
}

// ReplayArchive runs the replay step (see the top of this file). token is
// presented to the backup server; key decrypts an encrypted archive.
func ReplayArchive(ctx context.Context, a ReplayArgs, token string, key []byte, out io.Writer) (ReplayResult, error) {
	var res ReplayResult
	if a.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.Timeout)
		defer cancel()
	}
	done, err := Restored(a.DataDir)
	if err != nil {
		return res, err
	}
	if done {
		_, _ = fmt.Fprintf(out, "%s exists: the archive was replayed in this pod before; nothing to do\n", a.DataDir)
		return res, nil
	}
	if ok, err := Restored(a.ReplayDir); err != nil || !ok {
		if err == nil {
			err = errors.New("it does not exist")
		}
		return res, fmt.Errorf("%s, where %s should have restored the snapshot, is missing: %w", a.ReplayDir, RestoreDataDirSubcommand, err)
	}
	src := &archiveSource{url: strings.TrimSuffix(a.URL, "/"), token: token, key: key, client: &http.Client{}, log: out}
	chunks, err := src.manifest(ctx, a)
	if err != nil {
		return res, err
	}
	_, _ = fmt.Fprintf(out, "replaying %d archive chunks onto the snapshot of revision %d, up to revision %d\n", len(chunks), a.After, a.Revision)

	member, err := startLocalEtcd(ctx, a, out)
	if err != nil {
		return res, err
	}
	defer member.kill()
	res, err = replayOnto(ctx, member.client, a, chunks, src)
	if err != nil {
		return res, err
	}
	if err := member.stop(); err != nil {
		return res, err
	}
	if err := os.Rename(a.ReplayDir, a.DataDir); err != nil {
		return res, fmt.Errorf("put the replayed data directory in place: %w", err)
	}
	if err := syncDir(filepath.Dir(a.DataDir)); err != nil {
		return res, err
	}
	if res.SnapshotIsNewest {
		_, _ = fmt.Fprintf(out, "the snapshot holds revision %d, as new as the archive's last change (revision %d) or newer: nothing replayed\n", res.SnapshotRevision, a.Revision)
		return res, nil
	}
	_, _ = fmt.Fprintf(out, "replayed revisions %d to %d (%d revisions, %d events) onto the snapshot of revision %d; the %d keys they touch hold what the archive says\n",
		res.SnapshotRevision+1, res.Revision, res.Revisions, res.Events, res.SnapshotRevision, res.Keys)
	return res, nil
}

// replayOnto applies the chunks onto the etcd of client, which holds the
// restored snapshot, and checks the result.
func replayOnto(ctx context.Context, client *clientv3.Client, a ReplayArgs, chunks []archive.Chunk, src *archiveSource) (ReplayResult, error) {
	var res ReplayResult
	var err error
	if res.SnapshotRevision, err = archive.RestoredRevision(ctx, client, a.RevisionBump, a.After); err != nil {
		return res, err
	}
	switch {
	case a.Newest && res.SnapshotRevision >= a.Revision:
		// The snapshot was taken after the archive's last change, while the
		// archiver lagged or had stopped: it is the newest state there is.
		res.SnapshotIsNewest = true
		return res, nil
	case res.SnapshotRevision > a.Revision:
		return res, fmt.Errorf("the snapshot holds changes up to revision %d, past the point (revision %d): it was being taken when the point passed; choose a point before revision %d or at %d or later",
			res.SnapshotRevision, a.Revision, a.After+1, res.SnapshotRevision)
	case res.SnapshotRevision < a.After:
		return res, fmt.Errorf("the restored snapshot is at revision %d, but its name records revision %d: it is not the snapshot the restore chose", res.SnapshotRevision, a.After)
	}
	eff := ReplayEffect{After: a.After, Revision: a.Revision}
	read := 0
	opts := a.Limits.replayOptions(archive.ReplayOptions{After: res.SnapshotRevision, Revision: a.Revision, Log: logrus.NewEntry(logrus.StandardLogger())})
	replayed, err := archive.ApplyChunks(ctx, client, opts, chunks,
		func(ctx context.Context, c archive.Chunk) ([]archive.Event, error) {
			evs, err := src.chunk(ctx, c)
			if err == nil {
				eff.Add(evs)
				read++
			}
			return evs, err
		})
	res.Replayed = replayed
	if err != nil {
		return res, fmt.Errorf("replay the archive: %w", err)
	}
	// Chunks the snapshot already holds were not applied, but their keys are
	// part of what the restore operator recorded.
	for _, c := range chunks[read:] {
		evs, err := src.chunk(ctx, c)
		if err != nil {
			return res, err
		}
		eff.Add(evs)
	}
	if res.SnapshotRevision < a.Revision && replayed.Revision != a.Revision {
		return res, fmt.Errorf("the replay ended at revision %d, not at the point's revision %d", replayed.Revision, a.Revision)
	}
	if eff.Last() != a.Revision || int64(len(eff.Keys)) != a.Keys || KeyDigest(eff.Keys) != a.KeysSHA256 {
		return res, fmt.Errorf("the archive served holds changes up to revision %d touching %d keys (digest %s), but the restore operator found changes up to revision %d touching %d keys (digest %s)",
			eff.Last(), len(eff.Keys), KeyDigest(eff.Keys), a.Revision, a.Keys, a.KeysSHA256)
	}
	got, err := readKeys(ctx, client, eff.Keys)
	if err != nil {
		return res, err
	}
	for k, want := range eff.Keys {
		have := got[k]
		if have.Deleted != want.Deleted || string(have.Value) != string(want.Value) {
			return res, fmt.Errorf("after the replay key %q %s, but the archive says it %s at revision %d", k, describeKey(have), describeKey(want), a.Revision)
		}
	}
	if d := KeyDigest(got); d != a.KeysSHA256 {
		return res, fmt.Errorf("after the replay the keys the archive touches have digest %s, not %s", d, a.KeysSHA256)
	}
	res.Keys = len(got)
	return res, nil
}

func describeKey(s KeyState) string {
	if s.Deleted {
		return "does not exist"
	}
	return fmt.Sprintf("holds %d bytes", len(s.Value))
}

// readKeys reads what each key holds, many to a transaction.
func readKeys(ctx context.Context, client *clientv3.Client, keys map[string]KeyState) (map[string]KeyState, error) {
	got := make(map[string]KeyState, len(keys))
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	for len(names) > 0 {
		n := min(len(names), archive.DefaultMaxTxnOps)
		batch := names[:n]
		names = names[n:]
		ops := make([]clientv3.Op, len(batch))
		for i, k := range batch {
			ops[i] = clientv3.OpGet(k)
		}
		resp, err := client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read back the replayed keys: %w", err)
		}
		for i, r := range resp.Responses {
			kvs := r.GetResponseRange().Kvs
			if len(kvs) == 0 {
				got[batch[i]] = KeyState{Deleted: true}
			} else {
				got[batch[i]] = KeyState{Value: kvs[0].Value}
			}
		}
	}
	return got, nil
}

// localEtcd is the image's etcd, started on the replay directory.
type localEtcd struct {
	cmd    *exec.Cmd
	client *clientv3.Client
	exited chan error
}

// startLocalEtcd starts etcd on a.ReplayDir, listening on free loopback
// ports only: nothing outside the pod can reach it, and the member's own
// ports stay free.
func startLocalEtcd(ctx context.Context, a ReplayArgs, out io.Writer) (*localEtcd, error) {
	clientURL, err := freeLoopbackURL()
	if err != nil {
		return nil, err
	}
	peerURL, err := freeLoopbackURL()
	if err != nil {
		return nil, err
	}
	limits := a.Limits
	if limits.QuotaBackendBytes == 0 {
		limits.QuotaBackendBytes = replayMinQuotaBytes
	}
	cmd := exec.Command(a.Etcd, append([]string{
		"--name=" + a.Name,
		"--data-dir=" + a.ReplayDir,
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
	}, limits.etcdArgs()...)...)
	cmd.Stdout, cmd.Stderr = out, out
	// etcd reads ETCD_* variables as flags; the token is not one.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, TokenEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s on the restored snapshot: %w", a.Etcd, err)
	}
	m := &localEtcd{cmd: cmd, exited: make(chan error, 1)}
	go func() { m.exited <- cmd.Wait() }()
	// The client sends what the etcd takes; its own default bound is 2 MiB.
	m.client, err = clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		MaxCallSendMsgSize: int(max(limits.MaxRequestBytes, 2<<20))})
	if err != nil {
		m.kill()
		return nil, fmt.Errorf("connect to the local etcd: %w", err)
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := m.client.Get(rctx, "\x00", clientv3.WithCountOnly())
		cancel()
		if err == nil {
			return m, nil
		}
		select {
		case werr := <-m.exited:
			m.exited <- werr
			m.kill()
			return nil, fmt.Errorf("etcd stopped before it served the restored snapshot: %v", werr)
		case <-ctx.Done():
			m.kill()
			return nil, fmt.Errorf("etcd did not serve the restored snapshot (%v): %w", err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop stops etcd cleanly, so that what it applied is on disk.
func (m *localEtcd) stop() error {
	_ = m.client.Close()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop the local etcd: %w", err)
	}
	select {
	case err := <-m.exited:
		m.exited <- err
		// etcd closes its server on SIGTERM, then raises the signal again
		// against itself to end as the signal would.
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
				return nil
			}
		}
		if err != nil {
			return fmt.Errorf("the local etcd did not stop cleanly: %w", err)
		}
		return nil
	case <-time.After(time.Minute):
		m.kill()
		return errors.New("the local etcd did not stop within a minute")
	}
}

// kill ends etcd if it still runs; its directory is then not put in place.
func (m *localEtcd) kill() {
	if m.client != nil {
		_ = m.client.Close()
	}
	select {
	case err := <-m.exited:
		m.exited <- err
		return
	default:
	}
	_ = m.cmd.Process.Kill()
	m.exited <- <-m.exited
}

func freeLoopbackURL() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free loopback port: %w", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr, nil
}

// archiveSource reads a restore's archive from the backup server.
type archiveSource struct {
	url, token string
	key        []byte
	client     *http.Client
	log        io.Writer
}

// manifest gets the chunks and checks that they are those the restore
// operator planned, following each other without a hole.
func (s *archiveSource) manifest(ctx context.Context, a ReplayArgs) ([]archive.Chunk, error) {
	body, err := s.get(ctx, s.url, 1<<26)
	if err != nil {
		return nil, fmt.Errorf("get the archive's manifest: %w", err)
	}
	var m ArchiveManifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("the archive's manifest: %w", err)
	}
	chunks := make([]archive.Chunk, 0, len(m.Chunks))
	for _, mc := range m.Chunks {
		c, ok := archive.ParseChunkName("", backup.ObjectInfo{Key: mc.Name, Size: mc.Size})
		if !ok {
			return nil, fmt.Errorf("the archive's manifest names %q, not a chunk", mc.Name)
		}
		chunks = append(chunks, c)
	}
	if d := ChunkListDigest(chunks); d != a.ChunksSHA256 {
		return nil, fmt.Errorf("the backup server lists other chunks (digest %s) than the restore operator planned (digest %s)", d, a.ChunksSHA256)
	}
	if _, err := archive.Covering(chunks, a.After, a.Revision); err != nil {
		return nil, fmt.Errorf("the archive's chunks: %w", err)
	}
	return chunks, nil
}

// chunk gets one chunk and checks it (archive.DecodeStoredChunk).
func (s *archiveSource) chunk(ctx context.Context, c archive.Chunk) ([]archive.Event, error) {
	body, err := s.get(ctx, s.url+"/"+c.Key, 1<<30)
	if err != nil {
		return nil, fmt.Errorf("get chunk %s: %w", c.Key, err)
	}
	return archive.DecodeStoredChunk(c, body, s.key)
}

// get reads url, retrying what may pass, as Fetch does.
func (s *archiveSource) get(ctx context.Context, url string, limit int64) ([]byte, error) {
	backoff := time.Second
	for attempt := 1; ; attempt++ {
		body, err := s.getOnce(ctx, url, limit)
		if err == nil || failure.IsPermanent(err) {
			return body, err
		}
		_, _ = fmt.Fprintf(s.log, "attempt %d failed, retrying in %v: %v\n", attempt, backoff, err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("gave up after %d attempts (%v): %w", attempt, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 15*time.Second)
	}
}

func (s *archiveSource) getOnce(ctx context.Context, url string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, failure.Permanent(err)
	}
	if s.token != "" {
		req.Header.Set("Authorization", bearerPrefix+s.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		err := fmt.Errorf("the backup server answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return nil, failure.Permanent(err)
		}
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, failure.Permanent(fmt.Errorf("the answer exceeds %d bytes", limit))
	}
	return body, nil
}
