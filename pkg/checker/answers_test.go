package checker

import (
	"errors"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestAnswersLogWhereEachConnectionsRequestsWent(t *testing.T) {
	const ours, theirs = 0xa, 0xb
	from := func(cluster, member uint64) *etcdserverpb.ResponseHeader {
		return &etcdserverpb.ResponseHeader{ClusterId: cluster, MemberId: member}
	}
	type step struct {
		conn   string
		header *etcdserverpb.ResponseHeader
		err    error
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  []string
		warns int
	}{
		{
			name:  "a member of the run's cluster is named, and only its first answer logged",
			steps: []step{{"client 0", from(ours, 1), nil}, {"client 0", from(ours, 1), nil}, {"client 0", from(ours, 1), nil}},
			want:  []string{"connection client 0: answered by member m1 (1)"},
		},
		{
			name: "a client taking turns between members logs each member once",
			steps: []step{{"client 0", from(ours, 1), nil}, {"client 0", from(ours, 2), nil}, {"client 0", from(ours, 1), nil},
				{"client 0", from(ours, 2), nil}},
			want: []string{"answered by member m1 (1)", "answered by member m2 (2)"},
		},
		{
			name:  "an answer from another cluster is a warning naming both clusters",
			steps: []step{{"watch", from(ours, 1), nil}, {"watch", from(theirs, 9), nil}},
			want:  []string{"connection watch: answered by member m1 (1)", "connection watch: answered by member 9 of cluster b, not the cluster the run began on (a)"},
			warns: 1,
		},
		{
			name: "the same error again and again is one line and a count, and the answer after it is logged",
			steps: []step{{"watch", from(ours, 2), nil}, {"watch", nil, errors.New("404")}, {"watch", nil, errors.New("404")},
				{"watch", nil, errors.New("404")}, {"watch", from(ours, 2), nil}},
			want: []string{"connection watch: answered by member m2 (2)", "connection watch: failed: 404",
				"connection watch: failed the same way 2 more time(s) since", "connection watch: answered by member m2 (2)"},
		},
		{
			name:  "a run of errors still going at the end is counted then",
			steps: []step{{"read-back", nil, errors.New("no leader")}, {"read-back", nil, errors.New("no leader")}},
			want:  []string{"connection read-back: failed: no leader", "connection read-back: failed the same way 1 more time(s) since"},
		},
		{
			name:  "connections are followed apart",
			steps: []step{{"client 0", from(ours, 1), nil}, {"client 1", from(ours, 1), nil}},
			want:  []string{"connection client 0: answered by member m1 (1)", "connection client 1: answered by member m1 (1)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, hook := test.NewNullLogger()
			a := newAnswers(logrus.NewEntry(log), nil)
			a.cluster, a.members = ours, map[uint64]string{1: "m1", 2: "m2"}
			for _, s := range tc.steps {
				if s.err != nil {
					a.failed(s.conn, nil, s.err)
				} else {
					a.answered(t.Context(), s.conn, nil, s.header)
				}
			}
			a.flush()
			var lines []string
			warns := 0
			for _, e := range hook.AllEntries() {
				lines = append(lines, e.Message)
				if e.Level == logrus.WarnLevel {
					warns++
				}
			}
			got := strings.Join(lines, "\n")
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("the log has no %q:\n%s", w, got)
				}
			}
			if len(lines) != len(tc.want) {
				t.Errorf("%d lines logged, want %d:\n%s", len(lines), len(tc.want), got)
			}
			if warns != tc.warns {
				t.Errorf("%d warnings, want %d:\n%s", warns, tc.warns, got)
			}
		})
	}
}

func TestAnswersTakeTheFirstAnswersClusterWhenTheMemberListWasNotRead(t *testing.T) {
	log, hook := test.NewNullLogger()
	a := newAnswers(logrus.NewEntry(log), nil)
	a.answered(t.Context(), "client 0", nil, &etcdserverpb.ResponseHeader{ClusterId: 0xa, MemberId: 1})
	a.answered(t.Context(), "client 1", nil, &etcdserverpb.ResponseHeader{ClusterId: 0xa, MemberId: 2})
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			t.Errorf("warned of the run's own cluster: %s", e.Message)
		}
	}
	if len(hook.AllEntries()) != 2 {
		t.Errorf("%d lines logged, want one per connection", len(hook.AllEntries()))
	}
}
