package restore

import (
	"context"
	"errors"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// OpenFunc opens the store a restore reads from, with credentials from namespace.
type OpenFunc func(ctx context.Context, namespace string, spec *api.RestoreSpec) (backup.Store, storage.Location, error)

// StoreOpener is the real OpenFunc: the backup operator's S3 and OSS stores, with
// the credentials secret read from the EtcdRestore's namespace. ABS and GCS are
// valid in the API but answered "not supported yet"; the original exited the
// process on an unknown type.
func StoreOpener(secrets corev1client.SecretsGetter) OpenFunc {
	return func(ctx context.Context, namespace string, spec *api.RestoreSpec) (backup.Store, storage.Location, error) {
		if err := storage.CheckSupported(spec.BackupStorageType); err != nil {
			return nil, storage.Location{}, err
		}
		switch spec.BackupStorageType {
		case api.BackupStorageTypeS3:
			s := spec.S3
			if s == nil {
				return nil, storage.Location{}, failure.Permanent(errors.New("backupStorageType S3 needs spec.s3"))
			}
			return storage.OpenS3(ctx, secrets, namespace, &api.S3BackupSource{
				Path: s.Path, AWSSecret: s.AWSSecret, Endpoint: s.Endpoint, ForcePathStyle: s.ForcePathStyle,
			})
		default: // OSS; CheckSupported let nothing else through.
			s := spec.OSS
			if s == nil {
				return nil, storage.Location{}, failure.Permanent(errors.New("backupStorageType OSS needs spec.oss"))
			}
			// OpenOSS applies the default endpoint, which the original's restore forgot.
			return storage.OpenOSS(ctx, secrets, namespace, &api.OSSBackupSource{
				Path: s.Path, OSSSecret: s.OSSSecret, Endpoint: s.Endpoint,
			})
		}
	}
}
