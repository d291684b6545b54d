#!/usr/bin/env bash
# Measures the data path of a restore on a large snapshot (default 512 MiB):
# checking the backup before the cluster is touched, the seed's download through
# the backup server, `etcdutl snapshot restore`, and etcd starting on the result.
# Prints the time of each step. Needs an etcd 3.5 release (etcd and etcdutl):
# the local cluster's env file names one.
#
#   hack/bench/restore/run.sh
#   SIZE_MIB=2048 hack/bench/restore/run.sh -etcd-bin-dir=/path/to/etcd-v3.5.21
#
# The whole restore on the local cluster (pods, members joining) is measured by
#   E2E_RESTORE_BENCH_MIB=512 go test -tags e2e ./test/e2e/ -run TestMeasureRestore -v
set -o errexit -o nounset -o pipefail

cd "$(dirname "$0")/../../.."
size_mib=${SIZE_MIB:-512}
env_file=${E2E_ENV_FILE:-/var/lib/etcd-operator-local/env}
if [[ -z ${ETCD_BIN_DIR_3_5:-} && -f $env_file ]]; then
	# shellcheck disable=SC1090
	source "$env_file"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go build -o "$tmp/restore-bench" ./hack/bench/restore
TMPDIR=$tmp "$tmp/restore-bench" -size-mib "$size_mib" -etcd-bin-dir "${ETCD_BIN_DIR_3_5:-}" "$@"
