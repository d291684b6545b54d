// Package absstore keeps backups in Azure Blob Storage, as block blobs in one
// container.
package absstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

// Upload shape. The stream is cut into blocks that are staged while the next is
// read, so memory is about (Concurrency+1) x BlockSize whatever the size of the
// database; the original buffered the whole snapshot. 8 MiB blocks allow blobs of
// up to 390 GiB within Azure's 50,000-block limit.
const (
	DefaultBlockSize    = 8 << 20
	DefaultConcurrency  = 2
	DefaultListPageSize = 5000
)

// Cloud suffixes of the storage endpoint, by the names the original's `cloud`
// secret key took (go-autorest's environment names).
var cloudSuffixes = map[string]string{
	"AzurePublicCloud":       "core.windows.net",
	"AzureChinaCloud":        "core.chinacloudapi.cn",
	"AzureUSGovernmentCloud": "core.usgovcloudapi.net",
	"AzureGermanCloud":       "core.cloudapi.de",
}

// Config says which container to use and how to reach it.
type Config struct {
	Container string
	// Account and Key are the storage account's name and a base64 access key.
	Account string
	Key     string
	// Cloud picks the service's domain: AzurePublicCloud (the default),
	// AzureChinaCloud, AzureUSGovernmentCloud or AzureGermanCloud.
	Cloud string
	// Endpoint overrides the account's service URL, for Azurite or Azure Stack:
	// e.g. http://127.0.0.1:10000/devstoreaccount1.
	Endpoint string
	// Credential, when set, is a Microsoft Entra token credential used instead
	// of Account and Key (the operator's own identity); the service URL is then
	// Endpoint, which must be https: the SDK sends tokens over nothing else.
	Credential azcore.TokenCredential
	// ClientOptions are the SDK client's (tests give a transport that trusts
	// their certificate); nil means the defaults.
	ClientOptions *azblob.ClientOptions

	// BlockSize, Concurrency and ListPageSize default to the constants above; tests
	// shrink them to exercise many blocks and pages.
	BlockSize    int64
	Concurrency  int
	ListPageSize int32
}

// ServiceURL is the blob service URL cfg names.
func (cfg Config) ServiceURL() (string, error) {
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return "", fmt.Errorf("ABS endpoint %q is not an http(s) URL", cfg.Endpoint)
		}
		return strings.TrimSuffix(cfg.Endpoint, "/") + "/", nil
	}
	cloud := cfg.Cloud
	if cloud == "" {
		cloud = "AzurePublicCloud"
	}
	suffix, ok := cloudSuffixes[cloud]
	if !ok {
		return "", fmt.Errorf("unknown Azure cloud %q: use AzurePublicCloud, AzureChinaCloud, AzureUSGovernmentCloud or AzureGermanCloud", cfg.Cloud)
	}
	return fmt.Sprintf("https://%s.blob.%s/", cfg.Account, suffix), nil
}

// Store is a backup.Store on one container.
type Store struct {
	container *container.Client
	name      string
	// byToken is true when the operator's identity, not a key, reaches the account.
	byToken     bool
	blockSize   int64
	concurrency int
	pageSize    int32
}

var _ backup.Store = (*Store)(nil)

// New builds a store; it makes no request.
func New(cfg Config) (*Store, error) {
	if cfg.Container == "" {
		return nil, errors.New("abs store: no container")
	}
	svc, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{
		container:   svc.ServiceClient().NewContainerClient(cfg.Container),
		name:        cfg.Container,
		byToken:     cfg.Credential != nil,
		blockSize:   cfg.BlockSize,
		concurrency: cfg.Concurrency,
		pageSize:    cfg.ListPageSize,
	}
	if s.blockSize <= 0 {
		s.blockSize = DefaultBlockSize
	}
	if s.concurrency <= 0 {
		s.concurrency = DefaultConcurrency
	}
	if s.pageSize <= 0 {
		s.pageSize = DefaultListPageSize
	}
	return s, nil
}

func newClient(cfg Config) (*azblob.Client, error) {
	if cfg.Credential != nil {
		if cfg.Endpoint == "" {
			return nil, errors.New("abs store: a token credential needs the account's blob service URL as its endpoint")
		}
		serviceURL, err := cfg.ServiceURL()
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(serviceURL, "https://") {
			return nil, fmt.Errorf("ABS endpoint %q: the operator's identity is sent over https only", cfg.Endpoint)
		}
		svc, err := azblob.NewClient(serviceURL, cfg.Credential, cfg.ClientOptions)
		if err != nil {
			return nil, fmt.Errorf("abs client for %s: %w", serviceURL, err)
		}
		return svc, nil
	}
	switch {
	case cfg.Account == "":
		return nil, errors.New("abs store: no storage account")
	case cfg.Key == "":
		return nil, errors.New("abs store: no storage key")
	}
	serviceURL, err := cfg.ServiceURL()
	if err != nil {
		return nil, err
	}
	cred, err := azblob.NewSharedKeyCredential(cfg.Account, cfg.Key)
	if err != nil {
		// The SDK says only that base64 decoding failed; the key is not repeated.
		return nil, fmt.Errorf("the storage key of account %q is not base64: %w", cfg.Account, err)
	}
	svc, err := azblob.NewClientWithSharedKeyCredential(serviceURL, cred, cfg.ClientOptions)
	if err != nil {
		return nil, fmt.Errorf("abs client for %s: %w", serviceURL, err)
	}
	return svc, nil
}

// Container is the container the store writes to.
func (s *Store) Container() string { return s.name }

// Put stages r as blocks and commits the block list only once r has ended
// cleanly: if r fails, no block list is committed and an existing blob keeps its
// content (the staged blocks are dropped by Azure after a week).
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (int64, string, error) {
	d := backup.Digesting(r)
	_, err := s.container.NewBlockBlobClient(key).UploadStream(ctx, d, &blockblob.UploadStreamOptions{
		BlockSize:   s.blockSize,
		Concurrency: s.concurrency,
		HTTPHeaders: &blob.HTTPHeaders{BlobContentType: to.Ptr("application/octet-stream")},
	})
	if err != nil {
		return 0, "", s.describe("put", key, err)
	}
	n, sum := d.Digest()
	return n, sum, nil
}

// Get opens a blob. The SDK retries a broken download from where it stopped.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	resp, err := s.container.NewBlobClient(key).DownloadStream(ctx, nil)
	if err != nil {
		return nil, 0, s.describe("get", key, err)
	}
	return resp.NewRetryReader(ctx, nil), deref(resp.ContentLength), nil
}

// Head describes a blob.
func (s *Store) Head(ctx context.Context, key string) (backup.ObjectInfo, error) {
	props, err := s.container.NewBlobClient(key).GetProperties(ctx, nil)
	if err != nil {
		return backup.ObjectInfo{}, s.describe("head", key, err)
	}
	return backup.ObjectInfo{Key: key, Size: deref(props.ContentLength), LastModified: deref(props.LastModified)}, nil
}

// List pages through the container's flat listing.
func (s *Store) List(ctx context.Context, prefix string) ([]backup.ObjectInfo, error) {
	pager := s.container.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{
		Prefix:     to.Ptr(prefix),
		MaxResults: to.Ptr(s.pageSize),
	})
	var out []backup.ObjectInfo
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, s.describe("list", prefix+"*", err)
		}
		for _, b := range page.Segment.BlobItems {
			info := backup.ObjectInfo{Key: deref(b.Name)}
			if b.Properties != nil {
				info.Size = deref(b.Properties.ContentLength)
				info.LastModified = deref(b.Properties.LastModified)
			}
			out = append(out, info)
		}
	}
	return out, nil
}

// Delete removes a blob; a missing blob is not an error, as in S3.
func (s *Store) Delete(ctx context.Context, key string) error {
	_, err := s.container.NewBlobClient(key).Delete(ctx, nil)
	if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
		return s.describe("delete", key, err)
	}
	return nil
}

// describe turns the SDK's errors into ones a user can act on, keeping the
// original for errors.Is/As.
func (s *Store) describe(op, key string, err error) error {
	where := fmt.Sprintf("%s abs://%s/%s", op, s.name, key)
	switch {
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		return fmt.Errorf("%s: container %q does not exist: %w", where, s.name, err)
	case bloberror.HasCode(err, bloberror.BlobNotFound):
		return fmt.Errorf("%s: %w (%v)", where, backup.ErrNotFound, err)
	case s.byToken && bloberror.HasCode(err, bloberror.AuthenticationFailed, bloberror.AuthorizationFailure, bloberror.AuthorizationPermissionMismatch):
		return fmt.Errorf("%s: the operator's identity is refused; it needs a data role on the container, such as Storage Blob Data Contributor: %w", where, err)
	case bloberror.HasCode(err, bloberror.AuthenticationFailed, bloberror.AuthorizationFailure):
		return fmt.Errorf("%s: the storage account or key is wrong: %w", where, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
