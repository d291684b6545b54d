package k8sutil

import (
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// A joining member's pod is created before the member is added to etcd, with
// an init container that holds etcd back until the member is in the
// membership. The operator adds the member only once the pod's DNS name
// resolves, so no member ever looks up the new name before it exists: a
// lookup that early gets "no such name", which cluster DNS caches (30 s on
// kubeadm clusters), and every join would wait that cache out.
const (
	// MembershipWaitContainerName is the init container that waits.
	MembershipWaitContainerName = "wait-membership"
	// MembershipWaitSubcommand is the etcd-operator subcommand it runs.
	MembershipWaitSubcommand = "wait-membership"
	// OperatorCommand runs the operator binary in its own image.
	OperatorCommand = "etcd-operator"
)

// Flags of the wait-membership subcommand.
const (
	WaitFlagPeerURL = "member-peer-url"
	WaitFlagPeers   = "peer-urls"
	WaitFlagCert    = "cert"
	WaitFlagKey     = "key"
	WaitFlagCA      = "cacert"
	WaitFlagTimeout = "timeout"
)

// MembershipWait is what the init container of a joining member needs.
type MembershipWait struct {
	// Image is the operator's image, which holds the waiting binary; the
	// nodes that run the operator have it already.
	Image      string
	PullPolicy corev1.PullPolicy
	// Timeout ends the wait with an error, which fails the pod; the operator
	// then replaces it.
	Timeout time.Duration
}

// MembershipWaitArgs are the arguments of the wait-membership subcommand,
// encoded by Args into the init container's command line and parsed back by
// the subcommand (cmd/operator), with one set of flag names.
type MembershipWaitArgs struct {
	// PeerURL is the joining member's.
	PeerURL string
	// Peers are the peer URLs of the members it joins.
	Peers []string
	// Cert, Key and CA are the peer certificate files, with peer TLS.
	Cert, Key, CA string
	// Timeout ends the wait with an error; 0 waits for ever.
	Timeout time.Duration
}

// Args is the command line after the subcommand's name.
func (a MembershipWaitArgs) Args() []string {
	args := []string{
		"--" + WaitFlagPeerURL + "=" + a.PeerURL,
		"--" + WaitFlagPeers + "=" + strings.Join(a.Peers, ","),
		"--" + WaitFlagTimeout + "=" + a.Timeout.String(),
	}
	if a.Cert != "" || a.Key != "" || a.CA != "" {
		args = append(args, "--"+WaitFlagCert+"="+a.Cert, "--"+WaitFlagKey+"="+a.Key, "--"+WaitFlagCA+"="+a.CA)
	}
	return args
}

// WithMembershipWait adds the init container that waits, after check-dns,
// until member m (whose --initial-cluster is initialCluster) is in the
// membership of the other members it names.
func WithMembershipWait(m *etcdutil.Member, initialCluster []string, w MembershipWait) PodOption {
	args := MembershipWaitArgs{PeerURL: m.PeerURL(), Timeout: w.Timeout}
	for _, pair := range initialCluster {
		name, url, _ := strings.Cut(pair, "=")
		if name != m.Name {
			args.Peers = append(args.Peers, url)
		}
	}
	var mounts []corev1.VolumeMount
	if m.HoldsPeerCertificates() {
		// Peers demand a peer certificate of anyone reading their
		// membership; while TLS is switched, some of them listen https.
		args.Cert = path.Join(peerTLSDir, "peer.crt")
		args.Key = path.Join(peerTLSDir, "peer.key")
		args.CA = path.Join(peerTLSDir, "peer-ca.crt")
		mounts = append(mounts, corev1.VolumeMount{Name: peerTLSVolumeName, MountPath: peerTLSDir, ReadOnly: true})
	}
	cmd := append([]string{OperatorCommand, MembershipWaitSubcommand}, args.Args()...)
	return func(p *corev1.Pod) {
		c := corev1.Container{
			Name:            MembershipWaitContainerName,
			Image:           w.Image,
			ImagePullPolicy: w.PullPolicy,
			Command:         cmd,
			VolumeMounts:    mounts,
			SecurityContext: ContainerSecurity(),
		}
		// The same resources as etcd, as check-dns has: init containers never
		// raise the pod's request above its main container's then.
		if etcd := EtcdContainer(p); etcd != nil {
			c.Resources = *etcd.Resources.DeepCopy()
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

// WaitsForMembership tells whether the pod was created before its member was
// added to etcd.
func WaitsForMembership(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool {
		return c.Name == MembershipWaitContainerName
	})
}

// IsWaitingForMembership tells whether the pod's wait-membership container is
// running: the pod is scheduled and resolvable, and etcd starts within a
// moment of the member being added.
func IsWaitingForMembership(pod *corev1.Pod) bool {
	st := initContainerStatus(pod, MembershipWaitContainerName)
	return st != nil && st.State.Running != nil
}

// HasPassedDNSCheck tells whether the pod's check-dns container has found the
// pod's own name in DNS, so that peers looking it up get its address.
func HasPassedDNSCheck(pod *corev1.Pod) bool {
	st := initContainerStatus(pod, DNSCheckContainerName)
	return st != nil && st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
}

// InitialCluster is the pod's --initial-cluster, as "name=peerURL" pairs
// sorted by name; nil if the pod has no etcd container or no such flag.
func InitialCluster(pod *corev1.Pod) []string {
	etcd := EtcdContainer(pod)
	if etcd == nil {
		return nil
	}
	for _, arg := range etcd.Command {
		if v, ok := strings.CutPrefix(arg, "--initial-cluster="); ok {
			pairs := strings.Split(v, ",")
			slices.Sort(pairs)
			return pairs
		}
	}
	return nil
}

// EtcdContainer is the pod's etcd container, nil in a pod without one.
func EtcdContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == EtcdContainerName {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

func initContainerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.InitContainerStatuses {
		if pod.Status.InitContainerStatuses[i].Name == name {
			return &pod.Status.InitContainerStatuses[i]
		}
	}
	return nil
}
