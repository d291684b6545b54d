package etcdversion

import (
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Version
		ok   bool
	}{
		{"a release", "3.5.21", New(3, 5, 21), true},
		{"a leading v as in image tags", "v3.5.21", New(3, 5, 21), true},
		{"several leading v as the original tolerated", "vv3.4.0", New(3, 4, 0), true},
		{"a pre-release counts as its release", "3.6.0-rc.1", New(3, 6, 0), true},
		{"numbers of several digits", "3.10.123", New(3, 10, 123), true},
		{"a minor version alone is not a release", "3.5", Version{}, false},
		{"a tag that is no version", "latest", Version{}, false},
		{"empty", "", Version{}, false},
		{"a build suffix without a dash", "3.5.0+git", Version{}, false},
		{"a sign is not a number", "3.+5.0", Version{}, false},
		{"etcd's undecided cluster version", "not_decided", Version{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("Parse(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name string
		a, b Version
		want int
	}{
		{"equal", New(3, 5, 21), New(3, 5, 21), 0},
		{"a later patch is newer", New(3, 5, 21), New(3, 5, 9), 1},
		{"a later minor is newer whatever the patch", New(3, 6, 0), New(3, 5, 32), 1},
		{"a later major is newer whatever the minor", New(4, 0, 0), New(3, 10, 0), 1},
		{"an older minor is older", New(3, 4, 23), New(3, 5, 0), -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Compare(tt.b); got != tt.want {
				t.Fatalf("%v.Compare(%v) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
			if got := tt.b.Compare(tt.a); got != -tt.want {
				t.Fatalf("%v.Compare(%v) = %d, want %d", tt.b, tt.a, got, -tt.want)
			}
			if got := tt.a.AtLeast(tt.b); got != (tt.want >= 0) {
				t.Fatalf("%v.AtLeast(%v) = %v", tt.a, tt.b, got)
			}
		})
	}
}

func TestStrings(t *testing.T) {
	v := New(3, 6, 6)
	if v.String() != "3.6.6" || v.MinorString() != "3.6" {
		t.Fatalf("String %q, MinorString %q", v.String(), v.MinorString())
	}
	if !v.SameMinor(New(3, 6, 0)) || v.SameMinor(New(3, 5, 6)) || v.SameMinor(New(4, 6, 6)) {
		t.Fatal("SameMinor compares major and minor only")
	}
}
