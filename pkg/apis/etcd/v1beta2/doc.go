// Package v1beta2 holds the etcd.database.coreos.com/v1beta2 API: EtcdCluster,
// EtcdBackup and EtcdRestore. JSON keys match the archived coreos/etcd-operator
// byte for byte (including its odd casing) so that existing manifests keep working.
//
// +k8s:deepcopy-gen=package
// +groupName=etcd.database.coreos.com
package v1beta2
