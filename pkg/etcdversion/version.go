// Package etcdversion is the one place that reads an etcd version and knows
// what each etcd release can do. Code that depends on the version of etcd a
// member runs asks a Version (Learners, Probes, RestoreTool, ...) instead of
// comparing major and minor numbers itself, so that supporting a new etcd
// release is a row in the releases table, not a branch in every package.
//
// It imports nothing of the project: the API types validate spec.version
// with it.
package etcdversion

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Pattern is what a version looks like: "3.5.21", "v3.5.21" and pre-releases
// like "3.6.0-rc.1". The CRD schemas use it too, so admission and the
// operators agree on what a version is.
const Pattern = `^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`

var patternRE = regexp.MustCompile(Pattern)

// Version is an etcd release. A pre-release ("3.6.0-rc.1") counts as the
// release it precedes: what the operator relies on does not change between
// release candidates.
type Version struct {
	Major, Minor, Patch int
}

// New is the version major.minor.patch.
func New(major, minor, patch int) Version { return Version{major, minor, patch} }

// Normalize strips the leading "v" characters the original operator
// tolerated ("v3.5.21").
func Normalize(s string) string { return strings.TrimLeft(s, "v") }

// Parse reads "3.5.21", "v3.5.21" or "3.6.0-rc.1" (as 3.6.0).
func Parse(s string) (Version, error) {
	n := Normalize(s)
	if !patternRE.MatchString(n) {
		return Version{}, fmt.Errorf("%q is not an etcd version like 3.5.21", n)
	}
	core, _, _ := strings.Cut(n, "-")
	parts := strings.SplitN(core, ".", 3)
	var v Version
	var err error
	for i, p := range []*int{&v.Major, &v.Minor, &v.Patch} {
		if *p, err = strconv.Atoi(parts[i]); err != nil {
			return Version{}, fmt.Errorf("%q is not an etcd version like 3.5.21: %w", n, err)
		}
	}
	return v, nil
}

// String is "3.5.21".
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// MinorString is "3.5", as etcd's downgrade API and cluster version name a
// minor release.
func (v Version) MinorString() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Compare is -1, 0 or +1 as v is older than, the same as or newer than w.
func (v Version) Compare(w Version) int {
	for _, d := range [3]int{v.Major - w.Major, v.Minor - w.Minor, v.Patch - w.Patch} {
		switch {
		case d < 0:
			return -1
		case d > 0:
			return 1
		}
	}
	return 0
}

// AtLeast tells whether v is w or newer.
func (v Version) AtLeast(w Version) bool { return v.Compare(w) >= 0 }

// SameMinor tells whether v and w are releases of one minor version.
func (v Version) SameMinor(w Version) bool { return v.Major == w.Major && v.Minor == w.Minor }
