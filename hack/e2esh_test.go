package tools

import (
	"fmt"
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
// make chaos start with against a local cluster's state: with the kubelets of
// two extra nodes running it stops them and says how to get one node; with
// extra nodes listed but not running (a cluster brought down, whose env file
// still says three) or no cluster at all, they go on. Both scripts call it
// before anything else runs.
func TestSuitesForOneNodeRefuseAClusterOfSeveral(t *testing.T) {
	// A process standing for a running kubelet, recorded as start_proc does.
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", sleeper.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	running := fmt.Sprintf("%d %s\n", sleeper.Process.Pid, strings.Fields(string(stat))[21])
	for _, tc := range []struct {
		name    string
		listed  bool // nodes.list names b and c
		kubelet string
		refused bool
	}{
		{"two extra nodes running are refused", true, running, true},
		{"extra nodes listed but not running go on", true, "", false},
		{"a kubelet pid file of a process gone goes on", true, "1 1\n", false},
		{"no cluster yet goes on", false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			if tc.listed {
				list := "host-b b 172.31.250.2\nhost-c c 172.31.250.3\n"
				if err := os.WriteFile(filepath.Join(state, "nodes.list"), []byte(list), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(state, "env"), []byte("export LOCAL_CLUSTER_NODES=3\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.kubelet != "" {
				if err := os.MkdirAll(filepath.Join(state, "pids"), 0o755); err != nil {
					t.Fatal(err)
				}
				for _, zone := range []string{"b", "c"} {
					if err := os.WriteFile(filepath.Join(state, "pids", "kubelet-"+zone+".pid"), []byte(tc.kubelet), 0o644); err != nil {
						t.Fatal(err)
					}
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
