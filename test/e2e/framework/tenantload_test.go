package framework

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func configMapAt(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

func newTenantRun() *tenantRun {
	return &tenantRun{deliveries: map[string][]delivery{}, lastRV: map[string]int64{}, errors: map[string]int{}}
}

func TestTenantLoadJudgesTheInformersOrder(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rvs        []string
		outOfOrder int
	}{
		{"versions delivered in order are in order", []string{"5", "7", "9"}, 0},
		{"a relist that delivers an object again at the same version is in order", []string{"5", "7", "7"}, 0},
		{"an object delivered at an older version than before is out of order", []string{"5", "9", "7"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTenantRun()
			for _, rv := range tc.rvs {
				r.deliver(configMapAt("a", rv), false)
			}
			if len(r.outOfOrder) != tc.outOfOrder {
				t.Errorf("out of order: %q, want %d", r.outOfOrder, tc.outOfOrder)
			}
		})
	}
}

func TestTenantLoadFindsAcknowledgedChangesTheInformerMissed(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, cm := range []*corev1.ConfigMap{configMapAt("current", "10"), configMapAt("stale", "11"), configMapAt("undead", "12")} {
		if err := store.Add(cm); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]objectState{
		"current": {rv: 10},
		"stale":   {rv: 14},
		"undead":  {absent: true},
		"deleted": {absent: true},
		"never":   {rv: 20},
	}
	n, examples := missingFrom(store, "ns", want)
	if n != 3 {
		t.Errorf("%d missing (%q), want 3: an older version, a deleted object still there, a created one never seen", n, examples)
	}
	for _, name := range []string{"stale", "undead", "never"} {
		if !strings.Contains(strings.Join(examples, "\n"), name+":") {
			t.Errorf("examples %q do not name %s", examples, name)
		}
	}
}

func TestTenantLoadMeasuresTheSilentWatch(t *testing.T) {
	t0 := time.Now()
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	r := newTenantRun()
	r.changes = []change{
		{name: "a", op: "create", rv: 5, acked: true, at: at(1)},
		// Acknowledged at 2 s; the informer delivers nothing until 6 s.
		{name: "b", op: "create", rv: 6, acked: true, at: at(2)},
		// Delivered before its answer came back: it never waited.
		{name: "c", op: "create", rv: 7, acked: true, at: at(7)},
		// Not acknowledged: nobody waits for it.
		{name: "d", op: "create", acked: false, at: at(3)},
	}
	r.deliveries = map[string][]delivery{
		"a": {{rv: 5, at: at(1.1)}},
		"b": {{rv: 6, at: at(6)}},
		"c": {{rv: 7, at: at(6.9)}},
	}
	if got := r.longestSilentWatch(at(10)); got != 4*time.Second {
		t.Errorf("longest silent watch %s, want 4s", got)
	}
	// A change the informer never shows waits until the end.
	r.changes = append(r.changes, change{name: "e", op: "update", rv: 9, acked: true, at: at(8)})
	if got := r.longestSilentWatch(at(13)); got != 5*time.Second {
		t.Errorf("longest silent watch with a change never shown %s, want 5s", got)
	}
}

func TestLongestGapCountsTheStartAndTheEnd(t *testing.T) {
	t0 := time.Now()
	ts := []time.Time{t0.Add(3 * time.Second), t0.Add(time.Second), t0.Add(4 * time.Second)}
	if got := longestGap(t0, t0.Add(10*time.Second), ts); got != 6*time.Second {
		t.Errorf("longest gap %s, want 6s (from the last write to the end)", got)
	}
	if got := longestGap(t0, t0.Add(10*time.Second), nil); got != 10*time.Second {
		t.Errorf("longest gap with no write %s, want the whole run", got)
	}
}
