package manifests

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/yaml"

	"github.com/openetcd/etcd-operator/pkg/backup/backuptest"
	"github.com/openetcd/etcd-operator/pkg/cluster"
	"github.com/openetcd/etcd-operator/pkg/controller/backupcontroller"
	"github.com/openetcd/etcd-operator/pkg/restore"
)

func monitoringDir(t *testing.T) string { return filepath.Join(repoRoot(t), "example", "monitoring") }

func TestAlertRulesPassPromtool(t *testing.T) {
	promtool := tool(t, "PROMTOOL", "promtool")
	dir := monitoringDir(t)
	run(t, dir, promtool, "check", "rules", "rules.yaml")
	out := run(t, dir, promtool, "test", "rules", "rules_test.yaml")
	t.Logf("%s", out)
}

// The PrometheusRule is rules.yaml wrapped for the prometheus-operator, so the
// rules promtool tests are the rules that ship.
func TestPrometheusRuleHoldsTheTestedRules(t *testing.T) {
	dir := monitoringDir(t)
	want, err := prometheusRule(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	derived(t, filepath.Join(dir, "prometheusrule.yaml"), want, "rules.yaml as a PrometheusRule")
}

func prometheusRule(rulesFile string) ([]byte, error) {
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		return nil, err
	}
	var spec map[string]any
	if err := yaml.Unmarshal(data, &spec); err != nil {
		return nil, err
	}
	obj := map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata": map[string]any{
			"name":   "etcd-operator",
			"labels": map[string]any{"app.kubernetes.io/part-of": "etcd-operator"},
		},
		"spec": spec,
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	header := "# Generated from rules.yaml by `go test ./test/manifests -update`; edit rules.yaml.\n" +
		"# The alert rules for the prometheus-operator: apply it where your Prometheus's\n" +
		"# ruleSelector finds it.\n"
	return append([]byte(header), out...), nil
}

// metricRE finds the metrics the kit queries: the operators' and etcd's own
// all start with etcd_.
var metricRE = regexp.MustCompile(`\betcd_[a-z0-9_]+\b`)

// Every metric an alert or a panel queries is one the operators or etcd export:
// a renamed metric must not leave a silent alert or an empty panel behind.
func TestMonitoringQueriesOnlyExportedMetrics(t *testing.T) {
	exported := operatorMetrics(t)
	for name := range etcdMetrics(t) {
		exported[name] = true
	}
	dir := monitoringDir(t)
	for _, file := range []string{"rules.yaml", "grafana-dashboard.json"} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		for _, name := range metricRE.FindAllString(string(data), -1) {
			// The etcd_cluster label and the job name are not metrics.
			if name == "etcd_cluster" || exported[name] {
				continue
			}
			missing = append(missing, name)
		}
		if len(missing) > 0 {
			t.Errorf("%s queries metrics nothing exports: %v", file, unique(missing))
		}
	}
}

func unique(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// describer records the names of the collectors registered on it, including
// vectors that have no series yet.
type describer struct{ names map[string]bool }

var fqNameRE = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		m := fqNameRE.FindStringSubmatch(desc.String())
		if m == nil {
			continue
		}
		d.names[m[1]] = true
		// A histogram's series; harmless extra names for the other kinds.
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			d.names[m[1]+suffix] = true
		}
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return false }

func operatorMetrics(t *testing.T) map[string]bool {
	d := &describer{names: map[string]bool{}}
	cluster.NewMetrics(d)
	backupcontroller.NewMetrics(d)
	restore.NewMetrics(d)
	if len(d.names) == 0 {
		t.Fatal("no operator metrics found")
	}
	return d.names
}

// etcdMetrics are the metrics of a running etcd member (the embedded 3.5 the
// unit tests use; 3.4 and 3.6 export the same ones the kit queries).
func etcdMetrics(t *testing.T) map[string]bool {
	e, err := backuptest.StartEtcd(backuptest.EtcdOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "etcd_") {
			continue
		}
		names[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[name+suffix] = true
			}
		}
	}
	// A one-member etcd registers the peer histograms but, without peers,
	// never observes them, so gathering shows no series. A name etcd has
	// registered cannot be registered again: that proves it is etcd's.
	for _, name := range []string{"etcd_network_peer_round_trip_time_seconds"} {
		probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe"})
		if err := prometheus.DefaultRegisterer.Register(probe); err == nil {
			prometheus.DefaultRegisterer.Unregister(probe)
			t.Errorf("the embedded etcd does not register %s", name)
			continue
		}
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			names[name+suffix] = true
		}
	}
	if !names["etcd_server_has_leader"] {
		t.Fatalf("the embedded etcd exports no etcd_server_has_leader; got %d etcd_ metrics", len(names))
	}
	return names
}
