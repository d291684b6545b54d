package cluster

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clienttesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

// The clusters coreos/etcd-operator v0.9.4 made, met by this operator once
// the original is stopped: pods, services and status exactly as the original
// left them (original_builders_test.go), whole passes on fake clients.

// originalFaults are what may have happened to the original's cluster, or
// to its spec, by the time this operator takes it over.
var originalFaults = []struct {
	name  string
	mods  []func(*api.EtcdCluster)
	fault func(f *fixture)
}{
	{name: "healthy"},
	{name: "a member's pod ended", fault: func(f *fixture) {
		p := f.originalPodNow(originalB)
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}
		f.setPod(p)
	}},
	{name: "a member's pod is gone", fault: func(f *fixture) { f.podGone(originalB) }},
	{name: "spec.version moved on", mods: []func(*api.EtcdCluster){withVersion("3.5.22")}},
	{name: "spec.size is 5", mods: []func(*api.EtcdCluster){withSize(5)}},
	{name: "spec.size is 1", mods: []func(*api.EtcdCluster){withSize(1)}},
}

// originalPodNow is a copy of the lister's pod name.
func (f *fixture) originalPodNow(name string) *corev1.Pod {
	f.t.Helper()
	obj, exists, _ := f.indexer.GetByKey(testNS + "/" + name)
	if !exists {
		f.t.Fatalf("pod %s is not in the lister", name)
	}
	return obj.(*corev1.Pod).DeepCopy()
}

// runPasses runs n passes a minute and more apart, showing the pods the
// loop creates as Running, and returns every write to pods, claims and
// etcd's membership.
func (f *fixture) runPasses(n int) (pods, etcd []string) {
	f.t.Helper()
	for range n {
		_ = f.pass()
		pods = append(pods, f.podActions()...)
		f.showCreatedPods(resolvable)
		f.now = f.now.Add(70 * time.Second)
	}
	return pods, f.etcd.Calls(true)
}

// TestWithoutAdoptionTheOriginalsMembersWereReplaced shows what this operator
// did to a cluster the original made before adoption was a step of its
// ladder: it read the membership through the original's Services and wrote
// a status, silently, and then judged the original's pods as its own. A
// member whose pod ended or went (restartPolicy Never, emptyDir data) was
// removed from etcd and replaced by a new member of its own layout; a new
// spec.version replaced the members one by one (the original's exec probes
// run /bin/sh, so its pods are replaced, not patched); spec.size added
// members of its own layout or removed the original's.
func TestWithoutAdoptionTheOriginalsMembersWereReplaced(t *testing.T) {
	steps := decisionSteps
	t.Cleanup(func() { decisionSteps = steps })
	decisionSteps = slices.DeleteFunc(slices.Clone(steps), func(step func(*snapshot) (action, bool)) bool {
		return stepName(step) == stepName(adoptedFromTheOriginal)
	})
	want := map[string]struct{ pods, etcd string }{
		"healthy":                {"", ""},
		"a member's pod ended":   {"delete pods example-9wtl2cd5vx, create pods example-new0000001", "remove cb4cb7162995e8a8, add-learner http://example-new0000001.example.ns.svc:2380"},
		"a member's pod is gone": {"delete pods example-9wtl2cd5vx, create pods example-new0000001", "remove cb4cb7162995e8a8, add-learner http://example-new0000001.example.ns.svc:2380"},
		"spec.version moved on":  {"create pods example-new0000001", "add-learner http://example-new0000001.example.ns.svc:2380"},
		"spec.size is 5":         {"create pods example-new0000001, create pods example-new0000002", "add-learner http://example-new0000001.example.ns.svc:2380"},
		"spec.size is 1":         {"delete pods example-9wtl2cd5vx, delete pods example-h6nj8pqs2b", "remove cb4cb7162995e8a8, remove f43444dc37e7e124"},
	}
	for _, tt := range originalFaults {
		t.Run(tt.name, func(t *testing.T) {
			f := originalFixture(t, tt.mods...)
			if tt.fault != nil {
				tt.fault(f)
			}
			pods, etcd := f.runPasses(12)
			if got := strings.Join(pods, ", "); got != want[tt.name].pods {
				t.Errorf("pod writes = %q\n  want %q", got, want[tt.name].pods)
			}
			if got := strings.Join(etcd, ", "); got != want[tt.name].etcd {
				t.Errorf("etcd writes = %q\n  want %q", got, want[tt.name].etcd)
			}
			for _, e := range f.events() {
				if strings.Contains(e, eventAdoptedFromTheOriginal) {
					t.Errorf("adoption was told without the step: %s", e)
				}
			}
		})
	}
}

// stepName tells the steps of the ladder apart.
func stepName(step func(*snapshot) (action, bool)) string {
	return runtimeFuncName(step)
}

// TestTheOriginalsMembersAreAdoptedAsTheyRun: whatever happened to the
// original's cluster, no pod or claim is written and no membership changed;
// the adoption is told once, by a Normal event naming every member with
// its ID, and what is held back by a Warning.
func TestTheOriginalsMembersAreAdoptedAsTheyRun(t *testing.T) {
	warnings := map[string]string{
		"healthy":                "",
		"a member's pod ended":   "Warning AdoptedMembersHeld members adopted from coreos/etcd-operator are kept as they are until they are converted: the pod of member example-9wtl2cd5vx is Failed; it is not restarted or replaced",
		"a member's pod is gone": "Warning AdoptedMembersHeld members adopted from coreos/etcd-operator are kept as they are until they are converted: member example-9wtl2cd5vx has no pod; it is not replaced",
		"spec.version moved on":  "Warning AdoptedMembersHeld members adopted from coreos/etcd-operator are kept as they are until they are converted: spec.version asks for 3.5.22 and members run other versions (example-4bqzr7xkfm on 3.5.21, example-9wtl2cd5vx on 3.5.21, example-h6nj8pqs2b on 3.5.21); they are not upgraded",
		"spec.size is 5":         "Warning AdoptedMembersHeld members adopted from coreos/etcd-operator are kept as they are until they are converted: spec.size is 5 and etcd has 3 members; the cluster is not resized",
		"spec.size is 1":         "Warning AdoptedMembersHeld members adopted from coreos/etcd-operator are kept as they are until they are converted: spec.size is 1 and etcd has 3 members; the cluster is not resized",
	}
	for _, tt := range originalFaults {
		t.Run(tt.name, func(t *testing.T) {
			f := originalFixture(t, tt.mods...)
			if tt.fault != nil {
				tt.fault(f)
			}
			pods, etcd := f.runPasses(12)
			if len(pods) > 0 || len(etcd) > 0 {
				t.Errorf("an adopted cluster was changed: pods %v, etcd %v", pods, etcd)
			}
			events := f.events()
			var told []string
			for _, e := range events {
				if strings.HasPrefix(e, "Normal "+eventAdoptedFromTheOriginal+" ") {
					told = append(told, e)
				}
			}
			const want = "Normal AdoptedFromTheOriginal Adopted 3 members coreos/etcd-operator made, as they run, without restarting any: " +
				"example-4bqzr7xkfm (ID 2e46b13621c2294c), example-9wtl2cd5vx (ID cb4cb7162995e8a8), example-h6nj8pqs2b (ID f43444dc37e7e124); their pods are kept as they are"
			if len(told) != 1 || told[0] != want {
				t.Errorf("adoption events = %q\n  want one %q", told, want)
			}
			if w := warnings[tt.name]; w != "" && !slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, w) }) {
				t.Errorf("no event %q in %q", w, events)
			}
			st := f.mustStatus()
			if st.Phase != api.ClusterPhaseRunning || st.CurrentVersion != testVersion {
				t.Errorf("status phase %q, current version %q; want Running, %s", st.Phase, st.CurrentVersion, testVersion)
			}
			if w := warnings[tt.name]; w != "" && !strings.HasPrefix(st.Reason, strings.TrimPrefix(w, "Warning AdoptedMembersHeld ")) {
				t.Errorf("status.reason = %q, want the held-back change told", st.Reason)
			}
		})
	}
}

// TestTheOriginalsHealthyClusterGetsItsStatus: the status names the members
// etcd lists, ready, with the leader and the version they run.
func TestTheOriginalsHealthyClusterGetsItsStatus(t *testing.T) {
	f := originalFixture(t, func(cl *api.EtcdCluster) { cl.Status = api.ClusterStatus{} })
	f.runPasses(3)
	st := f.mustStatus()
	if st.Phase != api.ClusterPhaseRunning || st.Size != 3 || st.CurrentVersion != testVersion || st.Leader != originalA {
		t.Errorf("status: phase %q size %d version %q leader %q; want Running 3 %s %s", st.Phase, st.Size, st.CurrentVersion, st.Leader, testVersion, originalA)
	}
	if got := strings.Join(st.Members.Ready, ","); got != strings.Join([]string{originalA, originalB, originalC}, ",") {
		t.Errorf("ready members %s", got)
	}
}

// TestTheOriginalsMembersThatDoNotAnswerAreLeftAlone: etcd cannot be read
// through the Services: nothing is adopted or changed, and a Warning says
// so; once etcd answers, the members are adopted.
func TestTheOriginalsMembersThatDoNotAnswerAreLeftAlone(t *testing.T) {
	f := originalFixture(t)
	f.etcd.healthErr = errors.New("connection refused")
	pods, etcd := f.runPasses(3)
	if len(pods) > 0 || len(etcd) > 0 {
		t.Errorf("members that do not answer were changed: pods %v, etcd %v", pods, etcd)
	}
	events := strings.Join(f.events(), "\n")
	if !strings.Contains(events, "Warning AdoptionRefused the members coreos/etcd-operator made do not answer") {
		t.Errorf("no AdoptionRefused event in:\n%s", events)
	}
	if strings.Contains(events, eventAdoptedFromTheOriginal) {
		t.Errorf("adoption told before etcd answered:\n%s", events)
	}
	f.etcd.healthErr = nil
	f.runPasses(2)
	if events := strings.Join(f.events(), "\n"); !strings.Contains(events, "Normal "+eventAdoptedFromTheOriginal) {
		t.Errorf("not adopted once etcd answers:\n%s", events)
	}
}

// TestTheOriginalsPodsUnderOtherTLSAreLeftAlone: pods that serve without
// TLS under a spec.TLS (or the reverse) would be dialled wrongly; they are
// refused, not touched.
func TestTheOriginalsPodsUnderOtherTLSAreLeftAlone(t *testing.T) {
	f := originalFixture(t, withTLS)
	pods, etcd := f.runPasses(3)
	if len(pods) > 0 || len(etcd) > 0 {
		t.Errorf("refused members were changed: pods %v, etcd %v", pods, etcd)
	}
	events := strings.Join(f.events(), "\n")
	if !strings.Contains(events, "Warning AdoptionRefused the pods coreos/etcd-operator made are left as they are, not adopted: pod example-4bqzr7xkfm has peer TLS off, spec.TLS on") {
		t.Errorf("no AdoptionRefused event in:\n%s", events)
	}
}

// TestAnOperatorRestartTellsTheAdoptionAgain: the record that the adoption
// was told lives in the goroutine; a new one (an operator restart) reads the
// membership again and tells it again, still without a change.
func TestAnOperatorRestartTellsTheAdoptionAgain(t *testing.T) {
	f := originalFixture(t)
	f.runPasses(2)
	f.c.adoptionAnnounced = false
	f.forgetMembership()
	pods, etcd := f.runPasses(2)
	if len(pods) > 0 || len(etcd) > 0 {
		t.Errorf("changed after a restart: pods %v, etcd %v", pods, etcd)
	}
	n := 0
	for _, e := range f.events() {
		if strings.HasPrefix(e, "Normal "+eventAdoptedFromTheOriginal) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d adoption events over two starts, want 2", n)
	}
}

func runtimeFuncName(fn any) string {
	return runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
}

// TestTheOriginalsMembersOnClaimsAreNotRestartedInPlace: the original named
// a member's claim after it, as this operator does. Without adoption, a
// member whose pod was gone got a new pod of this operator's layout on its
// claim; adopted, its pod is not made again, and no claim is touched.
func TestTheOriginalsMembersOnClaimsAreNotRestartedInPlace(t *testing.T) {
	run := func(t *testing.T) (pods, etcd []string, events []string) {
		f := originalFixture(t, withPVC)
		f.podGone(originalB)
		pods, etcd = f.runPasses(6)
		return pods, etcd, f.events()
	}
	t.Run("without adoption, a new pod on the claim", func(t *testing.T) {
		steps := decisionSteps
		t.Cleanup(func() { decisionSteps = steps })
		decisionSteps = slices.DeleteFunc(slices.Clone(steps), func(step func(*snapshot) (action, bool)) bool {
			return stepName(step) == stepName(adoptedFromTheOriginal)
		})
		pods, etcd, _ := run(t)
		if got := strings.Join(pods, ", "); got != "create pods "+originalB || len(etcd) > 0 {
			t.Errorf("pod writes %q, etcd writes %v; want the member restarted in place", got, etcd)
		}
	})
	t.Run("adopted, nothing", func(t *testing.T) {
		pods, etcd, events := run(t)
		if len(pods) > 0 || len(etcd) > 0 {
			t.Errorf("an adopted cluster was changed: pods %v, etcd %v", pods, etcd)
		}
		want := "Warning AdoptedMembersHeld members adopted from coreos/etcd-operator are kept as they are until they are converted: member " + originalB + " has no pod; it is not replaced"
		if !slices.Contains(events, want) {
			t.Errorf("no event %q in %q", want, events)
		}
	})
}

// TestAdoptedMembersAreConvertedOneAtATime: with spec.adoption.convert, each
// member the original made is replaced by one of this operator's layout,
// added first and promoted before the original's goes, one membership change
// at a time, followers first and the leader last; in the end no pod of the
// original's layout is left, on emptyDir as on claims.
func TestAdoptedMembersAreConvertedOneAtATime(t *testing.T) {
	for _, tt := range []struct {
		name string
		mods []func(*api.EtcdCluster)
	}{
		{name: "on emptyDir", mods: []func(*api.EtcdCluster){converting}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := originalFixture(t, tt.mods...)
			for range 60 {
				_ = f.pass()
				f.showCreatedPods(resolvable)
				f.startAddedMembers()
				f.now = f.now.Add(70 * time.Second)
			}
			etcd := f.etcd.Calls(true)
			var kinds []string
			for _, call := range etcd {
				kinds = append(kinds, strings.Fields(call)[0])
			}
			const step = "add-learner promote remove"
			want := strings.Join([]string{step, step, "add-learner promote move-leader remove"}, " ")
			if got := strings.Join(kinds, " "); got != want {
				t.Logf("status.reason: %s", f.mustStatus().Reason)
				t.Fatalf("etcd writes %q\n  want %q (each member added and promoted before one of the original's goes)\n  calls: %v", got, want, etcd)
			}
			// The leader the original's cluster had is removed last.
			if last, want := etcd[len(etcd)-1], fmt.Sprintf("remove %x", memberID(originalA)); last != want {
				t.Errorf("the last removal is %q, want the first leader %s's (%s)", last, originalA, want)
			}
			pods := f.indexer.List()
			if len(pods) != 3 {
				t.Fatalf("%d pods after the conversion, want 3", len(pods))
			}
			for _, obj := range pods {
				if p := obj.(*corev1.Pod); k8sutil.IsOriginalPod(p) {
					t.Errorf("pod %s still has the original's layout", p.Name)
				}
			}
			for _, n := range []string{originalA, originalB, originalC} {
				if _, exists, _ := f.claims.GetByKey(testNS + "/" + n); exists {
					t.Errorf("the claim of converted member %s is left", n)
				}
			}
			st := f.mustStatus()
			if st.Phase != api.ClusterPhaseRunning || st.Size != 3 || st.Reason != "" {
				t.Errorf("status phase %q size %d reason %q; want Running, 3, no reason", st.Phase, st.Size, st.Reason)
			}
		})
	}
}

// TestAdoptedMembersOnClaimsAreConvertedInPlace: members the original made
// on claims are restarted on them in this operator's layout, one at a time,
// the leader last after a hand-off: the same members (no MemberAdd, no
// MemberRemove), the same claims, no pod of the original's layout left.
func TestAdoptedMembersOnClaimsAreConvertedInPlace(t *testing.T) {
	f := originalFixture(t, converting, withPVC)
	var order []string
	for range 60 {
		_ = f.pass()
		for _, a := range f.kube.Actions() {
			if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
				order = append(order, a.(clienttesting.DeleteAction).GetName())
			}
		}
		f.showCreatedPods(resolvable)
		f.startAddedMembers()
		f.now = f.now.Add(70 * time.Second)
	}
	var kinds []string
	for _, call := range f.etcd.Calls(true) {
		kinds = append(kinds, strings.Fields(call)[0])
	}
	if got := strings.Join(kinds, " "); got != "move-leader" {
		t.Errorf("etcd writes %q, want only the leader's hand-off: no member added or removed", got)
	}
	if want := []string{originalB, originalC, originalA}; !slices.Equal(order, want) {
		t.Errorf("pods deleted in the order %v, want %v: followers first, the leader last", order, want)
	}
	pods := f.indexer.List()
	if len(pods) != 3 {
		t.Fatalf("%d pods after the conversion, want 3", len(pods))
	}
	for _, obj := range pods {
		p := obj.(*corev1.Pod)
		if k8sutil.IsOriginalPod(p) {
			t.Errorf("pod %s still has the original's layout", p.Name)
		}
		if claim := podClaim(p); claim != p.Name {
			t.Errorf("pod %s runs on claim %q, want its own", p.Name, claim)
		}
	}
	for _, n := range []string{originalA, originalB, originalC} {
		if _, exists, _ := f.claims.GetByKey(testNS + "/" + n); !exists {
			t.Errorf("the claim of member %s, converted in place, is gone", n)
		}
	}
	st := f.mustStatus()
	if st.Phase != api.ClusterPhaseRunning || st.Size != 3 || st.Reason != "" {
		t.Errorf("status phase %q size %d reason %q; want Running, 3, no reason", st.Phase, st.Size, st.Reason)
	}
}

// podClaim is the claim pod p mounts, "" for none.
func podClaim(p *corev1.Pod) string {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// startAddedMembers starts the etcd of every pod whose member etcd has
// added and which still waits for it, as its membership wait would let it.
func (f *fixture) startAddedMembers() {
	f.t.Helper()
	for _, name := range f.etcd.names() {
		obj, exists, _ := f.indexer.GetByKey(testNS + "/" + name)
		if !exists {
			continue
		}
		if st := k8sutil.EtcdContainerStatus(obj.(*corev1.Pod)); st == nil || st.State.Running == nil {
			f.setReady(name, true)
		}
	}
}
