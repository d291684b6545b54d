package cluster

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// TestWholePasses checks, at the level of whole passes on fake clients,
// what a pass that read its snapshot, acted and wrote its status in pieces
// got wrong: lost spec edits, members removed on a stale cache, rollouts
// reported finished too early, reasons that said nothing.
func TestWholePasses(t *testing.T) {
	t.Run("a spec edit made while a pass writes status is not lost", func(t *testing.T) {
		f := healthyFixture(t)
		// The user scales to 4 while the pass runs: its status write
		// conflicts and re-reads the object, which carries the edit.
		edited := f.cl.DeepCopy()
		edited.Generation, edited.ResourceVersion = 2, "2"
		edited.Spec.Size = 4
		if err := f.crs.Tracker().Update(api.SchemeGroupVersion.WithResource("etcdclusters"), edited, testNS); err != nil {
			t.Fatal(err)
		}
		f.conflictOnNextStatusWrite()
		f.mustPass()
		// Then the informer delivers the edit.
		f.c.take(edited.DeepCopy())
		f.mustPass()
		s := f.mustStatus()
		if s.ObservedGeneration != 2 {
			t.Errorf("observedGeneration = %d, want 2: the edit was dropped", s.ObservedGeneration)
		}
		if c := condition(s, api.ClusterConditionScaling); c == nil || !strings.Contains(c.Message, "desired cluster size: 4") {
			t.Errorf("Scaling = %+v, want scaling up to 4", c)
		}
	})

	t.Run("a healthy member whose pod the cache does not show yet is not removed", func(t *testing.T) {
		f := newFixture(t, newTestCluster(withPVC))
		f.withMembers(memberA, memberB, memberC)
		f.pod(memberA)
		f.pod(memberB)
		// memberC's pod exists and its etcd answers, but the lister has not
		// caught up with it.
		f.etcd.answering[memberID(memberC)] = true
		for range 3 {
			_ = f.pass()
		}
		expect(t, "etcd writes", f.etcdWrites(), nil)
		for _, a := range f.podActions() {
			if strings.HasPrefix(a, "delete") {
				t.Errorf("deleted %s", a)
			}
		}
	})

	t.Run("an upgrade to an image that never becomes ready fails with its reason and can be reverted", func(t *testing.T) {
		const broken = "3.5.99"
		f := newFixture(t, newTestCluster(withVersion(broken)))
		f.withMembers(memberA, memberB, memberC)
		f.pod(memberA, onVersion(testVersion))
		f.pod(memberB, onVersion(testVersion))
		f.pod(memberC, onVersion(testVersion))
		f.mustPass()
		patched := slices.Collect(mapsKeys(f.patches()))
		if len(patched) != 1 {
			t.Fatalf("patched %v, want one member", patched)
		}
		victim := patched[0]
		f.applyUpgrade(victim, broken, nil)
		f.setPodStatus(victim, imagePullFailing)
		f.mustPass()
		f.now = f.now.Add(6 * time.Minute)
		f.mustPass()
		s := f.mustStatus()
		if !strings.Contains(s.Reason, "ErrImagePull") || !strings.Contains(s.Reason, victim) {
			t.Errorf("reason = %q, want the member's ErrImagePull", s.Reason)
		}
		if !hasEvent(f.events(), "Warning UpgradeFailed") {
			t.Error("no UpgradeFailed event")
		}

		back := f.cl.DeepCopy()
		back.Generation, back.ResourceVersion = 2, "2"
		back.Spec.Version = testVersion
		f.c.take(back)
		f.kube.ClearActions()
		f.mustPass()
		p, ok := f.patches()[victim]
		if !ok || !strings.Contains(mustJSON(t, p), testVersion) {
			t.Errorf("patches %v, want %s patched back to %s", f.patches(), victim, testVersion)
		}
	})

	t.Run("a joining pod that cannot be scheduled is reported with the scheduler's message", func(t *testing.T) {
		f := newFixture(t, newTestCluster(withSize(4)))
		f.withMembers(memberA, memberB, memberC)
		f.pod(memberA)
		f.pod(memberB)
		f.pod(memberC)
		const msg = "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."
		f.joinerPod("example-new0000001", []string{memberA, memberB, memberC}, func(p *corev1.Pod) {
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg,
			}}}
		})
		f.mustPass()
		f.mustPass()
		if s := f.mustStatus(); !strings.Contains(s.Reason, msg) {
			t.Errorf("reason = %q, want the scheduler's message", s.Reason)
		}
		if n := countEvents(f.events(), "Warning"); n != 1 {
			t.Errorf("%d Warning events, want one", n)
		}
	})

	t.Run("the membership is read from the leader, not from a member that lags", func(t *testing.T) {
		const joined = "example-new0000001"
		f := newFixture(t, newTestCluster(withSize(3)))
		f.withMembers(memberA, memberB, memberC)
		f.etcd.leader = memberID(memberC)
		// memberD joined as a learner and runs; memberA has not applied
		// that yet. The cluster was scaled back to 3 meanwhile, and the
		// operator restarted, so it knows no membership.
		m := f.member(joined)
		f.etcd.members = append(f.etcd.members, &etcdserverpb.Member{ID: m.ID, Name: joined, PeerURLs: []string{m.PeerURL()}, ClientURLs: []string{m.ClientURL()}, IsLearner: true})
		f.etcd.stale = map[string][]string{memberA: {memberA, memberB, memberC}}
		f.pod(memberA)
		f.pod(memberB)
		f.pod(memberC)
		f.joinerPod(joined, []string{memberA, memberB, memberC}, func(p *corev1.Pod) {
			p.Status = runningReady()
		})
		f.forgetMembership()
		for range 3 {
			_ = f.pass()
		}
		for _, a := range f.podActions() {
			if a == "delete pods "+joined {
				t.Errorf("deleted the pod of member %s, which etcd lists", joined)
			}
		}
	})

	t.Run("claims that belong to no member are collected", func(t *testing.T) {
		f := newFixture(t, newTestCluster(withPVC))
		f.withMembers(memberA, memberB, memberC)
		for _, n := range []string{memberA, memberB, memberC} {
			f.pod(n)
			f.claim(n)
		}
		f.claim("example-gone")
		for range 3 {
			_ = f.pass()
		}
		acts := f.podActions()
		if !slices.Contains(acts, "delete persistentvolumeclaims example-gone") {
			t.Errorf("actions %q, want the stray claim deleted", acts)
		}
		for _, n := range []string{memberA, memberB, memberC} {
			if slices.Contains(acts, "delete persistentvolumeclaims "+n) {
				t.Errorf("deleted the claim of member %s", n)
			}
		}
	})

	t.Run("a deleted service is created again", func(t *testing.T) {
		f := healthyFixture(t)
		f.mustPass()
		f.deleteService(k8sutil.ClientServiceName(testName))
		f.kube.ClearActions()
		f.mustPass()
		var created []string
		for _, a := range f.kube.Actions() {
			if ca, ok := a.(clienttesting.CreateAction); ok && a.GetResource().Resource == "services" {
				created = append(created, ca.GetObject().(metav1.Object).GetName())
			}
		}
		expect(t, "services created", created, []string{k8sutil.ClientServiceName(testName)})
	})

	t.Run("a rollout is not reported finished before the last member runs the new image", func(t *testing.T) {
		f := upgradeFixture(t, testVersion)
		for _, n := range []string{memberA, memberB} {
			f.applyUpgrade(n, testVersion, ptr(true))
		}
		// memberC is patched; the kubelet has not restarted its container.
		f.applyUpgrade(memberC, testVersion, nil)
		f.mustPass()
		s := f.mustStatus()
		if s.CurrentVersion == testVersion || s.TargetVersion != testVersion || condition(s, api.ClusterConditionUpgrading) == nil {
			t.Errorf("current %q target %q conditions %+v: reported finished while %s still runs %s",
				s.CurrentVersion, s.TargetVersion, s.Conditions, memberC, oldVersion)
		}
	})

	t.Run("a new cluster whose image cannot be pulled reports it and no running version", func(t *testing.T) {
		f := newFixture(t, newTestCluster(withSize(1), withPhase(api.ClusterPhaseNone)))
		f.mustSeed()
		f.showCreatedPods(func(p *corev1.Pod) { imagePullFailing(p); p.Status.Phase = corev1.PodPending })
		f.mustPass()
		f.mustPass()
		s := f.mustStatus()
		if s.CurrentVersion != "" {
			t.Errorf("currentVersion = %q while no member runs", s.CurrentVersion)
		}
		if !strings.Contains(s.Reason, "ErrImagePull") {
			t.Errorf("reason = %q, want the image pull failure", s.Reason)
		}
	})

	t.Run("a failed upgrade keeps the evidence in its event", func(t *testing.T) {
		f := upgradeFixture(t, testVersion)
		f.mustPass()
		victim := slices.Collect(mapsKeys(f.patches()))[0]
		f.applyUpgrade(victim, testVersion, nil)
		f.setPodStatus(victim, func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.Conditions = nil
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 2, Reason: "Error", Message: "panic: detected disallowed v2 WAL for stage --v2-deprecation=write-only",
			}}
		})
		f.mustPass()
		var got string
		for _, e := range f.events() {
			if strings.HasPrefix(e, "Warning UpgradeFailed") {
				got = e
			}
		}
		if !strings.Contains(got, "disallowed v2 WAL") || !strings.Contains(got, "exit code 2") {
			t.Errorf("UpgradeFailed event %q, want the container's exit code and last message", got)
		}
	})

	t.Run("pods being deleted are not reported as data to restore", func(t *testing.T) {
		f := newFixture(t, newTestCluster())
		f.withMembers(memberA, memberB, memberC)
		for _, n := range []string{memberA, memberB, memberC} {
			f.pod(n, terminating)
		}
		f.mustPass()
		if s := f.mustStatus(); strings.Contains(s.Reason, "restore") {
			t.Errorf("reason = %q while the member pods are being deleted", s.Reason)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// seeQuorumLost runs the passes of a disaster recovery's grace period: the
// goroutine recovers only a quorum it has seen lost for that long, on
// several reads of etcd without a leader. The clock ends past the grace.
func (f *fixture) seeQuorumLost() {
	f.t.Helper()
	for range leaderlessReadsNeeded {
		f.mustPass()
		f.now = f.now.Add(2 * time.Minute)
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, k := range sortedKeys(m) {
			if !yield(k) {
				return
			}
		}
	}
}

func hasEvent(events []string, prefix string) bool {
	return slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, prefix) })
}

func countEvents(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// setPodStatus changes the lister's pod name with fn.
func (f *fixture) setPodStatus(name string, fn podOpt) {
	f.t.Helper()
	obj, exists, err := f.indexer.GetByKey(testNS + "/" + name)
	if err != nil || !exists {
		f.t.Fatalf("pod %s is not in the lister", name)
	}
	p := obj.(*corev1.Pod).DeepCopy()
	fn(p)
	f.setPod(p)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	return strings.ReplaceAll(strings.TrimSpace(jsonString(v)), " ", "")
}

var _ = context.Background

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSilentFailuresAreTold covers failures the cluster loop once met
// silently, each failing before its fix.
func TestSilentFailuresAreTold(t *testing.T) {
	t.Run("a joining pod made unschedulable by an older spec.pod is made again from the spec in force, and the reason says why", func(t *testing.T) {
		f := newFixture(t, newTestCluster(withSize(2)))
		f.withMembers(memberA)
		f.pod(memberA, func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}},
			}}
		})
		const msg = "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."
		f.joinerPod("example-new0000001", []string{memberA}, func(p *corev1.Pod) {
			p.Annotations[k8sutil.AnnotationPodPolicy] = "made-for-an-older-spec"
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg,
			}}}
		})
		f.mustPass()
		if s := f.mustStatus(); !strings.Contains(s.Reason, msg) || !strings.Contains(s.Reason, "one member per node") {
			t.Errorf("reason = %q, want the scheduler's message and why the rule still holds", s.Reason)
		}
		f.mustPass()
		if !slices.Contains(f.podActions(), "delete pods example-new0000001") {
			t.Errorf("actions %v: the joining pod of the old spec.pod was kept", f.podActions())
		}
	})
	t.Run("deleting every pod of an emptyDir cluster at once removes no member", func(t *testing.T) {
		f := healthyFixture(t)
		f.setPodStatus(memberA, terminating)
		for range 3 {
			f.mustPass()
		}
		f.setPodStatus(memberB, terminating)
		f.setPodStatus(memberC, terminating)
		f.podGone(memberA)
		for range 3 {
			f.mustPass()
		}
		expect(t, "etcd writes", f.etcdWrites(), nil)
	})
	t.Run("a member OOM-killed at every start is one Warning with the cause, and its replacement backs off", func(t *testing.T) {
		f := healthyFixture(t)
		f.mustPass() // sees the members run
		oom := func(p *corev1.Pod) { crashLooping(5)(p) }
		f.setPodStatus(memberC, oom)
		f.mustPass() // removes the crashing member
		f.mustPass() // makes its replacement's pod
		f.showCreatedPods(resolvable)
		f.mustPass() // adds it
		joined := "example-new0000001"
		f.setPodStatus(joined, func(p *corev1.Pod) { p.Status = runningReady(); crashLooping(5)(p) })
		for range 3 {
			f.mustPass()
		}
		removes := 0
		for _, w := range f.etcdWrites() {
			if strings.HasPrefix(w, "remove ") {
				removes++
			}
		}
		if removes != 1 {
			t.Errorf("etcd writes %v: the second member failing the same way was replaced at once", f.etcdWrites())
		}
		warnings := 0
		for _, e := range f.events() {
			if strings.HasPrefix(e, "Warning MemberNotStarting") {
				warnings++
				if !strings.Contains(e, "OOMKilled") {
					t.Errorf("event %q lacks the cause", e)
				}
			}
		}
		if warnings != 1 {
			t.Errorf("%d MemberNotStarting warnings for one cause, want 1", warnings)
		}
		if s := f.mustStatus(); !strings.Contains(s.Reason, "OOMKilled") {
			t.Errorf("reason = %q", s.Reason)
		}
	})
}

// TestBadInputIsTold covers input that got past admission or is wrong
// outside the spec: each case failed before its fix.
func TestBadInputIsTold(t *testing.T) {
	t.Run("a reserved etcdEnv variable that got past admission is left out of the pods and reported", func(t *testing.T) {
		f := newFixture(t, newTestCluster(withSize(1), withPhase(api.ClusterPhaseNone), func(cl *api.EtcdCluster) {
			cl.Spec.Pod = &api.PodPolicy{EtcdEnv: []corev1.EnvVar{
				{Name: "ETCD_FORCE_NEW_CLUSTER", Value: "true"},
				{Name: "ETCD_SNAPSHOT_COUNT", Value: "5000"},
				{Name: "ETCD_DISCOVERY_SRV", Value: "example.com"},
			}}
		}))
		f.mustSeed()
		var env []string
		for _, a := range f.kube.Actions() {
			if ca, ok := a.(clienttesting.CreateAction); ok && a.GetResource().Resource == "pods" {
				for _, e := range ca.GetObject().(*corev1.Pod).Spec.Containers[0].Env {
					env = append(env, e.Name)
				}
			}
		}
		expect(t, "the seed's etcd environment", env, []string{"ETCD_SNAPSHOT_COUNT", api.EnvMaxLearners})
		s := f.mustStatus()
		if !strings.Contains(s.Reason, "ETCD_FORCE_NEW_CLUSTER, ETCD_DISCOVERY_SRV ignored") {
			t.Errorf("reason = %q, want the ignored variables named", s.Reason)
		}
		if !hasEvent(f.events(), "Warning InvalidSpec spec.pod.etcdEnv ETCD_FORCE_NEW_CLUSTER") {
			t.Error("no InvalidSpec event for the reserved variables")
		}
	})
	t.Run("a running cluster whose stored spec holds a reserved variable stays managed", func(t *testing.T) {
		f := newFixture(t, newTestCluster(withSize(4), func(cl *api.EtcdCluster) {
			cl.Spec.Pod = &api.PodPolicy{EtcdEnv: []corev1.EnvVar{{Name: "ETCD_FORCE_NEW_CLUSTER", Value: "true"}}}
		}))
		f.withMembers(memberA, memberB, memberC)
		f.pod(memberA)
		f.pod(memberB)
		f.pod(memberC)
		f.mustPass()
		f.mustPass()
		var created int
		for _, a := range f.podActions() {
			if strings.HasPrefix(a, "create pods") {
				created++
			}
		}
		if created != 1 {
			t.Errorf("actions %v: the cluster was not scaled to its spec", f.podActions())
		}
	})
}

// TestVersionNoLongerFixedIsSaidOnce: a cluster on an etcd minor version that
// etcd no longer fixes is run, with one Warning that says where to go next,
// not one per pass.
func TestVersionNoLongerFixedIsSaidOnce(t *testing.T) {
	f := newFixture(t, newTestCluster(withSize(1), withVersion("3.4.23"), withPhase(api.ClusterPhaseNone)))
	f.mustPass()
	f.mustPass()
	f.mustPass()
	if n := countEvents(f.events(), "Warning VersionNoLongerFixed etcd 3.4 is no longer fixed upstream"); n != 1 {
		t.Errorf("%d VersionNoLongerFixed events, want 1: %v", n, f.events())
	}
	if len(f.podActions()) == 0 {
		t.Error("no seed made: a cluster on 3.4 is still run")
	}
	g := newFixture(t, newTestCluster(withSize(1), withPhase(api.ClusterPhaseNone)))
	g.mustPass()
	if n := countEvents(g.events(), "Warning VersionNoLongerFixed"); n != 0 {
		t.Errorf("a cluster on %s got %d VersionNoLongerFixed events", testVersion, n)
	}
}
