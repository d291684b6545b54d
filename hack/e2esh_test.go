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
