package v1beta2

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
	// PointInTime, when set, restores the cluster as it was at a time or a
	// revision, or as the backup last saw it (latest), from the periodic
	// snapshots and the continuous archive of an
	// EtcdBackup with backupPolicy.archive. The source's path is then that
	// EtcdBackup's path (the base of its "<path>_v<revision>_<time>"
	// snapshots and of its "<path>.archive/" chunks), not a snapshot's.
	PointInTime *RestorePointInTime `json:"pointInTime,omitempty"`
}

// RestorePointInTime is the point a restore goes back to: a time, a
// revision, or the newest change the backup holds; exactly one of them.
type RestorePointInTime struct {
	// Time is an RFC 3339 time ("2026-11-28T14:32:10Z", fractions of a
	// second allowed): the cluster gets every change the archive received up
	// to it, and none received after it.
	Time string `json:"time,omitempty"`
	// Revision is the last revision of the source cluster the restored one
	// holds.
	Revision int64 `json:"revision,omitempty"`
	// Latest restores the newest change the backup holds: its newest
	// snapshot and every change its archive stored after it, as the restore
	// operator finds them when it plans. Where the archive cannot be replayed
	// that far (a hole after the newest snapshot, a chunk that cannot be
	// read), the restore goes as far as it can and says what it could not
	// reach in status.pointInTime.shortfall and a Warning event; a time or a
	// revision is refused instead.
	Latest bool `json:"latest,omitempty"`
}

// ParsedTime is Time as a time; zero when Time is empty.
func (p *RestorePointInTime) ParsedTime() (time.Time, error) {
	if p == nil || p.Time == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, p.Time)
}

// String says the point as a user names it.
func (p *RestorePointInTime) String() string {
	if p.Latest {
		return "the newest archived change"
	}
	if p.Time != "" {
		return "time " + p.Time
	}
	return fmt.Sprintf("revision %d", p.Revision)
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
	// PointInTime is what a restore to a point chose and replayed, once it
	// chose it.
	PointInTime *RestorePointInTimeStatus `json:"pointInTime,omitempty"`
}

// RestorePointInTimeStatus is the snapshot a restore to a point started
// from, and how far the archive is replayed onto it.
type RestorePointInTimeStatus struct {
	// Snapshot is the "bucket/key" of the full snapshot restored first: the
	// newest at or before the point.
	Snapshot string `json:"snapshot"`
	// SnapshotRevision is the revision its name records.
	SnapshotRevision int64 `json:"snapshotRevision"`
	// Revision is the last revision of the source cluster replayed from the
	// archive (SnapshotRevision when the point needs none).
	Revision int64 `json:"revision"`
	// Time is when the archiver received that revision; empty when no
	// revision is replayed.
	Time *metav1.Time `json:"time,omitempty"`
	// Revisions counts the revisions the archive adds to the snapshot.
	Revisions int64 `json:"revisions,omitempty"`
	// Events counts the changes (puts and deletes) in those revisions.
	Events int64 `json:"events,omitempty"`
	// Keys is how many keys the replay writes or deletes, each checked
	// afterwards against the value the archive gives it at the point.
	Keys int64 `json:"keys,omitempty"`
	// Replayed is true once the seed replayed the archive and its checks
	// passed.
	Replayed bool `json:"replayed,omitempty"`
	// ArchiveRevision is, with latest, the newest revision the archive's
	// chunks hold when the restore planned (0 when it held none).
	ArchiveRevision int64 `json:"archiveRevision,omitempty"`
	// Shortfall is, with latest, why the restore stops before the newest
	// change the backup holds; empty when it reaches it.
	Shortfall string `json:"shortfall,omitempty"`
}
