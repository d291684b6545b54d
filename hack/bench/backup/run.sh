#!/usr/bin/env bash
# Benchmarks the backup path on a large database: etcd (embedded, in a child
# process, quota raised) is filled with SIZE_MIB of data, then backed up three times
# into an in-process S3 server whose backend drops the bytes (or, with -store=abs,
# Azurite from hack/azurite.sh; with -store=gcs, fake-gcs-server in a child
# process). Prints MiB/s and the peak RSS (VmHWM) and Go heap of the backing-up
# process.
#
#   hack/bench/backup/run.sh                       # 512 MiB
#   SIZE_MIB=2048 hack/bench/backup/run.sh -concurrency=1
#   AZURITE_BLOB=$(bash hack/azurite.sh) hack/bench/backup/run.sh -store=abs
#   hack/bench/backup/run.sh -store=gcs
#
# Extra arguments go to the benchmark binary (-part-mib, -concurrency, -runs,
# -value-kib). The in-process Go benchmark is
#   BACKUP_BENCH_MB=64 go test -run '^$' -bench BenchmarkBackup ./pkg/backup
set -o errexit -o nounset -o pipefail

cd "$(dirname "$0")/../../.."
size_mib=${SIZE_MIB:-512}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go build -o "$tmp/backup-bench" ./hack/bench/backup
TMPDIR=$tmp "$tmp/backup-bench" -size-mib "$size_mib" "$@"
