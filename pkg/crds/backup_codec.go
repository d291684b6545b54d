package crds

import (
	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// backupTargetRule: an EtcdBackup names its cluster by endpoints or by name,
// never both, never neither.
var backupTargetRule = [2]string{"has(self.etcdEndpoints) != has(self.clusterName)", api.ClusterTargetMessage}

func clusterNameSchema() schema {
	return withDescription(withRules(boundedStr(api.MaxNameLength), [2]string{matches(api.ClusterNamePattern), api.ClusterNameMessage}),
		"An EtcdCluster of this namespace, backed up through its <name>-client Service (and its operator TLS secret when it has TLS); instead of etcdEndpoints.")
}

func compressionSchema() schema {
	return withDescription(enum(string(api.BackupCompressionGzip), string(api.BackupCompressionZstd)),
		"Compress the snapshot before it is stored: gzip or zstd.")
}

func encryptionSchema() schema {
	return withDescription(object(map[string]schema{"keySecret": secretName()}, "keySecret"),
		"Client-side AES-256-GCM encryption; keySecret names a Secret whose encryption-key holds 32 bytes (or their base64).")
}
