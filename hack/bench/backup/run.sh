#!/usr/bin/env bash
# Benchmarks the backup path on a large database: etcd (embedded, in a child
# process, quota raised) is filled with SIZE_MIB of data; `etcdctl snapshot save`
# (etcd 3.6, from hack/etcd-binaries.sh) saves it to local disk three times, the
# floor; then the operator's path backs it up three times per way of storing it
# (plain, gzip, zstd, AES-256-GCM, and compressed and encrypted) into an
# in-process S3 server whose backend drops the bytes (or, with -store=abs,
# Azurite from hack/azurite.sh; with -store=gcs, fake-gcs-server in a child
# process). Prints MiB/s of the snapshot, its share of etcdctl's rate, and the
# peak RSS (VmHWM, reset per way) and Go heap of the backing-up process. It runs
# etcd on this machine: no cluster is needed.
#
#   hack/bench/backup/run.sh                       # 512 MiB
#   SIZE_MIB=2048 hack/bench/backup/run.sh -concurrency=1
#   AZURITE_BLOB=$(bash hack/azurite.sh) hack/bench/backup/run.sh -store=abs
#   hack/bench/backup/run.sh -store=gcs
#
# Extra arguments go to the benchmark binary (-part-mib, -concurrency, -runs,
# -value-kib, -codecs, -etcdctl). The in-process Go benchmark is
#   BACKUP_BENCH_MB=64 go test -run '^$' -bench BenchmarkBackup ./pkg/backup
set -o errexit -o nounset -o pipefail

cd "$(dirname "$0")/../../.."
size_mib=${SIZE_MIB:-512}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

export ETCD_BIN_DIR_3_6=${ETCD_BIN_DIR_3_6:-$(bash hack/etcd-binaries.sh)}
go build -o "$tmp/backup-bench" ./hack/bench/backup
TMPDIR=$tmp "$tmp/backup-bench" -size-mib "$size_mib" "$@"
