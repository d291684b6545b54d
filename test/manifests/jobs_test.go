package manifests

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

// memberJob is the job the members' PodMonitor gives their series.
const memberJob = "etcd-operator-member"

// podMonitor is what these tests read of a PodMonitor.
type podMonitor struct {
	Spec struct {
		JobLabel            string `json:"jobLabel"`
		PodMetricsEndpoints []struct {
			Relabelings []struct {
				TargetLabel string `json:"targetLabel"`
				Replacement string `json:"replacement"`
			} `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

func (m podMonitor) job() string {
	job := ""
	for _, e := range m.Spec.PodMetricsEndpoints {
		for _, r := range e.Relabelings {
			if r.TargetLabel == "job" {
				job = r.Replacement
			}
		}
	}
	return job
}

// jobSelectorRE finds the job matchers of PromQL, in YAML or in JSON strings.
var jobSelectorRE = regexp.MustCompile(`\bjob\s*=~?\s*\\?"([^"\\]*)`)

// The members' job is etcd-operator-member in the PodMonitor, the chart's
// PodMonitor, the rules and the dashboard: rules written for the control
// plane's etcd select job="etcd", and a kit that selected it too would mix the
// two, while a job the monitors do not set leaves every member alert silent.
func TestMembersJobIsTheSameInMonitorsRulesAndDashboard(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(monitoringDir(t), "podmonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pm podMonitor
	if err := yaml.Unmarshal(data, &pm); err != nil {
		t.Fatal(err)
	}
	if got := pm.job(); got != memberJob || pm.Spec.JobLabel != "" {
		t.Errorf("podmonitor.yaml sets job %q (jobLabel %q), want %q", got, pm.Spec.JobLabel, memberJob)
	}
	var chartPM podMonitor
	if err := yaml.Unmarshal(render(t, allMonitoring...)["PodMonitor"]["rel-etcd-operator-members"], &chartPM); err != nil {
		t.Fatal(err)
	}
	if got := chartPM.job(); got != memberJob || chartPM.Spec.JobLabel != "" {
		t.Errorf("the chart's PodMonitor sets job %q (jobLabel %q), want %q", got, chartPM.Spec.JobLabel, memberJob)
	}
	operatorJobs := map[string]bool{
		"etcd-operator": true, "etcd-backup-operator": true, "etcd-restore-operator": true,
		"etcd-operator|etcd-backup-operator|etcd-restore-operator": true,
	}
	for _, file := range []string{"rules.yaml", "grafana-dashboard.json"} {
		data, err := os.ReadFile(filepath.Join(monitoringDir(t), file))
		if err != nil {
			t.Fatal(err)
		}
		matches := jobSelectorRE.FindAllStringSubmatch(string(data), -1)
		members := 0
		for _, m := range matches {
			switch {
			case m[1] == memberJob:
				members++
			case !operatorJobs[m[1]]:
				t.Errorf("%s selects job %q, neither the members' nor an operator's", file, m[1])
			}
		}
		if members == 0 {
			t.Errorf("%s never selects the members' job %q", file, memberJob)
		}
	}
}
