package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// The seed's init containers run again whenever the kubelet starts the pod in a
// new sandbox with no trace of its containers: after a node reboot on a runtime
// that does not keep exited containers, even with restartPolicy Never. By then
// the restore is long done, the data directory holds the member's data, and
// the restore's token Secret may be gone with the EtcdRestore. So each step
// first looks at the data directory: fetch-backup fetches nothing (it needs
// neither the token nor the key), and restore-datadir restores nothing. The etcd
// images have no shell to make that choice in, so fetch-backup copies the
// operator's own binary (static, and of the node's architecture like the pod)
// into the backup volume, and restore-datadir runs it in the etcd image; it
// runs the etcd tool only when the data directory is missing, into a staging
// directory that it renames into place once the tool succeeded, so that a
// restore cut short is never taken for a done one.

// RestoreDataDirSubcommand is the restore step: `etcd-restore-operator
// restore-datadir --data-dir=... --staging-dir=... -- <etcd tool> ...`.
const RestoreDataDirSubcommand = "restore-datadir"

// Flags of the restore-datadir subcommand.
const (
	DataDirFlagDataDir    = "data-dir"
	DataDirFlagStagingDir = "staging-dir"
	DataDirFlagOutputDir  = "output-dir"
)

// DataDirArgs are the arguments of the restore-datadir subcommand.
type DataDirArgs struct {
	// DataDir is the member's data directory: when it exists, the backup
	// was restored in this pod before, and nothing is done.
	DataDir string
	// StagingDir is where Tool writes; it becomes DataDir once Tool succeeded.
	// It must be on DataDir's filesystem.
	StagingDir string
	// Tool is the etcd image's restore command, writing into StagingDir.
	Tool []string
	// OutputDir, when set, is where StagingDir goes instead of DataDir: a
	// later step (the replay of a restore to a point) makes DataDir of it.
	// One left by an earlier attempt of that step is replaced.
	OutputDir string
}

// Args is the command line after the subcommand's name.
func (a DataDirArgs) Args() []string {
	args := []string{
		"--" + DataDirFlagDataDir + "=" + a.DataDir,
		"--" + DataDirFlagStagingDir + "=" + a.StagingDir,
	}
	if a.OutputDir != "" {
		args = append(args, "--"+DataDirFlagOutputDir+"="+a.OutputDir)
	}
	return append(append(args, "--"), a.Tool...)
}

// Validate says what the arguments lack, all at once.
func (a DataDirArgs) Validate() error {
	var problems []error
	if a.DataDir == "" {
		problems = append(problems, fmt.Errorf("--%s is required", DataDirFlagDataDir))
	}
	if a.StagingDir == "" || a.StagingDir == a.DataDir {
		problems = append(problems, fmt.Errorf("--%s is required, and must not be the data directory", DataDirFlagStagingDir))
	}
	if a.OutputDir != "" && (a.OutputDir == a.DataDir || a.OutputDir == a.StagingDir) {
		problems = append(problems, fmt.Errorf("--%s must differ from the data and staging directories", DataDirFlagOutputDir))
	}
	if len(a.Tool) == 0 {
		problems = append(problems, errors.New("the restore command is required after --"))
	}
	if err := errors.Join(problems...); err != nil {
		return fmt.Errorf("%s: %w", RestoreDataDirSubcommand, err)
	}
	return nil
}

// RestoreDataDir runs the restore step: nothing when a.DataDir exists, or
// else a.Tool into a.StagingDir, which then becomes a.DataDir. The tool's
// output goes to out.
func RestoreDataDir(ctx context.Context, a DataDirArgs, out io.Writer) error {
	done, err := Restored(a.DataDir)
	if err != nil {
		return err
	}
	if done {
		_, _ = fmt.Fprintf(out, "%s exists: the backup was restored in this pod before; nothing to do\n", a.DataDir)
		return nil
	}
	// Left by a restore cut short.
	if err := os.RemoveAll(a.StagingDir); err != nil {
		return fmt.Errorf("remove %s, left by an earlier attempt: %w", a.StagingDir, err)
	}
	cmd := exec.CommandContext(ctx, a.Tool[0], a.Tool[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", a.Tool[0], err)
	}
	target := a.DataDir
	if a.OutputDir != "" {
		target = a.OutputDir
		if err := os.RemoveAll(target); err != nil {
			return fmt.Errorf("remove %s, left by an earlier attempt: %w", target, err)
		}
	}
	if err := os.Rename(a.StagingDir, target); err != nil {
		return fmt.Errorf("put the restored data directory in place: %w", err)
	}
	return syncDir(filepath.Dir(target))
}

// Restored tells whether the data directory dataDir exists: the restore ran in
// this pod before (RestoreDataDir puts it in place whole, or not at all).
func Restored(dataDir string) (bool, error) {
	_, err := os.Stat(dataDir)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("look for the data directory: %w", err)
}

// CopySelf copies the running binary to path, executable by every user: the
// restore step runs it from the etcd image, as whichever user that runs as.
func CopySelf(path string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("copy this binary for the restore step: %w", err)
	}
	defer func() { _ = src.Close() }()
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return fmt.Errorf("copy this binary for the restore step: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op after the rename
	_, err = io.Copy(tmp, src)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("copy this binary for the restore step to %s: %w", path, err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
