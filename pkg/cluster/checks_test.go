package cluster

import (
	"slices"
	"strings"
	"testing"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
)

// The checks the package's tests share: what a status, a list of calls or
// the events should hold.

func condition(s *api.ClusterStatus, t api.ClusterConditionType) *api.ClusterCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// expect compares a list with the wanted one.
func expect(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// expectEvents checks that the events, in order, start with the wanted
// prefixes (type and reason, and as much of the message as the test cares).
func expectEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("events:\n got  %q\n want %q", got, want)
		return
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event %d:\n got  %q\n want %q...", i, got[i], want[i])
		}
	}
}
