package benchreport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestToolVersion(t *testing.T) {
	for _, tc := range []struct {
		name, script, want, err string
	}{
		{name: "the version follows the prefix on its line",
			script: "echo 'etcd Version: 3.5.21'; echo 'Git SHA: abc'", want: "3.5.21"},
		{name: "output without the prefix is an error that quotes it",
			script: "echo 'something else'", err: `sh -c echo 'something else' said "something else\n"`},
		{name: "a tool that fails is an error",
			script: "exit 3", err: "sh -c exit 3: exit status 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ToolVersion("/bin/sh", []string{"-c", tc.script}, "etcd Version: ")
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("got %q, %v; want the error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestWriteMakesTheDirectoryAndIndentsTheReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench", "restore-data-path-1.json")
	if err := Write(path, RestoreDataPath{SizeMiB: 8, Steps: []RestoreStep{{Step: "restore", Seconds: 1.5}}}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(raw); !strings.HasPrefix(got, "{\n  \"sizeMiB\": 8,") || !strings.HasSuffix(got, "}\n") {
		t.Errorf("wrote\n%s", got)
	}
}
