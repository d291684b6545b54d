package storage

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
)

// EncryptionKey reads the key that enc names from namespace; nil when enc is nil.
func EncryptionKey(ctx context.Context, secrets corev1client.SecretsGetter, namespace string, enc *api.BackupEncryption) ([]byte, error) {
	if enc == nil {
		return nil, nil
	}
	s, err := GetSecret(ctx, secrets, namespace, enc.KeySecret, "spec.encryption.keySecret")
	if err != nil {
		return nil, err
	}
	key, err := ParseEncryptionKey(s.Data[api.EncryptionKeySecretKey])
	if err != nil {
		return nil, failure.Permanent(fmt.Errorf("secret %s/%s (spec.encryption.keySecret): %w", namespace, enc.KeySecret, err))
	}
	return key, nil
}

// ParseEncryptionKey accepts the 32 bytes of a key as they are, or base64-encoded
// (what `openssl rand -base64 32` prints, with or without its newline).
func ParseEncryptionKey(data []byte) ([]byte, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("it has no %q", api.EncryptionKeySecretKey)
	}
	if len(data) == backup.KeySize {
		return bytes.Clone(data), nil
	}
	if key, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(data))); err == nil && len(key) == backup.KeySize {
		return key, nil
	}
	return nil, fmt.Errorf("%q must hold %d bytes, as they are or in base64 (openssl rand -base64 32), not %d bytes",
		api.EncryptionKeySecretKey, backup.KeySize, len(data))
}

// CodecFor is how an EtcdBackup's snapshots are stored: its compression, and
// its encryption key read from the backup's namespace.
func CodecFor(ctx context.Context, secrets corev1client.SecretsGetter, namespace string, spec *api.BackupSpec) (backup.Codec, error) {
	key, err := EncryptionKey(ctx, secrets, namespace, spec.Encryption)
	if err != nil {
		return backup.Codec{}, err
	}
	c := backup.Codec{Compression: string(spec.Compression), Key: key}
	if err := c.Check(); err != nil {
		return backup.Codec{}, failure.Permanent(fmt.Errorf("spec.compression: %w", err))
	}
	return c, nil
}
