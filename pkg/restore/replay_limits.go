package restore

import (
	"strconv"

	api "github.com/openetcd/etcd-operator/pkg/apis/etcd/v1beta2"
	"github.com/openetcd/etcd-operator/pkg/backup/archive"
)

// The replay's etcd takes the limits of the cluster it restores: what the
// cluster accepted, the replay must accept too. etcd's defaults would refuse
// a value larger than 1.5 MiB, or a transaction of more than 128 changes,
// that the cluster was allowed to take (pod.etcdEnv), and a database past
// the default quota.

// Variables of etcd's flags that bound what the replay writes; the quota's is
// api.EnvQuota.
const (
	envMaxRequestBytes = "ETCD_MAX_REQUEST_BYTES"
	envMaxTxnOps       = "ETCD_MAX_TXN_OPS"
)

const (
	// replayMinQuotaBytes is the least quota the replay gets: the replay
	// compacts nothing, so its database holds the history a running member
	// would have compacted; the member's own quota applies once it runs.
	replayMinQuotaBytes = 8 << 30
	// etcdMaxRequestBytes is etcd's default --max-request-bytes.
	etcdMaxRequestBytes = 3 << 19
	// replayFramingBytes is what a transaction adds around the changes it
	// carries: a change the cluster took as one request may need that much
	// more in the replay's transaction.
	replayFramingBytes = 64 << 10
)

// ReplayLimits are the bounds the replay's etcd runs with, and the replay
// keeps its transactions within; 0 means etcd's default.
type ReplayLimits struct {
	QuotaBackendBytes int64
	MaxRequestBytes   int64
	MaxTxnOps         int64
}

// replayLimitsOf are the limits of the cluster spec describes, as its
// members run: the quota from spec.maintenance (or derived from the claim)
// or ETCD_QUOTA_BACKEND_BYTES, and the request and transaction bounds from
// pod.etcdEnv; at least etcd's defaults, and at least replayMinQuotaBytes.
func replayLimitsOf(spec *api.ClusterSpec) ReplayLimits {
	env := map[string]int64{}
	if spec.Pod != nil {
		for _, e := range spec.Pod.EtcdEnv {
			if n, err := strconv.ParseInt(e.Value, 10, 64); err == nil && n > 0 {
				env[e.Name] = n
			}
		}
	}
	quota := spec.ResolvedMaintenance().QuotaBytes
	if q, ok := env[api.EnvQuota]; ok {
		quota = q
	}
	l := ReplayLimits{QuotaBackendBytes: max(quota, replayMinQuotaBytes)}
	if n := env[envMaxRequestBytes]; n > etcdMaxRequestBytes {
		l.MaxRequestBytes = n + replayFramingBytes
	}
	if n := env[envMaxTxnOps]; n > archive.DefaultMaxTxnOps {
		l.MaxTxnOps = n
	}
	return l
}

// etcdArgs are the flags that set the limits; none for a default.
func (l ReplayLimits) etcdArgs() []string {
	var args []string
	if l.QuotaBackendBytes > 0 {
		args = append(args, "--quota-backend-bytes="+strconv.FormatInt(l.QuotaBackendBytes, 10))
	}
	if l.MaxRequestBytes > 0 {
		args = append(args, "--max-request-bytes="+strconv.FormatInt(l.MaxRequestBytes, 10))
	}
	if l.MaxTxnOps > 0 {
		args = append(args, "--max-txn-ops="+strconv.FormatInt(l.MaxTxnOps, 10))
	}
	return args
}

// replayOptions bound the replay's transactions as the etcd it writes to
// does: a source transaction within the cluster's limits is one replayed
// transaction.
func (l ReplayLimits) replayOptions(o archive.ReplayOptions) archive.ReplayOptions {
	if l.MaxTxnOps > 0 {
		o.MaxTxnOps = int(l.MaxTxnOps)
	}
	if l.MaxRequestBytes > 0 {
		o.MaxTxnBytes = int(l.MaxRequestBytes - replayFramingBytes)
	}
	return o
}
