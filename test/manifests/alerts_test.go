package manifests

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// alertRule is an alerting rule of rules.yaml, as far as these tests read it.
type alertRule struct {
	Alert       string            `json:"alert"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(monitoringDir(t), "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	var rules []alertRule
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				rules = append(rules, r)
			}
		}
	}
	if len(rules) == 0 {
		t.Fatal("rules.yaml has no alerts")
	}
	return rules
}

// alertCase is an alert_rule_test entry of rules_test.yaml.
type alertCase struct {
	Alertname string `json:"alertname"`
	ExpAlerts []struct {
		ExpLabels map[string]string `json:"exp_labels"`
	} `json:"exp_alerts"`
}

func alertCases(t *testing.T) []alertCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(monitoringDir(t), "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			AlertRuleTest []alertCase `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	var cases []alertCase
	for _, tc := range file.Tests {
		cases = append(cases, tc.AlertRuleTest...)
	}
	return cases
}

// An alert nobody saw fire may never fire (a wrong label, a typo in a metric),
// and one nobody saw stay quiet may page all the time: rules_test.yaml must hold
// both for every alert, at each of its severities (the same alert name at
// warning and critical are two rules).
func TestEveryAlertHasFiringAndQuietPromtoolTests(t *testing.T) {
	cases := alertCases(t)
	for _, r := range alertRules(t) {
		sev := r.Labels["severity"]
		var fires, quiet bool
		for _, c := range cases {
			if c.Alertname != r.Alert {
				continue
			}
			seen := false
			for _, a := range c.ExpAlerts {
				if a.ExpLabels["severity"] == sev {
					seen = true
				}
			}
			fires = fires || seen
			quiet = quiet || !seen
		}
		if !fires {
			t.Errorf("%s (%s): no test in rules_test.yaml where it fires", r.Alert, sev)
		}
		if !quiet {
			t.Errorf("%s (%s): no test in rules_test.yaml where it stays quiet", r.Alert, sev)
		}
	}
}

// runbookPage is where the rules' runbook_url annotations point: the
// troubleshooting page at the project's home (the chart's home field).
func runbookPage(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "example", "chart", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Home string `json:"home"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil || chart.Home == "" {
		t.Fatalf("Chart.yaml has no home (%v)", err)
	}
	return chart.Home + "/blob/main/docs/user-guide/troubleshooting.md"
}

// Every alert links a section of docs/user-guide/troubleshooting.md that exists, so the
// person paged lands on what to check and what to do.
func TestEveryAlertHasARunbookInTheTroubleshootingPage(t *testing.T) {
	page := runbookPage(t)
	anchors := markdownAnchors(t, filepath.Join(repoRoot(t), "docs", "user-guide", "troubleshooting.md"))
	for _, r := range alertRules(t) {
		url := r.Annotations["runbook_url"]
		if url == "" {
			t.Errorf("%s has no runbook_url", r.Alert)
			continue
		}
		anchor, ok := strings.CutPrefix(url, page+"#")
		if !ok {
			t.Errorf("%s: runbook_url %s is not a section of %s", r.Alert, url, page)
			continue
		}
		if !anchors[anchor] {
			t.Errorf("%s: runbook_url %s: docs/user-guide/troubleshooting.md has no heading with anchor #%s", r.Alert, url, anchor)
		}
	}
}

var (
	headingRE     = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
	anchorDropRE  = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	fenceStartsRE = regexp.MustCompile("^\\s*(```|~~~)")
)

// markdownAnchors are the anchors GitHub gives the headings of a Markdown file:
// lower case, punctuation other than - and _ dropped, spaces as dashes, and
// -1, -2... after repeats.
func markdownAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	anchors := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if fenceStartsRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		a := strings.ReplaceAll(anchorDropRE.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return anchors
}

func TestMarkdownAnchorsAreGitHubs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "page.md")
	text := "# Troubleshooting\n## EtcdMemberDown\n## What `kubectl etcd status` shows!\n```\n# not a heading\n```\n## EtcdMemberDown\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := markdownAnchors(t, path)
	for _, want := range []string{"troubleshooting", "etcdmemberdown", "what-kubectl-etcd-status-shows", "etcdmemberdown-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block made an anchor")
	}
}
