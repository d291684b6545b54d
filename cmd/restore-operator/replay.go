package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/openetcd/etcd-operator/pkg/restore"
)

// replayArchive is `etcd-restore-operator replay-archive`, the seed pod's
// replay step of a restore to a point, run from the etcd image
// (restore.NewSeedPod): it replays the archive onto the restored snapshot
// with the image's etcd and checks the result (restore.ReplayArchive). On
// failure it writes the reason to the termination log, where the restore
// operator reads it into the EtcdRestore's status. It returns the exit code:
// 1 for a failed replay, 2 for bad arguments.
func replayArchive(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	a, err := parseReplayArchive(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = a.Validate()
	}
	fail := func(code int, err error) int {
		_, _ = fmt.Fprintln(stderr, err)
		restore.WriteTerminationLog(a.TerminationLog, err.Error())
		return code
	}
	if err != nil {
		return fail(2, err)
	}
	// Started again after the replay (see pkg/restore/datadir.go): the token
	// and the key may be gone, and nothing is wanted.
	if done, err := restore.Restored(a.DataDir); err != nil || done {
		if err != nil {
			return fail(1, err)
		}
		_, _ = fmt.Fprintf(stderr, "%s exists: the archive was replayed in this pod before; nothing to do\n", a.DataDir)
		return 0
	}
	token, err := restore.PresentedToken(getenv(restore.TokenEnv), a.TokenFile)
	if err != nil {
		return fail(1, fmt.Errorf("%s: %w", restore.ReplaySubcommand, err))
	}
	var key []byte
	if a.KeyFile != "" {
		if key, err = readKey(a.KeyFile); err != nil {
			return fail(1, err)
		}
	}
	if _, err := restore.ReplayArchive(ctx, a, token, key, stderr); err != nil {
		return fail(1, fmt.Errorf("%s: %w", restore.ReplaySubcommand, err))
	}
	return 0
}

// parseReplayArchive parses what restore.ReplayArgs.Args encodes.
func parseReplayArchive(args []string, output io.Writer) (restore.ReplayArgs, error) {
	a := restore.ReplayArgs{TerminationLog: restore.DefaultTerminationLog}
	fs := flag.NewFlagSet(restore.Binary+" "+restore.ReplaySubcommand, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&a.DataDir, restore.ReplayFlagDataDir, "", "the member's data directory; if it exists, nothing is done")
	fs.StringVar(&a.ReplayDir, restore.ReplayFlagReplayDir, "", "the restored snapshot, renamed to the data directory once replayed")
	fs.StringVar(&a.URL, restore.ReplayFlagURL, "", "URL of the restore's archive on the restore operator's backup server")
	fs.StringVar(&a.TokenFile, restore.ReplayFlagTokenFile, "", "file holding the restore's token, which the backup server asks for")
	fs.StringVar(&a.KeyFile, restore.ReplayFlagKeyFile, "", "file with the key of an encrypted archive (32 bytes, or their base64)")
	fs.StringVar(&a.Etcd, restore.ReplayFlagEtcd, "/usr/local/bin/etcd", "the etcd binary to replay with")
	fs.StringVar(&a.Name, restore.ReplayFlagName, "", "the member's name")
	fs.Int64Var(&a.After, restore.ReplayFlagAfter, 0, "the revision the restored snapshot's name records")
	fs.Int64Var(&a.Revision, restore.ReplayFlagRevision, 0, "the last revision to replay")
	fs.Int64Var(&a.RevisionBump, restore.ReplayFlagRevisionBump, 0, "what the restore added to the snapshot's revision")
	fs.StringVar(&a.ChunksSHA256, restore.ReplayFlagChunksSHA256, "", "digest of the names of the chunks to replay")
	fs.Int64Var(&a.Keys, restore.ReplayFlagKeys, 0, "how many keys the replay writes or deletes")
	fs.StringVar(&a.KeysSHA256, restore.ReplayFlagKeysSHA256, "", "digest of what those keys hold at the last revision")
	fs.BoolVar(&a.Newest, restore.ReplayFlagNewest, false, "the last revision is the newest the backup holds: a snapshot holding more is kept as it is")
	fs.Int64Var(&a.Limits.QuotaBackendBytes, restore.ReplayFlagQuotaBytes, 0, "the replay's etcd's --quota-backend-bytes (the cluster's, or more); 0 means 8 GiB")
	fs.Int64Var(&a.Limits.MaxRequestBytes, restore.ReplayFlagMaxRequest, 0, "the replay's etcd's --max-request-bytes (the cluster's); 0 means etcd's default")
	fs.Int64Var(&a.Limits.MaxTxnOps, restore.ReplayFlagMaxTxnOps, 0, "the replay's etcd's --max-txn-ops (the cluster's); 0 means etcd's default")
	fs.DurationVar(&a.Timeout, restore.ReplayFlagTimeout, 20*time.Minute, "give up after this long")
	fs.StringVar(&a.TerminationLog, restore.ReplayFlagTerminationLog, restore.DefaultTerminationLog, "file that receives the reason of a failure")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	if fs.NArg() > 0 {
		return a, fmt.Errorf("%s: unexpected arguments %v", restore.ReplaySubcommand, fs.Args())
	}
	return a, nil
}
