package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// git runs git in dir with a fixed identity and fails the test on error,
// returning its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.invalid",
		"-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commitChangelog commits a CHANGELOG.md whose newest release is version
// ("" for none) in the repository at dir and returns the commit's sha.
func commitChangelog(t *testing.T, dir, version string) string {
	t.Helper()
	text := "# Changelog\n\n## [Unreleased]\n"
	if version != "" {
		text += "\n## [" + version + "] - 2026-11-28\n\n- a feature\n\n## [0.0.1] - 2026-11-01\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "CHANGELOG.md")
	git(t, dir, "commit", "-q", "-m", "changelog "+version)
	return git(t, dir, "rev-parse", "HEAD")
}

// hack/previous-release.sh builds the previous release from the commit
// hack/previous-release records, never from a tag, so that a clone without
// tags works; it refuses, saying what to do, a commit the clone does not
// hold, one that is not that release, and a tag that names another commit.
func TestPreviousReleaseIsFoundByItsCommit(t *testing.T) {
	repo := t.TempDir()
	git(t, repo, "init", "-q")
	release := commitChangelog(t, repo, "0.1.0")
	after := commitChangelog(t, repo, "0.2.0")
	shallow := filepath.Join(t.TempDir(), "shallow")
	git(t, repo, "clone", "-q", "--depth=1", "file://"+repo, shallow)
	tagged := filepath.Join(t.TempDir(), "tagged")
	git(t, repo, "clone", "-q", repo, tagged)
	git(t, tagged, "tag", "-a", "v0.1.0", "-m", "v0.1.0", release)
	mistagged := filepath.Join(t.TempDir(), "mistagged")
	git(t, repo, "clone", "-q", repo, mistagged)
	git(t, mistagged, "tag", "-a", "v0.1.0", "-m", "v0.1.0", after)

	for _, tc := range []struct {
		name, dir, version, commit string
		refusal                    string // "" when accepted
	}{
		{"a release's commit in a clone without tags is accepted", repo, "v0.1.0", release, ""},
		{"a release's commit its tag names is accepted", tagged, "v0.1.0", release, ""},
		{"a shallow clone without the commit says to fetch the whole history", shallow, "v0.1.0", release, "git fetch --unshallow"},
		{"a commit the clone never had says to fetch it", repo, "v0.1.0", strings.Repeat("1", 40), "git fetch origin"},
		{"a commit whose changelog names a newer release is not that release", repo, "v0.1.0", after, "newest release its CHANGELOG.md names is '0.2.0'"},
		{"a tag on another commit than the recorded one is refused", mistagged, "v0.1.0", release, "tag v0.1.0 names commit " + after},
		{"a short sha is refused", repo, "v0.1.0", release[:12], "must be a full sha"},
		{"a directory that is no clone says to clone", t.TempDir(), "v0.1.0", release, "is not a git clone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("bash", "-c", `source previous-release.sh && release_commit_check "$1" "$2" "$3"`,
				"bash", tc.dir, tc.version, tc.commit)
			cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(tc.dir))
			out, err := cmd.CombinedOutput()
			if _, exited := err.(*exec.ExitError); err != nil && !exited {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			switch {
			case tc.refusal == "" && err != nil:
				t.Errorf("refused, want accepted: %s", out)
			case tc.refusal != "" && err == nil:
				t.Errorf("accepted, want refused saying %q", tc.refusal)
			case tc.refusal != "" && !strings.Contains(string(out), tc.refusal):
				t.Errorf("refused saying %q, want it to say %q", out, tc.refusal)
			}
		})
	}
}

// The recorded previous release is a version and a full sha, so that `make
// unit` finds a bad edit of the record before `make e2e-upgrade` does.
func TestPreviousReleaseRecordNamesAVersionAndAFullCommit(t *testing.T) {
	out, err := exec.Command("bash", "-c", `source previous-release && echo "$PREVIOUS_RELEASE_VERSION $PREVIOUS_RELEASE_COMMIT"`).CombinedOutput()
	if err != nil {
		t.Fatalf("source hack/previous-release: %v\n%s", err, out)
	}
	fields := strings.Fields(string(out))
	if len(fields) != 2 {
		t.Fatalf("hack/previous-release gives %q, want a version and a commit", out)
	}
	version, commit := fields[0], fields[1]
	if !strings.HasPrefix(version, "v") || strings.Count(version, ".") != 2 {
		t.Errorf("PREVIOUS_RELEASE_VERSION=%s, want vX.Y.Z", version)
	}
	if len(commit) != 40 || strings.Trim(commit, "0123456789abcdef") != "" {
		t.Errorf("PREVIOUS_RELEASE_COMMIT=%s, want a full sha", commit)
	}
}
