package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchRunsThePartsItIsAskedFor runs hack/bench/run.sh in a copy of the
// tree whose hack/e2e.sh only records what it was asked to run: BENCH_ONLY
// names one part or several separated by commas, nothing runs them all,
// and a part that does not exist is refused with the list of parts before
// anything runs.
func TestBenchRunsThePartsItIsAskedFor(t *testing.T) {
	for _, tc := range []struct {
		only, want, refused string
	}{
		{only: "", want: "^TestMeasure(Speed|Bootstrap|Scale|EtcdBenchmark)$"},
		{only: "speed", want: "^TestMeasure(Speed)$"},
		{only: "speed,bootstrap", want: "^TestMeasure(Speed|Bootstrap)$"},
		{only: "bootstrap,etcd", want: "^TestMeasure(Bootstrap|EtcdBenchmark)$"},
		{only: "speed,bogus", refused: "want speed, bootstrap, scale or etcd"},
		{only: "speed,", refused: "want speed, bootstrap, scale or etcd"},
	} {
		t.Run("BENCH_ONLY="+tc.only, func(t *testing.T) {
			root := t.TempDir()
			for _, dir := range []string{"hack/bench", "_output"} {
				if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			script, err := os.ReadFile("bench/run.sh")
			if err != nil {
				t.Fatal(err)
			}
			asked := filepath.Join(root, "asked")
			for name, body := range map[string]string{
				"hack/bench/run.sh": string(script),
				// The suite records its -run and fails, so that no page is written.
				"hack/e2e.sh":   `printf '%s\n' "$2" > ` + asked + "\nexit 1\n",
				"hack/tools.sh": "echo /nonexistent/benchmark\n",
			} {
				if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", filepath.Join(root, "hack/bench/run.sh"))
			cmd.Env = append(os.Environ(), "BENCH_ONLY="+tc.only)
			out, err := cmd.CombinedOutput()
			ran, _ := os.ReadFile(asked)
			if tc.refused != "" {
				if err == nil || !strings.Contains(string(out), tc.refused) {
					t.Errorf("run.sh exited with %v, printed\n%s\nwant a refusal saying %q", err, out, tc.refused)
				}
				if len(ran) > 0 {
					t.Errorf("the suite ran %q although the parts were refused", ran)
				}
				return
			}
			if got := strings.TrimSpace(string(ran)); got != tc.want {
				t.Errorf("the suite was asked to run %q, want %q\n%s", got, tc.want, out)
			}
		})
	}
}
