package backup

import (
	"context"
	"errors"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPeriodicKeyHasTheOriginalsShape(t *testing.T) {
	at := time.Date(2024, 3, 9, 7, 5, 1, 0, time.FixedZone("CET", 3600))
	got := PeriodicKey("etcd/backup", 42, at)
	if want := "etcd/backup_v42_2024-03-09-06:05:01"; got != want {
		t.Fatalf("PeriodicKey = %q, want %q (UTC)", got, want)
	}
	b, ok := parsePeriodicKey("etcd/backup", got)
	if !ok || b.revision != 42 || !b.at.Equal(at) {
		t.Fatalf("parse back %q = %+v, %v", got, b, ok)
	}
}

func TestExpired(t *testing.T) {
	const base = "cluster/snap"
	tests := []struct {
		name string
		keys []string
		keep int
		want []string
	}{
		{
			name: "revision 10 is newer than revision 9, although it sorts first as a string",
			keys: []string{base + "_v9_2024-01-01-00:00:00", base + "_v10_2024-01-01-00:01:00"},
			keep: 1,
			want: []string{base + "_v9_2024-01-01-00:00:00"},
		},
		{
			name: "revision decides before time",
			keys: []string{base + "_v100_2024-01-01-00:00:00", base + "_v99_2024-06-01-00:00:00"},
			keep: 1,
			want: []string{base + "_v99_2024-06-01-00:00:00"},
		},
		{
			name: "same revision: the later time is newer",
			keys: []string{
				base + "_v7_2024-01-01-10:00:00",
				base + "_v7_2024-01-01-09:59:59",
				base + "_v7_2024-01-02-00:00:00",
			},
			keep: 2,
			want: []string{base + "_v7_2024-01-01-09:59:59"},
		},
		{
			name: "a one-shot backup at exactly the base path is never pruned",
			keys: []string{base, base + "_v1_2024-01-01-00:00:00", base + "_v2_2024-01-01-00:00:00"},
			keep: 1,
			want: []string{base + "_v1_2024-01-01-00:00:00"},
		},
		{
			name: "keys of other shapes or other bases are left alone",
			keys: []string{
				base + "_v1_notatime",
				base + "_vx_2024-01-01-00:00:00",
				base + "_v-1_2024-01-01-00:00:00",
				base + "_v_2024-01-01-00:00:00",
				base + "2_v1_2024-01-01-00:00:00",
				"other/snap_v1_2024-01-01-00:00:00",
				base + "_v5_2024-01-01-00:00:00",
				base + "_v6_2024-01-01-00:00:00",
			},
			keep: 1,
			want: []string{base + "_v5_2024-01-01-00:00:00"},
		},
		{
			name: "no more than keep: nothing expires",
			keys: []string{base + "_v1_2024-01-01-00:00:00", base + "_v2_2024-01-01-00:00:00"},
			keep: 2,
		},
		{
			name: "keep 0 keeps everything",
			keys: []string{base + "_v1_2024-01-01-00:00:00", base + "_v2_2024-01-01-00:00:00"},
			keep: 0,
		},
		{
			name: "several expire, newest first",
			keys: []string{
				base + "_v3_2024-01-01-00:00:00", base + "_v1_2024-01-01-00:00:00",
				base + "_v4_2024-01-01-00:00:00", base + "_v2_2024-01-01-00:00:00",
				base + "_v11_2024-01-01-00:00:00",
			},
			keep: 2,
			want: []string{base + "_v3_2024-01-01-00:00:00", base + "_v2_2024-01-01-00:00:00", base + "_v1_2024-01-01-00:00:00"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Retention{MaxBackups: tc.keep}.Expired(base, tc.keys)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("Expired (-want +got):\n%s", diff)
			}
		})
	}
}

// memStore is a Store in a map, with injectable delete failures.
type memStore struct {
	mu        sync.Mutex
	objects   map[string][]byte
	failOn    string
	listCalls int
}

func newMemStore(keys ...string) *memStore {
	s := &memStore{objects: map[string][]byte{}}
	for _, k := range keys {
		s.objects[k] = []byte(k)
	}
	return s
}

func (s *memStore) Put(_ context.Context, key string, r io.Reader) (int64, string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = b
	return int64(len(b)), "", nil
}

func (s *memStore) Get(_ context.Context, key string) (io.ReadCloser, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[key]
	if !ok {
		return nil, 0, ErrNotFound
	}
	return io.NopCloser(strings.NewReader(string(b))), int64(len(b)), nil
}

func (s *memStore) Head(_ context.Context, key string) (ObjectInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[key]
	if !ok {
		return ObjectInfo{}, ErrNotFound
	}
	return ObjectInfo{Key: key, Size: int64(len(b))}, nil
}

func (s *memStore) List(_ context.Context, prefix string) ([]ObjectInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listCalls++
	var out []ObjectInfo
	for k, b := range s.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(b))})
		}
	}
	return out, nil
}

func (s *memStore) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if key == s.failOn {
		return errors.New("injected delete failure")
	}
	delete(s.objects, key)
	return nil
}

func (s *memStore) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.objects {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestPruneDeletesOnlyExpiredPeriodicBackups(t *testing.T) {
	const base = "b"
	store := newMemStore(base, "b_v1_2024-01-01-00:00:00", "b_v2_2024-01-01-00:00:00", "b_v10_2024-01-01-00:00:00", "c_v1_2024-01-01-00:00:00")
	deleted, err := Prune(context.Background(), store, base, Retention{MaxBackups: 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b_v1_2024-01-01-00:00:00"}, deleted); diff != "" {
		t.Fatalf("deleted (-want +got):\n%s", diff)
	}
	want := []string{"b", "b_v10_2024-01-01-00:00:00", "b_v2_2024-01-01-00:00:00", "c_v1_2024-01-01-00:00:00"}
	if diff := cmp.Diff(want, store.keys()); diff != "" {
		t.Fatalf("left (-want +got):\n%s", diff)
	}
}

func TestPruneKeepsGoingPastAFailedDelete(t *testing.T) {
	store := newMemStore("b_v1_2024-01-01-00:00:00", "b_v2_2024-01-01-00:00:00", "b_v3_2024-01-01-00:00:00")
	store.failOn = "b_v2_2024-01-01-00:00:00"
	deleted, err := Prune(context.Background(), store, "b", Retention{MaxBackups: 1})
	if err == nil || !strings.Contains(err.Error(), "b_v2_2024-01-01-00:00:00") {
		t.Fatalf("error %v does not name the key that could not be deleted", err)
	}
	if !slices.Equal(deleted, []string{"b_v1_2024-01-01-00:00:00"}) {
		t.Fatalf("deleted %v, want the other expired backup deleted anyway", deleted)
	}
}

func TestPruneWithKeepZeroDoesNotEvenList(t *testing.T) {
	store := newMemStore("b_v1_2024-01-01-00:00:00")
	if _, err := Prune(context.Background(), store, "b", Retention{}); err != nil {
		t.Fatal(err)
	}
	if store.listCalls != 0 {
		t.Fatalf("listed %d times", store.listCalls)
	}
}

// TestTieredRetention is the table of which backups tiered retention keeps:
// backup times in, kept and deleted names out.
func TestTieredRetention(t *testing.T) {
	const base = "cluster/snap"
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// at names the backup taken at an RFC 3339 time; revisions grow with time.
	at := func(s string) string {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return PeriodicKey(base, tm.Unix()/60, tm)
	}
	tests := []struct {
		name       string
		times      []string
		maxBackups int
		tiers      Tiers
		loc        *time.Location
		// deleted are the times whose backups go, newest first.
		deleted []string
	}{
		{
			name:    "no tiers keep only the newest backup",
			times:   []string{"2024-01-01T10:00:00Z", "2024-01-01T11:00:00Z", "2024-01-01T12:00:00Z"},
			deleted: []string{"2024-01-01T11:00:00Z", "2024-01-01T10:00:00Z"},
		},
		{
			name: "hourly keeps the newest of each of the latest hours",
			times: []string{
				"2024-01-01T09:40:00Z",
				"2024-01-01T10:00:00Z", "2024-01-01T10:20:00Z", "2024-01-01T10:40:00Z",
				"2024-01-01T11:00:00Z", "2024-01-01T11:20:00Z", "2024-01-01T11:40:00Z",
			},
			tiers: Tiers{Hourly: 2},
			deleted: []string{"2024-01-01T11:20:00Z", "2024-01-01T11:00:00Z",
				"2024-01-01T10:20:00Z", "2024-01-01T10:00:00Z", "2024-01-01T09:40:00Z"},
		},
		{
			name:    "days are read in the time zone: 23:30 and 00:30 in Berlin are two days",
			times:   []string{"2024-01-01T21:30:00Z", "2024-01-01T22:30:00Z", "2024-01-01T23:30:00Z"},
			tiers:   Tiers{Daily: 2},
			loc:     berlin,
			deleted: []string{"2024-01-01T21:30:00Z"},
		},
		{
			name:    "the same times in UTC are one day",
			times:   []string{"2024-01-01T21:30:00Z", "2024-01-01T22:30:00Z", "2024-01-01T23:30:00Z"},
			tiers:   Tiers{Daily: 2},
			deleted: []string{"2024-01-01T22:30:00Z", "2024-01-01T21:30:00Z"},
		},
		{
			name:    "a pause in the backups does not delete the days before it",
			times:   []string{"2024-01-01T03:00:00Z", "2024-01-02T03:00:00Z", "2024-01-03T03:00:00Z", "2024-01-20T03:00:00Z"},
			tiers:   Tiers{Daily: 3},
			deleted: []string{"2024-01-01T03:00:00Z"},
		},
		{
			name: "weeks run Monday to Sunday",
			// 2024-01-07 is a Sunday, 2024-01-08 a Monday.
			times:   []string{"2024-01-06T03:00:00Z", "2024-01-07T03:00:00Z", "2024-01-08T03:00:00Z", "2024-01-09T03:00:00Z"},
			tiers:   Tiers{Weekly: 2},
			deleted: []string{"2024-01-08T03:00:00Z", "2024-01-06T03:00:00Z"},
		},
		{
			name:    "months keep their last backup",
			times:   []string{"2024-01-15T03:00:00Z", "2024-01-31T03:00:00Z", "2024-02-01T03:00:00Z", "2024-02-29T03:00:00Z", "2024-03-01T03:00:00Z"},
			tiers:   Tiers{Monthly: 2},
			deleted: []string{"2024-02-01T03:00:00Z", "2024-01-31T03:00:00Z", "2024-01-15T03:00:00Z"},
		},
		{
			name: "tiers overlap: a backup kept by one tier counts in the others",
			times: []string{"2023-12-31T03:00:00Z", "2024-01-30T03:00:00Z", "2024-01-31T03:00:00Z",
				"2024-02-01T01:00:00Z", "2024-02-01T02:00:00Z", "2024-02-01T03:00:00Z"},
			tiers:   Tiers{Hourly: 2, Daily: 2, Monthly: 3},
			deleted: []string{"2024-02-01T01:00:00Z", "2024-01-30T03:00:00Z"},
		},
		{
			name: "the hour the autumn change repeats is two hours",
			// 00:10Z is 02:10 CEST, 01:10Z and 01:50Z are 02:10 and 02:50 CET.
			times:   []string{"2024-10-27T00:10:00Z", "2024-10-27T01:10:00Z", "2024-10-27T01:50:00Z"},
			tiers:   Tiers{Hourly: 2},
			loc:     berlin,
			deleted: []string{"2024-10-27T01:10:00Z"},
		},
		{
			name:       "with maxBackups a backup either rule keeps stays",
			times:      []string{"2024-01-01T03:00:00Z", "2024-01-02T03:00:00Z", "2024-01-02T09:00:00Z", "2024-01-02T15:00:00Z"},
			maxBackups: 2,
			tiers:      Tiers{Daily: 2},
			deleted:    []string{"2024-01-02T03:00:00Z"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys := []string{base, "other/snap_v1_2024-01-01-00:00:00", base + "_v1_notatime"}
			for _, s := range tc.times {
				keys = append(keys, at(s))
			}
			tiers := tc.tiers
			got := Retention{MaxBackups: tc.maxBackups, Tiers: &tiers, Location: tc.loc}.Expired(base, keys)
			var want []string
			for _, s := range tc.deleted {
				want = append(want, at(s))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("deleted (-want +got):\n%s", diff)
			}
		})
	}
}
