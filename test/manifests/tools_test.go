package manifests

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// update rewrites the files derived from others (the PrometheusRule from
// rules.yaml, the chart's copies) instead of failing on a difference.
var update = flag.Bool("update", false, "rewrite the derived manifests")

// repoRoot is the repository's top directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test's source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// tool returns the binary named by the environment variable env, failing the
// test with the way to get it when it is missing.
func tool(t *testing.T, env, name string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		t.Fatalf("%s is needed and $%s is not set: run `make unit`, or %s=$(bash hack/tools.sh %s) go test ./test/manifests", name, env, env, name)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is needed and $%s=%s is missing (%v): run `bash hack/tools.sh %s` to build it", name, env, bin, err, name)
	}
	return bin
}

// run runs a tool in dir and returns its output, failing the test with it when
// the tool fails.
func run(t *testing.T, dir, bin string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s%s", filepath.Base(bin), args, err, out.String(), stderr.String())
	}
	return out.Bytes()
}

// execOutput runs a command expected to fail and returns its combined output.
func execOutput(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
	return string(out), err
}

// derived checks that the file at path holds want, or writes it with -update.
func derived(t *testing.T, path string, want []byte, how string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s is not %s (read error: %v): run `go test ./test/manifests -update`", path, how, err)
	}
}
