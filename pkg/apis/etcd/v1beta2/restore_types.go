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
	Spec              RestoreSpec   `json:"spec"`
	Status            RestoreStatus `json:"status,omitempty"`
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
	BackupStorageType BackupStorageType `json:"backupStorageType"`
	RestoreSource     `json:",inline"`
	// EtcdCluster is the cluster, in the restore's namespace, to replace.
	EtcdCluster EtcdClusterRef `json:"etcdCluster"`
}

// RestoreSource is where the backup is read from.
type RestoreSource struct {
	S3  *S3RestoreSource  `json:"s3,omitempty"`
	ABS *ABSRestoreSource `json:"abs,omitempty"`
	GCS *GCSRestoreSource `json:"gcs,omitempty"`
	OSS *OSSRestoreSource `json:"oss,omitempty"`
	// Encryption names the key of an encrypted backup; compression is recognized
	// by itself.
	Encryption *BackupEncryption `json:"encryption,omitempty"`
}

// EtcdClusterRef names an EtcdCluster.
type EtcdClusterRef struct {
	Name string `json:"name"`
}

// S3RestoreSource reads a backup from S3 or an S3-compatible store.
type S3RestoreSource struct {
	Path           string `json:"path"`
	AWSSecret      string `json:"awsSecret"`
	Endpoint       string `json:"endpoint"`
	ForcePathStyle bool   `json:"forcePathStyle"`
}

// ABSRestoreSource reads a backup from Azure Blob Storage, as ABSBackupSource.
type ABSRestoreSource struct {
	Path      string `json:"path"`
	ABSSecret string `json:"absSecret"`
	Endpoint  string `json:"endpoint,omitempty"`
}

// GCSRestoreSource reads a backup from Google Cloud Storage, as GCSBackupSource.
type GCSRestoreSource struct {
	Path      string `json:"path"`
	GCPSecret string `json:"gcpSecret,omitempty"`
	Endpoint  string `json:"endpoint,omitempty"`
}

// OSSRestoreSource reads a backup from Alibaba Cloud OSS.
type OSSRestoreSource struct {
	Path      string `json:"path"`
	OSSSecret string `json:"ossSecret"`
	Endpoint  string `json:"endpoint,omitempty"`
}

// RestoreStatus is the progress and result of a restore.
type RestoreStatus struct {
	// Succeeded is true once the restored cluster is available at its full size.
	Succeeded bool         `json:"succeeded"`
	Reason    string       `json:"reason,omitempty"`
	Phase     RestorePhase `json:"phase,omitempty"`
	// StartTime and CompletionTime bound the restore.
	StartTime      *metav1.Time `json:"startTime,omitempty"`
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}
