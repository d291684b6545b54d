package cluster

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clienttesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

const oldVersion = "3.4.23"

// upgradeFixture is a complete 3-member cluster on oldVersion whose spec
// asks for target; memberA leads.
func upgradeFixture(t *testing.T, target string, opts ...podOpt) *fixture {
	f := newFixture(t, newTestCluster(withVersion(target)))
	f.withMembers(memberA, memberB, memberC)
	for _, n := range []string{memberA, memberB, memberC} {
		f.pod(n, append([]podOpt{onVersion(oldVersion)}, opts...)...)
	}
	return f
}

// patches are the pod patches sent, as pod name -> decoded patch.
func (f *fixture) patches() map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, a := range f.kube.Actions() {
		if pa, ok := a.(clienttesting.PatchAction); ok && a.GetResource().Resource == "pods" {
			var p map[string]any
			if err := json.Unmarshal(pa.GetPatch(), &p); err != nil {
				f.t.Fatal(err)
			}
			out[pa.GetName()] = p
		}
	}
	return out
}

// applyUpgrade shows in the lister what the kubelet does with a patched
// pod: new image and annotation at once, the container restarted (and Ready
// or not) only when restartedReady says so.
func (f *fixture) applyUpgrade(name, version string, restartedAndReady *bool) {
	f.t.Helper()
	obj, _, _ := f.indexer.GetByKey(testNS + "/" + name)
	p := obj.(*corev1.Pod).DeepCopy()
	p.Annotations[api.AnnotationVersion] = version
	p.Spec.Containers[0].Image = api.EtcdImage(api.DefaultRepository, version)
	f.setPod(p)
	if restartedAndReady != nil {
		f.setReady(name, *restartedAndReady, restarted(1))
	}
}

func TestUpgrade(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{
			name: "upgrade patches one follower's image and version annotation in place",
			run: func(t *testing.T) {
				f := upgradeFixture(t, testVersion)
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"patch pods " + memberB})
				expect(t, "etcd writes", f.etcdWrites(), nil)
				p := f.patches()[memberB]
				meta := p["metadata"].(map[string]any)
				if meta["annotations"].(map[string]any)[api.AnnotationVersion] != testVersion || meta["uid"] != "pod-uid-"+memberB {
					t.Errorf("patch metadata = %v", meta)
				}
				ctr := p["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
				if ctr["name"] != k8sutil.EtcdContainerName || ctr["image"] != "quay.io/coreos/etcd:v"+testVersion {
					t.Errorf("patched container = %v", ctr)
				}
				// The trailing space is the original's message.
				expectEvents(t, f.events(), "Normal Member Upgraded Member "+memberB+" upgraded from "+oldVersion+" to "+testVersion+" ")
				s := f.mustStatus()
				if c := condition(s, api.ClusterConditionUpgrading); c == nil || c.Reason != "ClusterUpgrading" || c.Message != "upgrading to "+testVersion {
					t.Errorf("Upgrading = %+v", c)
				}
				if s.TargetVersion != testVersion || s.CurrentVersion != oldVersion {
					t.Errorf("versions: current %q target %q", s.CurrentVersion, s.TargetVersion)
				}
			},
		},
		{
			name: "upgrade waits for the upgraded member to be ready, and does the leader last",
			run: func(t *testing.T) {
				f := upgradeFixture(t, testVersion)
				f.mustPass()
				expect(t, "first", f.podActions(), []string{"patch pods " + memberB})

				f.applyUpgrade(memberB, testVersion, nil) // patched, container not restarted yet, still Ready
				f.mustPass()
				expect(t, "before the restart", f.podActions(), []string{"patch pods " + memberB})
				f.applyUpgrade(memberB, testVersion, &no) // restarted, not Ready yet
				f.mustPass()
				expect(t, "while not ready", f.podActions(), []string{"patch pods " + memberB})
				f.applyUpgrade(memberB, testVersion, &yes)
				f.mustPass()
				expect(t, "once ready", f.podActions(), []string{"patch pods " + memberB, "patch pods " + memberC})

				f.applyUpgrade(memberC, testVersion, &yes)
				f.mustPass()
				// Leadership moves to a follower on the new version first.
				expect(t, "etcd writes", f.etcdWrites(), []string{fmt.Sprintf("move-leader %x", memberID(memberB))})
				f.mustPass()
				expect(t, "leader last", f.podActions(), []string{"patch pods " + memberB, "patch pods " + memberC, "patch pods " + memberA})

				f.applyUpgrade(memberA, testVersion, &yes)
				f.mustPass()
				s := f.mustStatus()
				if condition(s, api.ClusterConditionUpgrading) != nil || s.CurrentVersion != testVersion || s.TargetVersion != "" {
					t.Errorf("after the upgrade: %+v", s)
				}
				if len(f.podActions()) != 3 {
					t.Errorf("pod actions = %v", f.podActions())
				}
			},
		},
		{
			name: "an upgrade to an image that cannot be pulled, taken back, patches the member back at the next pass",
			run: func(t *testing.T) {
				f := upgradeFixture(t, testVersion)
				f.mustPass()
				expect(t, "upgrade", f.podActions(), []string{"patch pods " + memberB})
				f.applyUpgrade(memberB, testVersion, nil)
				f.setPodStatus(memberB, imagePullFailing)
				f.now = f.now.Add(10 * time.Second)
				f.mustPass()
				expect(t, "while the image is pulled", f.podActions(), []string{"patch pods " + memberB})

				taken := f.cl.DeepCopy()
				taken.Spec.Version, taken.Generation = oldVersion, taken.Generation+1
				f.c.take(taken)
				f.now = f.now.Add(time.Second)
				f.mustPass()
				expect(t, "after spec.version was set back", f.podActions(), []string{"patch pods " + memberB, "patch pods " + memberB})
				if got := f.patches()[memberB]["metadata"].(map[string]any)["annotations"].(map[string]any)[api.AnnotationVersion]; got != oldVersion {
					t.Errorf("member %s patched to %v, want %s", memberB, got, oldVersion)
				}
			},
		},
		{
			name: "upgrade waits for etcd to be healthy",
			run: func(t *testing.T) {
				f := upgradeFixture(t, testVersion)
				f.etcd.noQuorum = true
				f.mustPass()
				expect(t, "pod actions", f.podActions(), nil)
			},
		},
		{
			name: "upgrade refuses 3.4 to 3.6",
			run: func(t *testing.T) {
				f := upgradeFixture(t, "3.6.6")
				f.mustPass()
				f.mustPass()
				expect(t, "pod actions", f.podActions(), nil)
				s := f.mustStatus()
				if !strings.Contains(s.Reason, "upgrade refused") || !strings.Contains(s.Reason, "upgrade to a 3.5 release first") {
					t.Errorf("reason = %q", s.Reason)
				}
				if condition(s, api.ClusterConditionUpgrading) != nil || s.TargetVersion != "" || s.CurrentVersion != oldVersion {
					t.Errorf("status = %+v", s)
				}
				expectEvents(t, f.events(), "Warning UpgradeRefused upgrade refused: member "+memberA+" runs etcd 3.4.23 and cannot go to 3.6.6")
			},
		},
		{
			name: "upgrade refuses a minor downgrade",
			run: func(t *testing.T) {
				f := newFixture(t, newTestCluster(withVersion(oldVersion)))
				f.withMembers(memberA, memberB, memberC)
				for _, n := range []string{memberA, memberB, memberC} {
					f.pod(n, onVersion(testVersion))
				}
				f.mustPass()
				expect(t, "pod actions", f.podActions(), nil)
				if s := f.mustStatus(); !strings.Contains(s.Reason, "does not support downgrading from 3.5 to 3.4") {
					t.Errorf("reason = %q", s.Reason)
				}
			},
		},
		{
			name: "a patch-level downgrade is fine",
			run: func(t *testing.T) {
				f := newFixture(t, newTestCluster(withVersion("3.5.20")))
				f.withMembers(memberA, memberB, memberC)
				for _, n := range []string{memberA, memberB, memberC} {
					f.pod(n, onVersion(testVersion))
				}
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"patch pods " + memberB})
			},
		},
		{
			name: "a version change mid-upgrade compares each pod with the current spec",
			run: func(t *testing.T) {
				f := upgradeFixture(t, testVersion)
				f.applyUpgrade(memberB, testVersion, &yes) // memberB done, A and C on 3.4
				to36 := f.cl.DeepCopy()
				to36.Generation, to36.Spec.Version = 2, "3.6.6"
				f.c.take(to36)
				f.mustPass()
				expect(t, "3.6 while members run 3.4", f.podActions(), nil)
				if s := f.mustStatus(); !strings.Contains(s.Reason, "member "+memberA+" runs etcd 3.4.23") {
					t.Errorf("reason = %q", s.Reason)
				}
				to3522 := f.cl.DeepCopy()
				to3522.Generation, to3522.Spec.Version = 3, "3.5.22"
				f.c.take(to3522)
				f.mustPass()
				expect(t, "3.5.22", f.podActions(), []string{"patch pods " + memberB})
				if img := f.patches()[memberB]["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"]; img != "quay.io/coreos/etcd:v3.5.22" {
					t.Errorf("image = %v", img)
				}
				if s := f.mustStatus(); s.Reason != "" || s.TargetVersion != "3.5.22" {
					t.Errorf("status = %+v", s)
				}
			},
		},
		{
			name: "a member made for etcd 3.2 is replaced, not patched, on the way to 3.5",
			run: func(t *testing.T) {
				f := upgradeFixture(t, testVersion, madeFor32)
				f.mustPass()
				added := "example-new0000001"
				expect(t, "pod actions", f.podActions(), []string{"create pods " + added})
				if img := f.createdPod(added).Spec.Containers[0].Image; img != "quay.io/coreos/etcd:v"+testVersion {
					t.Errorf("replacement image = %s", img)
				}
				f.showCreatedPods(resolvable)
				f.mustPass()
				expect(t, "while the replacement is on its way", f.etcdWrites(), []string{f.learnerCall(added)})
				f.setReady(added, true)
				f.mustPass()
				f.mustPass()
				expect(t, "once it is ready", f.etcdWrites(), []string{f.learnerCall(added), promoteCall(added), removeCall(memberA)})
				if _, patched := f.patches()[memberA]; patched {
					t.Error("a pod with exec probes was patched")
				}
			},
		},
		{
			name: "a member that stops after its upgrade halts the rollout, and its replacement runs the old version",
			run: func(t *testing.T) {
				f := upgradeFixture(t, testVersion)
				f.mustPass()
				expect(t, "first", f.podActions(), []string{"patch pods " + memberB})
				// The upgraded etcd exits at once (etcd 3.6 does so on a log with v2
				// entries); with restartPolicy Never the pod fails.
				f.applyUpgrade(memberB, testVersion, nil)
				obj, _, _ := f.indexer.GetByKey(testNS + "/" + memberB)
				dead := obj.(*corev1.Pod).DeepCopy()
				failed(dead)
				f.setPod(dead)
				f.mustPass()
				expect(t, "the dead member is removed", f.etcdWrites(), []string{removeCall(memberB)})
				s := f.mustStatus()
				if !strings.Contains(s.Reason, "upgrade to "+testVersion+" halted") || !strings.Contains(s.Reason, memberB) {
					t.Errorf("status.reason = %q", s.Reason)
				}
				if !strings.Contains(strings.Join(f.events(), "\n"), "Warning UpgradeFailed") {
					t.Errorf("events = %v", f.events())
				}
				f.mustPass()
				added := "example-new0000001"
				expect(t, "then replaced", f.podActions(), []string{"patch pods " + memberB, "delete pods " + memberB, "create pods " + added})
				if img := f.createdPod(added).Spec.Containers[0].Image; img != "quay.io/coreos/etcd:v"+oldVersion {
					t.Errorf("the replacement runs %s, want the version the rest runs, %s", img, oldVersion)
				}
				f.showCreatedPods(resolvable)
				f.mustPass()
				f.setReady(added, true, onVersion(oldVersion))
				f.mustPass()
				f.mustPass()
				for _, a := range f.podActions() {
					if strings.HasPrefix(a, "patch pods") && a != "patch pods "+memberB {
						t.Errorf("the halted upgrade went on: %v", f.podActions())
					}
				}
			},
		},
		{
			name: "a member lost mid-upgrade is replaced at the oldest version running",
			run: func(t *testing.T) {
				f := newFixture(t, newTestCluster(withVersion(testVersion)))
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA, onVersion(oldVersion))
				f.pod(memberB, onVersion(testVersion))
				f.pod(memberC, onVersion(oldVersion), failed)
				f.mustPass()
				expect(t, "the dead member is removed", f.etcdWrites(), []string{removeCall(memberC)})
				f.mustPass()
				added := "example-new0000001"
				if img := f.createdPod(added).Spec.Containers[0].Image; img != "quay.io/coreos/etcd:v"+oldVersion {
					t.Errorf("the replacement runs %s, want %s", img, oldVersion)
				}
			},
		},
		{
			name: "while an upgrade is refused, new members run the cluster's version",
			run: func(t *testing.T) {
				f := newFixture(t, newTestCluster(withVersion("3.6.6"), withSize(4)))
				f.withMembers(memberA, memberB, memberC)
				for _, n := range []string{memberA, memberB, memberC} {
					f.pod(n, onVersion(oldVersion))
				}
				f.mustPass()
				added := "example-new0000001"
				pod := f.createdPod(added)
				if pod.Spec.Containers[0].Image != "quay.io/coreos/etcd:v"+oldVersion || pod.Annotations[api.AnnotationVersion] != oldVersion {
					t.Errorf("new member runs %s (annotation %s), want %s", pod.Spec.Containers[0].Image, pod.Annotations[api.AnnotationVersion], oldVersion)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// TestVersionChangeOfAVersionThatNeverRan covers spec.version changed away
// from a version no member ran: etcd's rules for moving between versions
// protect data, and a member whose etcd never ran holds none unless a claim
// of a cluster that served may.
func TestVersionChangeOfAVersionThatNeverRan(t *testing.T) {
	const missing = "3.7.99"
	neverRan := []podOpt{onVersion(missing), waitingForImage}
	cases := []struct {
		name string
		mods []snapMod
		// refused is how the refusal starts, "" for none; ranNot is not in it.
		refused, ranNot string
	}{
		{name: "a new cluster whose seed never ran its image goes to a lower version: there is nothing to downgrade",
			mods: mods(notYetAvailable, members(memberA), onlyPods(memberA), podIs(memberA, neverRan...))},
		{name: "a new cluster on claims whose seed never ran its image goes to a lower version: nobody was told anything is stored",
			mods: mods(notYetAvailable, spec(withPVC), claims(memberA), members(memberA), onlyPods(memberA), podIs(memberA, neverRan...))},
		{name: "members on emptyDir volumes that never ran their version go to a lower one",
			mods: mods(podIs(memberA, neverRan...), podIs(memberB, neverRan...), podIs(memberC, neverRan...))},
		{name: "a member on a claim of a cluster that served, whose pod never ran its version, is refused without saying it runs that version",
			mods:    mods(spec(withPVC), claims(memberA, memberB, memberC), onlyPods(memberA, memberB, memberC), podIs(memberC, neverRan...)),
			refused: "version change refused: member example-c was made for etcd 3.7.99, which has not run in its pod, but its claim may hold data an earlier pod wrote with it",
			ranNot:  "runs etcd"},
		{name: "a member that runs a version is still refused a minor downgrade",
			mods:    mods(spec(withVersion(oldVersion))),
			refused: "upgrade refused: member example-a runs etcd 3.5.21 and cannot go to 3.4.23"},
		{name: "a member whose old etcd stopped for an image that cannot be pulled ran before, and keeps etcd's rules",
			mods:    mods(spec(withVersion("3.4.23")), podIs(memberA, onVersion(missing), replacedForImage("ImagePullBackOff", "Back-off pulling image"))),
			refused: "upgrade refused: member example-a runs etcd 3.7.99 and cannot go to 3.4.23"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testSnapshot(tc.mods...)
			got := ""
			if s.plan.refused != nil {
				got = s.plan.refused.msg
			}
			switch {
			case tc.refused == "" && got != "":
				t.Errorf("refused: %q, want no refusal", got)
			case !strings.HasPrefix(got, tc.refused):
				t.Errorf("refused: %q, want %q...", got, tc.refused)
			case tc.ranNot != "" && strings.Contains(got, tc.ranNot):
				t.Errorf("refused: %q, want no %q in it", got, tc.ranNot)
			}
		})
	}
}

func TestCheckUpgrade(t *testing.T) {
	tests := []struct {
		from, to string
		ok       bool
	}{
		{"3.4.23", "3.5.21", true},
		{"3.5.21", "3.5.22", true},
		{"3.5.22", "3.5.21", true},
		{"3.4.23", "3.6.6", false},
		{"3.5.21", "3.4.23", false},
		{"", "3.5.21", false},
	}
	for _, tt := range tests {
		if err := checkUpgrade(tt.from, tt.to); (err == nil) != tt.ok {
			t.Errorf("checkUpgrade(%q, %q) = %v, want ok=%v", tt.from, tt.to, err, tt.ok)
		}
	}
}

func TestPodVersion(t *testing.T) {
	pod := func(annotation, image string) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: k8sutil.EtcdContainerName, Image: image}}}}
		if annotation != "" {
			p.Annotations = map[string]string{api.AnnotationVersion: annotation}
		}
		return p
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"the annotation wins", pod("3.5.21", "quay.io/coreos/etcd:v3.4.23"), "3.5.21"},
		{"without the annotation the image tag tells", pod("", "quay.io/coreos/etcd:v3.4.23"), "3.4.23"},
		{"a registry port is no tag", pod("", "registry:5000/etcd"), ""},
	}
	for _, tt := range tests {
		if got := podVersion(tt.pod); got != tt.want {
			t.Errorf("%s: podVersion = %q, want %q", tt.name, got, tt.want)
		}
	}
}
