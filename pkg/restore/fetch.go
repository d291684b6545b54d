package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// DefaultTerminationLog is where Kubernetes reads a container's termination
// message from; the restore operator reports it in the EtcdRestore's status.
const DefaultTerminationLog = "/dev/termination-log"

// maxTerminationMessage stays under the kubelet's 4096-byte limit.
const maxTerminationMessage = 4000

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// FetchOptions say what fetch-backup downloads and what it must get.
type FetchOptions struct {
	URL string
	// Out is the file written; it appears only once its content is verified.
	Out string
	// Size and SHA256 are those of the verified backup, as stored.
	Size   int64
	SHA256 string
	// Key decrypts an encrypted backup; compression is recognized by itself.
	// Out receives the decoded snapshot, whose trailer is checked once more.
	Key []byte
	// TokenFile holds the restore's token, presented to the backup server (see
	// token.go); read once, at the start. Without it, Token is the token
	// itself (TokenEnv, when the restore keeps it on the EtcdRestore).
	TokenFile string
	Token     string
	// Timeout bounds the whole fetch, retries included.
	Timeout time.Duration
	// Client defaults to an http.Client without overall timeout: a large backup
	// takes as long as it takes; a stalled connection is caught by Timeout.
	Client *http.Client
	// Retries back off from MinBackoff, doubling to MaxBackoff (1 s and 15 s).
	MinBackoff, MaxBackoff time.Duration
	// Log receives progress lines (os.Stderr in the pod, so `kubectl logs` shows them).
	Log io.Writer

	token string
}

func (o *FetchOptions) withDefaults() FetchOptions {
	out := *o
	if out.Client == nil {
		out.Client = &http.Client{}
	}
	if out.MinBackoff <= 0 {
		out.MinBackoff = time.Second
	}
	if out.MaxBackoff <= 0 {
		out.MaxBackoff = 15 * time.Second
	}
	if out.Log == nil {
		out.Log = io.Discard
	}
	return out
}

// Fetch downloads the backup to o.Out and proves it is the verified one: exactly
// o.Size bytes with sha256 o.SHA256. Failures that may pass (the restore operator
// restarting or changing leader, the object store slow to answer, a connection
// cut mid-way) are retried until the timeout. A 404 is final, because the backup
// server only serves restores in progress; so is a complete download of the wrong
// size or sha256 (TCP and TLS already protect the bytes in transit, so it means
// the object changed since it was verified, and asking again returns the same).
// The file is written under a temporary name and renamed only once verified, so
// the restore step never sees a partial backup.
func Fetch(ctx context.Context, opts FetchOptions) error {
	o := opts.withDefaults()
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	tok, err := PresentedToken(o.Token, o.TokenFile)
	if err != nil {
		return err
	}
	o.token = tok
	backoff := o.MinBackoff
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := o.attempt(ctx)
		if err == nil {
			secs := time.Since(start).Seconds()
			_, _ = fmt.Fprintf(o.Log, "fetched %d bytes from %s in %.1fs (%.1f MiB/s); size and sha256 %s match the verified backup\n",
				o.Size, o.URL, secs, float64(o.Size)/(1<<20)/max(secs, 1e-3), o.SHA256)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("fetch %s: gave up after %d attempts (%v): %w", o.URL, attempt, ctx.Err(), err)
		}
		if failure.IsPermanent(err) {
			return fmt.Errorf("fetch %s (attempt %d): %w", o.URL, attempt, err)
		}
		_, _ = fmt.Fprintf(o.Log, "attempt %d failed, retrying in %v: %v\n", attempt, backoff, err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("fetch %s: gave up after %d attempts (%v): %w", o.URL, attempt, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, o.MaxBackoff)
	}
}

func (o *FetchOptions) attempt(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.URL, nil)
	if err != nil {
		return failure.Permanent(err)
	}
	if o.token != "" {
		req.Header.Set("Authorization", bearerPrefix+o.token)
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		err := fmt.Errorf("the backup server answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
		// 404: no restore in progress serves this backup any more; 4xx in general
		// is a wrong request that asking again will not fix.
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return failure.Permanent(err)
		}
		return err
	}
	if resp.ContentLength >= 0 && resp.ContentLength != o.Size {
		return failure.Permanent(fmt.Errorf("the backup server announces %d bytes, but the verified backup has %d", resp.ContentLength, o.Size))
	}

	dir := filepath.Dir(o.Out)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(o.Out)+".part-*")
	if err != nil {
		return failure.Permanent(fmt.Errorf("create a file in %s: %w", dir, err))
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op after the rename
	// The stored bytes are counted and hashed as they arrive, and decoded
	// (decrypted, decompressed) into the file: the key never leaves the pod, and
	// the backup server only ever sends what is stored.
	body := backup.NewStoredBytes(resp.Body)
	n, decodeErr := o.decodeTo(tmp, body)
	if decodeErr == nil {
		decodeErr = tmp.Sync()
	}
	if cerr := tmp.Close(); decodeErr == nil {
		decodeErr = cerr
	}
	if body.ReadErr() != nil {
		return fmt.Errorf("download interrupted after %d of %d bytes: %w", body.Count(), o.Size, body.ReadErr())
	}
	// The size and sha256 come first: a download that is not the verified
	// backup says so, whatever decoding it made of it.
	if body.Count() != o.Size {
		return failure.Permanent(fmt.Errorf("downloaded %d bytes, but the verified backup has %d", body.Count(), o.Size))
	}
	if sum := body.SHA256(); sum != o.SHA256 {
		return failure.Permanent(fmt.Errorf("the downloaded backup has sha256 %s, but the verified backup has %s", sum, o.SHA256))
	}
	if decodeErr != nil {
		return failure.Permanent(fmt.Errorf("write the backup (%d bytes decoded) to %s: %w", n, o.Out, decodeErr))
	}
	// The restore step runs as another user when the etcd image runs as root
	// (this step runs as the operator image's 65532), and it has no
	// CAP_DAC_OVERRIDE to read past a 0600 file: every capability is dropped. The
	// volume is the pod's own, so readable by all is readable by its containers.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return failure.Permanent(err)
	}
	if err := os.Rename(tmp.Name(), o.Out); err != nil {
		return failure.Permanent(err)
	}
	return nil
}

// decodeTo writes the snapshot that body holds to w, and reads body to its end.
// A stored form that is not a plain snapshot is checked against its trailer too,
// since decoding is a step the store's checksums did not cover.
func (o *FetchOptions) decodeTo(w io.Writer, body io.Reader) (int64, error) {
	decoded, form, err := backup.Decode(body, o.Key)
	if err != nil {
		return 0, err
	}
	defer func() { _ = decoded.Close() }()
	check := backup.NewSnapshotCheck()
	n, err := io.Copy(io.MultiWriter(w, check), decoded)
	if err != nil {
		return n, err
	}
	if _, err := io.Copy(io.Discard, body); err != nil {
		return n, err
	}
	if form != (backup.Form{}) {
		if err := check.Verify(); err != nil {
			return n, fmt.Errorf("the decoded backup is not an intact etcd snapshot: %w", err)
		}
		_, _ = fmt.Fprintf(o.Log, "decoded the %s backup into a %d-byte snapshot\n", form, n)
	}
	return n, nil
}

// Flags of the fetch-backup subcommand.
const (
	FetchFlagURL            = "url"
	FetchFlagOut            = "out"
	FetchFlagSize           = "size"
	FetchFlagSHA256         = "sha256"
	FetchFlagTimeout        = "timeout"
	FetchFlagTokenFile      = "token-file"
	FetchFlagTerminationLog = "termination-log"
	FetchFlagKeyFile        = "encryption-key-file"
	FetchFlagDataDir        = "data-dir"
	FetchFlagCopySelf       = "copy-self-to"
)

// FetchArgs are the arguments of the fetch-backup subcommand, encoded by Args
// into the seed's init container and parsed back by the subcommand
// (cmd/restore-operator), with one set of flag names.
type FetchArgs struct {
	URL, Out string
	Size     int64
	SHA256   string
	Timeout  time.Duration
	// TokenFile is the mounted token of the restore.
	TokenFile string
	// TerminationLog receives the reason of a failure; empty leaves the
	// subcommand's default, DefaultTerminationLog.
	TerminationLog string
	// KeyFile holds the key of an encrypted backup (the Secret's
	// encryption-key, mounted); empty for backups that are not encrypted.
	KeyFile string
	// DataDir is the member's data directory: when it exists, the backup was
	// restored in this pod before, and nothing is fetched (see datadir.go).
	DataDir string
	// CopySelf is where the binary copies itself for the restore step
	// (RestoreDataDirSubcommand), before anything else.
	CopySelf string
}

// Args is the command line after the subcommand's name.
func (a FetchArgs) Args() []string {
	args := []string{
		"--" + FetchFlagURL + "=" + a.URL,
		"--" + FetchFlagOut + "=" + a.Out,
		"--" + FetchFlagSize + "=" + strconv.FormatInt(a.Size, 10),
		"--" + FetchFlagSHA256 + "=" + a.SHA256,
		"--" + FetchFlagTimeout + "=" + a.Timeout.String(),
	}
	if a.TokenFile != "" {
		args = append(args, "--"+FetchFlagTokenFile+"="+a.TokenFile)
	}
	if a.TerminationLog != "" {
		args = append(args, "--"+FetchFlagTerminationLog+"="+a.TerminationLog)
	}
	if a.KeyFile != "" {
		args = append(args, "--"+FetchFlagKeyFile+"="+a.KeyFile)
	}
	if a.DataDir != "" {
		args = append(args, "--"+FetchFlagDataDir+"="+a.DataDir)
	}
	if a.CopySelf != "" {
		args = append(args, "--"+FetchFlagCopySelf+"="+a.CopySelf)
	}
	return args
}

// Validate says what the arguments lack, all at once.
func (a FetchArgs) Validate() error {
	var problems []string
	if a.URL == "" {
		problems = append(problems, "--"+FetchFlagURL+" is required")
	}
	if a.Out == "" {
		problems = append(problems, "--"+FetchFlagOut+" is required")
	}
	if a.Size <= 0 {
		problems = append(problems, "--"+FetchFlagSize+" must be positive")
	}
	if !sha256RE.MatchString(a.SHA256) {
		problems = append(problems, "--"+FetchFlagSHA256+" must be 64 lower-case hex digits")
	}
	if len(problems) > 0 {
		return errors.New(FetchSubcommand + ": " + strings.Join(problems, "; "))
	}
	return nil
}

// WriteTerminationLog is best effort: outside Kubernetes the file may not exist,
// and the message is on stderr anyway.
func WriteTerminationLog(path, msg string) {
	if path == "" {
		return
	}
	if len(msg) > maxTerminationMessage {
		msg = msg[:maxTerminationMessage]
	}
	_ = os.WriteFile(path, []byte(msg), 0o644)
}

// PresentedToken is the restore's token a seed step presents to the backup
// server: the one in file (the mounted Secret) when there is one, else the
// one given in the environment (a role that may not create Secrets).
func PresentedToken(fromEnv, file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(fromEnv), nil
	}
	tok, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read the restore's token: %w", err)
	}
	return strings.TrimSpace(string(tok)), nil
}
