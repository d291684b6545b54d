// Package storage opens the store an EtcdBackup (or, later, an EtcdRestore) points
// at, from its spec and the credentials secret it names.
package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/s3store"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// Location is where a backup goes: a bucket and the key (or key prefix) inside it.
type Location struct {
	Bucket string
	Key    string
}

// Path is the "<bucket>/<key>" form used in specs and status.
func (l Location) Path() string { return l.Bucket + "/" + l.Key }

// ParsePath splits "<bucket>/<key>"; both parts must be non-empty.
func ParsePath(path string) (Location, error) {
	bucket, key, ok := strings.Cut(path, "/")
	if !ok || bucket == "" || key == "" {
		return Location{}, failure.Permanent(fmt.Errorf("path %q is not \"<bucket>/<key>\"", path))
	}
	return Location{Bucket: bucket, Key: key}, nil
}

// CheckSupported refuses the storage types the schema accepts but the operator cannot
// write yet. The original exited the whole process on an unknown type.
func CheckSupported(t api.BackupStorageType) error {
	switch t {
	case api.BackupStorageTypeS3, api.BackupStorageTypeOSS:
		return nil
	case api.BackupStorageTypeABS, api.BackupStorageTypeGCS:
		return failure.Permanent(fmt.Errorf("storage type %s is not supported yet", t))
	}
	return failure.Permanent(fmt.Errorf("unknown storage type %q: use S3 or OSS", t))
}

// ForBackup opens the store an EtcdBackup names, with the credentials secret read
// from the backup's own namespace.
func ForBackup(ctx context.Context, secrets corev1client.SecretsGetter, namespace string, spec *api.BackupSpec) (backup.Store, Location, error) {
	if err := CheckSupported(spec.StorageType); err != nil {
		return nil, Location{}, err
	}
	switch spec.StorageType {
	case api.BackupStorageTypeS3:
		if spec.S3 == nil {
			return nil, Location{}, failure.Permanent(errors.New("storage type S3 needs spec.s3"))
		}
		return OpenS3(ctx, secrets, namespace, spec.S3)
	default: // OSS; CheckSupported let nothing else through.
		if spec.OSS == nil {
			return nil, Location{}, failure.Permanent(errors.New("storage type OSS needs spec.oss"))
		}
		return OpenOSS(ctx, secrets, namespace, spec.OSS)
	}
}

// OpenS3 opens an S3 or S3-compatible bucket with the AWS files in src.AWSSecret.
func OpenS3(ctx context.Context, secrets corev1client.SecretsGetter, namespace string, src *api.S3BackupSource) (backup.Store, Location, error) {
	loc, err := ParsePath(src.Path)
	if err != nil {
		return nil, Location{}, fmt.Errorf("spec.s3: %w", err)
	}
	secret, err := GetSecret(ctx, secrets, namespace, src.AWSSecret, "spec.s3.awsSecret")
	if err != nil {
		return nil, Location{}, err
	}
	profile, err := s3store.ParseAWSSecret(namespace+"/"+src.AWSSecret, secret.Data)
	if err != nil {
		return nil, Location{}, failure.Permanent(err)
	}
	store, err := s3store.New(s3store.Config{
		Bucket:         loc.Bucket,
		Region:         profile.Region,
		Credentials:    profile.Credentials,
		Endpoint:       src.Endpoint,
		ForcePathStyle: src.ForcePathStyle,
	})
	if err != nil {
		return nil, Location{}, failure.Permanent(err)
	}
	return store, loc, nil
}

// OpenOSS opens an Alibaba Cloud OSS bucket with the keys in src.OSSSecret.
func OpenOSS(ctx context.Context, secrets corev1client.SecretsGetter, namespace string, src *api.OSSBackupSource) (backup.Store, Location, error) {
	loc, err := ParsePath(src.Path)
	if err != nil {
		return nil, Location{}, fmt.Errorf("spec.oss: %w", err)
	}
	secret, err := GetSecret(ctx, secrets, namespace, src.OSSSecret, "spec.oss.ossSecret")
	if err != nil {
		return nil, Location{}, err
	}
	var missing []string
	for _, k := range []string{api.OSSSecretAccessKeyID, api.OSSSecretAccessKeySecret} {
		if len(secret.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, Location{}, failure.Permanent(fmt.Errorf("the OSS secret %s/%s has no %s", namespace, src.OSSSecret, strings.Join(missing, " and no ")))
	}
	endpoint := src.Endpoint
	if endpoint == "" {
		endpoint = api.DefaultOSSEndpoint
	}
	cfg, err := s3store.OSSConfig(endpoint, loc.Bucket,
		strings.TrimSpace(string(secret.Data[api.OSSSecretAccessKeyID])),
		strings.TrimSpace(string(secret.Data[api.OSSSecretAccessKeySecret])))
	if err != nil {
		return nil, Location{}, failure.Permanent(fmt.Errorf("spec.oss.endpoint: %w", err))
	}
	store, err := s3store.New(cfg)
	if err != nil {
		return nil, Location{}, failure.Permanent(err)
	}
	return store, loc, nil
}

// getSecret reads a secret. A missing secret is not Permanent: it is often created
// just after the EtcdBackup (by the same kubectl apply, or by a secrets operator).
func GetSecret(ctx context.Context, secrets corev1client.SecretsGetter, namespace, name, field string) (*corev1.Secret, error) {
	if name == "" {
		return nil, failure.Permanent(fmt.Errorf("%s names no secret", field))
	}
	s, err := secrets.Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("secret %s/%s (%s) not found", namespace, name, field)
	case err != nil:
		return nil, fmt.Errorf("get secret %s/%s (%s): %w", namespace, name, field, err)
	}
	return s, nil
}
