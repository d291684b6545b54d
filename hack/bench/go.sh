#!/usr/bin/env bash
# go.sh: `make bench-go`. Runs the Go benchmarks of ./pkg/... COUNT times each
# (default 3) and leaves go test's output in
# _output/bench/backup-restore/go-benchmarks-<time>.txt. A run that passes also
# writes the idle cluster's benchmarks (pkg/cluster) to the Go benchmarks section
# of docs/results/backup-restore.md and its data,
# docs/results/data/backup-restore-go-benchmarks.json, and the etcd releases set
# side by side (pkg/util/etcdutil, real etcd 3.6 and 3.7 processes, which
# hack/etcd-binaries.sh builds first) to its etcd 3.6 and 3.7 section,
# docs/results/data/backup-restore-etcd-releases.json (hack/gen-docs
# backup-restore): the range over the runs, with the date, commit and machine;
# commit both to publish the figures. Extra arguments go to go test (e.g.
# -benchtime=2s); a later -bench runs only some, and only their sections are
# written: -bench 'LearnerPromotion|LeaseKeepAlive' for the etcd releases alone.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

out=_output/bench/backup-restore
mkdir -p "$out"
report=$out/go-benchmarks-$(date -u +%Y%m%d-%H%M%S).txt
ETCD_BIN_DIR_LATEST_3_6=$(bash hack/etcd-binaries.sh 3.6.16)
ETCD_BIN_DIR_3_7=$(bash hack/etcd-binaries.sh 3.7.3)
export ETCD_BIN_DIR_LATEST_3_6 ETCD_BIN_DIR_3_7
go test -run '^$' -bench . -benchmem -count "${COUNT:-3}" "$@" ./pkg/... | tee "$report"

commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- . ':(exclude)docs/results' || commit+="-dirty"
go run ./hack/gen-docs backup-restore -in "$out" -since "$report" -commit "$commit" -o docs/results/backup-restore.md &&
	echo "bench-go: docs/results/backup-restore.md and the data of the sections this run measured (docs/results/data/backup-restore-*.json) written"
