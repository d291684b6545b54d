package statusutil

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/generated/clientset/versioned/fake"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil/statustest"
)

type fixture struct {
	client   *fake.Clientset
	recorder *record.FakeRecorder
	logs     *logtest.Hook
	now      time.Time
	w        *ClusterWriter
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{client: fake.NewSimpleClientset(objs...), recorder: record.NewFakeRecorder(20), now: time.Unix(1e9, 0)}
	logger, hook := logtest.NewNullLogger()
	f.logs = hook
	f.w = ForClusters(f.client, f.recorder, logrus.NewEntry(logger))
	f.w.cfg.Now = func() time.Time { return f.now }
	return f
}

func cluster(generation int64) *api.EtcdCluster {
	return &api.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u1", Generation: generation, ResourceVersion: "1"},
		Spec:       api.ClusterSpec{Size: 3},
	}
}

// write writes phase into the stored cluster's status, and fails the test
// unless the status is stored.
func (f *fixture) write(t *testing.T, phase api.ClusterPhase) *api.EtcdCluster {
	t.Helper()
	out, err := f.tryWrite(t, phase)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	return out
}

// writeNotStored is write for a status the server does not store.
func (f *fixture) writeNotStored(t *testing.T, phase api.ClusterPhase) *api.EtcdCluster {
	t.Helper()
	out, err := f.tryWrite(t, phase)
	if !errors.Is(err, ErrStatusNotStored) {
		t.Fatalf("write: %v, want ErrStatusNotStored", err)
	}
	return out
}

func (f *fixture) tryWrite(t *testing.T, phase api.ClusterPhase) (*api.EtcdCluster, error) {
	t.Helper()
	cur, err := f.client.EtcdV1beta2().EtcdClusters("ns").Get(context.Background(), "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj := cur.DeepCopy()
	obj.Status.Phase = phase
	obj.Status.ObservedGeneration = obj.Generation
	return f.w.Write(context.Background(), obj)
}

// recreate deletes the cluster and creates it again under its name, with uid.
func (f *fixture) recreate(t *testing.T, uid types.UID) {
	t.Helper()
	clusters := f.client.EtcdV1beta2().EtcdClusters("ns")
	if err := clusters.Delete(context.Background(), "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	obj := cluster(1)
	obj.UID = uid
	if _, err := clusters.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// updates lists the updates made, "status" for the subresource, "object" for the object.
func (f *fixture) updates() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "update" {
			continue
		}
		if a.GetSubresource() == "status" {
			out = append(out, "status")
		} else {
			out = append(out, "object")
		}
	}
	return out
}

func (f *fixture) events() []string { return statustest.Events(f.recorder) }

func TestWriteUsesTheStatusSubresourceWhenServed(t *testing.T) {
	f := newFixture(t, cluster(1))
	out := f.write(t, api.ClusterPhaseRunning)
	if out.Status.Phase != api.ClusterPhaseRunning {
		t.Errorf("phase %q, want Running", out.Status.Phase)
	}
	if got := f.updates(); strings.Join(got, ",") != "status" {
		t.Errorf("updates %v, want one of the status subresource", got)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events %v, want none", ev)
	}
}

func TestWithoutTheSubresourceStatusGoesWithAnUpdateOfTheObjectAndSettles(t *testing.T) {
	f := newFixture(t, cluster(1))
	statustest.WithoutStatusSubresource(f.client, api.EtcdClusterResourcePlural, false)
	out := f.write(t, api.ClusterPhaseRunning)
	if out.Status.Phase != api.ClusterPhaseRunning {
		t.Fatalf("phase %q, want Running", out.Status.Phase)
	}
	// The write moved the generation; the status describes the new one, so
	// a writer that derives observedGeneration from the object has nothing
	// more to write and does not chase its own writes.
	if out.Generation != 2 || out.Status.ObservedGeneration != 2 {
		t.Errorf("generation %d, observedGeneration %d: want both 2", out.Generation, out.Status.ObservedGeneration)
	}
	if got := f.updates(); strings.Join(got, ",") != "status,object" {
		t.Errorf("updates %v, want the subresource tried, then the object", got)
	}
	f.client.ClearActions()
	f.write(t, api.ClusterPhaseFailed)
	if got := f.updates(); strings.Join(got, ",") != "object" {
		t.Errorf("second write: updates %v, want only the object", got)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events %v, want none: nothing is lost", ev)
	}
	if n := countLogs(f.logs, "serves no status subresource"); n != 1 {
		t.Errorf("%d log lines about the missing subresource, want 1", n)
	}
}

func TestASchemaThatPrunesStatusIsReportedOnceWithTheFix(t *testing.T) {
	f := newFixture(t, cluster(1))
	statustest.WithoutStatusSubresource(f.client, api.EtcdClusterResourcePlural, true)
	out := f.writeNotStored(t, api.ClusterPhaseRunning)
	if out == nil || out.Status.Phase != api.ClusterPhaseNone {
		t.Fatalf("returned %+v, want the object as stored, without the status", out)
	}
	f.writeNotStored(t, api.ClusterPhaseRunning)
	ev := f.events()
	if len(ev) != 1 {
		t.Fatalf("events %v, want one", ev)
	}
	for _, want := range []string{"Warning", ReasonStatusNotStored, "prunes status", "example/crd/"} {
		if !strings.Contains(ev[0], want) {
			t.Errorf("event %q lacks %q", ev[0], want)
		}
	}
	if n := countLogs(f.logs, "prunes status"); n != 1 {
		t.Errorf("%d warnings logged, want 1", n)
	}
}

func TestARoleWithoutTheStatusRuleFallsBackAndNamesTheRule(t *testing.T) {
	f := newFixture(t, cluster(1))
	statustest.ForbidStatus(f.client, api.EtcdClusterResourcePlural)
	f.write(t, api.ClusterPhaseRunning)
	f.write(t, api.ClusterPhaseCreating)
	if got := f.updates(); strings.Join(got, ",") != "status,object,object" {
		t.Errorf("updates %v, want the subresource tried once, then the object", got)
	}
	ev := f.events()
	if len(ev) != 1 {
		t.Fatalf("events %v, want one", ev)
	}
	for _, want := range []string{"Warning", ReasonStatusSubresourceForbidden, `resources: ["etcdclusters/status"]`, `apiGroups: ["etcd.database.coreos.com"]`} {
		if !strings.Contains(ev[0], want) {
			t.Errorf("event %q lacks %q", ev[0], want)
		}
	}
}

func TestTheSubresourceIsTriedAgainAfterTheReprobeInterval(t *testing.T) {
	f := newFixture(t, cluster(1))
	statustest.ForbidStatus(f.client, api.EtcdClusterResourcePlural)
	f.write(t, api.ClusterPhaseRunning)
	f.client.ReactionChain = f.client.ReactionChain[1:] // the role is fixed
	f.now = f.now.Add(ReprobeInterval)
	f.client.ClearActions()
	f.write(t, api.ClusterPhaseCreating)
	f.write(t, api.ClusterPhaseRunning)
	if got := f.updates(); strings.Join(got, ",") != "status,status" {
		t.Errorf("updates %v, want the subresource again", got)
	}
}

func TestAStatusNotStoredThroughTheObjectSendsTheNextWriteToTheSubresource(t *testing.T) {
	f := newFixture(t, cluster(1))
	statustest.ForbidServedStatus(f.client, api.EtcdClusterResourcePlural)
	f.writeNotStored(t, api.ClusterPhaseRunning)
	f.writeNotStored(t, api.ClusterPhaseRunning)
	if got := f.updates(); strings.Join(got, ",") != "status,object,status,object" {
		t.Errorf("updates %v, want the subresource tried before each update of the object", got)
	}
	f.client.ReactionChain = f.client.ReactionChain[1:] // the role is granted <resource>/status
	f.client.ClearActions()
	if out := f.write(t, api.ClusterPhaseRunning); out.Status.Phase != api.ClusterPhaseRunning {
		t.Errorf("phase %q, want Running", out.Status.Phase)
	}
	if got := f.updates(); strings.Join(got, ",") != "status" {
		t.Errorf("updates %v, want the subresource at once, before ReprobeInterval", got)
	}
	ev := f.events()
	if len(ev) != 2 || !strings.Contains(ev[0], ReasonStatusSubresourceForbidden) || !strings.Contains(ev[1], ReasonStatusNotStored) {
		t.Errorf("events %v, want one of each reason", ev)
	}
}

func TestAClusterCreatedAgainUnderItsNameIsWarnedAboutAgain(t *testing.T) {
	f := newFixture(t, cluster(1))
	statustest.ForbidServedStatus(f.client, api.EtcdClusterResourcePlural)
	f.writeNotStored(t, api.ClusterPhaseRunning)
	f.writeNotStored(t, api.ClusterPhaseRunning)
	f.recreate(t, "u2")
	f.writeNotStored(t, api.ClusterPhaseRunning)
	f.writeNotStored(t, api.ClusterPhaseRunning)
	var reasons []string
	for _, e := range f.events() {
		reasons = append(reasons, strings.Fields(e)[1])
	}
	want := []string{ReasonStatusSubresourceForbidden, ReasonStatusNotStored, ReasonStatusSubresourceForbidden, ReasonStatusNotStored}
	if !slices.Equal(reasons, want) {
		t.Errorf("warnings %v, want %v: each reason once for each of the two clusters", reasons, want)
	}
}

func TestAStatusStoredWithItsTimesToTheSecondIsStored(t *testing.T) {
	f := newFixture(t, cluster(1))
	// The apiserver sends back what it stored as JSON: times to the second.
	f.client.PrependReactor("update", api.EtcdClusterResourcePlural, func(a k8stesting.Action) (bool, runtime.Object, error) {
		stored := a.(k8stesting.UpdateAction).GetObject().(*api.EtcdCluster).DeepCopy()
		stored.Status.Recovery.Time = metav1.NewTime(stored.Status.Recovery.Time.Truncate(time.Second))
		return true, stored, f.client.Tracker().Update(api.SchemeGroupVersion.WithResource(api.EtcdClusterResourcePlural), stored, stored.Namespace)
	})
	statustest.ForbidStatus(f.client, api.EtcdClusterResourcePlural)
	obj := cluster(1)
	obj.Status.Phase = api.ClusterPhaseRunning
	obj.Status.Recovery = &api.RecoveryStatus{Time: metav1.NewTime(time.Unix(1e9, 123456789)), FromMember: "c-0000"}
	out, err := f.w.Write(context.Background(), obj)
	if err != nil {
		t.Fatalf("write: %v, want the status stored", err)
	}
	if out.Status.Recovery.Time.Nanosecond() != 0 || obj.Status.Recovery.Time.Nanosecond() == 0 {
		t.Fatal("the fake did not store the time to the second: the test tests nothing")
	}
	if ev := f.events(); len(ev) != 1 || !strings.Contains(ev[0], ReasonStatusSubresourceForbidden) {
		t.Errorf("events %v, want only the forbidden subresource", ev)
	}
}

func TestAConflictIsReturnedNotWrittenOver(t *testing.T) {
	f := newFixture(t, cluster(1))
	stale := cluster(1)
	stale.ResourceVersion = "0"
	f.client.PrependReactor("update", api.EtcdClusterResourcePlural, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "etcdclusters"}, "c", nil)
	})
	stale.Status.Phase = api.ClusterPhaseRunning
	if _, err := f.w.Write(context.Background(), stale); !apierrors.IsConflict(err) {
		t.Fatalf("err %v, want a conflict", err)
	}
	if got := f.updates(); len(got) != 1 {
		t.Errorf("updates %v, want one attempt", got)
	}
}

func TestAWriteToADeletedObjectIsNotFound(t *testing.T) {
	f := newFixture(t)
	statustest.WithoutStatusSubresource(f.client, api.EtcdClusterResourcePlural, false)
	obj := cluster(1)
	obj.Status.Phase = api.ClusterPhaseRunning
	if _, err := f.w.Write(context.Background(), obj); !apierrors.IsNotFound(err) {
		t.Fatalf("err %v, want NotFound", err)
	}
	if got := f.updates(); strings.Join(got, ",") != "status" {
		t.Errorf("updates %v, want no update of the object", got)
	}
}

func TestChangeRetriesAConflictFromAFreshRead(t *testing.T) {
	f := newFixture(t, cluster(1))
	conflicts := 1
	f.client.PrependReactor("update", api.EtcdClusterResourcePlural, func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "etcdclusters"}, "c", nil)
	})
	out, err := f.w.Change(context.Background(), "ns", "c", "u1", func(st *api.ClusterStatus) { st.Phase = api.ClusterPhaseRunning })
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.Phase != api.ClusterPhaseRunning {
		t.Errorf("phase %q, want Running", out.Status.Phase)
	}
}

func TestChangeTellsAStatusNotStored(t *testing.T) {
	f := newFixture(t, cluster(1))
	statustest.ForbidServedStatus(f.client, api.EtcdClusterResourcePlural)
	out, err := f.w.Change(context.Background(), "ns", "c", "u1", func(st *api.ClusterStatus) { st.Phase = api.ClusterPhaseRunning })
	if !errors.Is(err, ErrStatusNotStored) {
		t.Fatalf("err %v, want ErrStatusNotStored", err)
	}
	if out == nil || out.Status.Phase != api.ClusterPhaseNone {
		t.Errorf("returned %+v, want the object as stored", out)
	}
}

func TestChangeLeavesAnObjectOfAnotherUIDAlone(t *testing.T) {
	f := newFixture(t, cluster(1))
	if _, err := f.w.Change(context.Background(), "ns", "c", "other", func(st *api.ClusterStatus) { st.Phase = api.ClusterPhaseRunning }); err != nil {
		t.Fatal(err)
	}
	if got := f.updates(); len(got) != 0 {
		t.Errorf("updates %v, want none", got)
	}
}

func TestChangeThatChangesNothingWritesNothing(t *testing.T) {
	f := newFixture(t, cluster(1))
	if _, err := f.w.Change(context.Background(), "ns", "c", "u1", func(*api.ClusterStatus) {}); err != nil {
		t.Fatal(err)
	}
	if got := f.updates(); len(got) != 0 {
		t.Errorf("updates %v, want none", got)
	}
}

func countLogs(h *logtest.Hook, substr string) int {
	n := 0
	for _, e := range h.AllEntries() {
		if strings.Contains(e.Message, substr) {
			n++
		}
	}
	return n
}
