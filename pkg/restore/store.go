package restore

import (
	"context"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/backup/storage"
)

// OpenFunc opens the store a restore reads from, with credentials from namespace.
type OpenFunc func(ctx context.Context, namespace string, spec *api.RestoreSpec) (backup.Store, storage.Location, error)

// StoreOpener is the real OpenFunc: the backup operator's stores, with the
// credentials secret read from the EtcdRestore's namespace, or the restore
// operator's own cloud identity where the source asks for it and lend lends
// it to that namespace.
func StoreOpener(secrets corev1client.SecretsGetter, lend storage.CloudIdentity) OpenFunc {
	return func(ctx context.Context, namespace string, spec *api.RestoreSpec) (backup.Store, storage.Location, error) {
		return storage.ForRestore(ctx, secrets, lend, namespace, spec)
	}
}
