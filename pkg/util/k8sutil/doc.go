// Package k8sutil builds the Kubernetes objects of an etcd cluster: member pods,
// their PVCs and the two services, plus small predicates over pod state.
//
// Every builder is a pure function of its inputs and makes no API call, so the
// objects can be tested as golden files and the reconcile loop decides alone
// when to create, patch or delete them. Builders expect the cluster already
// defaulted with (*v1beta2.EtcdCluster).WithDefaults.
package k8sutil
