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

// TestSuitesForOneNodeRefuseAClusterOfSeveral runs make test's and make
// chaos's scripts against a local cluster's env file: on three nodes they
// stop before running anything (make is a stub that records its calls), and
// say how to get one node; on one node, or with no cluster yet, they go on.
func TestSuitesForOneNodeRefuseAClusterOfSeveral(t *testing.T) {
	for _, script := range []string{"test.sh", "chaos.sh"} {
		for _, tc := range []struct {
			name    string
			env     string // the env file's content; "" for none
			refused bool
		}{
			{"three nodes are refused", "export LOCAL_CLUSTER_NODES=1\nexport LOCAL_CLUSTER_NODES=3\n", true},
			{"one node goes on", "export LOCAL_CLUSTER_NODES=1\n", false},
			{"no cluster yet goes on", "", false},
		} {
			t.Run(script+": "+tc.name, func(t *testing.T) {
				state, bin := t.TempDir(), t.TempDir()
				if tc.env != "" {
					if err := os.WriteFile(filepath.Join(state, "env"), []byte(tc.env), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				calls := filepath.Join(bin, "calls")
				// The stub fails, so that a script that goes on stops at its
				// first make and runs no suite.
				stub := "#!/bin/sh\necho \"$*\" >>" + calls + "\nexit 1\n"
				for _, name := range []string{"make", "go"} {
					if err := os.WriteFile(filepath.Join(bin, name), []byte(stub), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				cmd := exec.Command("bash", script)
				cmd.Env = append(os.Environ(), "LOCAL_CLUSTER_STATE_DIR="+state, "PATH="+bin+":"+os.Getenv("PATH"))
				out, err := cmd.CombinedOutput()
				if err == nil {
					t.Fatalf("%s succeeded with make failing:\n%s", script, out)
				}
				_, statErr := os.Stat(calls)
				ran := statErr == nil
				said := strings.Contains(string(out), "runs 3 nodes") && strings.Contains(string(out), "make local-down")
				if tc.refused && (ran || !said) {
					t.Errorf("%s on three nodes: ran something = %v, said how to get one node = %v\n%s", script, ran, said, out)
				}
				if !tc.refused && (!ran || said) {
					t.Errorf("%s: ran nothing = %v, refused = %v\n%s", script, !ran, said, out)
				}
			})
		}
	}
}
