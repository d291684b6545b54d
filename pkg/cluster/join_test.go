package cluster

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
)

const testJoinImage = "openetcd/etcd-operator:test"

// joinerPod puts in the lister the pod the loop makes for member name joining
// members, resolvable unless opts say otherwise.
func (f *fixture) joinerPod(name string, members []string, opts ...podOpt) *corev1.Pod {
	f.t.Helper()
	cl := f.cl.WithDefaults()
	set := etcdutil.MemberSet{}
	for _, n := range append(slices.Clone(members), name) {
		set.Add(f.member(n))
	}
	pairs := set.PeerURLPairs()
	p := k8sutil.NewEtcdPod(cl, f.member(name), cl.Spec.Version, pairs, k8sutil.ClusterStateExisting, "",
		k8sutil.WithMembershipWait(f.member(name), pairs, f.c.cfg.MembershipWait))
	p.UID = types.UID("pod-uid-" + name)
	p.CreationTimestamp = metav1.NewTime(testStart.Add(-time.Minute))
	resolvable(p)
	for _, o := range opts {
		o(p)
	}
	f.setPod(p)
	return p
}

// TestPodFirstJoin covers join.go: the joining member's pod is created first,
// the member is added once the pod resolves, and a joining pod that can no
// longer be added is replaced without etcd ever knowing about it.
func TestPodFirstJoin(t *testing.T) {
	const joiner = "example-new0000001"
	tests := []passCase{
		{
			name:    "scale up creates the pod first, holding etcd back, and tells etcd nothing yet",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), nil)
				expect(t, "pod actions", f.podActions(), []string{"create pods " + joiner})
				pod := f.createdPod(joiner)
				var inits []string
				for _, c := range pod.Spec.InitContainers {
					inits = append(inits, c.Name)
				}
				expect(t, "init containers", inits, []string{k8sutil.DNSCheckContainerName, k8sutil.MembershipWaitContainerName})
				wait := pod.Spec.InitContainers[1]
				if wait.Image != testJoinImage || !slices.Contains(wait.Command, "--peer-urls="+strings.Join([]string{
					f.member(memberA).PeerURL(), f.member(memberB).PeerURL(), f.member(memberC).PeerURL()}, ",")) {
					t.Errorf("wait container %s %q", wait.Image, wait.Command)
				}
				cmd := strings.Join(pod.Spec.Containers[0].Command, " ")
				for _, want := range []string{"--initial-cluster-state=existing", joiner + "=http://" + joiner + ".example.ns.svc:2380", memberC + "=http://"} {
					if !strings.Contains(cmd, want) {
						t.Errorf("command %q lacks %q", cmd, want)
					}
				}
				expectEvents(t, f.events())
				s := f.mustStatus()
				if s.Size != 3 || slices.Contains(s.Members.Unready, joiner) {
					t.Errorf("status size %d, unready %q: a pod etcd does not know is no member", s.Size, s.Members.Unready)
				}
			},
		},
		{
			name:    "the member is added once its pod resolves in DNS, and only then",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.mustPass()
				f.showCreatedPods(resolving)
				f.mustPass()
				expect(t, "etcd writes while check-dns runs", f.etcdWrites(), nil)
				expect(t, "pod actions while check-dns runs", f.podActions(), nil)

				obj, _, err := f.indexer.GetByKey(testNS + "/" + joiner)
				if err != nil || obj == nil {
					t.Fatalf("the joining pod is not in the lister: %v", err)
				}
				p := obj.(*corev1.Pod).DeepCopy()
				resolvable(p)
				f.setPod(p)
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{f.learnerCall(joiner)})
				expect(t, "pod actions", f.podActions(), nil)
				expectEvents(t, f.events(), "Normal New Member Added New member "+joiner+" added to cluster")
				if _, ok := f.c.knownMembership.set[joiner]; !ok {
					t.Fatalf("members %s lack the added member", f.c.knownMembership.set)
				}

				// Its pod is still Pending (etcd starts a moment later): it is
				// a starting member, not a joiner to replace.
				f.kube.ClearActions()
				f.mustPass()
				expect(t, "pod actions after the add", f.podActions(), nil)
				expect(t, "etcd writes after the add", f.etcdWrites(), []string{f.learnerCall(joiner)})
				// Once its etcd runs, the learner is promoted; then nothing is left to do.
				f.setReady(joiner, false)
				f.mustPass()
				expect(t, "etcd writes once it runs", f.etcdWrites(), []string{f.learnerCall(joiner), promoteCall(joiner)})
				if f.c.knownMembership.set[joiner].IsLearner {
					t.Error("the promoted member is still a learner in memory")
				}
				f.setReady(joiner, true)
				f.mustPass()
				expect(t, "etcd writes at full size", f.etcdWrites(), []string{f.learnerCall(joiner), promoteCall(joiner)})
				expect(t, "pod actions at full size", f.podActions(), nil)
			},
		},
		{
			name:    "a resolvable joining pod waits while a member is not ready or etcd refuses, and is kept",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC, notReady)
				f.joinerPod(memberD, []string{memberA, memberB, memberC})
				f.mustPass()
				expect(t, "etcd writes while C is not ready", f.etcdWrites(), nil)

				f.setReady(memberC, true)
				f.etcd.addErr = rpctypes.ErrUnhealthy
				f.mustPass()
				expect(t, "etcd writes when refused", f.etcdWrites(), []string{f.learnerCall(memberD)})
				expect(t, "pod actions when refused", f.podActions(), nil)

				f.etcd.addErr = nil
				f.mustPass()
				expect(t, "etcd writes on retry", f.etcdWrites(), []string{f.learnerCall(memberD), f.learnerCall(memberD)})
				expect(t, "pod actions on retry", f.podActions(), nil)
			},
		},
		{
			name:    "on etcd 3.6, scaling up by two makes both pods at once and adds both learners before either votes",
			cluster: newTestCluster(withSize(5), withVersion("3.6.6")),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"create pods " + joiner})
				f.showCreatedPods(resolving)
				f.mustPass()
				second := "example-new0000002"
				expect(t, "pod actions while the first pod's check-dns runs", f.podActions(), []string{"create pods " + second})
				want := []string{
					memberA + "=" + f.member(memberA).PeerURL(), memberB + "=" + f.member(memberB).PeerURL(), memberC + "=" + f.member(memberC).PeerURL(),
					joiner + "=" + f.member(joiner).PeerURL(), second + "=" + f.member(second).PeerURL(),
				}
				expect(t, "the second pod's --initial-cluster", k8sutil.InitialCluster(f.createdPod(second)), want)
				f.showCreatedPods(resolving)
				for _, name := range []string{joiner, second} {
					obj, _, err := f.indexer.GetByKey(testNS + "/" + name)
					if err != nil || obj == nil {
						t.Fatalf("pod %s is not in the lister: %v", name, err)
					}
					p := obj.(*corev1.Pod).DeepCopy()
					resolvable(p)
					f.setPod(p)
				}
				f.mustPass()
				f.mustPass()
				expect(t, "etcd writes: the first learner, the second waiting for its start", f.etcdWrites(), []string{f.learnerCall(joiner)})

				// Its etcd runs and has joined: the second learner is added
				// before the first votes.
				f.setReady(joiner, false)
				f.etcd.start(joiner)
				f.mustPass()
				expect(t, "etcd writes: both learners, nothing promoted", f.etcdWrites(), []string{f.learnerCall(joiner), f.learnerCall(second)})

				f.setReady(second, false)
				f.etcd.start(second)
				f.mustPass()
				f.mustPass()
				expect(t, "etcd writes: both promoted", f.etcdWrites()[2:], []string{promoteCall(joiner), promoteCall(second)})
			},
		},
		{
			name:    "etcd's refusal of a learner too many is waited out, the joining pod kept",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.joinerPod(memberD, []string{memberA, memberB, memberC})
				f.etcd.addErr = rpctypes.ErrTooManyLearners
				f.mustPass()
				expect(t, "etcd writes when refused", f.etcdWrites(), []string{f.learnerCall(memberD)})
				if f.c.knownMembership.set == nil {
					t.Error("the membership was forgotten after a refusal that changed nothing")
				}
				f.etcd.addErr = nil
				f.mustPass()
				expect(t, "etcd writes on retry", f.etcdWrites(), []string{f.learnerCall(memberD), f.learnerCall(memberD)})
				expect(t, "pod actions", f.podActions(), nil)
			},
		},
		{
			name:    "a joining pod made for an older membership is replaced when a dead member was removed",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				dead := f.pod(memberC, failed)
				f.joinerPod(memberD, []string{memberA, memberB, memberC})
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{removeCall(memberC)})
				_ = f.indexer.Delete(dead)
				f.kube.ClearActions()
				f.mustPass()
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberD, "create pods " + joiner})
				expect(t, "etcd writes", f.etcdWrites(), []string{removeCall(memberC)})
				if got := k8sutil.InitialCluster(f.createdPod(joiner)); len(got) != 3 {
					t.Errorf("new joining pod's --initial-cluster %q, want A, B and itself", got)
				}
			},
		},
		{
			name:    "joining pods that cannot be added are replaced; one waiting for the add is not",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				members := []string{memberA, memberB, memberC}
				// Ended (check-dns timed out), never resolved in time, and
				// made for another version: all go. The one waiting, although
				// older than the pending timeout, stays and is added.
				f.joinerPod("example-ended", members, failed)
				f.joinerPod("example-stuck", members, resolving, createdAgo(6*time.Minute))
				f.joinerPod("example-oldver", members, func(p *corev1.Pod) { p.Annotations[api.AnnotationVersion] = "3.4.23" })
				f.joinerPod("example-waits", members, createdAgo(10*time.Minute))
				for range 4 {
					f.mustPass()
				}
				expect(t, "pod actions", f.podActions(), []string{
					"delete pods example-ended", "delete pods example-oldver", "delete pods example-stuck",
				})
				expect(t, "etcd writes", f.etcdWrites(), []string{f.learnerCall("example-waits")})
			},
		},
		{
			name:    "a second joining pod is deleted; the first in name order is used",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.joinerPod(memberD, []string{memberA, memberB, memberC})
				f.joinerPod(memberE, []string{memberA, memberB, memberC})
				f.mustPass()
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberE})
				expect(t, "etcd writes", f.etcdWrites(), []string{f.learnerCall(memberD)})
			},
		},
		{
			name:    "scaling back down deletes the joining pod and its claim, and etcd never hears of it",
			cluster: newTestCluster(withSize(3), withPVC),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.joinerPod(memberD, []string{memberA, memberB, memberC})
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberD, "delete persistentvolumeclaims " + memberD})
				expect(t, "etcd writes", f.etcdWrites(), nil)
			},
		},
		{
			name:    "in PVC mode the claim comes before the joining pod",
			cluster: newTestCluster(withSize(4), withPVC),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"create persistentvolumeclaims " + joiner, "create pods " + joiner})
				expect(t, "etcd writes", f.etcdWrites(), nil)
			},
		},
		{
			name:    "after an operator restart the joining pod is found and added",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.c.knownMembership.forget() // a restarted operator knows nothing
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.joinerPod(memberD, []string{memberA, memberB, memberC})
				f.mustPass()
				expect(t, "pod actions", f.podActions(), nil)
				expect(t, "etcd writes", f.etcdWrites(), []string{f.learnerCall(memberD)})
			},
		},
		{
			name:    "a member added after a long wait is starting, not dead, while its pod finishes waiting",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC, memberD)
				f.etcd.members[3].Name, f.etcd.members[3].ClientURLs = "", nil
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.joinerPod(memberD, []string{memberA, memberB, memberC}, createdAgo(time.Hour))
				f.mustPass()
				expect(t, "pod actions", f.podActions(), nil)
				expect(t, "etcd writes", f.etcdWrites(), nil)
			},
		},
		{
			name:    "an add whose reply was lost is found in etcd, and its pod is kept even when the cluster shrinks",
			cluster: newTestCluster(withSize(4)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.joinerPod(memberD, []string{memberA, memberB, memberC})
				f.etcd.addReplyLost = true
				if err := f.pass(); err == nil {
					t.Fatal("the lost reply was not reported")
				}
				f.etcd.addReplyLost = false
				// Scaled back down before the next pass: the pod is a member
				// in etcd and must be removed as one, never deleted as a joiner.
				shrunk := f.cl.DeepCopy()
				shrunk.Spec.Size = 3
				shrunk.Generation, shrunk.ResourceVersion = 2, "2"
				f.c.take(shrunk)
				f.mustPass()
				if f.c.knownMembership.set == nil || f.c.knownMembership.set[memberD] == nil {
					t.Fatalf("members %s: the added member was not read back from etcd", f.c.knownMembership.set)
				}
				for _, a := range f.podActions() {
					if a == "delete pods "+memberD {
						t.Errorf("the pod of a member etcd knows was deleted as a joiner: %q", f.podActions())
					}
				}
			},
		},
		{
			name:    "a learner is promoted once it has caught up, before any other change",
			cluster: newTestCluster(withSize(5)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC, memberD)
				f.etcd.members[3].IsLearner = true
				f.c.knownMembership.set[memberD].IsLearner = true
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.pod(memberD, notReady)
				f.etcd.promoteErr = rpctypes.ErrMemberLearnerNotReady
				requeue, err := f.c.pass(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				expect(t, "etcd writes while it catches up", f.etcdWrites(), []string{promoteCall(memberD)})
				expect(t, "pod actions while it catches up", f.podActions(), nil)
				if requeue <= 0 {
					t.Errorf("requeue = %v, want a retry soon", requeue)
				}
				expectEvents(t, f.events())
				if s := f.mustStatus(); s.Reason != "" {
					t.Errorf("status reason %q: catching up is no problem", s.Reason)
				}

				f.etcd.promoteErr = nil
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{promoteCall(memberD), promoteCall(memberD)})
				// Only now is the next member's pod made.
				f.setReady(memberD, true)
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"create pods " + joiner})
			},
		},
		{
			name:    "a learner does not count towards the quorum",
			cluster: newTestCluster(withSize(2)),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB)
				f.etcd.members[1].IsLearner = true
				f.c.knownMembership.set[memberB].IsLearner = true
				f.pod(memberA)
				f.joinerPod(memberB, []string{memberA})
				f.mustPass()
				s := f.mustStatus()
				if c := condition(s, api.ClusterConditionAvailable); c == nil || c.Status != corev1.ConditionTrue {
					t.Errorf("Available = %+v: the one voter is the whole quorum", c)
				}
				expect(t, "pod actions", f.podActions(), nil)
			},
		},
		{
			name:    "a restarted operator promotes the learner it finds",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.etcd.members[2].IsLearner = true
				f.c.knownMembership.forget()
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC, notReady)
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{promoteCall(memberC)})
			},
		},
		{
			name:    "members of etcd before 3.4, which has no learners, vote from the start",
			cluster: newTestCluster(withSize(4), withVersion("3.3.27")),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.joinerPod(memberD, []string{memberA, memberB, memberC})
				f.mustPass()
				expect(t, "etcd writes", f.etcdWrites(), []string{f.addCall(memberD)})
			},
		},
		{
			name:    "without the operator's image a pod that waits for its membership is an unknown pod",
			cluster: newTestCluster(),
			run: func(t *testing.T, f *fixture) {
				f.withMembers(memberA, memberB, memberC)
				f.pod(memberA)
				f.pod(memberB)
				f.pod(memberC)
				f.joinerPod(memberD, []string{memberA, memberB, memberC})
				f.c.cfg.MembershipWait = k8sutil.MembershipWait{}
				f.mustPass()
				expect(t, "pod actions", f.podActions(), []string{"delete pods " + memberD})
			},
		},
	}
	runPassCases(t, tests)
}
