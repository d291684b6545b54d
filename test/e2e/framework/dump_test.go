package framework

import (
	"strings"
	"testing"
	"time"
)

func TestAStuckKubeProxyIsNamedInTheFailureDump(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	cases := []struct {
		name    string
		metrics string
		want    string
		warns   bool
	}{
		{
			name: "synced after the last change",
			metrics: "kubeproxy_sync_proxy_rules_last_timestamp_seconds 1.79999999e+09\n" +
				"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds 1.799999985e+09\n",
			want: "kube-proxy last applied Service changes 10s ago\n",
		},
		{
			name: "a change waits a little",
			metrics: "# HELP x\nkubeproxy_sync_proxy_rules_last_timestamp_seconds 1.79999990e+09\n" +
				"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds 1.799999995e+09\n",
			want: "kube-proxy last applied Service changes 1m40s ago; a change has waited 5s\n",
		},
		{
			name: "a change waits for minutes",
			metrics: "kubeproxy_sync_proxy_rules_last_timestamp_seconds 1.7999998e+09\n" +
				"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds 1.799999801e+09\n",
			warns: true,
		},
		{
			name:    "the queued gauge is missing",
			metrics: "kubeproxy_sync_proxy_rules_last_timestamp_seconds 1.79999999e+09\n",
			want:    "kube-proxy last applied Service changes 10s ago\n",
		},
		{
			name:    "never synced",
			metrics: "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds 1.79999999e+09\n",
			want:    "kube-proxy has not synced its rules since it started\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := describeKubeProxySync(tc.metrics, now)
			if tc.warns {
				if !strings.HasPrefix(got, "WARNING: ") || !strings.Contains(got, "a change has waited 3m19s") {
					t.Fatalf("got %q, want a warning that a change waited 3m19s", got)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
