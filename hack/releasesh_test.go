package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// make release refuses a version the changelog says nothing about; a
// development build, which git describe names after the last tag, may ship
// under "Unreleased", a release may not.
func TestReleaseNeedsAChangelogEntryForItsVersion(t *testing.T) {
	const withRelease = "# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2026-11-28\n\n### Added\n\n- a feature\n"
	const onlyUnreleased = "# Changelog\n\n## [Unreleased]\n\n- a feature\n"
	const vPrefixed = "# Changelog\n\n## [v0.3.0]\n"
	const subheading = "# Changelog\n\n### [0.2.0]\n"
	for _, tc := range []struct {
		name, version, changelog string
		accepted                 bool
	}{
		{"a release with its entry is accepted", "v0.2.0", withRelease, true},
		{"a version without its v finds the same entry", "0.2.0", withRelease, true},
		{"an entry written with the v is found too", "v0.3.0", vPrefixed, true},
		{"a release without an entry is refused", "v0.3.0", withRelease, false},
		{"a release is refused even with an Unreleased entry", "v0.2.0", onlyUnreleased, false},
		{"a prerelease needs its own entry", "v0.2.0-rc.1", withRelease, false},
		{"a build after a tag may use Unreleased", "v0.2.0-3-g1a2b3c4", onlyUnreleased, true},
		{"a build with uncommitted changes may use Unreleased", "v0.2.0-dirty", onlyUnreleased, true},
		{"a build before the first tag may use Unreleased", "v0.0.0-g1a2b3c4", onlyUnreleased, true},
		{"a build after a tag is refused without Unreleased", "v0.2.0-3-g1a2b3c4", vPrefixed, false},
		{"a version that only begins an entry's version is refused", "v0.2", withRelease, false},
		{"a heading of a lower level is not an entry", "v0.2.0", subheading, false},
		{"no changelog at all is refused", "v0.2.0", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changelog := filepath.Join(t.TempDir(), "CHANGELOG.md")
			if tc.changelog != "" {
				if err := os.WriteFile(changelog, []byte(tc.changelog), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", "-c", `source release.sh && changelog_has_entry "$1" "$2"`, "bash", tc.version, changelog)
			out, err := cmd.CombinedOutput()
			if _, exited := err.(*exec.ExitError); err != nil && !exited {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			if accepted := err == nil; accepted != tc.accepted {
				t.Errorf("changelog_has_entry %s accepted=%v, want %v\n%s", tc.version, accepted, tc.accepted, out)
			}
		})
	}
}
