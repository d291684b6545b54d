package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEventsReferenceListsEveryProblem(t *testing.T) {
	page := eventsReference()
	for _, want := range []string{
		"| `NoSpace` | `no_space` |",
		"| `DataCorrupt` | `data_corrupt` |",
		"| `LostQuorum` | `lost_quorum` | `LostQuorum` |",
		"| `WaitingTooLong` | `waiting` |",
		"| Normal | `New Member Added` (original) | `New member <member> added to cluster` |",
		"| `NoSpace` | True | `AlarmNOSPACE` |",
		"| `DataCorrupt` | True | `AlarmCORRUPT` |",
		"| `Available` | False | `QuorumRecovering` |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("events.md lacks %q", want)
		}
	}
}

func TestAPIReferenceDescribesTheFields(t *testing.T) {
	page := apiReference()
	for _, want := range []string{
		"## EtcdCluster", "## EtcdBackup", "## EtcdRestore",
		"| `size` | integer | **Required.**",
		"| `pod.DNSTimeoutInSecond` | integer |",
		"| `TLS.static.member.peerSecret` | string |",
		"| `storageType` | string |",
		"| `Reason` | string |", // the backup status key keeps the original's casing
		"short names `etcd`, `etcdclus`",
		"each item's rule: name is reserved", // the rules of list items show on the list
	} {
		if !strings.Contains(page, want) {
			t.Errorf("api.md lacks %q", want)
		}
	}
	for i, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "| `") && strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") != 4 {
			t.Errorf("line %d is not a three-column row: %s", i+1, line)
		}
	}
}

func TestBenchBodyKeepsTheTableUnderOneProvenanceLine(t *testing.T) {
	md := "Speed, 2026-11-26, single node, 2 cores; seconds, median of 3 (min–max)\n\n| scenario | seconds |\n|---|---|\n| floor | 4.6 |\n\nA note.\n"
	got := benchBody(md, benchReport{Kind: "speed", Date: "2026-11-26", Machine: "single node, 2 cores"}, "abc1234")
	want := "Last run: 2026-11-26, commit abc1234, single node, 2 cores; seconds, median of 3 (min–max).\n\n| scenario | seconds |\n|---|---|\n| floor | 4.6 |\n\nA note.\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestAPageKeepsTheSectionsARunDidNotMeasure(t *testing.T) {
	old := page(benchIntro, []string{"speed", "scale"}, map[string]string{
		"speed": section("speed", "Speed", "old speed\n"),
		"scale": section("scale", "Scale", "old scale\n"),
	}, "")
	got := page(benchIntro, []string{"speed", "scale"}, map[string]string{"speed": section("speed", "Speed", "new speed\n")}, old)
	if !strings.Contains(got, "new speed") || strings.Contains(got, "old speed") || !strings.Contains(got, "old scale") {
		t.Errorf("page:\n%s", got)
	}
	if again := page(benchIntro, []string{"speed", "scale"}, nil, got); again != got {
		t.Errorf("a page read back and written again changed:\n%s", again)
	}
}

func TestChaosTable(t *testing.T) {
	got := chaosTable([]chaosRow{
		{Scenario: "leader-kill", Ops: 10, Acked: 9, Indeterminate: 1, Linearizable: "yes", LongestUnavailableSeconds: 1.24, RecoverySeconds: 16.9, Passed: true},
		{Scenario: "follower-kill", Ops: 5, Acked: 5, Linearizable: "yes", Passed: true},
	})
	if !strings.Contains(got, "| leader-kill | 10 | 9 | 0 | 1 | yes | 0 | 0 | 1.2 s | 16.9 s | yes |") {
		t.Errorf("table:\n%s", got)
	}
	if strings.Index(got, "follower-kill") > strings.Index(got, "leader-kill") {
		t.Errorf("rows are not in scenario order:\n%s", got)
	}
}

func TestHeadingAnchorsAreGitHubs(t *testing.T) {
	a := headingAnchors("# Install\n## `kubectl etcd`: the plugin\n## Install\n```\n# not a heading\n```\n## What kubectl shows?\n")
	for _, want := range []string{"install", "kubectl-etcd-the-plugin", "install-1", "what-kubectl-shows"} {
		if !a[want] {
			t.Errorf("no anchor %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Errorf("a line in a code block made an anchor")
	}
}

func TestMarkdownLinksLeaveCodeAlone(t *testing.T) {
	got := markdownLinks("see [a](a.md#x) and `[b](b.md)`\n```\n[c](c.md)\n```\n[d](https://example.org)\n")
	if strings.Join(got, ",") != "a.md#x,https://example.org" {
		t.Errorf("links: %v", got)
	}
}

func TestChaosPageFromResults(t *testing.T) {
	dir := t.TempDir()
	in, out := dir+"/results.json", dir+"/chaos.md"
	if err := os.WriteFile(in, []byte(`[{"scenario":"leader-kill","ops":10,"acked":9,"failed":0,"indeterminate":1,"linearizable":"yes","ackedLost":0,"longestUnavailableSeconds":1.2,"recoverySeconds":16.9,"passed":true,"test":"TestChaosLeaderKill"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runChaos([]string{"-in", in, "-o", out, "-commit", "abc1234", "-date", "2026-11-25", "-machine", "single node, 2 cores", "-run", "1 scenarios in 60 s, 6 at a time"}); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(out)
	for _, want := range []string{
		"Last run: 2026-11-25, commit abc1234, single node, 2 cores; 1 scenarios in 60 s, 6 at a time.\n",
		"| leader-kill | 10 | 9 | 0 | 1 | yes | 0 | 0 | 1.2 s | 16.9 s | yes |",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("chaos.md lacks %q:\n%s", want, page)
		}
	}
}

func TestBenchPageTakesTheNewestReportOfEachKind(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := "single node, 2 cores"
	write("speed-20261125-010000.json", `{"kind":"speed","date":"2026-11-25","machine":"`+m+`"}`)
	write("speed-20261125-010000.md", "Speed, 2026-11-25, "+m+"; seconds\n\n| old |\n")
	write("speed-20261126-010000.json", `{"kind":"speed","date":"2026-11-26","machine":"`+m+`"}`)
	write("speed-20261126-010000.md", "Speed, 2026-11-26, "+m+"; seconds\n\n| new |\n")
	out := filepath.Join(dir, "bench.md")
	if err := runBench([]string{"-in", dir, "-o", out, "-commit", "abc1234"}); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(out)
	if !strings.Contains(string(page), "Last run: 2026-11-26, commit abc1234, single node, 2 cores; seconds.\n\n| new |") || strings.Contains(string(page), "| old |") {
		t.Errorf("bench.md:\n%s", page)
	}
}

// The committed result pages are in the generator's own format: read back and
// written again, they do not change.
func TestCommittedResultPagesAreInTheGeneratedFormat(t *testing.T) {
	for _, c := range []struct {
		path, intro string
		order       []string
	}{
		{"../../docs/results/bench.md", benchIntro, []string{"speed", "scale"}},
		{"../../docs/results/chaos.md", chaosIntro, []string{"matrix"}},
	} {
		old, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if again := page(c.intro, c.order, nil, string(old)); again != string(old) {
			t.Errorf("%s is not what hack/gen-docs writes; regenerate it rather than editing it", c.path)
		}
	}
}
