package backupcontroller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	versioned "github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/failure"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// target is the cluster a backup snapshots: its endpoints, and the client TLS
// secret to reach them with.
type target struct {
	endpoints []string
	tlsSecret string
	// tlsField names where tlsSecret came from, for error messages.
	tlsField string
}

// resolveTarget finds the endpoints of an EtcdBackup: spec.etcdEndpoints as
// given, or the client Service of the EtcdCluster that spec.clusterName names,
// with https and the cluster's operator secret when the cluster serves clients
// over TLS (an explicit spec.clientTLSSecret still wins).
func resolveTarget(ctx context.Context, clusters versioned.Interface, eb *api.EtcdBackup) (target, error) {
	spec := &eb.Spec
	t := target{endpoints: spec.EtcdEndpoints, tlsSecret: spec.ClientTLSSecret, tlsField: "spec.clientTLSSecret"}
	if spec.ClusterName == "" {
		return t, nil
	}
	if clusters == nil {
		return t, failure.Permanent(errors.New("spec.clusterName: this backup operator cannot read EtcdClusters"))
	}
	cl, err := clusters.EtcdV1beta2().EtcdClusters(eb.Namespace).Get(ctx, spec.ClusterName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// Not Permanent: the cluster is often created with its backup.
		return t, fmt.Errorf("EtcdCluster %s/%s (spec.clusterName) not found", eb.Namespace, spec.ClusterName)
	case err != nil:
		return t, fmt.Errorf("get EtcdCluster %s/%s (spec.clusterName): %w", eb.Namespace, spec.ClusterName, err)
	}
	secure := cl.Spec.TLS.IsSecureClient()
	scheme := "http"
	if secure {
		scheme = "https"
	}
	domain := ""
	if cl.Spec.Pod != nil {
		domain = cl.Spec.Pod.ClusterDomain
		if domain != "" && !strings.HasPrefix(domain, ".") {
			domain = "." + domain
		}
	}
	t.endpoints = []string{fmt.Sprintf("%s://%s.%s.svc%s:%d", scheme, k8sutil.ClientServiceName(cl.Name), eb.Namespace, domain, etcdutil.ClientPort)}
	if secure && t.tlsSecret == "" {
		t.tlsSecret = cl.Spec.TLS.Secrets(cl.Name).Client
		t.tlsField = fmt.Sprintf("the client TLS secret of EtcdCluster %s", cl.Name)
	}
	return t, nil
}

// checkOwnNamespace refuses, for a cluster-wide backup operator, endpoints
// that are not known to be in the EtcdBackup's namespace: otherwise anyone who
// may create an EtcdBackup in one namespace could copy another namespace's etcd
// into a bucket of theirs. Only the host name can be checked, so only in-cluster
// names that carry the namespace are admitted: "<service>.<ns>.svc" and member
// names "<pod>.<service>.<ns>.svc", optionally with ".cluster.local". Shorter
// names are completed by the DNS search path of the operator's pod, whose first
// domain is the operator's namespace, not the backup's; IP addresses and
// "<ip>.<ns>.pod" names reach any address; other names may be outside the
// cluster, or lead back into it through its search path.
func checkOwnNamespace(namespace string, endpoints []string) error {
	for _, ep := range endpoints {
		u, err := url.Parse(ep)
		if err != nil {
			return failure.Permanent(fmt.Errorf("spec.etcdEndpoints: %q is not a URL: %w", ep, err))
		}
		if why := outsideNamespace(namespace, u.Hostname()); why != "" {
			return failure.Permanent(fmt.Errorf("spec.etcdEndpoints: %q %s; a cluster-wide backup operator backs up only clusters of the EtcdBackup's own namespace %s: set spec.clusterName, or use <cluster>-client.%s.svc",
				ep, why, namespace, namespace))
		}
	}
	return nil
}

// outsideNamespace says why host is not known to be in namespace; "" when it is.
func outsideNamespace(namespace, host string) string {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if net.ParseIP(host) != nil {
		return "is an IP address, which cannot be tied to a namespace"
	}
	labels := strings.Split(host, ".")
	i := slices.Index(labels, "svc")
	switch {
	case slices.Contains(labels, "pod"):
		return "is a pod DNS name, which resolves to any IP address"
	case i < 0:
		return "is not a Service DNS name (<service>.<namespace>.svc) that names the namespace"
	case i != 2 && i != 3:
		return "is not a Service DNS name (<service>.<namespace>.svc)"
	case labels[i-1] != namespace:
		return fmt.Sprintf("names namespace %s", labels[i-1])
	case len(labels) > i+1 && strings.Join(labels[i+1:], ".") != "cluster.local":
		return "continues after .svc with a domain other than cluster.local"
	}
	return ""
}
