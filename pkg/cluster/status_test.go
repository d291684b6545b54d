package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil"
	"github.com/openetcd/etcd-operator/pkg/util/k8sutil"
	"github.com/openetcd/etcd-operator/pkg/util/promutil"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil"
	"github.com/openetcd/etcd-operator/pkg/util/statusutil/statustest"
)

func healthyFixture(t *testing.T) *fixture {
	f := newFixture(t, newTestCluster())
	f.withMembers(memberA, memberB, memberC)
	f.pod(memberA)
	f.pod(memberB)
	f.pod(memberC)
	return f
}

func TestStatusWrites(t *testing.T) {
	t.Run("status is written only when it changed", func(t *testing.T) {
		f := healthyFixture(t)
		f.mustPass()
		f.now = f.now.Add(30 * time.Second)
		f.mustPass()
		if n := f.statusWrites(); n != 1 {
			t.Errorf("%d status writes for an unchanged status, want 1", n)
		}
	})

	t.Run("status names the member pods' selector, for the scale subresource", func(t *testing.T) {
		f := healthyFixture(t)
		f.mustPass()
		if got, want := f.mustStatus().Selector, "app=etcd,etcd_cluster="+testName; got != want {
			t.Errorf("selector %q, want %q", got, want)
		}
	})

	t.Run("lastTransitionTime moves only when a condition's status changes", func(t *testing.T) {
		f := healthyFixture(t)
		f.mustPass()
		first := *condition(f.mustStatus(), api.ClusterConditionAvailable)

		f.now = f.now.Add(time.Minute)
		f.indexer.Delete(f.pod(memberB))
		f.indexer.Delete(f.pod(memberC))
		f.mustPass()
		lost := *condition(f.mustStatus(), api.ClusterConditionAvailable)
		if lost.Status != corev1.ConditionFalse || lost.LastTransitionTime == first.LastTransitionTime {
			t.Errorf("quorum loss: %+v (was %+v)", lost, first)
		}

		f.now = f.now.Add(time.Minute)
		f.indexer.Delete(f.pod(memberA, notReady))
		f.mustPass() // no member runs now: reason and message change, the status does not
		zero := *condition(f.mustStatus(), api.ClusterConditionAvailable)
		if zero.LastTransitionTime != lost.LastTransitionTime || zero.LastUpdateTime == lost.LastUpdateTime {
			t.Errorf("message change: %+v (was %+v)", zero, lost)
		}
		if _, err := time.Parse(time.RFC3339, zero.LastUpdateTime); err != nil {
			t.Errorf("lastUpdateTime %q is not RFC 3339", zero.LastUpdateTime)
		}
	})

	t.Run("a status conflict re-reads the object and the next pass, soon, writes again", func(t *testing.T) {
		f := healthyFixture(t)
		f.conflictOnNextStatusWrite()
		requeue, err := f.c.pass(context.Background())
		if err != nil || requeue != DefaultMinPassInterval {
			t.Errorf("pass = %v, %v; want a new pass soon", requeue, err)
		}
		f.mustPass()
		var verbs []string
		for _, a := range f.crs.Actions() {
			verbs = append(verbs, a.GetVerb()+" "+a.GetSubresource())
		}
		expect(t, "API calls", verbs, []string{"update status", "get ", "update status"})
		stored, err := f.crs.Tracker().Get(api.SchemeGroupVersion.WithResource("etcdclusters"), testNS, testName)
		if err != nil {
			t.Fatal(err)
		}
		if s := stored.(*api.EtcdCluster).Status; s.Size != 3 || len(s.Members.Ready) != 3 {
			t.Errorf("stored status = %+v", s)
		}
	})

	t.Run("a status changed by someone else is written again", func(t *testing.T) {
		f := healthyFixture(t)
		f.mustPass()
		tampered := f.c.latest.DeepCopy()
		tampered.Status.Members.Ready = nil
		f.c.take(tampered)
		f.mustPass()
		if n := f.statusWrites(); n != 2 {
			t.Errorf("%d status writes, want the overwritten status restored", n)
		}
	})

	t.Run("on a CRD without the status subresource status goes with an update of the object and settles", func(t *testing.T) {
		f := healthyFixture(t)
		statustest.WithoutStatusSubresource(f.crs, api.EtcdClusterResourcePlural, false)
		for range 4 {
			f.now = f.now.Add(10 * time.Second)
			f.mustPass()
		}
		var verbs []string
		for _, a := range f.crs.Actions() {
			verbs = append(verbs, strings.TrimSpace(a.GetVerb()+" "+a.GetSubresource()))
		}
		// Each object write moves the generation; observedGeneration is
		// carried along, so the passes after it find nothing to write.
		expect(t, "API calls", verbs, []string{"update status", "get", "update"})
		stored, err := f.crs.Tracker().Get(api.SchemeGroupVersion.WithResource("etcdclusters"), testNS, testName)
		if err != nil {
			t.Fatal(err)
		}
		cl := stored.(*api.EtcdCluster)
		if s := cl.Status; s.Size != 3 || len(s.Members.Ready) != 3 || s.ObservedGeneration != cl.Generation {
			t.Errorf("stored generation %d, status %+v", cl.Generation, s)
		}
	})

	t.Run("a role without etcdclusters/status is named once in a Warning", func(t *testing.T) {
		f := healthyFixture(t)
		statustest.ForbidStatus(f.crs, api.EtcdClusterResourcePlural)
		f.mustPass()
		f.now = f.now.Add(time.Minute)
		f.indexer.Delete(f.pod(memberC))
		f.mustPass()
		var warnings []string
		for _, e := range f.events() {
			if strings.Contains(e, "etcdclusters/status") {
				warnings = append(warnings, e)
			}
		}
		if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "Warning "+statusutil.ReasonStatusSubresourceForbidden) {
			t.Errorf("warnings about the rule: %q, want one", warnings)
		}
	})

	t.Run("a new cluster grows to its size while its status cannot be stored", func(t *testing.T) {
		f := newFixture(t, newTestCluster(withPhase(api.ClusterPhaseNone), withSeedAndJoin))
		statustest.ForbidServedStatus(f.crs, api.EtcdClusterResourcePlural)
		f.mustSeed()
		seed := f.podActions()
		if len(seed) != 1 || !strings.HasPrefix(seed[0], "create pods ") {
			t.Fatalf("pod actions %v, want the seed", seed)
		}
		f.showCreatedPods()
		f.withMembers(strings.TrimPrefix(seed[0], "create pods "))
		for i := 0; i < 20 && len(f.etcd.names()) < 3; i++ {
			f.now = f.now.Add(10 * time.Second)
			f.mustPass()
			f.showCreatedPods(resolvable)
			f.mustPass()
			for _, name := range f.etcd.names() {
				if obj, ok, _ := f.indexer.GetByKey(testNS + "/" + name); ok && obj.(*corev1.Pod).Status.Phase != corev1.PodRunning {
					f.setReady(name, true)
				}
			}
		}
		f.mustPass()
		if got := f.etcd.names(); len(got) != 3 {
			t.Errorf("members %v, want 3", got)
		}
		if got := f.c.status(); got.Phase != api.ClusterPhaseRunning || len(got.Members.Ready) != 3 {
			t.Errorf("status kept in memory: phase %q, ready %v; want Running with 3", got.Phase, got.Members.Ready)
		}
		stored, err := f.crs.Tracker().Get(api.SchemeGroupVersion.WithResource("etcdclusters"), testNS, testName)
		if err != nil {
			t.Fatal(err)
		}
		if st := stored.(*api.EtcdCluster).Status; st.Phase != api.ClusterPhaseNone {
			t.Errorf("stored phase %q: the fake stored a status it should not", st.Phase)
		}
		var warnings []string
		for _, e := range f.events() {
			if strings.HasPrefix(e, "Warning "+statusutil.ReasonStatusSubresourceForbidden) {
				warnings = append(warnings, e)
			}
		}
		if len(warnings) != 1 {
			t.Errorf("warnings %q, want one naming the rule", warnings)
		}

		// The rule added: the next pass stores the status kept, without
		// waiting for statusutil.ReprobeInterval, and memory gives way.
		f.crs.ReactionChain = f.crs.ReactionChain[1:]
		f.mustPass()
		stored, err = f.crs.Tracker().Get(api.SchemeGroupVersion.WithResource("etcdclusters"), testNS, testName)
		if err != nil {
			t.Fatal(err)
		}
		if st := stored.(*api.EtcdCluster).Status; st.Phase != api.ClusterPhaseRunning || len(st.Members.Ready) != 3 || f.c.unstored != nil {
			t.Errorf("once the rule is added: stored phase %q, ready %v, kept in memory %v; want Running with 3 stored", st.Phase, st.Members.Ready, f.c.unstored != nil)
		}
	})

	t.Run("a status another writer stores wins over the one kept in memory", func(t *testing.T) {
		f := healthyFixture(t)
		statustest.ForbidServedStatus(f.crs, api.EtcdClusterResourcePlural)
		f.mustPass()
		if f.c.unstored == nil || f.c.status().Size != 3 {
			t.Fatalf("kept %+v, want the derived status kept", f.c.unstored)
		}
		handOver := f.c.latest.DeepCopy()
		handOver.Status = api.ClusterStatus{Phase: api.ClusterPhaseCreating}
		f.c.take(handOver)
		if got := f.c.status().Phase; got != api.ClusterPhaseCreating {
			t.Errorf("phase %q, want the stored Creating", got)
		}
	})

	t.Run("a status the server stores in its own form is not kept in memory", func(t *testing.T) {
		f := healthyFixture(t)
		// The apiserver stores times to the second.
		f.crs.PrependReactor("update", "etcdclusters", func(a clienttesting.Action) (bool, runtime.Object, error) {
			obj := a.(clienttesting.UpdateAction).GetObject().(*api.EtcdCluster).DeepCopy()
			obj.Status.Reason += " (as stored)"
			return true, obj, f.crs.Tracker().Update(api.SchemeGroupVersion.WithResource("etcdclusters"), obj, testNS)
		})
		f.mustPass()
		if f.c.unstored != nil {
			t.Errorf("status kept in memory although the server stored one: %+v", f.c.unstored)
		}
	})

	t.Run("a deleted cluster's status write is not an error", func(t *testing.T) {
		f := healthyFixture(t)
		if err := f.crs.Tracker().Delete(api.SchemeGroupVersion.WithResource("etcdclusters"), testNS, testName); err != nil {
			t.Fatal(err)
		}
		f.mustPass()
	})
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	if NewMetrics(reg) == nil {
		t.Fatal("registering twice failed")
	}
	f := newFixture(t, newTestCluster())
	f.c.cfg.Metrics = m
	f.withMembers(memberA, memberB, memberC)
	f.pod(memberA, notReady)
	f.mustPass() // lost quorum
	f.mustPass()

	want := `
# HELP etcd_operator_cluster_reconcile_failed Reconcile passes that ended with a problem, by problem code (Reason).
# TYPE etcd_operator_cluster_reconcile_failed counter
etcd_operator_cluster_reconcile_failed{Reason="lost_quorum",name="example",namespace="ns"} 2
# HELP etcd_operator_cluster_phase 1 for the cluster's current phase, 0 for the others.
# TYPE etcd_operator_cluster_phase gauge
etcd_operator_cluster_phase{name="example",namespace="ns",phase="Creating"} 0
etcd_operator_cluster_phase{name="example",namespace="ns",phase="Failed"} 0
etcd_operator_cluster_phase{name="example",namespace="ns",phase="None"} 0
etcd_operator_cluster_phase{name="example",namespace="ns",phase="Running"} 1
# HELP etcd_operator_cluster_members Members of the cluster known to the operator.
# TYPE etcd_operator_cluster_members gauge
etcd_operator_cluster_members{name="example",namespace="ns"} 3
# HELP etcd_operator_cluster_ready_members Members whose pod is Ready.
# TYPE etcd_operator_cluster_ready_members gauge
etcd_operator_cluster_ready_members{name="example",namespace="ns"} 0
# HELP etcd_operator_cluster_desired_size spec.size of the cluster.
# TYPE etcd_operator_cluster_desired_size gauge
etcd_operator_cluster_desired_size{name="example",namespace="ns"} 3
# HELP etcd_operator_cluster_reconcile_failures_total Reconcile passes that ended with a problem, by problem code (reconcile_failed, named by convention).
# TYPE etcd_operator_cluster_reconcile_failures_total counter
etcd_operator_cluster_reconcile_failures_total{name="example",namespace="ns",reason="lost_quorum"} 2
# HELP etcd_operator_cluster_quorum 1 while a majority of the cluster's members is ready, so that it can commit writes; 0 otherwise.
# TYPE etcd_operator_cluster_quorum gauge
etcd_operator_cluster_quorum{name="example",namespace="ns"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"etcd_operator_cluster_reconcile_failed", "etcd_operator_cluster_phase", "etcd_operator_cluster_members",
		"etcd_operator_cluster_ready_members", "etcd_operator_cluster_desired_size",
		"etcd_operator_cluster_reconcile_failures_total", "etcd_operator_cluster_quorum"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "etcd_operator_cluster_reconcile_duration"); n != 1 || err != nil {
		t.Errorf("%d duration series (%v), want 1", n, err)
	}
	if n, err := testutil.GatherAndCount(reg, "etcd_operator_cluster_reconcile_duration_seconds"); n != 1 || err != nil {
		t.Errorf("%d reconcile_duration_seconds series (%v), want 1", n, err)
	}
	// Every counter is exposed with the _total suffix; the original's name
	// only beside its conventional twin.
	if bad, err := promutil.CountersWithoutTotal(reg, originalCounterNames); err != nil || len(bad) > 0 {
		t.Errorf("counters without _total: %v (%v)", bad, err)
	}
	m.forget(testNS, testName)
	if n := testutil.CollectAndCount(reg); n != 0 {
		t.Errorf("%d series left after forget", n)
	}
	var nilMetrics *Metrics
	nilMetrics.observePass(testNS, testName, time.Second) // a nil *Metrics records nothing, and does not panic
}

// Each certificate has its expiry series, the CAs of one bundle apart; a
// certificate gone from the secrets loses its series.
func TestCertificateExpiryMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	peer := etcdutil.Certificate{Secret: "peer-tls", Key: etcdutil.SecretPeerCert, Subject: "CN=peer", Serial: "a1", NotAfter: testStart}
	oldCA := etcdutil.Certificate{Secret: "peer-tls", Key: etcdutil.SecretPeerCA, Subject: "CN=CA", Serial: "1", NotAfter: testStart.Add(time.Hour)}
	newCA := etcdutil.Certificate{Secret: "peer-tls", Key: etcdutil.SecretPeerCA, Subject: "CN=CA", Serial: "2", NotAfter: testStart.Add(2 * time.Hour)}
	m.setCertificates(testNS, testName, []etcdutil.Certificate{peer, oldCA, newCA})
	const header = `# HELP etcd_operator_cluster_certificate_expiry_timestamp_seconds When a certificate of the cluster's TLS secrets expires (notAfter), in Unix seconds.
# TYPE etcd_operator_cluster_certificate_expiry_timestamp_seconds gauge
`
	series := func(key, serial, subject string, at time.Time) string {
		return fmt.Sprintf("etcd_operator_cluster_certificate_expiry_timestamp_seconds{key=%q,name=%q,namespace=%q,secret=\"peer-tls\",serial=%q,subject=%q} %d\n",
			key, testName, testNS, serial, subject, at.Unix())
	}
	want := header + series("peer-ca.crt", "1", "CN=CA", oldCA.NotAfter) + series("peer-ca.crt", "2", "CN=CA", newCA.NotAfter) + series("peer.crt", "a1", "CN=peer", peer.NotAfter)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "etcd_operator_cluster_certificate_expiry_timestamp_seconds"); err != nil {
		t.Error(err)
	}
	m.setCertificates(testNS, testName, []etcdutil.Certificate{peer, newCA})
	want = header + series("peer-ca.crt", "2", "CN=CA", newCA.NotAfter) + series("peer.crt", "a1", "CN=peer", peer.NotAfter)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "etcd_operator_cluster_certificate_expiry_timestamp_seconds"); err != nil {
		t.Errorf("after the old CA left the bundle: %v", err)
	}
	m.forget(testNS, testName)
	if n := testutil.CollectAndCount(reg); n != 0 {
		t.Errorf("%d series left after forget", n)
	}
}

// The pass durations are exposed as client_golang's own histogram with the
// same buckets would expose them: the same buckets, count and sum under both
// names, for each cluster apart.
func TestPassDurationsAreTheHistogramsOfClientGolang(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	ref := prometheus.NewRegistry()
	vecs := map[string]*prometheus.HistogramVec{}
	for _, name := range []string{"reconcile_duration", "reconcile_duration_seconds"} {
		vecs[name] = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "etcd_operator", Subsystem: "cluster", Name: name,
			Help: map[string]string{
				"reconcile_duration":         "Time of one reconcile pass of a cluster, in seconds.",
				"reconcile_duration_seconds": "Time of one reconcile pass of a cluster (reconcile_duration, named by convention).",
			}[name],
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 10),
		}, []string{"namespace", "name"})
		ref.MustRegister(vecs[name])
	}
	observe := func(ns, name string, d time.Duration) {
		m.observePass(ns, name, d)
		for _, v := range vecs {
			v.WithLabelValues(ns, name).Observe(d.Seconds())
		}
	}
	// On a bound, just past one, in the first and past the last bucket.
	for _, d := range []time.Duration{0, 100 * time.Millisecond, 101 * time.Millisecond, 400 * time.Millisecond, 3 * time.Second, 51200 * time.Millisecond, time.Minute} {
		observe(testNS, testName, d)
	}
	observe("other", testName, 2*time.Second)
	names := []string{"etcd_operator_cluster_reconcile_duration", "etcd_operator_cluster_reconcile_duration_seconds"}
	want, err := ref.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, mf := range want {
		if _, err := expfmt.MetricFamilyToText(&text, mf); err != nil {
			t.Fatal(err)
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(text.String()), names...); err != nil {
		t.Error(err)
	}
}

func TestQuorumGaugeIsAMajorityOfMembersReady(t *testing.T) {
	for _, tc := range []struct {
		name           string
		members, ready int
		want           float64
	}{
		{"two of three ready hold a quorum", 3, 2, 1},
		{"one of three ready does not", 3, 1, 0},
		{"two of four ready do not", 4, 2, 0},
		{"the one member of one ready holds it", 1, 1, 1},
		{"a cluster without members has none", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg)
			m.setState(testNS, testName, tc.members, tc.members, tc.ready, api.ClusterPhaseRunning)
			want := fmt.Sprintf(`
# HELP etcd_operator_cluster_quorum 1 while a majority of the cluster's members is ready, so that it can commit writes; 0 otherwise.
# TYPE etcd_operator_cluster_quorum gauge
etcd_operator_cluster_quorum{name=%q,namespace=%q} %v
`, testName, testNS, tc.want)
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "etcd_operator_cluster_quorum"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A newer object with the same spec (the status written, say) becomes the
// spec in force: the goroutine keeps no older copy of the object beside the
// informer's. A new spec is still judged as one.
func TestTheSpecInForceIsTheNewestObjectWithIt(t *testing.T) {
	c := newCluster(t.Context(), Config{MembershipWait: k8sutil.MembershipWait{Image: "op:test"}}, newTestCluster())
	written := newTestCluster(func(cl *api.EtcdCluster) {
		cl.ResourceVersion = "2"
		cl.Status.Size = 3
	})
	c.take(written)
	if c.spec != written {
		t.Errorf("spec in force is the first object, want the newest with the same spec")
	}
	scaled := newTestCluster(func(cl *api.EtcdCluster) {
		cl.ResourceVersion, cl.Generation, cl.Spec.Size = "3", 2, 5
	})
	if !c.take(scaled) || c.spec != scaled {
		t.Errorf("a new spec was not put in force")
	}
	invalid := newTestCluster(func(cl *api.EtcdCluster) {
		cl.ResourceVersion, cl.Generation, cl.Spec.Size = "4", 3, -1
	})
	c.take(invalid)
	again := invalid.DeepCopy()
	again.ResourceVersion = "5"
	c.take(again)
	if c.spec != scaled {
		t.Errorf("spec in force %v, want the last valid one (generation 2)", c.spec.Generation)
	}
}
