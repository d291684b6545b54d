package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// Objects shaped exactly as coreos/etcd-operator v0.9.4 made them
// (pkg/util/k8sutil there: newEtcdPod, AddEtcdVolumeToPod,
// newEtcdServiceManifest), for the tests of adoption.

// The original's member names: the cluster's name and ten random letters.
const (
	originalA = testName + "-4bqzr7xkfm"
	originalB = testName + "-9wtl2cd5vx"
	originalC = testName + "-h6nj8pqs2b"
)

// originalRepository is the repository the original wrote into the spec.
const originalRepository = "quay.io/coreos/etcd"

// originalCluster is an EtcdCluster as the original left it running: its
// defaults persisted in the spec, its status naming the members.
func originalCluster(mods ...func(*api.EtcdCluster)) *api.EtcdCluster {
	cl := newTestCluster(withRepository(originalRepository))
	cl.Status = api.ClusterStatus{
		Phase:          api.ClusterPhaseRunning,
		Size:           3,
		ServiceName:    testName + "-client",
		ClientPort:     2379,
		CurrentVersion: testVersion,
		Members:        api.MembersStatus{Ready: []string{originalA, originalB, originalC}},
	}
	for _, m := range mods {
		m(cl)
	}
	return cl
}

// originalPod is the pod the original made for member name of the test
// cluster, started as a new cluster's member (state "new", as its seed) or
// as one added later ("existing"), Running and Ready, never restarted.
func originalPod(cl *api.EtcdCluster, name string, initialCluster []string, state string) *corev1.Pod {
	peerURL := fmt.Sprintf("http://%s.%s.%s.svc:2380", name, cl.Name, cl.Namespace)
	clientURL := fmt.Sprintf("http://%s.%s.%s.svc:2379", name, cl.Name, cl.Namespace)
	cmd := fmt.Sprintf("/usr/local/bin/etcd --data-dir=/var/etcd/data --name=%s --initial-advertise-peer-urls=%s "+
		"--listen-peer-urls=http://0.0.0.0:2380 --listen-client-urls=http://0.0.0.0:2379 --advertise-client-urls=%s "+
		"--initial-cluster=%s --initial-cluster-state=%s",
		name, peerURL, clientURL, strings.Join(initialCluster, ","), state)
	if state == "new" {
		cmd += " --initial-cluster-token=5f0c1a2e-6f4d-4b5c-9a57-3d0c8e1f2a6b"
	}
	probe := func() *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-ec", "ETCDCTL_API=3 etcdctl endpoint status"}}},
			InitialDelaySeconds: 10, TimeoutSeconds: 10, PeriodSeconds: 60, FailureThreshold: 3,
		}
	}
	readiness := probe()
	readiness.InitialDelaySeconds, readiness.TimeoutSeconds, readiness.PeriodSeconds = 1, 5, 5
	image := fmt.Sprintf("%s:v%s", cl.Spec.Repository, cl.Spec.Version)
	data := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	if cl.Spec.Pod != nil && cl.Spec.Pod.PersistentVolumeClaimSpec != nil {
		// The original named a member's claim after it, as this operator does.
		data = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: cl.Namespace, UID: types.UID("uid-original-" + name),
			Labels:      map[string]string{"app": "etcd", "etcd_node": name, "etcd_cluster": cl.Name},
			Annotations: map[string]string{"etcd.version": cl.Spec.Version},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: api.SchemeGroupVersion.String(), Kind: api.EtcdClusterResourceKind,
				Name: cl.Name, UID: cl.UID, Controller: new(true),
			}},
			CreationTimestamp: metav1.NewTime(testStart.Add(-24 * 60 * 60 * 1e9)),
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{
				Name: "check-dns", Image: "busybox:1.28.0-glibc",
				Command: []string{"/bin/sh", "-c", "\n\t\t\t\t\tTIMEOUT_READY=0\n\t\t\t\t\twhile ( ! nslookup " + name + "." + cl.Name + "." + cl.Namespace + ".svc )\n\t\t\t\t\tdo\n\t\t\t\t\t\tsleep 1\n\t\t\t\t\tdone"},
			}},
			Containers: []corev1.Container{{
				Name: "etcd", Image: image, Command: strings.Split(cmd, " "),
				Ports: []corev1.ContainerPort{
					{Name: "server", ContainerPort: 2380, Protocol: corev1.ProtocolTCP},
					{Name: "client", ContainerPort: 2379, Protocol: corev1.ProtocolTCP},
				},
				VolumeMounts:   []corev1.VolumeMount{{Name: "etcd-data", MountPath: "/var/etcd"}},
				LivenessProbe:  probe(),
				ReadinessProbe: readiness,
			}},
			RestartPolicy:                corev1.RestartPolicyNever,
			Volumes:                      []corev1.Volume{{Name: "etcd-data", VolumeSource: data}},
			Hostname:                     name,
			Subdomain:                    cl.Name,
			AutomountServiceAccountToken: new(false),
			NodeName:                     "node-1",
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			},
			InitContainerStatuses: []corev1.ContainerStatus{{
				Name: "check-dns", Ready: true,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
			}},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "etcd", Image: image, Ready: true, Started: new(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(testStart.Add(-24 * 60 * 60 * 1e9))}},
			}},
			PodIP: "10.0.0.1",
		},
	}
}

// originalService is a Service as the original made it: the peer service
// (headless, named after the cluster) or the client service.
func originalService(cl *api.EtcdCluster, peer bool) *corev1.Service {
	labels := map[string]string{"app": "etcd", "etcd_cluster": cl.Name}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: cl.Name + "-client", Namespace: cl.Namespace, Labels: labels,
			Annotations: map[string]string{"service.alpha.kubernetes.io/tolerate-unready-endpoints": "true"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: api.SchemeGroupVersion.String(), Kind: api.EtcdClusterResourceKind,
				Name: cl.Name, UID: cl.UID, Controller: new(true),
			}},
		},
		Spec: corev1.ServiceSpec{
			Selector: labels, PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{{Name: "client", Port: 2379, TargetPort: intstr.FromInt(2379), Protocol: corev1.ProtocolTCP}},
		},
	}
	if peer {
		svc.Name = cl.Name
		svc.Spec.ClusterIP = corev1.ClusterIPNone
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "peer", Port: 2380, TargetPort: intstr.FromInt(2380), Protocol: corev1.ProtocolTCP})
	}
	return svc
}

// originalFixture is a three-member cluster the original made and ran, met
// by this operator after it started: the membership is unknown to it. mods
// change the EtcdCluster as the user may have since, not the pods.
func originalFixture(t testing.TB, mods ...func(*api.EtcdCluster)) *fixture {
	cl := originalCluster(mods...)
	f := newFixture(t, cl).withoutServices()
	f.addService(originalService(cl, true))
	f.addService(originalService(cl, false))
	f.withMembers(originalA, originalB, originalC)
	f.forgetMembership()
	peers := []string{}
	for _, n := range []string{originalA, originalB, originalC} {
		peers = append(peers, fmt.Sprintf("%s=http://%s.%s.%s.svc:2380", n, n, cl.Name, cl.Namespace))
	}
	// The pods are as the original made them, whatever the spec says now.
	ran := originalCluster()
	if cl.Spec.Pod != nil && cl.Spec.Pod.PersistentVolumeClaimSpec != nil {
		withPVC(ran)
		for _, n := range []string{originalA, originalB, originalC} {
			f.claim(n)
		}
	}
	f.setPod(originalPod(ran, originalA, peers[:1], "new"))
	f.setPod(originalPod(ran, originalB, peers[:2], "existing"))
	f.setPod(originalPod(ran, originalC, peers, "existing"))
	f.kube.ClearActions()
	return f
}

// originalMembers makes the pods of the snapshot's members the ones the
// original made for them, on the spec's version; spec changes made after it
// are the user's since.
func originalMembers(s *snapshot) {
	names := s.membership.Names()
	if s.membership == nil {
		names = sortedKeys(s.pods)
	}
	var peers []string
	for _, n := range names {
		m := memberTemplate(s.spec)
		m.Name = n
		peers = append(peers, n+"="+m.PeerURL())
	}
	for i, n := range names {
		state := "existing"
		if i == 0 {
			state = "new"
		}
		s.pods[n] = originalPod(s.spec, n, peers[:i+1], state)
	}
}

// originalPodOf adds a pod the original made for name, which etcd does not
// list.
func originalPodOf(name string) snapMod {
	return func(s *snapshot) { s.pods[name] = originalPod(s.spec, name, []string{name + "=x"}, "existing") }
}

// announced records that the adoption was told in this operator's run.
func announced(s *snapshot) { s.adoptionAnnounced = true }

// lookAlike makes member name's pod one of neither operator's layout.
func lookAlike(name string) snapMod {
	return func(s *snapshot) { s.pods[name] = snapPod(s, name, restoreSeed) }
}

// onlyOriginal gives the other members pods of this operator's layout, as
// after their conversion.
func onlyOriginal(names ...string) snapMod {
	return func(s *snapshot) {
		for _, n := range s.membership.Names() {
			if !slices.Contains(names, n) {
				s.pods[n] = snapPod(s, n)
			}
		}
	}
}

// converting sets spec.adoption.convert.
func converting(cl *api.EtcdCluster) { cl.Spec.Adoption = &api.AdoptionPolicy{Convert: true} }
