package restore

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// shTool is a restore command that runs script with sh: the tests stand in
// for the etcd tool with it.
func shTool(script string) []string { return []string{"/bin/sh", "-c", script} }

func TestRestoreDataDir(t *testing.T) {
	tests := []struct {
		name string
		// before lays out dir (the data volume) before the step runs.
		before func(t *testing.T, a DataDirArgs)
		tool   string
		// wantErr: the step fails; wantData: the data directory holds the
		// file "db" with this content afterwards ("" for no data directory).
		wantErr  bool
		wantData string
	}{
		{
			name:     "the first run restores into the staging directory and puts it in place",
			tool:     `mkdir -p "$STAGING" && echo restored > "$STAGING/db"`,
			wantData: "restored\n",
		},
		{
			name:     "a run again after the restore leaves the data directory and runs no tool",
			before:   func(t *testing.T, a DataDirArgs) { writeFile(t, filepath.Join(a.DataDir, "db"), "the member's data\n") },
			tool:     `echo the tool ran > "$MARK"; exit 1`,
			wantData: "the member's data\n",
		},
		{
			name: "a run after a restore cut short starts again from an empty staging directory",
			before: func(t *testing.T, a DataDirArgs) {
				writeFile(t, filepath.Join(a.StagingDir, "db"), "half\n")
			},
			tool:     `test ! -e "$STAGING" && mkdir -p "$STAGING" && echo restored > "$STAGING/db"`,
			wantData: "restored\n",
		},
		{
			name:    "a failed tool leaves no data directory, so the next run restores again",
			tool:    `mkdir -p "$STAGING" && echo half > "$STAGING/db"; exit 3`,
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a := DataDirArgs{DataDir: filepath.Join(dir, "data"), StagingDir: filepath.Join(dir, "data.restoring"), Tool: shTool(tc.tool)}
			mark := filepath.Join(dir, "tool-ran")
			t.Setenv("STAGING", a.StagingDir)
			t.Setenv("MARK", mark)
			if tc.before != nil {
				tc.before(t, a)
			}
			var out bytes.Buffer
			err := RestoreDataDir(context.Background(), a, &out)
			if (err != nil) != tc.wantErr {
				t.Fatalf("RestoreDataDir: %v, want an error: %v; output:\n%s", err, tc.wantErr, out.String())
			}
			got, readErr := os.ReadFile(filepath.Join(a.DataDir, "db"))
			switch {
			case tc.wantData == "" && !os.IsNotExist(readErr):
				t.Errorf("the data directory holds %q (%v), want none: etcd would start on a restore cut short", got, readErr)
			case tc.wantData != "" && string(got) != tc.wantData:
				t.Errorf("the data directory holds %q (%v), want %q", got, readErr, tc.wantData)
			}
			if _, err := os.Stat(mark); err == nil {
				t.Error("the tool ran on a data directory that was there")
			}
		})
	}
}

func TestCopySelfLeavesAnExecutableCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), Binary)
	for range 2 { // the second copy replaces the first
		if err := CopySelf(path); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.Stat(self)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Size() != want.Size() || got.Mode().Perm() != 0o755 {
		t.Errorf("copy of %d bytes with mode %v, want %d bytes with mode 0755", got.Size(), got.Mode().Perm(), want.Size())
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
