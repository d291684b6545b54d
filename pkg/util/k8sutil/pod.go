package k8sutil

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/etcdversion"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

// Values of etcd's --initial-cluster-state: "new" only for the seed member
// that bootstraps a cluster, "existing" for every member added with MemberAdd.
const (
	ClusterStateNew      = "new"
	ClusterStateExisting = "existing"
)

// Names and paths inside a member pod. The data ones are exported for the
// restore feature, whose init containers fill the data directory before etcd
// starts and must mount the same volume at the same place.
const (
	EtcdContainerName     = "etcd"
	DNSCheckContainerName = "check-dns"
	EtcdDataVolumeName    = "etcd-data"
	EtcdDataMountDir      = "/var/etcd"
	EtcdDataDir           = EtcdDataMountDir + "/data"
)

// TLS secrets are mounted where the original mounted them, so that secrets
// and certificates made for it keep working.
const (
	peerTLSVolumeName     = "member-peer-tls"
	peerTLSDir            = "/etc/etcdtls/member/peer-tls"
	serverTLSVolumeName   = "member-server-tls"
	serverTLSDir          = "/etc/etcdtls/member/server-tls"
	operatorTLSVolumeName = "etcd-client-tls"
	operatorTLSDir        = "/etc/etcdtls/operator/etcd-tls"
)

// Probe paths on the metrics listener. /health answers 503 when the member
// has no leader, has an active alarm or cannot serve a linearizable read, so
// readiness (and through it the client service and status.members) follows
// quorum. The liveness path must not depend on the rest of the cluster,
// otherwise a quorum loss or an overloaded leader gets healthy members killed
// (a defect of the original), and a member killed over and over is eventually
// replaced with an empty one: serializable=true skips the leader check and
// reads locally; exclude=NOSPACE keeps a full database (the NOSPACE alarm is
// cluster-wide) from killing every member at once. kubeadm probes its etcd
// the same way.
const (
	readinessPath = "/health"
	livenessPath  = "/health?exclude=NOSPACE&serializable=true"
)

// MemberOf is the member named name of cluster cl, without an etcd ID yet:
// its namespace, TLS and DNS domain are the cluster's. The operator's members
// and a restore's seed are built from it alike, so the seed is a member the
// operator adopts.
func MemberOf(cl *v1beta2.EtcdCluster, name string) etcdutil.Member {
	m := etcdutil.Member{
		Name:         name,
		Namespace:    cl.Namespace,
		ClusterName:  cl.Name,
		SecurePeer:   cl.Spec.TLS.IsSecurePeer(),
		SecureClient: cl.Spec.TLS.IsSecureClient(),
	}
	if cl.Spec.Pod != nil {
		m.ClusterDomain = cl.Spec.Pod.ClusterDomain
	}
	return m
}

// PodOption changes a member pod after NewEtcdPod has built it, for callers
// that need more than a plain member, such as the seed of a restored cluster.
type PodOption func(*corev1.Pod)

// AnnotationPodPolicy on a member pod is PodPolicyHash of the spec it was
// made from.
const AnnotationPodPolicy = "etcd.database.coreos.com/pod-policy"

// PodPolicyHash identifies a cluster's spec.pod: two pods made from the same
// spec.pod carry the same hash.
func PodPolicyHash(cluster *v1beta2.EtcdCluster) string {
	b, err := json.Marshal(podPolicy(cluster))
	if err != nil {
		return ""
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return strconv.FormatUint(h.Sum64(), 36)
}

// WithoutDNSCheck leaves out the check-dns init container, for a member
// restarted in place. Its data directory makes etcd start as the member it
// was, without resolving its own name, and it reaches its peers by theirs:
// the peers' streams to it are opened by it. Waiting for its own name would
// wait out cluster DNS's cache of the lookups that failed while it had no
// pod, which lasts the zone's TTL.
func WithoutDNSCheck() PodOption {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = slices.DeleteFunc(p.Spec.InitContainers, func(c corev1.Container) bool {
			return c.Name == DNSCheckContainerName
		})
	}
}

// WithInitContainers runs cs, in order, after check-dns and before etcd: a
// restore has to fetch and unpack the snapshot into the data volume first.
func WithInitContainers(cs ...corev1.Container) PodOption {
	return func(p *corev1.Pod) {
		for _, c := range cs {
			p.Spec.InitContainers = append(p.Spec.InitContainers, *c.DeepCopy())
		}
	}
}

// WithVolumes adds volumes to the pod, for the containers of
// WithInitContainers.
func WithVolumes(vs ...corev1.Volume) PodOption {
	return func(p *corev1.Pod) {
		for _, v := range vs {
			p.Spec.Volumes = append(p.Spec.Volumes, *v.DeepCopy())
		}
	}
}

// EtcdDataVolumeMount mounts the data volume where etcd expects it; etcd's data
// directory is EtcdDataDir inside it.
func EtcdDataVolumeMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: EtcdDataVolumeName, MountPath: EtcdDataMountDir}
}

// NewEtcdPod builds the pod of member m running etcd version. initialCluster is the
// "name=peerURL" list of --initial-cluster (etcdutil.MemberSet.PeerURLPairs),
// state is ClusterStateNew for the seed and ClusterStateExisting for a member
// already added with MemberAdd, and token is the seed's
// --initial-cluster-token ("" for every other member: etcd ignores it when
// joining an existing cluster).
//
// The kubelet restarts etcd (restartPolicy Always) in the same pod, on the
// same data volume: an emptyDir survives a container restart (not a new
// pod), so a member that crashed, was OOM-killed, failed its liveness probe
// or was patched to an image it cannot pull keeps its data and its identity,
// where the original's restartPolicy Never turned every such exit into the
// loss of the member and a full copy of the data to its replacement. A
// member that keeps failing is replaced by the operator's repair ladder.
// Always, not OnFailure: etcd exits 0 when the kubelet stops it to run a
// patched image, and with OnFailure a patched image that cannot be pulled
// then ends the pod (Succeeded) instead of leaving it waiting for the image,
// where patching the version back can still save the member.
func NewEtcdPod(cluster *v1beta2.EtcdCluster, m *etcdutil.Member, version string, initialCluster []string, state, token string, opts ...PodOption) *corev1.Pod {
	policy := podPolicy(cluster)
	probes := probesFor(version, m.SecureClient)

	annotations := map[string]string{}
	maps.Copy(annotations, policy.Annotations)
	// The operator's annotations win: upgrades compare the version with
	// spec.version, and a joining pod made for an older spec.pod is made
	// again.
	annotations[v1beta2.AnnotationVersion] = etcdversion.Normalize(version)
	annotations[AnnotationPodPolicy] = PodPolicyHash(cluster)

	ports := []corev1.ContainerPort{
		containerPort(ClientPortName, EtcdClientPort),
		containerPort(PodPeerPortName, EtcdPeerPort),
	}
	if probes.metrics {
		ports = append(ports, containerPort(MetricsPortName, EtcdMetricsPort))
	}

	volumes, mounts := memberVolumes(cluster, m, probes.operatorSecret)
	affinity, spread := memberPlacement(cluster.Name, policy)

	etcd := corev1.Container{
		Name:            EtcdContainerName,
		Image:           v1beta2.EtcdImage(cluster.Spec.Repository, version),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         append(etcdCommand(m, initialCluster, state, token, probes.metrics), MaintenanceArgs(&cluster.Spec, version)...),
		// When etcd exits with an error, the end of its log becomes the
		// container's termination message: the evidence stays in the pod's
		// status (and the operator's events) after the pod is replaced.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Ports:                    ports,
		Env:                      etcdEnv(policy, version),
		Resources:                *policy.Resources.DeepCopy(),
		VolumeMounts:             mounts,
		ReadinessProbe:           probes.readiness,
		LivenessProbe:            probes.liveness,
		SecurityContext:          EtcdContainerSecurity(version),
	}

	checkDNS := corev1.Container{
		Name:            DNSCheckContainerName,
		Image:           policy.BusyboxImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/bin/sh", "-c", dnsCheckScript(m.Addr(), policy.DNSTimeoutInSecond)},
		Resources:       *policy.Resources.DeepCopy(),
		SecurityContext: ContainerSecurity(),
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            m.Name,
			Namespace:       cluster.Namespace,
			Labels:          MemberLabels(cluster, m.Name),
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{AsOwner(cluster)},
		},
		Spec: corev1.PodSpec{
			// hostname.subdomain is the member's DNS name in the headless
			// peer service; peer URLs and certificates are built on it.
			Hostname:       m.Name,
			Subdomain:      PeerServiceName(cluster.Name),
			InitContainers: []corev1.Container{checkDNS},
			Containers:     []corev1.Container{etcd},
			Volumes:        volumes,
			RestartPolicy:  corev1.RestartPolicyAlways,
			// etcd never talks to the Kubernetes API.
			AutomountServiceAccountToken: new(false),
			// etcd takes its configuration from ETCD_* variables too (and
			// warns about each one it does not know), while service links
			// inject ETCD_* variables for every service whose name starts
			// with "etcd", this cluster's own when it is called so. The
			// member needs none of them.
			EnableServiceLinks:        new(false),
			NodeSelector:              maps.Clone(policy.NodeSelector),
			Affinity:                  affinity,
			Tolerations:               copyTolerations(policy.Tolerations),
			SecurityContext:           policy.SecurityContext.DeepCopy(),
			PriorityClassName:         policy.PriorityClassName,
			TopologySpreadConstraints: spread,
		},
	}
	for _, opt := range opts {
		opt(pod)
	}
	return pod
}

// spreadConstraints copies the pod policy's constraints; one without a label
// selector spreads the cluster's own members, the selector nearly everyone
// means, which is otherwise easy to get wrong (a selector matching no pod
// spreads nothing).
func spreadConstraints(cluster string, cs []corev1.TopologySpreadConstraint) []corev1.TopologySpreadConstraint {
	if cs == nil {
		return nil
	}
	out := make([]corev1.TopologySpreadConstraint, len(cs))
	for i := range cs {
		cs[i].DeepCopyInto(&out[i])
		if out[i].LabelSelector == nil {
			out[i].LabelSelector = &metav1.LabelSelector{MatchLabels: ClusterLabels(cluster)}
		}
	}
	return out
}

// NewEtcdPVC builds the claim of a member's data volume, named like the member
// so the pod can find it and the operator can delete it with the member, and
// annotated with the etcd version that writes it, so that a member restarted
// on its claim starts on a version its data allows. It returns nil when the
// cluster does not ask for persistent volumes.
func NewEtcdPVC(cluster *v1beta2.EtcdCluster, memberName, version string) *corev1.PersistentVolumeClaim {
	policy := podPolicy(cluster)
	if policy.PersistentVolumeClaimSpec == nil {
		return nil
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            memberName,
			Namespace:       cluster.Namespace,
			Labels:          ClusterLabels(cluster.Name),
			Annotations:     map[string]string{v1beta2.AnnotationVersion: etcdversion.Normalize(version)},
			OwnerReferences: []metav1.OwnerReference{AsOwner(cluster)},
		},
		Spec: *policy.PersistentVolumeClaimSpec.DeepCopy(),
	}
}

// WithRestartPolicy overrides the pod's restart policy, for pods whose
// failure must end them (the restore operator's seed reports a failed
// restore from its pod's end).
func WithRestartPolicy(policy corev1.RestartPolicy) PodOption {
	return func(p *corev1.Pod) { p.Spec.RestartPolicy = policy }
}

// etcdCommand is an argv list, not a string split on spaces as in the
// original, so no value can ever be cut in two or smuggle in a flag.
func etcdCommand(m *etcdutil.Member, initialCluster []string, state, token string, metrics bool) []string {
	cmd := []string{
		"/usr/local/bin/etcd",
		"--data-dir=" + EtcdDataDir,
		"--name=" + m.Name,
		"--initial-advertise-peer-urls=" + m.PeerURL(),
		"--listen-peer-urls=" + m.ListenPeerURL(),
		"--listen-client-urls=" + m.ListenClientURL(),
		"--advertise-client-urls=" + m.AdvertiseClientURL(),
		"--initial-cluster=" + strings.Join(initialCluster, ","),
		"--initial-cluster-state=" + state,
	}
	if metrics {
		// Plain HTTP even when TLS is on: the kubelet probes it without a
		// client certificate, and it serves no keys, only health and metrics.
		cmd = append(cmd, fmt.Sprintf("--listen-metrics-urls=http://0.0.0.0:%d", EtcdMetricsPort))
	}
	if m.HoldsPeerCertificates() {
		cmd = append(cmd,
			"--peer-client-cert-auth=true",
			"--peer-trusted-ca-file="+path.Join(peerTLSDir, "peer-ca.crt"),
			"--peer-cert-file="+path.Join(peerTLSDir, "peer.crt"),
			"--peer-key-file="+path.Join(peerTLSDir, "peer.key"),
		)
	}
	if m.HoldsServerCertificates() {
		cmd = append(cmd,
			"--client-cert-auth=true",
			"--trusted-ca-file="+path.Join(serverTLSDir, "server-ca.crt"),
			"--cert-file="+path.Join(serverTLSDir, "server.crt"),
			"--key-file="+path.Join(serverTLSDir, "server.key"),
		)
	}
	if token != "" {
		cmd = append(cmd, "--initial-cluster-token="+token)
	}
	return cmd
}

// memberVolumes returns the pod's volumes and the etcd container's mounts.
// TLS volumes follow the member's URL schemes, so flags and files always
// match; the secret names come from the cluster's TLS policy.
func memberVolumes(cluster *v1beta2.EtcdCluster, m *etcdutil.Member, operatorSecret bool) ([]corev1.Volume, []corev1.VolumeMount) {
	policy := podPolicy(cluster)
	data := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	if policy.PersistentVolumeClaimSpec != nil {
		data = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: m.Name}}
	}
	volumes := []corev1.Volume{{Name: EtcdDataVolumeName, VolumeSource: data}}
	mounts := []corev1.VolumeMount{EtcdDataVolumeMount()}

	// Each secret is mounted whole, never by subPath: the kubelet then
	// swaps a renewed secret's files in place (a subPath mount keeps the
	// old file until the pod restarts), and etcd reads its certificate
	// files again for each new connection, so renewed certificates take
	// over without a restart.
	addSecret := func(volume, secret, dir string) {
		volumes = append(volumes, corev1.Volume{
			Name:         volume,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}},
		})
		mounts = append(mounts, corev1.VolumeMount{Name: volume, MountPath: dir, ReadOnly: true})
	}
	secrets := cluster.Spec.TLS.SecretsInUse(cluster.Name)
	if m.HoldsPeerCertificates() {
		addSecret(peerTLSVolumeName, secrets.Peer, peerTLSDir)
	}
	if m.HoldsServerCertificates() {
		addSecret(serverTLSVolumeName, secrets.Server, serverTLSDir)
		if operatorSecret {
			addSecret(operatorTLSVolumeName, secrets.Operator, operatorTLSDir)
		}
	}
	return volumes, mounts
}

// memberProbes is what the kubelet can probe on a given etcd version.
type memberProbes struct {
	readiness, liveness *corev1.Probe
	// metrics: the member runs the plain-HTTP metrics listener.
	metrics bool
	// operatorSecret: the probes need the operator's client certificate.
	operatorSecret bool
}

// probesFor picks probes that need neither a shell nor a client certificate
// wherever etcd allows it. Upstream etcd images are distroless since 3.5 (no
// /bin/sh), so the original's shell probe cannot run there, and it was the
// only reason every member carried the operator's client certificate.
//
//   - >= 3.5: readiness /health, liveness /health?serializable=true (answers
//     without a leader; see livenessPath), both on the metrics listener.
//   - 3.3, 3.4: readiness /health on the metrics listener; liveness is a TCP
//     connect to the client port, because /health of these versions has no
//     serializable mode and would fail on quorum loss.
//   - 3.2: no metrics listener, so the original's etcdctl probes stay; 3.2
//     images are Alpine-based and have a shell.
//
// Readiness is faster than the original's (every 5 s): every second from
// 3.5 on, so that status, the client service and the next membership change
// follow a member's start within a second, with six failures in a row (6 s)
// taking a member out, so that a leader election alone does not; every 2 s,
// three failures, before 3.5, whose /health puts a v2 QGET through raft (a
// log entry and an fsync on every member per probe).
func probesFor(version string, secureClient bool) memberProbes {
	readiness := func(h corev1.ProbeHandler) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        h,
			InitialDelaySeconds: 1,
			TimeoutSeconds:      5,
			PeriodSeconds:       2,
			FailureThreshold:    3,
		}
	}
	liveness := func(h corev1.ProbeHandler) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        h,
			InitialDelaySeconds: 10,
			TimeoutSeconds:      10,
			PeriodSeconds:       60,
			FailureThreshold:    3,
		}
	}
	// An unparsable version, which validation rejects, gets the probes of
	// current etcd.
	kind := etcdversion.ProbeHealth
	if v, err := etcdversion.Parse(version); err == nil {
		kind = v.Release().Probes
	}
	switch kind {
	case etcdversion.ProbeEtcdctl:
		h := etcdctlProbe(secureClient)
		return memberProbes{readiness: readiness(h), liveness: liveness(h), operatorSecret: secureClient}
	case etcdversion.ProbeHealthTCP:
		return memberProbes{
			readiness: readiness(httpProbe(readinessPath)),
			liveness:  liveness(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(EtcdClientPort)}}),
			metrics:   true,
		}
	default:
		r := readiness(httpProbe(readinessPath))
		r.PeriodSeconds, r.FailureThreshold = 1, 6
		return memberProbes{
			readiness: r,
			liveness:  liveness(httpProbe(livenessPath)),
			metrics:   true,
		}
	}
}

func httpProbe(path string) corev1.ProbeHandler {
	return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path:   path,
		Port:   intstr.FromInt32(EtcdMetricsPort),
		Scheme: corev1.URISchemeHTTP,
	}}
}

// etcdctlProbe is the original's probe, kept for etcd 3.2 only. With client
// TLS it needs the operator's client certificate, mounted for that purpose.
func etcdctlProbe(secureClient bool) corev1.ProbeHandler {
	cmd := "ETCDCTL_API=3 etcdctl endpoint status"
	if secureClient {
		cmd = fmt.Sprintf("ETCDCTL_API=3 etcdctl --endpoints=https://localhost:%d --cert=%s --key=%s --cacert=%s endpoint status",
			EtcdClientPort,
			path.Join(operatorTLSDir, etcdutil.SecretClientCert),
			path.Join(operatorTLSDir, etcdutil.SecretClientKey),
			path.Join(operatorTLSDir, etcdutil.SecretClientCA))
	}
	return corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-ec", cmd}}}
}

// dnsCheckScript waits until the member's own DNS name resolves. etcd
// resolves its advertised peer URL at start and, with TLS, peers check the
// certificate against the reverse lookup of the connecting IP, so starting
// before the headless service publishes the pod only makes etcd fail.
//
// The first lookup waits a moment: the init container starts as soon as the
// pod has an address, usually before the endpoints controller has published
// it, and CoreDNS caches that first "no such name" for the zone's TTL, which
// every bootstrap would then wait out.
//
// A positive timeout is measured on the clock rather than by counting tries:
// one failing nslookup can itself take seconds. A zero timeout waits forever;
// the operator replaces members that stay Pending too long, which bounds it.
func dnsCheckScript(addr string, timeoutSeconds int64) string {
	if timeoutSeconds <= 0 {
		return fmt.Sprintf(`sleep 2
until nslookup %s; do
  sleep 1
done`, addr)
	}
	return fmt.Sprintf(`deadline=$(( $(date +%%s) + %d ))
sleep 2
until nslookup %s; do
  if [ "$(date +%%s)" -ge "$deadline" ]; then
    echo "Timed out waiting for DNS entry"
    exit 1
  fi
  sleep 1
done`, timeoutSeconds, addr)
}

// DNSCheckName is the DNS name the pod's check-dns container waits for, as
// its script names it (the member's name, with the cluster domain of the spec
// the pod was made from); "" when the pod has no such container.
func DNSCheckName(pod *corev1.Pod) string {
	for _, c := range pod.Spec.InitContainers {
		if c.Name != DNSCheckContainerName || len(c.Command) == 0 {
			continue
		}
		_, rest, ok := strings.Cut(c.Command[len(c.Command)-1], "until nslookup ")
		if !ok {
			return ""
		}
		name, _, _ := strings.Cut(rest, ";")
		return strings.TrimSpace(name)
	}
	return ""
}

func containerPort(name string, port int32) corev1.ContainerPort {
	return corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: corev1.ProtocolTCP}
}

// podPolicy tolerates a cluster that was not defaulted, so a caller's mistake
// yields an odd pod rather than a panic in the operator.
func podPolicy(cluster *v1beta2.EtcdCluster) *v1beta2.PodPolicy {
	if cluster.Spec.Pod == nil {
		return &v1beta2.PodPolicy{}
	}
	return cluster.Spec.Pod
}

// MaxLearners is how many learners the operator lets a cluster hold at once
// where every member runs etcd 3.6 or later: a join's MemberAdd then comes
// before the previous learner's promotion, so etcd's 5 s health interval
// (an add waits until every voter has been connected that long) is paid once
// per pair of joins instead of once per join.
const MaxLearners = 2

// etcdEnv is the etcd container's environment: pod.etcdEnv without its
// reserved variables (refused at admission; one that got past it, under a
// CRD older than the rule, must still never reach etcd), and
// ETCD_MAX_LEARNERS from 3.4 on, learners' first version. etcd before 3.6
// warns about it and goes on; set from the start, it holds once the member
// is patched to 3.6, and every member of a cluster then allows the same.
func etcdEnv(policy *v1beta2.PodPolicy, version string) []corev1.EnvVar {
	env := copyEnv(v1beta2.FilterReservedEtcdEnv(policy.EtcdEnv))
	if v, err := etcdversion.Parse(version); err == nil && v.Release().Learners {
		env = append(env, corev1.EnvVar{Name: v1beta2.EnvMaxLearners, Value: strconv.Itoa(MaxLearners)})
	}
	return env
}

// PodMaxLearners is how many learners the pod's etcd accepts in the
// membership, as its environment sets it: 1, etcd's default, without the
// variable. Whether its etcd reads the variable at all (3.6 and later) is
// the caller's to check.
func PodMaxLearners(pod *corev1.Pod) int {
	etcd := EtcdContainer(pod)
	if etcd == nil {
		return 1
	}
	for _, e := range etcd.Env {
		if e.Name == v1beta2.EnvMaxLearners {
			if n, err := strconv.Atoi(e.Value); err == nil && n > 0 {
				return n
			}
			return 1
		}
	}
	return 1
}

func copyEnv(env []corev1.EnvVar) []corev1.EnvVar {
	if env == nil {
		return nil
	}
	out := make([]corev1.EnvVar, len(env))
	for i := range env {
		env[i].DeepCopyInto(&out[i])
	}
	return out
}

func copyTolerations(ts []corev1.Toleration) []corev1.Toleration {
	if ts == nil {
		return nil
	}
	out := make([]corev1.Toleration, len(ts))
	for i := range ts {
		ts[i].DeepCopyInto(&out[i])
	}
	return out
}

// ContainerSecurity is the security context of every container of a member
// pod: what Pod Security "restricted" asks of containers (no privilege
// escalation, every capability dropped, the runtime's default seccomp
// profile). etcd and the init containers need no capability: they only open
// sockets on unprivileged ports and write the data directory, which the
// container's user owns. Running as non-root, the last requirement of
// "restricted", is the pod's (spec.pod.securityContext: runAsNonRoot,
// runAsUser, fsGroup for persistent volumes), since images of old etcd
// releases run as root. The root filesystem is read-only: the init containers
// (the DNS check, wait-membership, a seed's fetch) write nothing, or only to
// their own volume.
func ContainerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: new(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		ReadOnlyRootFilesystem:   new(true),
	}
}

// EtcdContainerSecurity is ContainerSecurity for a container of the etcd image
// of version (etcd itself, a seed's snapshot restore). From 3.4 etcd and
// etcdutl write nothing outside the data directory, a volume, so the root
// filesystem is read-only (e2e: the restricted namespace runs 3.4 to 3.6);
// older releases' images keep a writable one, as they were never run that way.
func EtcdContainerSecurity(version string) *corev1.SecurityContext {
	sc := ContainerSecurity()
	if v, err := etcdversion.Parse(version); err != nil || !v.Release().ReadOnlyRootFilesystem {
		sc.ReadOnlyRootFilesystem = nil
	}
	return sc
}
