package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestE2ESummaryShowsWhyATestFailed runs hack/e2e.sh's last_words on a go
// test -v log of two parallel tests: the failed one's lines up to its dump
// are shown, its dump and the other test's lines are not.
func TestE2ESummaryShowsWhyATestFailed(t *testing.T) {
	log := filepath.Join(t.TempDir(), "go-test.log")
	const out = `=== RUN   TestA
=== PAUSE TestA
=== RUN   TestB
=== CONT  TestA
    a_test.go:10: A starts
=== NAME  TestB
    b_test.go:5: B logs
=== NAME  TestA
    a_test.go:20: the checker failed
        checker log:
        the cluster did not answer
    helpers_test.go:146: ======== pods in e2e-a
        NAME READY
=== NAME  TestB
    b_test.go:6: B logs again
=== NAME  TestA
    helpers_test.go:146: ======== events
--- FAIL: TestA (1.00s)
--- PASS: TestB (1.00s)
FAIL
`
	if err := os.WriteFile(log, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `source <(sed -n '/^last_words()/,/^}/p' e2e.sh) && last_words "$1" TestA`
	got, err := exec.Command("bash", "-c", script, "bash", log).CombinedOutput()
	if err != nil {
		t.Fatalf("last_words: %v\n%s", err, got)
	}
	want := `[e2e] TestA, its last lines before its dump:
      a_test.go:10: A starts
      a_test.go:20: the checker failed
          checker log:
          the cluster did not answer
`
	if string(got) != want {
		t.Errorf("last_words printed\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(string(got), "B logs") || strings.Contains(string(got), "NAME READY") {
		t.Error("another test's lines or the dump were shown")
	}
}

// TestSuitesForOneNodeRefuseAClusterOfSeveral runs the check make test and
// make chaos start with against a local cluster's env file: on three nodes
// it stops them and says how to get one node; on one node, or with no
// cluster yet, they go on. Both scripts call it before anything else runs.
func TestSuitesForOneNodeRefuseAClusterOfSeveral(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     string // the env file's content; "" for none
		refused bool
	}{
		{"three nodes are refused", "export LOCAL_CLUSTER_NODES=1\nexport LOCAL_CLUSTER_NODES=3\n", true},
		{"one node goes on", "export LOCAL_CLUSTER_NODES=1\n", false},
		{"no cluster yet goes on", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			if tc.env != "" {
				if err := os.WriteFile(filepath.Join(state, "env"), []byte(tc.env), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", "local-cluster/one-node.sh", "make test", "sudo make test")
			cmd.Env = append(os.Environ(), "LOCAL_CLUSTER_STATE_DIR="+state)
			out, err := cmd.CombinedOutput()
			said := strings.Contains(string(out), "runs 3 nodes") && strings.Contains(string(out), "make local-down")
			if refused := err != nil; refused != tc.refused || said != tc.refused {
				t.Errorf("refused = %v (%v), said how to get one node = %v; want %v\n%s", refused, err, said, tc.refused, out)
			}
		})
	}
	for _, script := range []string{"test.sh", "chaos.sh"} {
		body, err := os.ReadFile(script)
		if err != nil {
			t.Fatal(err)
		}
		check := strings.Index(string(body), "bash hack/local-cluster/one-node.sh")
		first := strings.Index(string(body), "\nphase ")
		if e2e := strings.Index(string(body), "bash hack/e2e.sh"); first < 0 || e2e >= 0 && e2e < first {
			first = e2e
		}
		if check < 0 || first < 0 || check > first {
			t.Errorf("%s does not check for one node before its first suite (check at %d, first suite at %d)", script, check, first)
		}
	}
}

// TestExtraNodesAreNamedBeforeAnyWasAdded runs nodes.sh's extra_node_vars
// under errexit on a state directory without the list of added nodes (a
// fresh machine): the node gets its default name instead of the script
// stopping without a word.
func TestExtraNodesAreNamedBeforeAnyWasAdded(t *testing.T) {
	script := `set -o errexit -o nounset -o pipefail
STATE_DIR=$1 NODE_NAME=host
source local-cluster/nodes.sh
extra_node_vars 2
echo "$XN_NAME $XN_ZONE $XN_IP"`
	got, err := exec.Command("bash", "-c", script, "bash", t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("extra_node_vars: %v\n%s", err, got)
	}
	if want := "host-b b 172.31.250.2\n"; string(got) != want {
		t.Errorf("extra_node_vars printed %q, want %q", got, want)
	}
}
