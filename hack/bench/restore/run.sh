#!/usr/bin/env bash
# Measures the data path of a restore on a large snapshot (default 512 MiB):
# checking the backup before the cluster is touched, the seed's download through
# the backup server, `etcdutl snapshot restore`, etcd starting on the result, and,
# as a restore to a point does, the replay of an archived hour of changes read from
# the store (-hour-writes-per-second, default 10; 0 leaves it out).
# Prints the time of each step, leaves them as JSON in
# _output/bench/backup-restore/restore-data-path-<time>.json, and writes the Restore
# data path section of docs/results/backup-restore.md and its data,
# docs/results/data/backup-restore-restore-data-path.json (hack/gen-docs
# backup-restore), with the date, commit and machine; commit both to publish the
# figures. Needs an etcd 3.5 release (etcd and etcdutl): the local cluster's env
# file names one.
#
#   hack/bench/restore/run.sh
#   SIZE_MIB=2048 hack/bench/restore/run.sh -etcd-bin-dir=/path/to/etcd-v3.5.21
#   SIZE_MIB=1024 hack/bench/restore/run.sh     # make bench's 1 GiB plus an hour
#
# The whole restore on the local cluster (pods, members joining) is measured by
#   E2E_RESTORE_BENCH_MIB=512 bash hack/e2e.sh -run TestMeasureRestore
# which leaves _output/bench/backup-restore/restore-on-cluster-<time>.json; then
#   go run ./hack/gen-docs backup-restore -commit "$(git rev-parse --short HEAD)"
# writes its section (and those of any other report there).
set -o errexit -o nounset -o pipefail

cd "$(dirname "$0")/../../.."
size_mib=${SIZE_MIB:-512}
env_file=${E2E_ENV_FILE:-/var/lib/etcd-operator-local/env}
if [[ -z ${ETCD_BIN_DIR_3_5:-} && -f $env_file ]]; then
	# shellcheck disable=SC1090
	source "$env_file"
fi
out=_output/bench/backup-restore
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
touch "$tmp/start"

go build -o "$tmp/restore-bench" ./hack/bench/restore
TMPDIR=$tmp "$tmp/restore-bench" -size-mib "$size_mib" -etcd-bin-dir "${ETCD_BIN_DIR_3_5:-}" \
	-report "$out/restore-data-path-$(date -u +%Y%m%d-%H%M%S).json" "$@"

commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- . ':(exclude)docs/results' || commit+="-dirty"
go run ./hack/gen-docs backup-restore -in "$out" -since "$tmp/start" -commit "$commit" -o docs/results/backup-restore.md &&
	echo "restore bench: docs/results/backup-restore.md and docs/results/data/backup-restore-restore-data-path.json written"
