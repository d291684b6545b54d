package k8sutil

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// Ports of a member. Client and peer ports come from etcdutil, which builds
// the URLs on them, so the pod, the services and the URLs cannot disagree.
const (
	EtcdClientPort = etcdutil.ClientPort
	EtcdPeerPort   = etcdutil.PeerPort
	// EtcdMetricsPort is a plain-HTTP listener for /metrics and /health (etcd
	// >= 3.3), which lets the kubelet probe members without a shell or a
	// client certificate.
	EtcdMetricsPort = 2381
)

// Port names. The peer port is "peer" on the headless service but "server" on
// the pod, the name the original gave it; renaming a container port of
// existing pods is impossible, and tools may already refer to it.
const (
	ClientPortName  = "client"
	PeerPortName    = "peer"
	PodPeerPortName = "server"
	MetricsPortName = "metrics"
)

// ClientServiceName is the service clients use: it balances over ready members
// only.
func ClientServiceName(clusterName string) string {
	return clusterName + "-client"
}

// PeerServiceName is the headless service that gives members their DNS names
// (it is every member pod's subdomain). It carries the cluster's own name
// because member addresses, and so peer certificates, are built on it.
func PeerServiceName(clusterName string) string {
	return clusterName
}

// NewPeerService builds the headless service behind the member DNS names
// <member>.<cluster>.<namespace>.svc. It publishes members that are not ready
// yet: a new member needs its own name to resolve (the check-dns init
// container waits for it) and its peers' names before it can ever become
// ready. The original asked for this with the
// service.alpha.kubernetes.io/tolerate-unready-endpoints annotation, which
// current Kubernetes ignores, so it could not bootstrap a cluster there.
func NewPeerService(cluster *v1beta2.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: serviceMeta(cluster, PeerServiceName(cluster.Name)),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{
				servicePort(ClientPortName, EtcdClientPort),
				servicePort(PeerPortName, EtcdPeerPort),
			},
			Selector:                 ClusterLabels(cluster.Name),
			PublishNotReadyAddresses: true,
		},
	}
}

// NewClientService builds the service applications connect to. Unlike the
// peer service it lists ready members only, so clients are not sent to a
// member that is still joining or has lost its leader.
func NewClientService(cluster *v1beta2.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: serviceMeta(cluster, ClientServiceName(cluster.Name)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Ports:    []corev1.ServicePort{servicePort(ClientPortName, EtcdClientPort)},
			Selector: ClusterLabels(cluster.Name),
		},
	}
}

func serviceMeta(cluster *v1beta2.EtcdCluster, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       cluster.Namespace,
		Labels:          ClusterLabels(cluster.Name),
		OwnerReferences: []metav1.OwnerReference{AsOwner(cluster)},
	}
}

func servicePort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{
		Name:       name,
		Protocol:   corev1.ProtocolTCP,
		Port:       port,
		TargetPort: intstr.FromInt32(port),
	}
}

// NewDisruptionBudget is the PodDisruptionBudget that keeps a quorum of the
// cluster's members available through voluntary disruptions (kubectl drain,
// evictions): an eviction that would take a member of a bare quorum is
// refused. It returns nil for a single member, which no budget can protect
// without blocking every drain.
func NewDisruptionBudget(cluster *v1beta2.EtcdCluster) *policyv1.PodDisruptionBudget {
	if cluster.Spec.Size < 2 {
		return nil
	}
	minAvailable := intstr.FromInt32(int32(cluster.Spec.Size/2 + 1))
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name:            cluster.Name,
			Namespace:       cluster.Namespace,
			Labels:          ClusterLabels(cluster.Name),
			OwnerReferences: []metav1.OwnerReference{AsOwner(cluster)},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: ClusterLabels(cluster.Name)},
		},
	}
}
