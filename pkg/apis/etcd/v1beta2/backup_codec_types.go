package v1beta2

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// BackupCompression is how a backup is compressed before it is stored.
type BackupCompression string

const (
	BackupCompressionNone BackupCompression = ""
	BackupCompressionGzip BackupCompression = "gzip"
	BackupCompressionZstd BackupCompression = "zstd"

	// EncryptionKeySecretKey is the key of BackupEncryption.KeySecret that holds
	// the key: 32 bytes, as they are or base64-encoded (`openssl rand -base64 32`).
	EncryptionKeySecretKey = "encryption-key"

	// ClusterTargetMessage is the rule that an EtcdBackup names its cluster one way.
	ClusterTargetMessage = "exactly one of spec.etcdEndpoints and spec.clusterName must be set"
	// ClusterNamePattern is an EtcdCluster's name; the backup reaches its
	// "<name>-client" Service.
	ClusterNamePattern = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ClusterNameMessage = "must be the name of an EtcdCluster: lowercase letters, digits and '-', starting and ending with a letter or digit"
)

var clusterNameRE = regexp.MustCompile(ClusterNamePattern)

// BackupEncryption encrypts backups on the client side, with AES-256-GCM, before
// they leave the backup operator; EtcdRestore and the seed's fetch-backup decrypt.
type BackupEncryption struct {
	// KeySecret names a Secret in the resource's namespace whose "encryption-key"
	// holds the key.
	KeySecret string `json:"keySecret"`
}

// BackupEncoding records how a stored backup was encoded, so that whoever restores
// it knows which key it needs without reading it: the object itself says the
// rest (pkg/backup/codec.go).
type BackupEncoding struct {
	// Compression is gzip or zstd, the algorithm the snapshot was compressed
	// with before any encryption; empty when it was not compressed.
	Compression BackupCompression `json:"compression,omitempty"`
	// Encryption is AES-256-GCM when the snapshot was encrypted; empty when not.
	Encryption string `json:"encryption,omitempty"`
	// KeySecret is the Secret (in the backup's namespace) whose encryption-key
	// encrypted the snapshot, as the spec named it at the time.
	KeySecret string `json:"keySecret,omitempty"`
	// KeyID is the hex key id the encrypted object's header carries, an HMAC of
	// the key: a key whose id differs cannot decrypt the backup. It identifies
	// the key without revealing it, and tells a replaced Secret apart.
	KeyID string `json:"keyID,omitempty"`
}

// BackupEncryptionAESGCM is BackupEncoding.Encryption of an encrypted backup.
const BackupEncryptionAESGCM = "AES-256-GCM"

// validateCodec checks the compression and encryption fields of a backup spec.
func validateCodec(p *field.Path, comp BackupCompression, enc *BackupEncryption) field.ErrorList {
	var errs field.ErrorList
	switch comp {
	case BackupCompressionNone, BackupCompressionGzip, BackupCompressionZstd:
	default:
		errs = append(errs, field.NotSupported(p.Child("compression"), comp,
			[]BackupCompression{BackupCompressionGzip, BackupCompressionZstd}))
	}
	errs = append(errs, validateEncryption(p, enc)...)
	return errs
}

func validateEncryption(p *field.Path, enc *BackupEncryption) field.ErrorList {
	if enc == nil {
		return nil
	}
	kp := p.Child("encryption", "keySecret")
	if enc.KeySecret == "" {
		return field.ErrorList{field.Required(kp, "names the secret holding the encryption key")}
	}
	return validateSecretName(kp, enc.KeySecret)
}

// validateTarget checks that a backup names its cluster exactly one way.
func validateTarget(p *field.Path, s *BackupSpec) field.ErrorList {
	var errs field.ErrorList
	switch {
	case len(s.EtcdEndpoints) == 0 && s.ClusterName == "":
		errs = append(errs, field.Required(p.Child("etcdEndpoints"), ClusterTargetMessage))
	case len(s.EtcdEndpoints) > 0 && s.ClusterName != "":
		errs = append(errs, field.Invalid(p.Child("clusterName"), s.ClusterName, ClusterTargetMessage))
	case s.ClusterName != "" && (len(s.ClusterName) > MaxNameLength || !clusterNameRE.MatchString(s.ClusterName)):
		errs = append(errs, field.Invalid(p.Child("clusterName"), s.ClusterName,
			fmt.Sprintf("%s, at most %d characters", ClusterNameMessage, MaxNameLength)))
	}
	return errs
}
