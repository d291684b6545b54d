// Package storage opens the store an EtcdBackup or an EtcdRestore points at, from
// its spec and the credentials secret it names. It is the one place that knows
// the storage types: everything past it works on a backup.Store.
package storage

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/absstore"
	"github.com/openetcd/etcd-operator/pkg/backup/gcsstore"
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

// ParsePath splits "<bucket>/<key>" (for ABS "<container>/<blob>"); both parts
// must be non-empty.
func ParsePath(path string) (Location, error) {
	bucket, key, ok := strings.Cut(path, "/")
	if !ok || bucket == "" || key == "" {
		return Location{}, failure.Permanent(fmt.Errorf("path %q is not \"<bucket>/<key>\"", path))
	}
	return Location{Bucket: bucket, Key: key}, nil
}

// CheckSupported refuses a storage type the operator cannot use. The original
// exited the whole process on an unknown type.
func CheckSupported(t api.BackupStorageType) error {
	if supported(t) {
		return nil
	}
	return failure.Permanent(fmt.Errorf("unknown storage type %q: use S3, ABS, GCS or OSS", t))
}

// MetricLabel is the storage_type label of a metric: the storage type, or
// "unknown", which keeps the label set fixed whatever string a CRD without a
// schema lets into the spec.
func MetricLabel(t api.BackupStorageType) string {
	if supported(t) {
		return string(t)
	}
	return "unknown"
}

func supported(t api.BackupStorageType) bool {
	switch t {
	case api.BackupStorageTypeS3, api.BackupStorageTypeOSS, api.BackupStorageTypeABS, api.BackupStorageTypeGCS:
		return true
	}
	return false
}

// ForBackup opens the store an EtcdBackup names, with the credentials secret read
// from the backup's own namespace, or the operator's own cloud identity where
// the source asks for it and lend lends it to that namespace.
func ForBackup(ctx context.Context, secrets corev1client.SecretsGetter, lend CloudIdentity, namespace string, spec *api.BackupSpec) (backup.Store, Location, error) {
	return open(ctx, secrets, lend, namespace, "storage type", spec.StorageType, spec.BackupSource)
}

// ForRestore opens the store an EtcdRestore reads from, with the credentials
// secret read from the restore's namespace, or the operator's own cloud
// identity as in ForBackup. Its sources have the fields of the backup's, so
// both go through the same code.
func ForRestore(ctx context.Context, secrets corev1client.SecretsGetter, lend CloudIdentity, namespace string, spec *api.RestoreSpec) (backup.Store, Location, error) {
	var src api.BackupSource
	if s := spec.S3; s != nil {
		src.S3 = &api.S3BackupSource{Path: s.Path, AWSSecret: s.AWSSecret, Endpoint: s.Endpoint, ForcePathStyle: s.ForcePathStyle,
			CredentialSource: s.CredentialSource, Region: s.Region}
	}
	if s := spec.ABS; s != nil {
		src.ABS = &api.ABSBackupSource{Path: s.Path, ABSSecret: s.ABSSecret, Endpoint: s.Endpoint, CredentialSource: s.CredentialSource}
	}
	if s := spec.GCS; s != nil {
		src.GCS = &api.GCSBackupSource{Path: s.Path, GCPSecret: s.GCPSecret, Endpoint: s.Endpoint, CredentialSource: s.CredentialSource}
	}
	if s := spec.OSS; s != nil {
		// OpenOSS applies the default endpoint, which the original's restore forgot.
		src.OSS = &api.OSSBackupSource{Path: s.Path, OSSSecret: s.OSSSecret, Endpoint: s.Endpoint}
	}
	return open(ctx, secrets, lend, namespace, "backupStorageType", spec.BackupStorageType, src)
}

func open(ctx context.Context, secrets corev1client.SecretsGetter, lend CloudIdentity, namespace, typeField string, t api.BackupStorageType, src api.BackupSource) (backup.Store, Location, error) {
	if err := CheckSupported(t); err != nil {
		return nil, Location{}, err
	}
	missing := func(block string) error {
		return failure.Permanent(fmt.Errorf("%s %s needs spec.%s", typeField, t, block))
	}
	switch t {
	case api.BackupStorageTypeS3:
		if src.S3 == nil {
			return nil, Location{}, missing("s3")
		}
		return OpenS3(ctx, secrets, lend, namespace, src.S3)
	case api.BackupStorageTypeABS:
		if src.ABS == nil {
			return nil, Location{}, missing("abs")
		}
		return OpenABS(ctx, secrets, lend, namespace, src.ABS)
	case api.BackupStorageTypeGCS:
		if src.GCS == nil {
			return nil, Location{}, missing("gcs")
		}
		return OpenGCS(ctx, secrets, lend, namespace, src.GCS)
	default: // OSS; CheckSupported let nothing else through.
		if src.OSS == nil {
			return nil, Location{}, missing("oss")
		}
		return OpenOSS(ctx, secrets, namespace, src.OSS)
	}
}

// OpenS3 opens an S3 or S3-compatible bucket with the AWS files in
// src.AWSSecret, or with the operator's own AWS identity (see CloudIdentity).
func OpenS3(ctx context.Context, secrets corev1client.SecretsGetter, lend CloudIdentity, namespace string, src *api.S3BackupSource) (backup.Store, Location, error) {
	loc, err := ParsePath(src.Path)
	if err != nil {
		return nil, Location{}, fmt.Errorf("spec.s3: %w", err)
	}
	how, err := lend.chooseCredentials(namespace, credentialsRequest{block: "s3", secretField: "awsSecret", secret: src.AWSSecret, source: src.CredentialSource})
	if err != nil {
		return nil, Location{}, err
	}
	cfg := s3store.Config{Bucket: loc.Bucket, Endpoint: src.Endpoint, ForcePathStyle: src.ForcePathStyle}
	if how == fromOperatorIdentity {
		// Not Permanent: STS or the Pod Identity agent may be down for a while.
		if cfg.Region, cfg.Provider, err = s3store.DefaultChain(ctx, src.Region); err != nil {
			return nil, Location{}, fmt.Errorf("spec.s3.credentialSource %s: %w", src.CredentialSource, err)
		}
	} else {
		secret, err := GetSecret(ctx, secrets, namespace, src.AWSSecret, "spec.s3.awsSecret")
		if err != nil {
			return nil, Location{}, err
		}
		profile, err := s3store.ParseAWSSecret(namespace+"/"+src.AWSSecret, secret.Data)
		if err != nil {
			return nil, Location{}, failure.Permanent(err)
		}
		cfg.Region, cfg.Credentials = profile.Region, profile.Credentials
	}
	store, err := s3store.New(cfg)
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

// OpenABS opens an Azure Blob Storage container with the account and key in
// src.ABSSecret, or with the operator's own Microsoft Entra identity (see
// CloudIdentity) on the account src.Endpoint names.
func OpenABS(ctx context.Context, secrets corev1client.SecretsGetter, lend CloudIdentity, namespace string, src *api.ABSBackupSource) (backup.Store, Location, error) {
	loc, err := ParsePath(src.Path)
	if err != nil {
		return nil, Location{}, fmt.Errorf("spec.abs: %w", err)
	}
	how, err := lend.chooseCredentials(namespace, credentialsRequest{block: "abs", secretField: "absSecret", secret: src.ABSSecret, source: src.CredentialSource})
	if err != nil {
		return nil, Location{}, err
	}
	if how == fromOperatorIdentity {
		return openABSWithIdentity(ctx, lend, src, loc)
	}
	secret, err := GetSecret(ctx, secrets, namespace, src.ABSSecret, "spec.abs.absSecret")
	if err != nil {
		return nil, Location{}, err
	}
	var missing []string
	for _, k := range []string{api.ABSSecretStorageAccount, api.ABSSecretStorageKey} {
		if len(strings.TrimSpace(string(secret.Data[k]))) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, Location{}, failure.Permanent(fmt.Errorf("the ABS secret %s/%s has no %s", namespace, src.ABSSecret, strings.Join(missing, " and no ")))
	}
	store, err := absstore.New(absstore.Config{
		Container: loc.Bucket,
		Account:   strings.TrimSpace(string(secret.Data[api.ABSSecretStorageAccount])),
		Key:       strings.TrimSpace(string(secret.Data[api.ABSSecretStorageKey])),
		Cloud:     strings.TrimSpace(string(secret.Data[api.ABSSecretCloud])),
		Endpoint:  src.Endpoint,
	})
	if err != nil {
		return nil, Location{}, failure.Permanent(fmt.Errorf("the ABS secret %s/%s or spec.abs: %w", namespace, src.ABSSecret, err))
	}
	return store, loc, nil
}

// OpenGCS opens a Google Cloud Storage bucket with the access-token or
// credentials.json in src.GCPSecret, or with the operator's own Google identity
// (see CloudIdentity); a source that names no secret and asks for nothing uses
// the pod's application default credentials, as in the original.
func OpenGCS(ctx context.Context, secrets corev1client.SecretsGetter, lend CloudIdentity, namespace string, src *api.GCSBackupSource) (backup.Store, Location, error) {
	loc, err := ParsePath(src.Path)
	if err != nil {
		return nil, Location{}, fmt.Errorf("spec.gcs: %w", err)
	}
	how, err := lend.chooseCredentials(namespace, credentialsRequest{block: "gcs", secretField: "gcpSecret", secret: src.GCPSecret,
		source: src.CredentialSource, defaultsToADC: true})
	if err != nil {
		return nil, Location{}, err
	}
	cfg := gcsstore.Config{Bucket: loc.Bucket, Endpoint: src.Endpoint}
	switch how {
	case fromOperatorIdentity:
		// Not Permanent: the metadata server may be slow to answer for a new pod.
		if cfg.DefaultCredentials, err = gcsstore.DefaultCredentials(ctx); err != nil {
			return nil, Location{}, fmt.Errorf("spec.gcs.credentialSource %s: %w", src.CredentialSource, err)
		}
	case fromSecret:
		// The original fell back to default credentials when the named secret could
		// not be read; a named secret that is missing is an error here, since
		// backing up with other credentials than the ones asked for is a surprise.
		secret, err := GetSecret(ctx, secrets, namespace, src.GCPSecret, "spec.gcs.gcpSecret")
		if err != nil {
			return nil, Location{}, err
		}
		cfg.AccessToken = strings.TrimSpace(string(secret.Data[api.GCPSecretAccessToken]))
		cfg.CredentialsJSON = secret.Data[api.GCPSecretCredentialsJSON]
		if cfg.AccessToken == "" && len(cfg.CredentialsJSON) == 0 {
			return nil, Location{}, failure.Permanent(fmt.Errorf("the GCP secret %s/%s has neither %s nor %s",
				namespace, src.GCPSecret, api.GCPSecretAccessToken, api.GCPSecretCredentialsJSON))
		}
	}
	store, err := gcsstore.New(ctx, cfg)
	if err != nil {
		if src.GCPSecret != "" {
			err = fmt.Errorf("the GCP secret %s/%s or spec.gcs: %w", namespace, src.GCPSecret, err)
		}
		return nil, Location{}, failure.Permanent(err)
	}
	return store, loc, nil
}

// GetSecret reads a secret. A missing secret is not Permanent: it is often created
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
