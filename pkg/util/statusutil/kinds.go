package statusutil

import (
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/record"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	versioned "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
)

// ClusterWriter writes EtcdCluster statuses.
type ClusterWriter = Writer[*api.EtcdCluster, api.ClusterStatus]

// BackupWriter writes EtcdBackup statuses.
type BackupWriter = Writer[*api.EtcdBackup, api.BackupStatus]

// RestoreWriter writes EtcdRestore statuses.
type RestoreWriter = Writer[*api.EtcdRestore, api.RestoreStatus]

// ForClusters makes the writer of EtcdCluster statuses.
func ForClusters(client versioned.Interface, recorder record.EventRecorder, log *logrus.Entry) *ClusterWriter {
	return New(Config[*api.EtcdCluster, api.ClusterStatus]{
		Group: api.GroupName, Version: api.SchemeGroupVersion.Version,
		Resource: api.EtcdClusterResourcePlural, Kind: api.EtcdClusterResourceKind,
		Client:             func(ns string) Client[*api.EtcdCluster] { return client.EtcdV1beta2().EtcdClusters(ns) },
		Status:             func(o *api.EtcdCluster) *api.ClusterStatus { return &o.Status },
		ObservedGeneration: func(s *api.ClusterStatus) *int64 { return &s.ObservedGeneration },
		Recorder:           recorder,
		Log:                log,
	})
}

// ForBackups makes the writer of EtcdBackup statuses.
func ForBackups(client versioned.Interface, recorder record.EventRecorder, log *logrus.Entry) *BackupWriter {
	return New(Config[*api.EtcdBackup, api.BackupStatus]{
		Group: api.GroupName, Version: api.SchemeGroupVersion.Version,
		Resource: api.EtcdBackupResourcePlural, Kind: api.EtcdBackupResourceKind,
		Client:   func(ns string) Client[*api.EtcdBackup] { return client.EtcdV1beta2().EtcdBackups(ns) },
		Status:   func(o *api.EtcdBackup) *api.BackupStatus { return &o.Status },
		Recorder: recorder,
		Log:      log,
	})
}

// ForRestores makes the writer of EtcdRestore statuses.
func ForRestores(client versioned.Interface, recorder record.EventRecorder, log *logrus.Entry) *RestoreWriter {
	return New(Config[*api.EtcdRestore, api.RestoreStatus]{
		Group: api.GroupName, Version: api.SchemeGroupVersion.Version,
		Resource: api.EtcdRestoreResourcePlural, Kind: api.EtcdRestoreResourceKind,
		Client:   func(ns string) Client[*api.EtcdRestore] { return client.EtcdV1beta2().EtcdRestores(ns) },
		Status:   func(o *api.EtcdRestore) *api.RestoreStatus { return &o.Status },
		Recorder: recorder,
		Log:      log,
	})
}
