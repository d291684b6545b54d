package main

import (
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

func TestTenantTable(t *testing.T) {
	got := tenantTable([]tenantRow{
		{Scenario: "member-and-leader-kill", Ops: 900, Acked: 880, LongestUnavailableSeconds: 3.04, ReadyzFailures: 2, LongestNotReadySeconds: 4.1, LongestSilentWatchSeconds: 2.96, Passed: true},
		{Scenario: "after-the-restore", Ops: 300, Acked: 300, Missing: 1, OutOfOrder: 2},
	})
	for _, want := range []string{
		"| scenario | ops | acked | missing | out of order | longest unavailable | /readyz failures | longest not ready | longest silent watch | passed |",
		"| member-and-leader-kill | 900 | 880 | 0 | 0 | 3.0 s | 2 | 4.1 s | 3.0 s | yes |",
		"| after-the-restore | 300 | 300 | 1 | 2 | 0.0 s | 0 | 0.0 s | 0.0 s | no |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "member-and-leader-kill") < strings.Index(got, "after-the-restore") {
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
