package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// BackupStorageType names where a backup is kept.
type BackupStorageType string

const (
	BackupStorageTypeS3  BackupStorageType = "S3"
	BackupStorageTypeABS BackupStorageType = "ABS"
	BackupStorageTypeGCS BackupStorageType = "GCS"
	BackupStorageTypeOSS BackupStorageType = "OSS"

	// BackupPeriodicFinalizer keeps a periodic EtcdBackup until its runner has stopped.
	BackupPeriodicFinalizer = "backup-operator-periodic"
	// DefaultBackupTimeoutInSecond bounds one backup when the policy names no timeout.
	DefaultBackupTimeoutInSecond = 60
	// MaxBackupTimeoutInSecond (a day) and MaxBackupIntervalInSecond (a
	// year) bound the policy: far larger values overflow a Go duration
	// (above 9 223 372 036 s) and turned into negative timeouts and a
	// ticker that panicked the backup operator for every backup.
	MaxBackupTimeoutInSecond  = 24 * 60 * 60
	MaxBackupIntervalInSecond = 365 * 24 * 60 * 60
	// DefaultOSSEndpoint is used when an OSS source names no endpoint.
	DefaultOSSEndpoint = "http://oss-cn-hangzhou.aliyuncs.com"

	// Keys of the secrets named by the sources.
	AWSSecretCredentialsFileKey = "credentials"
	AWSSecretConfigFileKey      = "config"
	OSSSecretAccessKeyID        = "accessKeyID"
	OSSSecretAccessKeySecret    = "accessKeySecret"
	ABSSecretStorageAccount     = "storage-account"
	ABSSecretStorageKey         = "storage-key"
	ABSSecretCloud              = "cloud"
	GCPSecretAccessToken        = "access-token"
	GCPSecretCredentialsJSON    = "credentials.json"

	// Keys of the client TLS secrets (clientTLSSecret, operatorSecret).
	CliCertFile = "etcd-client.crt"
	CliKeyFile  = "etcd-client.key"
	CliCAFile   = "etcd-client-ca.crt"
)

// CredentialSource says whose credentials reach an S3, ABS or GCS store.
type CredentialSource string

const (
	// CredentialSourceSecret is the original's way: the keys in the secret the
	// source names (awsSecret, absSecret, gcpSecret).
	CredentialSourceSecret CredentialSource = "Secret"
	// CredentialSourceOperatorServiceAccount is the cloud identity of the
	// backup (or restore) operator's own ServiceAccount, found by the cloud
	// SDK's default credential chain: IRSA or EKS Pod Identity for S3, Azure
	// Workload Identity for ABS, GKE Workload Identity (application default
	// credentials) for GCS. The operator lends it only to the namespaces its
	// -cloud-identity-namespaces flag lists, since it may reach whatever that
	// identity may, not only one namespace's bucket.
	CredentialSourceOperatorServiceAccount CredentialSource = "OperatorServiceAccount"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EtcdBackup asks for a one-shot or periodic backup of an etcd cluster.
type EtcdBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec says what to back up, where to, and how often.
	Spec BackupSpec `json:"spec"`
	// Status is the result of the latest backup.
	Status BackupStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EtcdBackupList is a list of EtcdBackups.
type EtcdBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackup `json:"items"`
}

// BackupSpec says what to back up and where to.
type BackupSpec struct {
	// EtcdEndpoints are the client URLs of one cluster; the member with the highest
	// revision among those reachable is snapshotted. Exactly one of EtcdEndpoints
	// and ClusterName is set.
	EtcdEndpoints []string `json:"etcdEndpoints,omitempty"`
	// ClusterName names an EtcdCluster of the backup's namespace: its client
	// Service, and its operator TLS secret when it has TLS, are used.
	ClusterName string `json:"clusterName,omitempty"`
	// StorageType is the store: S3, ABS, GCS or OSS; the block of the same
	// name (s3, abs, gcs, oss) says where in it.
	StorageType BackupStorageType `json:"storageType"`
	// BackupPolicy makes the backup periodic and bounds it; without it one
	// backup is taken.
	BackupPolicy *BackupPolicy `json:"backupPolicy,omitempty"`
	BackupSource `json:",inline"`
	// ClientTLSSecret holds etcd-client.crt, etcd-client.key and etcd-client-ca.crt.
	ClientTLSSecret string `json:"clientTLSSecret,omitempty"`
	// Compression compresses the snapshot before it is stored (and encrypted).
	Compression BackupCompression `json:"compression,omitempty"`
	// Encryption encrypts the snapshot before it is stored.
	Encryption *BackupEncryption `json:"encryption,omitempty"`
	// Verify says which stored backups are read back and proven restorable
	// (backup_verify.go).
	Verify *BackupVerify `json:"verify,omitempty"`
}

// BackupSource is where the backup goes; only the one matching StorageType is used.
type BackupSource struct {
	// S3 is an Amazon S3 or S3-compatible bucket (MinIO, Ceph).
	S3 *S3BackupSource `json:"s3,omitempty"`
	// ABS is an Azure Blob Storage container.
	ABS *ABSBackupSource `json:"abs,omitempty"`
	// GCS is a Google Cloud Storage bucket.
	GCS *GCSBackupSource `json:"gcs,omitempty"`
	// OSS is an Alibaba Cloud OSS bucket.
	OSS *OSSBackupSource `json:"oss,omitempty"`
}

// BackupPolicy makes a backup periodic and bounds it.
type BackupPolicy struct {
	// TimeoutInSecond bounds one backup; 0 means 60 seconds.
	TimeoutInSecond int64 `json:"timeoutInSecond,omitempty"`
	// BackupIntervalInSecond > 0 makes the backup periodic; 0 means one-shot.
	BackupIntervalInSecond int64 `json:"backupIntervalInSecond,omitempty"`
	// MaxBackups > 0 keeps only the newest N periodic backups; 0 keeps all.
	// With Retention, a backup either of them keeps stays.
	MaxBackups int `json:"maxBackups,omitempty"`
	// Schedule makes the backup periodic at the times of a standard five-field
	// cron expression ("0 */6 * * *") or a shorthand (@hourly, @daily, @weekly,
	// @monthly, @yearly), read in TimeZone. It replaces
	// BackupIntervalInSecond; the two are not set together.
	Schedule string `json:"schedule,omitempty"`
	// TimeZone is the IANA name ("Europe/Berlin") of the zone Schedule and the
	// hours, days, weeks and months of Retention are read in; empty means UTC.
	TimeZone string `json:"timeZone,omitempty"`
	// Retention keeps the newest periodic backup of each of the last hours,
	// days, weeks and months, and the newest backup of all; the other backups
	// this EtcdBackup wrote are deleted.
	Retention *BackupRetention `json:"retention,omitempty"`
	// Archive stores every change the cluster commits between the periodic
	// snapshots (backup_archive.go); periodic backups only.
	Archive *BackupArchive `json:"archive,omitempty"`
}

// BackupRetention says how many hours, days, weeks (Monday to Sunday) and
// months keep their newest backup. Only periods that hold a backup count, so a
// pause in the backups never deletes the ones taken before it.
type BackupRetention struct {
	// Hourly is how many of the latest hours with a backup keep their newest one.
	Hourly int `json:"hourly,omitempty"`
	// Daily is how many of the latest days with a backup keep their newest one.
	Daily int `json:"daily,omitempty"`
	// Weekly is how many of the latest weeks with a backup keep their newest one.
	Weekly int `json:"weekly,omitempty"`
	// Monthly is how many of the latest months with a backup keep their newest one.
	Monthly int `json:"monthly,omitempty"`
}

// BackupStatus is the result of the latest backup.
type BackupStatus struct {
	// Succeeded tells whether the latest backup was stored.
	Succeeded bool `json:"succeeded"`
	// Reason is the failure, if any. The capital R is the original's JSON key.
	Reason string `json:"Reason,omitempty"`
	// EtcdVersion is the etcd version of the member snapshotted.
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// EtcdRevision is the store revision the snapshot holds.
	EtcdRevision int64 `json:"etcdRevision,omitempty"`
	// LastSuccessDate is when a backup last succeeded; null before the first.
	LastSuccessDate metav1.Time `json:"lastSuccessDate,omitempty"`
	// BackupPath is the "bucket/key" of the latest stored snapshot.
	BackupPath string `json:"backupPath,omitempty"`
	// BackupSize is the latest snapshot's size in bytes.
	BackupSize int64 `json:"backupSize,omitempty"`
	// SHA256 is the hex digest of the latest stored snapshot.
	SHA256 string `json:"sha256,omitempty"`
	// Encoding is how the latest stored snapshot was compressed and encrypted;
	// absent when it is byte for byte what etcd sent.
	Encoding *BackupEncoding `json:"encoding,omitempty"`
	// Verified is what reading the latest verified backup back found.
	Verified *BackupVerification `json:"verified,omitempty"`
	// Archive is how far the continuous archive is, when one is asked for.
	Archive *BackupArchiveStatus `json:"archive,omitempty"`
}

// S3BackupSource stores backups in S3 or an S3-compatible store.
type S3BackupSource struct {
	// Path is "<bucket>/<key>".
	Path string `json:"path"`
	// AWSSecret holds the AWS "credentials" and "config" files (profile default).
	// Required unless CredentialSource is OperatorServiceAccount.
	AWSSecret string `json:"awsSecret,omitempty"`
	// Endpoint is an S3-compatible endpoint; empty means AWS.
	Endpoint string `json:"endpoint,omitempty"`
	// ForcePathStyle addresses buckets as "<endpoint>/<bucket>", as MinIO and Ceph need.
	ForcePathStyle bool `json:"forcePathStyle"`
	// CredentialSource is Secret (the default: awsSecret's keys) or
	// OperatorServiceAccount: the operator's own AWS identity (IRSA, EKS Pod
	// Identity) from the SDK's default chain, with the region of its
	// environment (AWS_REGION) unless Region names one, and no awsSecret.
	CredentialSource CredentialSource `json:"credentialSource,omitempty"`
	// Region is the bucket's region, with credentialSource
	// OperatorServiceAccount only (a secret's config file names its own);
	// empty means the operator's AWS_REGION. Backups kept in another region
	// than the cluster's need it.
	Region string `json:"region,omitempty"`
}

// ABSBackupSource stores backups in Azure Blob Storage.
type ABSBackupSource struct {
	// Path is "<container>/<blob>".
	Path string `json:"path"`
	// ABSSecret holds storage-account, storage-key and optionally cloud.
	// Required unless CredentialSource is OperatorServiceAccount.
	ABSSecret string `json:"absSecret,omitempty"`
	// Endpoint overrides the account's blob service URL (Azurite, Azure Stack);
	// empty means https://<account>.blob.<cloud's domain>.
	Endpoint string `json:"endpoint,omitempty"`
	// CredentialSource is Secret (the default: absSecret's account and key) or
	// OperatorServiceAccount: the operator's own Microsoft Entra identity
	// (Azure Workload Identity) from the SDK's default chain, for the account
	// whose blob service URL Endpoint gives, and no absSecret.
	CredentialSource CredentialSource `json:"credentialSource,omitempty"`
}

// GCSBackupSource stores backups in Google Cloud Storage.
type GCSBackupSource struct {
	// Path is "<bucket>/<object>".
	Path string `json:"path"`
	// GCPSecret holds access-token or credentials.json; empty means the pod's
	// application default credentials.
	GCPSecret string `json:"gcpSecret,omitempty"`
	// Endpoint is a GCS emulator's URL (fake-gcs-server), reached without
	// credentials unless CredentialSource is OperatorServiceAccount; empty
	// means Google.
	Endpoint string `json:"endpoint,omitempty"`
	// CredentialSource is empty (gcpSecret's keys, or without it the
	// operator's application default credentials, as in the original), Secret
	// (gcpSecret's keys, never anything else) or OperatorServiceAccount: the
	// operator's own Google identity (GKE Workload Identity) through
	// application default credentials, only where the operator lends it, and
	// no gcpSecret.
	CredentialSource CredentialSource `json:"credentialSource,omitempty"`
}

// OSSBackupSource stores backups in Alibaba Cloud OSS through its S3-compatible API.
type OSSBackupSource struct {
	// Path is "<bucket>/<object>".
	Path string `json:"path"`
	// OSSSecret holds accessKeyID and accessKeySecret.
	OSSSecret string `json:"ossSecret"`
	// Endpoint defaults to http://oss-cn-hangzhou.aliyuncs.com.
	Endpoint string `json:"endpoint,omitempty"`
}
