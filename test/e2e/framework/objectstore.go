package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// VersityGWVersion is the S3-compatible server the backup tests store into; it is
// built from the Go module proxy (test-infra.md: MinIO works too but takes twice as
// long to build).
const VersityGWVersion = "v1.8.0"

// ToolCacheDir is where the local cluster keeps the binaries it builds; the suite
// puts its own tools next to them so that they survive between runs.
func ToolCacheDir() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "etcd-operator-local", "bin")
}

// VersityGW returns the versitygw binary, building it with `go install` into the
// tool cache the first time (about a minute).
func VersityGW(ctx context.Context) (string, error) {
	dir := filepath.Join(ToolCacheDir(), "versitygw-"+VersityGWVersion)
	bin := filepath.Join(dir, "versitygw")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/versity/versitygw/cmd/versitygw@"+VersityGWVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0")
	cmd.Dir = os.TempDir() // outside this module: go install pkg@version ignores it anyway
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build versitygw %s (GOBIN=%s go install github.com/versity/versitygw/cmd/versitygw@%s): %w\n%s",
			VersityGWVersion, dir, VersityGWVersion, err, out)
	}
	return bin, nil
}

// S3Server is a versitygw process on the host serving the posix backend; pods reach
// it at Endpoint through the node's address.
type S3Server struct {
	Endpoint  string
	Region    string
	AccessKey string
	SecretKey string
	Client    *s3.Client
	// LogFile has the server's output.
	LogFile string
	cmd     *exec.Cmd
	exited  chan error
}

// StartS3Server starts versitygw on a free port of host with its data under dir.
func StartS3Server(ctx context.Context, host, dir string) (*S3Server, error) {
	bin, err := VersityGW(ctx)
	if err != nil {
		return nil, err
	}
	port, err := freePort(host)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	s := &S3Server{
		Endpoint:  fmt.Sprintf("http://%s", net.JoinHostPort(host, fmt.Sprint(port))),
		Region:    "us-east-1",
		AccessKey: "e2e-access-key",
		SecretKey: "e2e-secret-key-" + UniqueName("s"),
		LogFile:   filepath.Join(dir, "versitygw.log"),
		exited:    make(chan error, 1),
	}
	logf, err := os.Create(s.LogFile)
	if err != nil {
		return nil, err
	}
	// Not tied to ctx: Stop ends it, by its own pid.
	s.cmd = exec.Command(bin, "--access", s.AccessKey, "--secret", s.SecretKey,
		"--region", s.Region, "--port", net.JoinHostPort(host, fmt.Sprint(port)), "posix", data)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	go func() { s.exited <- s.cmd.Wait(); logf.Close() }()
	s.Client = s3.New(s3.Options{
		Region:       s.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
	})
	err = WaitFor(ctx, 30*time.Second, 200*time.Millisecond, "versitygw to answer at "+s.Endpoint, func(ctx context.Context) (bool, string, error) {
		select {
		case err := <-s.exited:
			out, _ := os.ReadFile(s.LogFile)
			return false, "", fmt.Errorf("versitygw exited (%v):\n%s", err, out)
		default:
		}
		_, err := s.Client.ListBuckets(ctx, &s3.ListBucketsInput{})
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Stop kills the server process it started and waits for it.
func (s *S3Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
	}
}

// Object is one stored object.
type Object struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// List lists the objects of bucket under prefix, oldest first, every page.
func (s *S3Server) List(ctx context.Context, bucket, prefix string) ([]Object, error) {
	var out []Object
	p := s3.NewListObjectsV2Paginator(s.Client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			out = append(out, Object{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastModified.Before(out[j].LastModified) })
	return out, nil
}

// Head returns the size of an object.
func (s *S3Server) Head(ctx context.Context, bucket, key string) (int64, error) {
	h, err := s.Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return 0, fmt.Errorf("head s3://%s/%s: %w", bucket, key, err)
	}
	return aws.ToInt64(h.ContentLength), nil
}

// CreateBucket creates a bucket.
func (s *S3Server) CreateBucket(ctx context.Context, bucket string) error {
	_, err := s.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	return nil
}

// AWSSecretData is an AWS secret as the backup operator reads it: the shared
// credentials and config files, profile default, the region in config (the
// original's MissingRegion complaint).
func (s *S3Server) AWSSecretData() map[string]string {
	return map[string]string{
		"credentials": fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", s.AccessKey, s.SecretKey),
		"config":      fmt.Sprintf("[default]\nregion = %s\n", s.Region),
	}
}

// freePort finds a port nobody listens on at host. Another process could take it
// before the server binds it; versitygw then exits and StartS3Server says so.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", host, err)
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("not a TCP address: " + l.Addr().String())
	}
	return addr.Port, nil
}

// KeysOf lists the keys of objects.
func KeysOf(objs []Object) []string {
	keys := make([]string, 0, len(objs))
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}
