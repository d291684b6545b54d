// Package kubectlplugin is the work behind `kubectl etcd`: it finds an
// EtcdCluster's member pods with the user's own credentials, reaches each
// member's client port through a port-forward on the API server, and runs
// etcd maintenance on them with pkg/util/etcdutil.
//
// Why port-forwards: they need nothing but the user's kubeconfig and RBAC
// (get on etcdclusters, list on pods, create on pods/portforward; get on the
// operator's client secret for a TLS cluster, unless the user brings a
// certificate), they work from outside the cluster, and the plugin keeps
// speaking gRPC itself, so snapshots stream to a local file and TLS is
// verified against each member's own DNS name. Exec into the members would
// need pods/exec, a client certificate inside the member pods (which only
// hold their server certificate) and a shell or tar to copy a snapshot out,
// which etcd's distroless images do not have.
package kubectlplugin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// Forwarder opens a tunnel to a port of a pod.
type Forwarder interface {
	// Forward returns a local "host:port" that reaches port of the pod until
	// stop is called.
	Forward(ctx context.Context, namespace, pod string, port int) (addr string, stop func(), err error)
}

// Plugin holds what every command needs.
type Plugin struct {
	Kube      kubernetes.Interface
	Etcd      versioned.Interface
	Forwarder Forwarder
	// Executor runs etcdctl in member pods.
	Executor Executor
	// ClientTLS, if set, is the user's own client certificate for TLS
	// clusters; otherwise the cluster's operator secret is read.
	ClientTLS *tls.Config
	// Timeout bounds each etcd request (0: etcdutil's default).
	Timeout time.Duration
}

// member is one reachable member: its pod and the address that reaches it.
type member struct {
	pod      string
	endpoint string
	cfg      etcdutil.ClientConfig
	health   etcdutil.MemberHealth
}

// session is a cluster whose members are forwarded for the duration of one
// command.
type session struct {
	cluster *api.EtcdCluster
	members []*member
	// unreachable lists pods that could not be forwarded or did not answer.
	unreachable []string
	stops       []func()
}

func (s *session) close() {
	for _, stop := range s.stops {
		stop()
	}
}

// health is the cluster as the reachable members report it.
func (s *session) health() etcdutil.Health {
	var ms []etcdutil.MemberHealth
	for _, m := range s.members {
		ms = append(ms, m.health)
	}
	return etcdutil.HealthOf(ms)
}

// byID finds a member by etcd ID.
func (s *session) byID(id uint64) *member {
	for _, m := range s.members {
		if m.health.ID == id {
			return m
		}
	}
	return nil
}

// byName finds a member by pod name.
func (s *session) byName(name string) *member {
	for _, m := range s.members {
		if m.pod == name {
			return m
		}
	}
	return nil
}

// leader returns the member the others follow.
func (s *session) leader() (*member, error) {
	id := s.health().LeaderID
	if id == 0 {
		return nil, fmt.Errorf("%s: %w", s.cluster.Name, etcdutil.ErrNoLeader)
	}
	m := s.byID(id)
	if m == nil {
		return nil, fmt.Errorf("%s: the leader %x is not among the reachable members", s.cluster.Name, id)
	}
	return m, nil
}

// refresh asks every member for its status again.
func (s *session) refresh(ctx context.Context) {
	var wg sync.WaitGroup
	for _, m := range s.members {
		wg.Go(func() {
			h := etcdutil.MemberStatus(ctx, m.cfg, m.endpoint)
			h.Name = m.pod
			m.health = h
		})
	}
	wg.Wait()
}

// open finds the cluster's running member pods and forwards each one's
// client port.
func (p *Plugin) open(ctx context.Context, namespace, name string) (*session, error) {
	cluster, err := p.Etcd.EtcdV1beta2().EtcdClusters(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get EtcdCluster %s/%s: %w", namespace, name, err)
	}
	pods, err := p.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: k8sutil.ClusterSelector(name).String()})
	if err != nil {
		return nil, fmt.Errorf("list the pods of %s/%s: %w", namespace, name, err)
	}
	tlsBase, err := p.clientTLS(ctx, cluster)
	if err != nil {
		return nil, err
	}
	s := &session{cluster: cluster}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !k8sutil.IsOwnedBy(pod, cluster) {
			continue
		}
		if pod.Status.Phase != corev1.PodRunning {
			s.unreachable = append(s.unreachable, fmt.Sprintf("%s (%s)", pod.Name, pod.Status.Phase))
			continue
		}
		addr, stop, err := p.Forwarder.Forward(ctx, namespace, pod.Name, etcdutil.ClientPort)
		if err != nil {
			s.unreachable = append(s.unreachable, fmt.Sprintf("%s (port-forward: %v)", pod.Name, err))
			continue
		}
		s.stops = append(s.stops, stop)
		m := &member{pod: pod.Name, cfg: etcdutil.ClientConfig{RequestTimeout: p.Timeout}}
		if tlsBase != nil {
			// The tunnel ends at 127.0.0.1, but the member's certificate is
			// for its DNS name: verify against that.
			c := tlsBase.Clone()
			c.ServerName = memberAddr(cluster, pod.Name)
			m.cfg.TLS = c
			m.endpoint = "https://" + addr
		} else {
			m.endpoint = "http://" + addr
		}
		s.members = append(s.members, m)
	}
	if len(s.members) == 0 {
		s.close()
		if len(s.unreachable) == 0 {
			return nil, fmt.Errorf("%s/%s has no member pods right now", namespace, name)
		}
		return nil, fmt.Errorf("no running member of %s/%s could be reached: %s", namespace, name, strings.Join(s.unreachable, ", "))
	}
	s.refresh(ctx)
	return s, nil
}

// clientTLS is the certificate to present to a TLS cluster's members: the
// user's, or the operator's from the cluster's operatorSecret.
func (p *Plugin) clientTLS(ctx context.Context, cluster *api.EtcdCluster) (*tls.Config, error) {
	if !cluster.Spec.TLS.IsSecureClient() {
		return nil, nil
	}
	if p.ClientTLS != nil {
		return p.ClientTLS, nil
	}
	name := cluster.Spec.TLS.Secrets(cluster.Name).Client
	secret, err := p.Kube.CoreV1().Secrets(cluster.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the cluster serves clients over TLS and its client certificate secret %s/%s cannot be read (%w); pass your own with --cert, --key and --cacert",
			cluster.Namespace, name, err)
	}
	c, err := etcdutil.TLSConfigFromSecretData(secret.Data)
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", cluster.Namespace, name, err)
	}
	return c, nil
}

func memberAddr(cluster *api.EtcdCluster, pod string) string {
	return k8sutil.MemberOf(cluster, pod).Addr()
}

// errNoMember is returned for a --member that is not a reachable member.
var errNoMember = errors.New("no such reachable member")
