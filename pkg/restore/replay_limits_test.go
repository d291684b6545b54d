package restore

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
	"github.com/openetcd/etcd-operator/pkg/util/etcdutil/etcdtest"
)

// The replay's etcd takes the limits the cluster's members run with, never
// less than etcd's defaults and the replay's own room for a database.
func TestReplayLimitsAreTheClusters(t *testing.T) {
	env := func(kv ...string) func(*api.ClusterSpec) {
		return func(s *api.ClusterSpec) {
			s.Pod = &api.PodPolicy{}
			for i := 0; i < len(kv); i += 2 {
				s.Pod.EtcdEnv = append(s.Pod.EtcdEnv, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
			}
		}
	}
	quota := func(q string) func(*api.ClusterSpec) {
		return func(s *api.ClusterSpec) {
			v := resource.MustParse(q)
			s.Maintenance = &api.MaintenancePolicy{Quota: &v}
		}
	}
	tests := []struct {
		name string
		spec func(*api.ClusterSpec)
		want ReplayLimits
	}{
		{"a cluster on etcd's defaults replays with them and the replay's room for a database",
			func(*api.ClusterSpec) {}, ReplayLimits{QuotaBackendBytes: 8 << 30}},
		{"a quota larger than the replay's room is the cluster's",
			quota("16Gi"), ReplayLimits{QuotaBackendBytes: 16 << 30}},
		{"a quota smaller than the replay's room leaves the room",
			quota("1Gi"), ReplayLimits{QuotaBackendBytes: 8 << 30}},
		{"a quota set through etcdEnv is the cluster's",
			env("ETCD_QUOTA_BACKEND_BYTES", "12884901888"), ReplayLimits{QuotaBackendBytes: 12 << 30}},
		{"larger requests and transactions the cluster takes, the replay takes",
			env("ETCD_MAX_REQUEST_BYTES", "10485760", "ETCD_MAX_TXN_OPS", "1024"),
			ReplayLimits{QuotaBackendBytes: 8 << 30, MaxRequestBytes: 10<<20 + replayFramingBytes, MaxTxnOps: 1024}},
		{"bounds below etcd's defaults are not taken: the replay's transactions fit the defaults",
			env("ETCD_MAX_REQUEST_BYTES", "1024", "ETCD_MAX_TXN_OPS", "16"), ReplayLimits{QuotaBackendBytes: 8 << 30}},
		{"a value that is not a number is etcd's business, not the replay's",
			env("ETCD_MAX_TXN_OPS", "many"), ReplayLimits{QuotaBackendBytes: 8 << 30}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := &api.ClusterSpec{Size: 3}
			tc.spec(spec)
			if got := replayLimitsOf(spec); got != tc.want {
				t.Errorf("limits %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The replay's etcd, a real one, takes what the cluster took: a value past
// etcd's default request size and a transaction of more changes than its
// default allows are replayed as one revision each, where the defaults refuse
// the value.
func TestTheReplaysEtcdTakesWhatTheClusterTook(t *testing.T) {
	dir := etcdtest.BinDir36(t, "the replay step runs the real etcd "+etcdtest.Version36, "etcd")
	big := strings.Repeat("v", 3<<20)
	// Revision 2 puts a value of 3 MiB; revision 3 is one transaction of 300
	// puts.
	evs := []archive.Event{{Event: mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("/big"), Value: []byte(big), ModRevision: 2}}}}
	for i := range 300 {
		evs = append(evs, archive.Event{Event: mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(fmt.Sprintf("/txn/%03d", i)), Value: []byte("t"), ModRevision: 3}}})
	}
	chunks := []archive.Chunk{{First: 2, Last: 3}}
	read := func(context.Context, archive.Chunk) ([]archive.Event, error) { return evs, nil }
	replay := func(t *testing.T, limits ReplayLimits) (*clientv3.Client, *localEtcd, error) {
		t.Helper()
		a := ReplayArgs{Etcd: filepath.Join(dir, "etcd"), Name: "replay", ReplayDir: filepath.Join(t.TempDir(), "replay"), Limits: limits}
		var out strings.Builder
		m, err := startLocalEtcd(t.Context(), a, &out)
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		t.Cleanup(m.kill)
		opts := limits.replayOptions(archive.ReplayOptions{After: 1, Revision: 3, Log: testLog(t)})
		_, err = archive.ApplyChunks(t.Context(), m.client, opts, chunks, read)
		return m.client, m, err
	}

	t.Run("with etcd's defaults the value is refused", func(t *testing.T) {
		_, m, err := replay(t, ReplayLimits{})
		if err == nil || !strings.Contains(err.Error(), "too large") && !strings.Contains(err.Error(), "larger than max") {
			t.Errorf("replay with the defaults: %v, want the 3 MiB value refused", err)
		}
		if !slices.Contains(m.cmd.Args, "--quota-backend-bytes=8589934592") {
			t.Errorf("the replay's etcd runs %q, without its room for a database", m.cmd.Args)
		}
	})
	t.Run("with the cluster's limits each revision is one transaction", func(t *testing.T) {
		limits := replayLimitsOf(&api.ClusterSpec{Size: 3, Pod: &api.PodPolicy{EtcdEnv: []corev1.EnvVar{
			{Name: "ETCD_MAX_REQUEST_BYTES", Value: fmt.Sprint(4 << 20)}, {Name: "ETCD_MAX_TXN_OPS", Value: "512"},
			{Name: "ETCD_QUOTA_BACKEND_BYTES", Value: fmt.Sprint(int64(10 << 30))},
		}}})
		cli, m, err := replay(t, limits)
		if err != nil {
			t.Fatalf("replay with the cluster's limits: %v", err)
		}
		if !slices.Contains(m.cmd.Args, "--quota-backend-bytes=10737418240") {
			t.Errorf("the replay's etcd runs %q, not with the cluster's quota", m.cmd.Args)
		}
		got, err := cli.Get(t.Context(), "/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		// A fresh etcd is at revision 1; two source revisions make two.
		if got.Count != 301 || got.Header.Revision != 3 {
			t.Errorf("%d keys at revision %d, want 301 keys at revision 3", got.Count, got.Header.Revision)
		}
	})
}
