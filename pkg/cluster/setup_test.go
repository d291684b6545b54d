package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	clienttesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// TestSetup covers what happens before the diff loop: bootstrap, services,
// TLS, invalid specs, restarts and the restore operator's hand-over.
func TestSetup(t *testing.T) {
	seed := "example-new0000001"
	tests := []passCase{
		{
			name:    "a new cluster is marked Creating, then gets a seed member with a fresh token holding its UID",
			cluster: newTestCluster(withPhase(""), withSeedAndJoin),
			run: func(t *testing.T, f *fixture) {
				f.mustPass()
				expect(t, "pod actions once Creating is recorded", f.podActions(), nil)
				if s := f.mustStatus(); s.Phase != api.ClusterPhaseCreating {
					t.Fatalf("phase = %q, want Creating before any pod exists", s.Phase)
				}
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"create pods " + seed})
				expect(t, "etcd calls", f.etcd.Calls(false), nil)
				pod := f.createdPod(seed)
				cmd := strings.Join(pod.Spec.Containers[0].Command, " ")
				for _, want := range []string{
					"--initial-cluster-state=new",
					"--initial-cluster=" + seed + "=http://" + seed + ".example.ns.svc:2380 ",
					"--initial-cluster-token=" + string(testUID) + "-new0000002",
				} {
					if !strings.Contains(cmd+" ", want) {
						t.Errorf("seed command %q lacks %q", cmd, want)
					}
				}
				if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != testUID {
					t.Errorf("seed owner = %+v, want the cluster as controller", ref)
				}
				statuses := f.writtenStatuses()
				if len(statuses) != 2 || statuses[0].Phase != api.ClusterPhaseCreating || statuses[1].Phase != api.ClusterPhaseRunning {
					t.Fatalf("phases written = %v, want Creating then Running", phases(statuses))
				}
				if c := condition(&statuses[0], api.ClusterConditionScaling); c == nil || c.Message != "Current cluster size: 0, desired cluster size: 3" {
					t.Errorf("Scaling while Creating = %+v", c)
				}
				s := statuses[1]
				if c := condition(&s, api.ClusterConditionScaling); c == nil || c.Reason != "ScalingUp" || c.Message != "Current cluster size: 1, desired cluster size: 3" {
					t.Errorf("Scaling = %+v", c)
				}
				// No member runs yet, so no version is reported as running.
				if s.Size != 1 || s.CurrentVersion != "" {
					t.Errorf("status = %+v", s)
				}
				expectEvents(t, f.events(), "Normal New Member Added New member "+seed+" added to cluster")
			},
		},
		{
			name:    "the seed grows to full size one member at a time, each added once the previous one is ready",
			cluster: newTestCluster(withPhase(""), withSeedAndJoin),
			run: func(t *testing.T, f *fixture) {
				f.mustSeed()
				// The informer shows the seed; etcd knows it as a started member.
				f.etcd.members = []*etcdserverpb.Member{{ID: memberID(seed), PeerURLs: []string{f.member(seed).PeerURL()}}}
				f.etcd.leader = memberID(seed)
				f.showCreatedPods(pendingFor(0))
				f.mustPass()
				expect(t, "while the seed starts", f.etcdWrites(), nil)
				f.setReady(seed, true)
				second, third := "example-new0000003", "example-new0000004"
				f.join(second)
				expect(t, "once the seed is ready", f.etcdWrites(), []string{f.learnerCall(second), promoteCall(second)})
				f.join(third)
				expect(t, "once the second is ready", f.etcdWrites(), []string{
					f.learnerCall(second), promoteCall(second), f.learnerCall(third), promoteCall(third)})
				f.mustPass()
				s := f.mustStatus()
				if s.Size != 3 || len(s.Members.Ready) != 3 || condition(s, api.ClusterConditionScaling) != nil {
					t.Errorf("status = %+v", s)
				}
				if c := condition(s, api.ClusterConditionAvailable); c == nil || c.Status != corev1.ConditionTrue {
					t.Errorf("Available = %+v", c)
				}
			},
		},
		{
			name:    "services are created once, owned by the cluster, and reported in status",
			cluster: newTestCluster(withPhase("")),
			run: func(t *testing.T, f *fixture) {
				f.withoutServices()
				f.mustPass()
				f.mustPass()
				var created []string
				for _, a := range f.kube.Actions() {
					if ca, ok := a.(clienttesting.CreateAction); ok && a.GetResource().Resource == "services" {
						svc := ca.GetObject().(*corev1.Service)
						created = append(created, svc.Name)
						if ref := metav1.GetControllerOf(svc); ref == nil || ref.UID != testUID {
							t.Errorf("service %s owner = %+v", svc.Name, ref)
						}
					}
				}
				expect(t, "services created", created, []string{"example", "example-client"})
				if s := f.mustStatus(); s.ServiceName != "example-client" || s.ClientPort != 2379 {
					t.Errorf("status = %+v", s)
				}
			},
		},
		{
			name:    "a new cluster's setup steps before its members start (services, budget, the phase Creating) are not paced",
			cluster: newTestCluster(withPhase("")),
			run: func(t *testing.T, f *fixture) {
				f.withoutServices()
				var paced time.Duration
				for range 10 {
					requeue, err := f.c.pass(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					if len(f.podActions()) > 0 {
						break
					}
					paced += requeue
				}
				if len(f.podActions()) == 0 {
					t.Fatal("no member started within 10 passes")
				}
				// The floor of a new cluster is its pods starting: every
				// pass before them is time added to it.
				if paced >= f.c.cfg.MinPassInterval {
					t.Errorf("the passes before the members asked to wait %v in all, want less than one pacing interval (%v)", paced, f.c.cfg.MinPassInterval)
				}
			},
		},
		{
			name:    "a budget the informer does not show yet is made and followed at once; one the API has already is paced, so that a lagging informer cannot spin the loop",
			cluster: newTestCluster(withPhase("")),
			run: func(t *testing.T, f *fixture) {
				lister := policylisters.NewPodDisruptionBudgetLister(newIndexer())
				f.c.cfg.Budgets = func() policylisters.PodDisruptionBudgetLister { return lister }
				requeue, err := f.c.pass(t.Context())
				if err != nil || requeue != setupFollowUp {
					t.Errorf("made: pass = %v, %v; want the next pass at once (%v)", requeue, err, setupFollowUp)
				}
				// The informer still shows no budget: the next pass finds
				// the one it made.
				requeue, err = f.c.pass(t.Context())
				if err != nil || requeue != f.c.cfg.MinPassInterval {
					t.Errorf("found: pass = %v, %v; want the next pass paced (%v)", requeue, err, f.c.cfg.MinPassInterval)
				}
				var made []string
				for _, a := range f.kube.Actions() {
					if a.GetResource().Resource == "poddisruptionbudgets" {
						made = append(made, a.GetVerb())
					}
				}
				expect(t, "budget calls", made, []string{"create", "create"})
			},
		},
		{
			name:    "a service left by an older cluster of the same name is waited for",
			cluster: newTestCluster(withPhase("")),
			run: func(t *testing.T, f *fixture) {
				f.withoutServices()
				old := newTestCluster(func(cl *api.EtcdCluster) { cl.UID = "uid-of-the-old-cluster" })
				f.addService(k8sutil.NewPeerService(old.WithDefaults()))
				f.mustPass()
				if s := f.mustStatus(); !strings.Contains(s.Reason, "uid-of-the-old-cluster") {
					t.Errorf("reason = %q, want the stale service named", s.Reason)
				}
				expect(t, "pod actions", f.podActions(), nil)
				expectEvents(t, f.events(), "Warning ServiceConflict service example belongs to EtcdCluster example (uid uid-of-the-old-cluster)")
			},
		},
		{
			name:    "with volumes the seed's claim is created before its pod",
			cluster: newTestCluster(withPhase(""), withPVC, withSeedAndJoin),
			run: func(t *testing.T, f *fixture) {
				f.mustSeed()
				expect(t, "pod actions", f.podActions(), []string{"create persistentvolumeclaims " + seed, "create pods " + seed})
			},
		},
		{
			name:    "restart while Creating resumes: an existing seed is adopted, not failed or duplicated",
			cluster: newTestCluster(withPhase(api.ClusterPhaseCreating)),
			run: func(t *testing.T, f *fixture) {
				f.pod(memberA, pendingFor(time.Second))
				f.etcd.members = []*etcdserverpb.Member{{ID: memberID(memberA), PeerURLs: []string{f.member(memberA).PeerURL()}}}
				f.etcd.leader = memberID(memberA)
				f.mustPass()
				expect(t, "pod actions", f.podActions(), nil)
				if s := f.mustStatus(); s.Phase != api.ClusterPhaseRunning || s.Reason != "" {
					t.Errorf("status = %+v", s)
				}
				f.setReady(memberA, true)
				f.mustPass()
				expect(t, "membership", f.c.knownMembership.set.Names(), []string{memberA})
				expect(t, "pod actions", f.podActions(), []string{"create pods " + seed})
			},
		},
		{
			name:    "restart while Creating with nothing created yet creates the seed",
			cluster: newTestCluster(withPhase(api.ClusterPhaseCreating), withSeedAndJoin),
			run: func(t *testing.T, f *fixture) {
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"create pods " + seed})
				expect(t, "phases", phases(f.writtenStatuses()), []string{"Running"})
			},
		},
		{
			name:    "a paused new cluster is not bootstrapped",
			cluster: newTestCluster(withPhase(""), withPaused),
			run: func(t *testing.T, f *fixture) {
				f.mustPass()
				expect(t, "pod actions", f.podActions(), nil)
				if s := f.mustStatus(); s.Phase != api.ClusterPhaseNone || !s.ControlPaused {
					t.Errorf("status = %+v", s)
				}
			},
		},
		{
			name:    "the restore operator's hand-over is adopted: no seed of our own, membership read from its seed",
			cluster: newTestCluster(withPhase(""), withPaused),
			run: func(t *testing.T, f *fixture) {
				f.mustPass()
				// The restore operator sets the phase, creates its seed, unpauses.
				running := f.cl.DeepCopy()
				running.ResourceVersion = "2"
				running.Status.Phase = api.ClusterPhaseRunning
				if !f.c.take(running) {
					t.Error("the phase hand-over did not ask for a pass")
				}
				restored := "example-restored1"
				f.pod(restored)
				f.etcd.members = []*etcdserverpb.Member{{ID: memberID(restored), Name: restored,
					PeerURLs: []string{f.member(restored).PeerURL()}, ClientURLs: []string{f.member(restored).ClientURL()}}}
				f.etcd.leader = memberID(restored)
				unpaused := running.DeepCopy()
				unpaused.ResourceVersion, unpaused.Generation = "3", 2
				unpaused.Spec.Paused = false
				if !f.c.take(unpaused) {
					t.Error("unpausing did not ask for a pass")
				}
				f.mustPass()
				added := "example-new0000001"
				expect(t, "pod actions", f.podActions(), []string{"create pods " + added})
				cmd := strings.Join(f.createdPod(added).Spec.Containers[0].Command, " ")
				if !strings.Contains(cmd, "--initial-cluster-state=existing") || !strings.Contains(cmd, restored+"=http://") {
					t.Errorf("the second member does not join the restored seed: %q", cmd)
				}
				if s := f.mustStatus(); s.Phase != api.ClusterPhaseRunning || s.ControlPaused {
					t.Errorf("status = %+v", s)
				}
			},
		},
		{
			name:    "a status write that conflicts with the restore operator's phase adopts the phase",
			cluster: newTestCluster(withPhase(""), withPaused),
			run: func(t *testing.T, f *fixture) {
				stored := f.cl.DeepCopy()
				stored.Status.Phase = api.ClusterPhaseRunning
				if err := f.crs.Tracker().Update(api.SchemeGroupVersion.WithResource("etcdclusters"), stored, testNS); err != nil {
					t.Fatal(err)
				}
				f.conflictOnNextStatusWrite()
				f.mustPass() // the write conflicts: the fresh object is taken
				f.mustPass()
				if s := f.mustStatus(); s.Phase != api.ClusterPhaseRunning || !s.ControlPaused {
					t.Errorf("written status = %+v, want the restore operator's Running kept", s)
				}
				if f.c.latest.Status.Phase != api.ClusterPhaseRunning {
					t.Errorf("phase known = %q", f.c.latest.Status.Phase)
				}
			},
		},
		{
			name:    "a Creating write that finds the restore operator's Running phase creates no seed",
			cluster: newTestCluster(withPhase("")),
			run: func(t *testing.T, f *fixture) {
				stored := f.cl.DeepCopy()
				stored.Status.Phase = api.ClusterPhaseRunning
				if err := f.crs.Tracker().Update(api.SchemeGroupVersion.WithResource("etcdclusters"), stored, testNS); err != nil {
					t.Fatal(err)
				}
				f.conflictOnNextStatusWrite()
				f.mustPass()
				f.mustPass()
				expect(t, "pod actions", f.podActions(), nil)
				if s := f.mustStatus(); s.Phase != api.ClusterPhaseRunning {
					t.Errorf("phase written = %q, want Running kept", s.Phase)
				}
			},
		},
		{
			name:    "a missing TLS secret is reported and retried, not Failed",
			cluster: newTestCluster(withPhase(""), withTLS, withSeedAndJoin),
			run: func(t *testing.T, f *fixture) {
				for range 2 {
					if err := f.pass(); err == nil {
						t.Fatal("pass succeeded without the TLS secret")
					}
				}
				expect(t, "pod actions", f.podActions(), nil)
				s := f.mustStatus()
				if s.Phase == api.ClusterPhaseFailed || !strings.Contains(s.Reason, "operator-tls") {
					t.Errorf("status = %+v", s)
				}
				expectEvents(t, f.events(), "Warning TLSSecretUnavailable read TLS secret operator-tls (spec.TLS.static.operatorSecret): not found")

				// A secret without the key is still a problem, reported anew
				// only if its text changes category: same code, no new event.
				secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "operator-tls", Namespace: testNS}, Data: map[string][]byte{}}
				if err := f.kube.Tracker().Add(secret); err != nil {
					t.Fatal(err)
				}
				if err := f.pass(); err == nil || !strings.Contains(f.mustStatus().Reason, "missing or empty key") {
					t.Fatalf("pass with an empty secret: err %v, reason %q", err, f.mustStatus().Reason)
				}
				secret.Data = testClientSecretData(t)
				if err := f.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), secret, testNS); err != nil {
					t.Fatal(err)
				}
				f.mustSeed()
				expect(t, "pod actions", f.podActions(), []string{"create pods " + seed})
				if f.c.tlsConfig == nil {
					t.Error("no TLS configuration was built")
				}
				if s := f.mustStatus(); s.Reason != "" || s.Phase != api.ClusterPhaseRunning {
					t.Errorf("status = %+v", s)
				}
				cmd := strings.Join(f.createdPod(seed).Spec.Containers[0].Command, " ")
				if !strings.Contains(cmd, "--advertise-client-urls=https://") {
					t.Errorf("seed of a TLS cluster does not serve https: %q", cmd)
				}
			},
		},
		{
			name:    "an invalid spec at start is reported and nothing is created until it is fixed",
			cluster: newTestCluster(withPhase(""), withSize(0)),
			run: func(t *testing.T, f *fixture) {
				f.mustPass()
				f.mustPass()
				expect(t, "pod actions", f.podActions(), nil)
				s := f.mustStatus()
				if !strings.Contains(s.Reason, "invalid spec") || !strings.Contains(s.Reason, "spec.size") || s.Phase != api.ClusterPhaseNone {
					t.Errorf("status = %+v", s)
				}
				expectEvents(t, f.events(), "Warning InvalidSpec invalid spec")
				fixed := f.cl.DeepCopy()
				fixed.Generation, fixed.Spec.Size = 2, 1
				if !f.c.take(fixed) {
					t.Fatal("the fix did not ask for a pass")
				}
				f.mustSeed()
				expect(t, "pod actions", f.podActions(), []string{"create pods " + seed})
				if s := f.mustStatus(); s.Reason != "" || s.ObservedGeneration != 2 {
					t.Errorf("status = %+v", s)
				}
			},
		},
		{
			name: "a name longer than 52 characters is reported, not bootstrapped",
			cluster: newTestCluster(withPhase(""), func(cl *api.EtcdCluster) {
				cl.Name = strings.Repeat("n", 53)
			}),
			run: func(t *testing.T, f *fixture) {
				f.mustPass()
				expect(t, "pod actions", f.podActions(), nil)
				if s := f.mustStatus(); !strings.Contains(s.Reason, "metadata.name") {
					t.Errorf("reason = %q", s.Reason)
				}
			},
		},
		{
			name:    "a cluster re-created under the same name starts over and ignores its predecessor's pods",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.mustPass()
				again := newTestCluster(withPhase(""), withSeedAndJoin, func(cl *api.EtcdCluster) { cl.UID = "uid-of-the-new-cluster" })
				if err := f.crs.Tracker().Update(api.SchemeGroupVersion.WithResource("etcdclusters"), again, testNS); err != nil {
					t.Fatal(err)
				}
				if !f.c.take(again) {
					t.Fatal("re-creation did not ask for a pass")
				}
				f.withoutServices() // garbage collection deleted the old cluster's
				f.mustPass()
				f.mustPass()
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"create pods " + seed})
				if ref := metav1.GetControllerOf(f.createdPod(seed)); ref.UID != "uid-of-the-new-cluster" {
					t.Errorf("new seed owned by %s", ref.UID)
				}
			},
		},
		{
			name:    "with volumes a joining member's claim is created before its pod, and both stay while etcd refuses the member",
			cluster: newTestCluster(withSize(4), withPVC),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.mustPass()
				expect(t, "created", f.podActions(), []string{"create persistentvolumeclaims " + seed, "create pods " + seed})
				f.showCreatedPods(resolvable)
				f.claim(seed)
				f.etcd.addErr = errors.New("etcdserver: peer URL exists")
				if err := f.pass(); err == nil {
					t.Fatal("pass succeeded")
				}
				if s := f.mustStatus(); !strings.Contains(s.Reason, "peer URL exists") {
					t.Errorf("reason = %q", s.Reason)
				}
				f.etcd.addErr = nil
				f.mustPass() // the membership is read again: the add's outcome was unknown
				f.mustPass()
				expect(t, "pod actions", f.podActions(), nil)
				expect(t, "etcd writes", f.etcdWrites(), []string{f.learnerCall(seed), f.learnerCall(seed)})
			},
		},
		{
			name:    "an unreachable etcd makes a TLS cluster read its operator secret again",
			cluster: newTestCluster(withTLS, withSize(4)),
			run: func(t *testing.T, f *fixture) {
				secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "operator-tls", Namespace: testNS}, Data: testClientSecretData(t)}
				if err := f.kube.Tracker().Add(secret); err != nil {
					t.Fatal(err)
				}
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.etcd.healthErr = errors.New("tls: bad certificate")
				if err := f.pass(); err == nil {
					t.Fatal("pass succeeded")
				}
				f.etcd.healthErr = nil
				f.kube.ClearActions()
				f.mustPass()
				gets := 0
				for _, a := range f.kube.Actions() {
					if a.GetVerb() == "get" && a.GetResource().Resource == "secrets" {
						gets++
					}
				}
				if gets != 1 || f.c.tlsConfig == nil {
					t.Errorf("secret read %d times after the etcd error, want 1", gets)
				}
			},
		},
		{
			name:    "invalid update keeps the old spec and reports it",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				bad := f.cl.DeepCopy()
				bad.Generation = 2
				bad.Spec.Size = 5
				// TLS is switched on for peers and clients together only.
				bad.Spec.TLS = &api.TLSPolicy{Static: &api.StaticTLS{Member: &api.MemberSecret{PeerSecret: "peer-tls"}}}
				f.c.take(bad)
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), nil)
				s := f.mustStatus()
				if !strings.Contains(s.Reason, "still reconciling generation 1") || !strings.Contains(s.Reason, api.TLSSwitchedOnPartlyMessage) {
					t.Errorf("reason = %q", s.Reason)
				}
				expectEvents(t, f.events(), "Warning InvalidSpec invalid spec update ignored")
				good := f.cl.DeepCopy()
				good.Generation = 3
				good.Spec.Size = 4
				f.c.take(good)
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"create pods " + seed})
				if s := f.mustStatus(); s.Reason != "" {
					t.Errorf("reason = %q after the fix", s.Reason)
				}
			},
		},
	}
	runPassCases(t, tests)
}

func phases(ss []api.ClusterStatus) []string {
	var out []string
	for _, s := range ss {
		out = append(out, string(s.Phase))
	}
	return out
}
