package backuptest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// VersityGWVersion is what hack/versitygw.sh builds by default (and the e2e suite).
const VersityGWVersion = "v1.8.0"

const howToGetVersityGW = "versitygw (an S3 server) is built from the Go module proxy: run `bash hack/versitygw.sh` " +
	"and set VERSITYGW to the path it prints, or run `make unit`, which does both"

// VersityGWBinary finds versitygw: $VERSITYGW, or the copy hack/versitygw.sh (or
// the e2e suite) builds into the tool cache.
func VersityGWBinary() (string, error) {
	return toolBinary("VERSITYGW", filepath.Join("etcd-operator-local", "bin", "versitygw-"+VersityGWVersion, "versitygw"), "", howToGetVersityGW)
}

// VersityGW is a versitygw process serving its posix backend on a loopback port.
type VersityGW struct {
	URL    string
	Client *s3.Client
	cmd    *exec.Cmd
	out    *etcdtest.Output
	done   chan struct{}
	err    error
}

// StartVersityGW runs versitygw with its data under dir and waits until it answers.
func StartVersityGW(ctx context.Context, dir string) (*VersityGW, error) {
	bin, err := VersityGWBinary()
	if err != nil {
		return nil, err
	}
	return startOnFreePort(dir, "versitygw", "address already in use", func(dir string) (*VersityGW, error) { return startVersityGW(ctx, bin, dir) })
}

func startVersityGW(ctx context.Context, bin, dir string) (*VersityGW, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	v := &VersityGW{URL: "http://" + addr, out: &etcdtest.Output{}, done: make(chan struct{})}
	v.cmd = exec.Command(bin, "--access", AccessKeyID, "--secret", SecretAccessKey, "--region", Region, "--port", addr, "posix", dir)
	v.cmd.Stdout, v.cmd.Stderr = v.out, v.out
	if err := v.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w; %s", bin, err, howToGetVersityGW)
	}
	go func() { v.err = v.cmd.Wait(); close(v.done) }()
	v.Client = s3.New(s3.Options{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		BaseEndpoint: aws.String(v.URL),
		UsePathStyle: true,
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := v.Client.ListBuckets(ctx, &s3.ListBucketsInput{}); err == nil {
			return v, nil
		}
		select {
		case <-v.done:
			return nil, fmt.Errorf("versitygw exited (%v):\n%s", v.err, v.out.String())
		case <-ctx.Done():
			v.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			v.Close()
			return nil, fmt.Errorf("versitygw does not answer at %s after a minute:\n%s", v.URL, v.out.String())
		}
	}
}

// CreateBucket creates a bucket.
func (v *VersityGW) CreateBucket(ctx context.Context, name string) error {
	if _, err := v.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		return fmt.Errorf("create bucket %s in versitygw: %w", name, err)
	}
	return nil
}

// StoreConfig is an s3store configuration for one bucket of this server.
func (v *VersityGW) StoreConfig(bucket string) s3store.Config {
	return s3store.Config{
		Bucket:         bucket,
		Region:         Region,
		Endpoint:       v.URL,
		ForcePathStyle: true,
		Credentials:    aws.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey},
	}
}

// Close stops the server and waits for it.
func (v *VersityGW) Close() {
	if v.cmd.Process != nil {
		_ = v.cmd.Process.Kill()
	}
	<-v.done
}

// NoChecksumsProxy forwards to an S3 server but refuses, as Ceph RGW and older
// MinIO do, the flexible checksums that aws-sdk-go-v2 sends by default since
// early 2025: the x-amz-checksum-* and x-amz-sdk-checksum-algorithm headers and
// aws-chunked bodies with a trailer. Refused holds how many requests it refused.
type NoChecksumsProxy struct {
	URL     string
	srv     *httptest.Server
	refused chan struct{}
}

// StartNoChecksumsProxy proxies to target (an http URL).
func StartNoChecksumsProxy(target string) (*NoChecksumsProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &NoChecksumsProxy{refused: make(chan struct{}, 1<<16)}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := checksumHeader(r); h != "" {
			p.refused <- struct{}{}
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidArgument</Code><Message>unsupported header %s</Message></Error>`, h)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	p.URL = p.srv.URL
	return p, nil
}

func checksumHeader(r *http.Request) string {
	for name := range r.Header {
		l := strings.ToLower(name)
		if strings.HasPrefix(l, "x-amz-checksum-") || l == "x-amz-sdk-checksum-algorithm" || l == "x-amz-trailer" {
			return name
		}
	}
	if strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") {
		return "Content-Encoding: aws-chunked"
	}
	return ""
}

// Refused is the number of requests refused so far.
func (p *NoChecksumsProxy) Refused() int { return len(p.refused) }

// Close stops the proxy.
func (p *NoChecksumsProxy) Close() { p.srv.Close() }
