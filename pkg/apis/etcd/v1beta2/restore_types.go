package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// RestorePhase is the progress of a restore.
type RestorePhase string

const (
	RestorePhaseValidating RestorePhase = "Validating"
	RestorePhaseFetching   RestorePhase = "Fetching"
	RestorePhaseRestoring  RestorePhase = "Restoring"
	RestorePhaseCompleted  RestorePhase = "Completed"
	RestorePhaseFailed     RestorePhase = "Failed"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EtcdRestore replaces an EtcdCluster with one seeded from a backup. Its name must
// equal spec.etcdCluster.name.
type EtcdRestore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec says which backup restores which cluster.
	Spec RestoreSpec `json:"spec"`
	// Status is the progress and result of the restore.
	Status RestoreStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EtcdRestoreList is a list of EtcdRestores.
type EtcdRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdRestore `json:"items"`
}

// RestoreSpec says which backup restores which cluster.
type RestoreSpec struct {
	// BackupStorageType is the store holding the backup: S3, ABS, GCS or
	// OSS; the block of the same name (s3, abs, gcs, oss) says where in it.
	BackupStorageType BackupStorageType `json:"backupStorageType"`
	RestoreSource     `json:",inline"`
	// EtcdCluster is the cluster, in the restore's namespace, to replace.
	EtcdCluster EtcdClusterRef `json:"etcdCluster"`
}

// RestoreSource is where the backup is read from.
type RestoreSource struct {
	// S3 is an Amazon S3 or S3-compatible bucket (MinIO, Ceph).
	S3 *S3RestoreSource `json:"s3,omitempty"`
	// ABS is an Azure Blob Storage container.
	ABS *ABSRestoreSource `json:"abs,omitempty"`
	// GCS is a Google Cloud Storage bucket.
	GCS *GCSRestoreSource `json:"gcs,omitempty"`
	// OSS is an Alibaba Cloud OSS bucket.
	OSS *OSSRestoreSource `json:"oss,omitempty"`
	// Encryption names the key of an encrypted backup; compression is recognized
	// by itself.
	Encryption *BackupEncryption `json:"encryption,omitempty"`
}

// EtcdClusterRef names an EtcdCluster.
type EtcdClusterRef struct {
	// Name is the EtcdCluster's name, which must equal the EtcdRestore's.
	Name string `json:"name"`
}

// S3RestoreSource reads a backup from S3 or an S3-compatible store.
type S3RestoreSource struct {
	// Path is "<bucket>/<key>" of the snapshot.
	Path string `json:"path"`
	// AWSSecret holds the AWS "credentials" and "config" files (profile default).
	// Required unless CredentialSource is OperatorServiceAccount.
	AWSSecret string `json:"awsSecret,omitempty"`
	// Endpoint is an S3-compatible endpoint; empty means AWS.
	Endpoint string `json:"endpoint"`
	// ForcePathStyle addresses buckets as "<endpoint>/<bucket>", as MinIO and Ceph need.
	ForcePathStyle bool `json:"forcePathStyle"`
	// CredentialSource is Secret (the default) or OperatorServiceAccount, as
	// in S3BackupSource.
	CredentialSource CredentialSource `json:"credentialSource,omitempty"`
	// Region is the bucket's region with credentialSource
	// OperatorServiceAccount, as in S3BackupSource.
	Region string `json:"region,omitempty"`
}

// ABSRestoreSource reads a backup from Azure Blob Storage, as ABSBackupSource.
type ABSRestoreSource struct {
	// Path is "<container>/<blob>" of the snapshot.
	Path string `json:"path"`
	// ABSSecret holds storage-account, storage-key and optionally cloud.
	// Required unless CredentialSource is OperatorServiceAccount.
	ABSSecret string `json:"absSecret,omitempty"`
	// Endpoint overrides the account's blob service URL (Azurite, Azure Stack).
	Endpoint string `json:"endpoint,omitempty"`
	// CredentialSource is Secret (the default) or OperatorServiceAccount, as
	// in ABSBackupSource.
	CredentialSource CredentialSource `json:"credentialSource,omitempty"`
}

// GCSRestoreSource reads a backup from Google Cloud Storage, as GCSBackupSource.
type GCSRestoreSource struct {
	// Path is "<bucket>/<object>" of the snapshot.
	Path string `json:"path"`
	// GCPSecret holds access-token or credentials.json; empty means the pod's
	// application default credentials.
	GCPSecret string `json:"gcpSecret,omitempty"`
	// Endpoint is a GCS emulator's URL; empty means Google.
	Endpoint string `json:"endpoint,omitempty"`
	// CredentialSource is empty, Secret or OperatorServiceAccount, as in
	// GCSBackupSource.
	CredentialSource CredentialSource `json:"credentialSource,omitempty"`
}

// OSSRestoreSource reads a backup from Alibaba Cloud OSS.
type OSSRestoreSource struct {
	// Path is "<bucket>/<object>" of the snapshot.
	Path string `json:"path"`
	// OSSSecret holds accessKeyID and accessKeySecret.
	OSSSecret string `json:"ossSecret"`
	// Endpoint defaults to http://oss-cn-hangzhou.aliyuncs.com.
	Endpoint string `json:"endpoint,omitempty"`
}

// RestoreStatus is the progress and result of a restore.
type RestoreStatus struct {
	// Succeeded is true once the restored cluster is available at its full size.
	Succeeded bool `json:"succeeded"`
	// Reason is the failure, if any.
	Reason string `json:"reason,omitempty"`
	// Phase is Validating, Fetching, Restoring, Completed or Failed.
	Phase RestorePhase `json:"phase,omitempty"`
	// StartTime is when the restore started.
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when it completed or failed.
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}
