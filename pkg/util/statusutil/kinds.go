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
	w := forKind(api.EtcdClusterResourcePlural, api.EtcdClusterResourceKind,
		func(ns string) Client[*api.EtcdCluster] { return client.EtcdV1beta2().EtcdClusters(ns) },
		func(o *api.EtcdCluster) *api.ClusterStatus { return &o.Status }, recorder, log)
	w.cfg.ObservedGeneration = func(s *api.ClusterStatus) *int64 { return &s.ObservedGeneration }
	return w
}

// ForBackups makes the writer of EtcdBackup statuses.
func ForBackups(client versioned.Interface, recorder record.EventRecorder, log *logrus.Entry) *BackupWriter {
	return forKind(api.EtcdBackupResourcePlural, api.EtcdBackupResourceKind,
		func(ns string) Client[*api.EtcdBackup] { return client.EtcdV1beta2().EtcdBackups(ns) },
		func(o *api.EtcdBackup) *api.BackupStatus { return &o.Status }, recorder, log)
}

// ForRestores makes the writer of EtcdRestore statuses.
func ForRestores(client versioned.Interface, recorder record.EventRecorder, log *logrus.Entry) *RestoreWriter {
	return forKind(api.EtcdRestoreResourcePlural, api.EtcdRestoreResourceKind,
		func(ns string) Client[*api.EtcdRestore] { return client.EtcdV1beta2().EtcdRestores(ns) },
		func(o *api.EtcdRestore) *api.RestoreStatus { return &o.Status }, recorder, log)
}

func forKind[T Object, S any](resource, kind string, client func(string) Client[T], status func(T) *S,
	recorder record.EventRecorder, log *logrus.Entry) *Writer[T, S] {
	return New(Config[T, S]{
		Group: api.GroupName, Version: api.SchemeGroupVersion.Version, Resource: resource, Kind: kind,
		Client: client, Status: status, Recorder: recorder, Log: log,
	})
}
