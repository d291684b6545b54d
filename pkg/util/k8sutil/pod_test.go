package k8sutil

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
)

func withVersion(v string) func(*v1beta2.EtcdCluster) {
	return func(c *v1beta2.EtcdCluster) { c.Spec.Version = v }
}

func withTLS(c *v1beta2.EtcdCluster) {
	c.Spec.TLS = &v1beta2.TLSPolicy{Static: &v1beta2.StaticTLS{
		Member: &v1beta2.MemberSecret{
			PeerSecret:   "example-peer-tls",
			ServerSecret: "example-server-tls",
		},
		OperatorSecret: "example-operator-tls",
	}}
}

func withPVC(c *v1beta2.EtcdCluster) {
	if c.Spec.Pod == nil {
		c.Spec.Pod = &v1beta2.PodPolicy{}
	}
	c.Spec.Pod.PersistentVolumeClaimSpec = &corev1.PersistentVolumeClaimSpec{
		StorageClassName: new("fast-ssd"),
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		},
	}
}

func withEveryPodKnob(c *v1beta2.EtcdCluster) {
	c.Spec.Repository = "registry.example.com/etcd"
	c.Spec.Pod = &v1beta2.PodPolicy{
		Labels:       map[string]string{"team": "storage"},
		Annotations:  map[string]string{"prometheus.io/scrape": "true"},
		NodeSelector: map[string]string{"disktype": "ssd"},
		AntiAffinity: true,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
		},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "etcd", Effect: corev1.TaintEffectNoSchedule}},
		EtcdEnv: []corev1.EnvVar{
			{Name: "ETCD_AUTO_COMPACTION_RETENTION", Value: "1"},
			{Name: "ETCD_QUOTA_BACKEND_BYTES", Value: "4294967296"},
		},
		BusyboxImage: "registry.example.com/busybox:1.36.1-glibc",
		SecurityContext: &corev1.PodSecurityContext{
			RunAsUser:    new(int64(1000)),
			RunAsNonRoot: new(true),
			FSGroup:      new(int64(1000)),
		},
	}
}

func TestEtcdPodGolden(t *testing.T) {
	joining := func(c *v1beta2.EtcdCluster, opts ...func(*etcdutil.Member, []string) PodOption) *corev1.Pod {
		seed := newTestMember(c, testSeed)
		second := newTestMember(c, "example-7tq4wx2lbn")
		third := newTestMember(c, "example-zc8hd5mv3p")
		members := etcdutil.NewMemberSet(seed, second, third)
		var podOpts []PodOption
		for _, o := range opts {
			podOpts = append(podOpts, o(third, members.PeerURLPairs()))
		}
		return NewEtcdPod(c, third, c.Spec.Version, members.PeerURLPairs(), ClusterStateExisting, "", podOpts...)
	}
	// The operator's pod-first join (WithMembershipWait).
	waiting := func(m *etcdutil.Member, initialCluster []string) PodOption {
		return WithMembershipWait(m, initialCluster, MembershipWait{Image: "openetcd/etcd-operator:v0.1.0", PullPolicy: corev1.PullIfNotPresent, Timeout: 5 * time.Minute})
	}
	tests := []struct {
		golden string
		pod    *corev1.Pod
	}{
		{"pod-seed", newSeedPod(newTestCluster())},
		{"pod-joining", joining(newTestCluster())},
		{"pod-joining-waits", joining(newTestCluster(), waiting)},
		{"pod-joining-waits-tls", joining(newTestCluster(withTLS), waiting)},
		{"pod-tls", newSeedPod(newTestCluster(withTLS))},
		{"pod-pvc", newSeedPod(newTestCluster(withPVC))},
		{"pod-cluster-domain", newSeedPod(newTestCluster(func(c *v1beta2.EtcdCluster) {
			c.Spec.Pod = &v1beta2.PodPolicy{ClusterDomain: ".cluster.local", DNSTimeoutInSecond: 30}
		}))},
		{"pod-every-pod-knob", joining(newTestCluster(withEveryPodKnob))},
		{"pod-3.4", newSeedPod(newTestCluster(withVersion("3.4.37")))},
		{"pod-3.2", newSeedPod(newTestCluster(withVersion("3.2.32")))},
		{"pod-3.2-tls", newSeedPod(newTestCluster(withVersion("3.2.32"), withTLS))},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			assertGolden(t, tt.golden, tt.pod)
		})
	}
}

func TestEtcdPVCGolden(t *testing.T) {
	assertGolden(t, "pvc", NewEtcdPVC(newTestCluster(withPVC), testSeed, "3.5.21"))
}

func TestNewEtcdPVCWithoutClaimSpecIsNil(t *testing.T) {
	if pvc := NewEtcdPVC(newTestCluster(), testSeed, "3.5.21"); pvc != nil {
		t.Errorf("NewEtcdPVC() = %v, want nil for a cluster on emptyDir", pvc)
	}
}

func mustEtcdContainer(t *testing.T, pod *corev1.Pod) corev1.Container {
	t.Helper()
	for _, c := range pod.Spec.Containers {
		if c.Name == EtcdContainerName {
			return c
		}
	}
	t.Fatalf("pod %s has no %s container", pod.Name, EtcdContainerName)
	return corev1.Container{}
}

func volumeNames(pod *corev1.Pod) []string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		names = append(names, v.Name)
	}
	return names
}

func TestProbesByVersion(t *testing.T) {
	type probeKinds struct{ readiness, liveness string }
	kind := func(p *corev1.Probe) string {
		switch {
		case p == nil:
			return "none"
		case p.Exec != nil:
			return "exec"
		case p.TCPSocket != nil:
			return "tcp:" + p.TCPSocket.Port.String()
		case p.HTTPGet != nil:
			return "http:" + p.HTTPGet.Port.String() + p.HTTPGet.Path
		}
		return "unknown"
	}
	tests := []struct {
		name    string
		version string
		want    probeKinds
		metrics bool
	}{
		{"etcd 3.2 has no metrics listener and keeps the shell probes", "3.2.32", probeKinds{"exec", "exec"}, false},
		{"etcd 3.3 is probed on the metrics listener, liveness by TCP", "3.3.27", probeKinds{"http:2381/health", "tcp:2379"}, true},
		{"etcd 3.4 is probed on the metrics listener, liveness by TCP", "3.4.37", probeKinds{"http:2381/health", "tcp:2379"}, true},
		{"etcd 3.5 liveness does not need a leader", "3.5.21", probeKinds{"http:2381/health", "http:2381/health?exclude=NOSPACE&serializable=true"}, true},
		{"a leading v is ignored", "v3.5.0", probeKinds{"http:2381/health", "http:2381/health?exclude=NOSPACE&serializable=true"}, true},
		{"later versions get the 3.5 probes", "3.6.1", probeKinds{"http:2381/health", "http:2381/health?exclude=NOSPACE&serializable=true"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustEtcdContainer(t, newSeedPod(newTestCluster(withVersion(tt.version))))
			got := probeKinds{kind(c.ReadinessProbe), kind(c.LivenessProbe)}
			if got != tt.want {
				t.Errorf("probes = %+v, want %+v", got, tt.want)
			}
			hasFlag := slices.Contains(c.Command, "--listen-metrics-urls=http://0.0.0.0:2381")
			hasPort := slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
				return p.Name == MetricsPortName && p.ContainerPort == EtcdMetricsPort
			})
			if hasFlag != tt.metrics || hasPort != tt.metrics {
				t.Errorf("metrics flag %v, metrics port %v, want both %v", hasFlag, hasPort, tt.metrics)
			}
		})
	}
}

func TestOperatorSecretIsMountedOnlyForShellProbes(t *testing.T) {
	tests := []struct {
		name    string
		version string
		want    bool
	}{
		{"etcd 3.2 probes with the operator's client certificate", "3.2.32", true},
		{"etcd 3.4 probes need no certificate", "3.4.37", false},
		{"etcd 3.5 probes need no certificate", "3.5.21", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newSeedPod(newTestCluster(withVersion(tt.version), withTLS))
			if got := slices.Contains(volumeNames(pod), operatorTLSVolumeName); got != tt.want {
				t.Errorf("volume %s present = %v, want %v (volumes %v)", operatorTLSVolumeName, got, tt.want, volumeNames(pod))
			}
		})
	}
}

// Renewed certificates reach running members only through whole secret
// volumes: the kubelet does not update a file mounted by subPath.
func TestTLSSecretsAreMountedWhole(t *testing.T) {
	pod := newSeedPod(newTestCluster(withVersion("3.2.32"), withTLS))
	secrets := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = true
		}
	}
	if len(secrets) != 3 {
		t.Fatalf("secret volumes %v, want the peer, server and operator secrets", secrets)
	}
	for _, c := range pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if secrets[m.Name] && (m.SubPath != "" || m.SubPathExpr != "") {
				t.Errorf("container %s mounts secret volume %s by subPath %q", c.Name, m.Name, m.SubPath+m.SubPathExpr)
			}
		}
	}
}

func TestEtcdCommand(t *testing.T) {
	t.Run("the seed alone carries the cluster token", func(t *testing.T) {
		c := newTestCluster()
		seed := mustEtcdContainer(t, newSeedPod(c)).Command
		if !slices.Contains(seed, "--initial-cluster-token="+testToken) {
			t.Errorf("seed command %q lacks the token", seed)
		}
		m := newTestMember(c, "example-7tq4wx2lbn")
		joiner := mustEtcdContainer(t, NewEtcdPod(c, m, c.Spec.Version, []string{"a=http://a:2380"}, ClusterStateExisting, "")).Command
		for _, arg := range joiner {
			if strings.HasPrefix(arg, "--initial-cluster-token") {
				t.Errorf("joining member has %q", arg)
			}
		}
	})
	t.Run("every argument is one argv element", func(t *testing.T) {
		for _, arg := range mustEtcdContainer(t, newSeedPod(newTestCluster(withTLS))).Command {
			if strings.ContainsAny(arg, " \t\n") {
				t.Errorf("argument %q contains white space", arg)
			}
		}
	})
	t.Run("TLS flags follow the URL schemes", func(t *testing.T) {
		cmd := mustEtcdContainer(t, newSeedPod(newTestCluster(withTLS))).Command
		for _, want := range []string{
			"--listen-peer-urls=https://0.0.0.0:2380",
			"--listen-client-urls=https://0.0.0.0:2379",
			"--peer-client-cert-auth=true",
			"--client-cert-auth=true",
			"--listen-metrics-urls=http://0.0.0.0:2381",
		} {
			if !slices.Contains(cmd, want) {
				t.Errorf("command lacks %q: %q", want, cmd)
			}
		}
	})
}

func TestEtcdPodAnnotations(t *testing.T) {
	c := newTestCluster(func(c *v1beta2.EtcdCluster) {
		c.Spec.Pod = &v1beta2.PodPolicy{Annotations: map[string]string{
			"note":                    "kept",
			v1beta2.AnnotationVersion: "9.9.9",
		}}
	})
	pod := newSeedPod(c)
	want := map[string]string{"note": "kept", v1beta2.AnnotationVersion: "3.5.21", AnnotationPodPolicy: PodPolicyHash(c)}
	if !reflect.DeepEqual(pod.Annotations, want) {
		t.Errorf("annotations = %v, want %v (the version and pod-policy annotations are the operator's)", pod.Annotations, want)
	}
	other := newTestCluster(func(c *v1beta2.EtcdCluster) {
		c.Spec.Pod = &v1beta2.PodPolicy{NodeSelector: map[string]string{"a": "b"}}
	})
	if PodPolicyHash(other) == PodPolicyHash(c) || PodPolicyHash(c) != PodPolicyHash(c.DeepCopy()) {
		t.Error("PodPolicyHash does not tell spec.pod apart")
	}
}

func TestPodOptionsExtendTheSeed(t *testing.T) {
	c := newTestCluster()
	restore := corev1.Container{
		Name:         "restore-datadir",
		Image:        v1beta2.EtcdImage(c.Spec.Repository, c.Spec.Version),
		Command:      []string{"etcdutl", "snapshot", "restore", "/backup/snapshot.db", "--data-dir=" + EtcdDataDir},
		VolumeMounts: []corev1.VolumeMount{EtcdDataVolumeMount(), {Name: "backup", MountPath: "/backup"}},
	}
	fetch := corev1.Container{Name: "fetch-backup", Image: "example/fetch:1"}
	backup := corev1.Volume{Name: "backup", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}

	pod := newSeedPod(c, WithInitContainers(fetch, restore), WithVolumes(backup))

	var inits []string
	for _, ic := range pod.Spec.InitContainers {
		inits = append(inits, ic.Name)
	}
	if want := []string{DNSCheckContainerName, "fetch-backup", "restore-datadir"}; !slices.Equal(inits, want) {
		t.Errorf("init containers = %v, want %v", inits, want)
	}
	if want := []string{EtcdDataVolumeName, "backup"}; !slices.Equal(volumeNames(pod), want) {
		t.Errorf("volumes = %v, want %v", volumeNames(pod), want)
	}
	pod.Spec.InitContainers[2].Command[0] = "changed"
	if restore.Command[0] != "etcdutl" {
		t.Error("the pod shares the caller's container instead of a copy")
	}
}

func TestNewEtcdPodIsPure(t *testing.T) {
	c := newTestCluster(withEveryPodKnob, withPVC, withTLS)
	before := c.DeepCopy()
	pod := newSeedPod(c)
	if !reflect.DeepEqual(c, before) {
		t.Fatal("NewEtcdPod changed the cluster")
	}
	if again := newSeedPod(c); !reflect.DeepEqual(pod, again) {
		t.Fatal("NewEtcdPod is not deterministic")
	}

	// Changing the pod must not reach back into the cluster spec.
	etcd := &pod.Spec.Containers[0]
	etcd.Env[0].Value = "changed"
	etcd.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("9")
	pod.Spec.InitContainers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("9Gi")
	pod.Spec.NodeSelector["disktype"] = "changed"
	pod.Spec.Tolerations[0].Value = "changed"
	pod.Spec.Affinity.PodAntiAffinity = nil
	pod.Spec.SecurityContext.RunAsUser = nil
	pod.Labels["team"] = "changed"
	pod.Annotations["prometheus.io/scrape"] = "changed"
	if !reflect.DeepEqual(c, before) {
		t.Error("the pod shares memory with the cluster spec")
	}

	pvc := NewEtcdPVC(c, testSeed, c.Spec.Version)
	pvc.Spec.AccessModes[0] = corev1.ReadOnlyMany
	if !reflect.DeepEqual(c, before) {
		t.Error("the PVC shares memory with the cluster spec")
	}
}

func TestEtcdPodWithoutDefaultsDoesNotPanic(t *testing.T) {
	c := &v1beta2.EtcdCluster{Spec: v1beta2.ClusterSpec{
		Version: "3.5.21",
		TLS:     &v1beta2.TLSPolicy{Static: &v1beta2.StaticTLS{OperatorSecret: "op"}},
	}}
	m := &etcdutil.Member{Name: "x-1", SecurePeer: true, SecureClient: true}
	NewEtcdPod(c, m, c.Spec.Version, nil, ClusterStateNew, "")
	NewEtcdPVC(c, "x-1", c.Spec.Version)
}

func TestMemberPodsGetThePolicysPriorityAndSpread(t *testing.T) {
	zone := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule}
	own := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}}
	host := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: own}
	c := newTestCluster(func(c *v1beta2.EtcdCluster) {
		c.Spec.Pod = &v1beta2.PodPolicy{PriorityClassName: "etcd-critical", TopologySpreadConstraints: []corev1.TopologySpreadConstraint{zone, host}}
	})
	pod := newSeedPod(c)
	if pod.Spec.PriorityClassName != "etcd-critical" {
		t.Errorf("priorityClassName %q", pod.Spec.PriorityClassName)
	}
	got := pod.Spec.TopologySpreadConstraints
	if len(got) != 2 {
		t.Fatalf("constraints %+v", got)
	}
	// Without a selector, the cluster's own members are spread.
	if got[0].LabelSelector == nil || !reflect.DeepEqual(got[0].LabelSelector.MatchLabels, ClusterLabels(c.Name)) {
		t.Errorf("a constraint without selector got %+v, want the cluster's labels", got[0].LabelSelector)
	}
	if !reflect.DeepEqual(got[1].LabelSelector, own) {
		t.Errorf("a constraint's own selector became %+v", got[1].LabelSelector)
	}
	if c.Spec.Pod.TopologySpreadConstraints[0].LabelSelector != nil {
		t.Error("the cluster's spec was changed")
	}
	// A cluster that sets neither gets no priority class (the default
	// spreading is TestMemberPlacement's).
	if p := newSeedPod(newTestCluster()).Spec; p.PriorityClassName != "" {
		t.Error("a cluster without a priority class got one")
	}
}

func TestMemberOf(t *testing.T) {
	cluster := func(opts ...func(*v1beta2.EtcdCluster)) *v1beta2.EtcdCluster {
		c := &v1beta2.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: "db"}}
		for _, o := range opts {
			o(c)
		}
		return c
	}
	withDomain := func(c *v1beta2.EtcdCluster) { c.Spec.Pod = &v1beta2.PodPolicy{ClusterDomain: ".cluster.local"} }
	tests := []struct {
		name string
		cl   *v1beta2.EtcdCluster
		want etcdutil.Member
		addr string
	}{
		{"a plain cluster's member speaks http in the cluster's namespace", cluster(),
			etcdutil.Member{Name: "example-abc", Namespace: "db", ClusterName: "example"},
			"example-abc.example.db.svc"},
		{"a cluster with TLS makes its members speak https", cluster(withTLS),
			etcdutil.Member{Name: "example-abc", Namespace: "db", ClusterName: "example", SecurePeer: true, SecureClient: true},
			"example-abc.example.db.svc"},
		{"the cluster's DNS domain is the member's", cluster(withDomain),
			etcdutil.Member{Name: "example-abc", Namespace: "db", ClusterName: "example", ClusterDomain: ".cluster.local"},
			"example-abc.example.db.svc.cluster.local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MemberOf(tt.cl, "example-abc")
			if got != tt.want || got.Addr() != tt.addr {
				t.Fatalf("MemberOf = %+v at %s, want %+v at %s", got, got.Addr(), tt.want, tt.addr)
			}
		})
	}
}
