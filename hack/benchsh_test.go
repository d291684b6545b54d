package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchRunsThePartsItIsAskedFor runs hack/bench/run.sh in a copy of the
// tree whose hack/e2e.sh and restore bench only record what they were asked
// to run: BENCH_ONLY names one part or several separated by commas, nothing
// runs them all, the restore part is the restore bench's (no e2e test), and
// a part that does not exist is refused with the list of parts before
// anything runs.
func TestBenchRunsThePartsItIsAskedFor(t *testing.T) {
	for _, tc := range []struct {
		only, want, refused string
		restore             bool
	}{
		{only: "", want: "^TestMeasure(Speed|Bootstrap|Scale|EtcdBenchmark)$", restore: true},
		{only: "speed", want: "^TestMeasure(Speed)$"},
		{only: "speed,bootstrap", want: "^TestMeasure(Speed|Bootstrap)$"},
		{only: "bootstrap,etcd", want: "^TestMeasure(Bootstrap|EtcdBenchmark)$"},
		{only: "restore", restore: true},
		{only: "speed,restore", want: "^TestMeasure(Speed)$", restore: true},
		{only: "speed,bogus", refused: "want speed, bootstrap, scale, etcd or restore"},
		{only: "speed,", refused: "want speed, bootstrap, scale, etcd or restore"},
	} {
		t.Run("BENCH_ONLY="+tc.only, func(t *testing.T) {
			root := t.TempDir()
			for _, dir := range []string{"hack/bench/restore", "_output"} {
				if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			script, err := os.ReadFile("bench/run.sh")
			if err != nil {
				t.Fatal(err)
			}
			asked, restored := filepath.Join(root, "asked"), filepath.Join(root, "restored")
			for name, body := range map[string]string{
				"hack/bench/run.sh":         string(script),
				"hack/bench/restore/run.sh": `echo "$SIZE_MIB" > ` + restored + "\nexit 1\n",
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
			size, _ := os.ReadFile(restored)
			if tc.refused != "" {
				if err == nil || !strings.Contains(string(out), tc.refused) {
					t.Errorf("run.sh exited with %v, printed\n%s\nwant a refusal saying %q", err, out, tc.refused)
				}
				if len(ran) > 0 || len(size) > 0 {
					t.Errorf("the suite ran %q and the restore bench %q although the parts were refused", ran, size)
				}
				return
			}
			if got := strings.TrimSpace(string(ran)); got != tc.want {
				t.Errorf("the suite was asked to run %q, want %q\n%s", got, tc.want, out)
			}
			if got := strings.TrimSpace(string(size)); tc.restore && got != "1024" || !tc.restore && got != "" {
				t.Errorf("the restore bench ran with SIZE_MIB %q; want it run (1024): %v\n%s", got, tc.restore, out)
			}
		})
	}
}
