#!/usr/bin/env bash
# Benchmarks the backup path on large databases, one command for the whole
# matrix: for each size in SIZE_MIB (default "256 1024"), etcd (embedded, in a
# child process, quota raised) is filled with that much data; `etcdctl snapshot
# save` (etcd 3.6, from hack/etcd-binaries.sh) saves it to local disk, the
# floor; then the operator's path backs it up per way of storing it (plain,
# gzip, zstd, AES-256-GCM, and compressed and encrypted) into each store in turn: S3 (an in-process server whose backend drops the bytes),
# ABS (Azurite, from hack/azurite.sh) and GCS (fake-gcs-server in a child
# process). Prints MiB/s of the snapshot, its share of etcdctl's rate, and the
# peak RSS (VmHWM, reset per way) and Go heap of the backing-up process, one
# table per size: the RSS columns of the sizes side by side show that memory
# does not grow with the database. It runs etcd on this machine: no cluster is
# needed. The whole matrix at 256 MiB (best of 2) and 1 GiB (one run each)
# takes about 20 minutes on 2 cores, most of it fake-gcs-server's.
#
#   hack/bench/backup/run.sh                             # everything
#   SIZE_MIB=256 hack/bench/backup/run.sh -store=s3 -codecs=none
#   SIZE_MIB=2048 hack/bench/backup/run.sh -store=s3 -concurrency=1
#   hack/bench/backup/run.sh -store=s3 -codecs=none -cpuprofile=/tmp/cpu.out   # go tool pprof
#
# Each size's table is also left as JSON, _output/bench/backup-restore/backups-<size>-<time>.json.
# A run of the whole matrix (no extra arguments) then writes the Backups section of
# docs/results/backup-restore.md and its data, docs/results/data/backup-restore-backups.json
# (hack/gen-docs backup-restore), with the date, commit and machine; commit both to
# publish the figures. A run with extra arguments measures part of the matrix and
# leaves the page as it is.
#
# Extra arguments go to the benchmark binary (-store, -part-mib, -concurrency,
# -runs, -value-kib, -codecs, -etcdctl, -cpuprofile). The in-process Go benchmark is
#   BACKUP_BENCH_MB=64 go test -run '^$' -bench BenchmarkBackup ./pkg/backup
set -o errexit -o nounset -o pipefail

cd "$(dirname "$0")/../../.."
sizes=${SIZE_MIB:-256 1024}
out=_output/bench/backup-restore
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
touch "$tmp/start"

export ETCD_BIN_DIR_3_6=${ETCD_BIN_DIR_3_6:-$(bash hack/etcd-binaries.sh)}
export AZURITE_BLOB=${AZURITE_BLOB:-$(bash hack/azurite.sh)}
go build -o "$tmp/backup-bench" ./hack/bench/backup
for size in $sizes; do
	# Best of RUNS (default 2) below 1 GiB, one run from 1 GiB up: the
	# fake-gcs-server emulator alone takes minutes per GiB (-runs overrides).
	runs=${RUNS:-2}
	if ((size >= 1024)); then
		runs=${RUNS:-1}
	fi
	TMPDIR=$tmp "$tmp/backup-bench" -size-mib "$size" -store=s3,abs,gcs -runs="$runs" \
		-report "$out/backups-$size-$(date -u +%Y%m%d-%H%M%S).json" "$@"
done

if (($# > 0)); then
	echo "backup bench: part of the matrix (extra arguments); docs/results/backup-restore.md left as it is"
	exit 0
fi
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- . ':(exclude)docs/results' || commit+="-dirty"
go run ./hack/gen-docs backup-restore -in "$out" -since "$tmp/start" -commit "$commit" -o docs/results/backup-restore.md &&
	echo "backup bench: docs/results/backup-restore.md and docs/results/data/backup-restore-backups.json written"
