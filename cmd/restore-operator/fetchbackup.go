package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/restore"
)

// fetchBackup is `etcd-restore-operator fetch-backup`, the seed pod's download
// step (restore.NewSeedPod): it fetches and checks the backup, and on failure
// writes the reason to the termination log, where the restore operator reads
// it into the EtcdRestore's status. It returns the exit code: 1 for a failed
// fetch, 2 for bad arguments.
func fetchBackup(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	a, err := parseFetchBackup(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = a.Validate()
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, err)
		restore.WriteTerminationLog(a.TerminationLog, err.Error())
		return 2
	}
	fail := func(err error) int {
		_, _ = fmt.Fprintln(stderr, err)
		restore.WriteTerminationLog(a.TerminationLog, err.Error())
		return 1
	}
	// First of all, as the restore step needs the copy even when nothing is
	// fetched.
	if a.CopySelf != "" {
		if err := restore.CopySelf(a.CopySelf); err != nil {
			return fail(err)
		}
	}
	// Started again after the restore (see pkg/restore/datadir.go): the token
	// and the key may be gone, and the backup is not wanted.
	if a.DataDir != "" {
		done, err := restore.Restored(a.DataDir)
		if err != nil {
			return fail(err)
		}
		if done {
			_, _ = fmt.Fprintf(stderr, "%s exists: the backup was restored in this pod before; nothing to fetch\n", a.DataDir)
			return 0
		}
	}
	var key []byte
	if a.KeyFile != "" {
		if key, err = readKey(a.KeyFile); err != nil {
			return fail(err)
		}
	}
	_, _ = fmt.Fprintf(stderr, "fetching %s (%d bytes, sha256 %s) to %s\n", a.URL, a.Size, a.SHA256, a.Out)
	err = restore.Fetch(ctx, restore.FetchOptions{URL: a.URL, Out: a.Out, Size: a.Size, SHA256: a.SHA256, Key: key, TokenFile: a.TokenFile, Token: getenv(restore.TokenEnv), Timeout: a.Timeout, Log: stderr})
	if err != nil {
		return fail(err)
	}
	return 0
}

// parseFetchBackup parses what restore.FetchArgs.Args encodes. The termination
// log is known even when parsing fails, so that the failure can be written.
func parseFetchBackup(args []string, output io.Writer) (restore.FetchArgs, error) {
	a := restore.FetchArgs{TerminationLog: restore.DefaultTerminationLog}
	fs := flag.NewFlagSet(restore.Binary+" "+restore.FetchSubcommand, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&a.URL, restore.FetchFlagURL, "", "URL of the backup on the restore operator's backup server")
	fs.StringVar(&a.Out, restore.FetchFlagOut, restore.BackupFile, "file to write the verified backup to")
	fs.Int64Var(&a.Size, restore.FetchFlagSize, 0, "size in bytes the backup must have")
	fs.StringVar(&a.SHA256, restore.FetchFlagSHA256, "", "hex sha256 the backup must have")
	fs.DurationVar(&a.Timeout, restore.FetchFlagTimeout, 20*time.Minute, "give up after this long, retries included")
	fs.StringVar(&a.TokenFile, restore.FetchFlagTokenFile, "", "file holding the restore's token, which the backup server asks for")
	fs.StringVar(&a.TerminationLog, restore.FetchFlagTerminationLog, restore.DefaultTerminationLog, "file that receives the reason of a failure")
	fs.StringVar(&a.KeyFile, restore.FetchFlagKeyFile, "", "file with the key of an encrypted backup (32 bytes, or their base64)")
	fs.StringVar(&a.DataDir, restore.FetchFlagDataDir, "", "the member's data directory: if it exists, the backup was restored before and nothing is fetched")
	fs.StringVar(&a.CopySelf, restore.FetchFlagCopySelf, "", "file to copy this binary to, for the "+restore.RestoreDataDirSubcommand+" step")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	if fs.NArg() > 0 {
		return a, fmt.Errorf("%s: unexpected arguments %v", restore.FetchSubcommand, fs.Args())
	}
	return a, nil
}

// readKey reads the key of an encrypted backup from the mounted Secret.
func readKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: read the encryption key: %w", restore.FetchSubcommand, err)
	}
	key, err := storage.ParseEncryptionKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: the encryption key in %s: %w", restore.FetchSubcommand, path, err)
	}
	return key, nil
}

// restoreDataDir is `etcd-restore-operator restore-datadir`, the seed pod's
// restore step, run from the etcd image (restore.NewSeedPod): it runs the etcd
// tool given after -- unless the data directory is there already. It returns the
// exit code: 1 for a failed restore, 2 for bad arguments. The container's
// termination message is the end of its log.
func restoreDataDir(ctx context.Context, args []string, stderr io.Writer) int {
	a, err := parseRestoreDataDir(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = a.Validate()
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, err)
		return 2
	}
	if err := restore.RestoreDataDir(ctx, a, stderr); err != nil {
		_, _ = fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// parseRestoreDataDir parses what restore.DataDirArgs.Args encodes.
func parseRestoreDataDir(args []string, output io.Writer) (restore.DataDirArgs, error) {
	var a restore.DataDirArgs
	fs := flag.NewFlagSet(restore.Binary+" "+restore.RestoreDataDirSubcommand, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&a.DataDir, restore.DataDirFlagDataDir, "", "the member's data directory; if it exists, nothing is done")
	fs.StringVar(&a.StagingDir, restore.DataDirFlagStagingDir, "", "where the restore command writes, renamed to the data directory once it succeeded")
	fs.StringVar(&a.OutputDir, restore.DataDirFlagOutputDir, "", "where the staging directory goes instead of the data directory, for a later step")
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	a.Tool = fs.Args()
	return a, nil
}
