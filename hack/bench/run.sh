#!/usr/bin/env bash
# run.sh: `make bench`. Measures, on the local single-node cluster, the floor
# (etcd pods made directly, no operator) and the operator's lifecycle
# (test/e2e TestMeasureSpeed), a new cluster's start on every version a new
# cluster may be made on (TestMeasureBootstrap), then its cost with many idle
# clusters (TestMeasureScale), then etcd's own benchmark tool against a
# cluster the operator runs and against the floor (TestMeasureEtcdBenchmark;
# the tool is built once by hack/tools.sh). Brings the local cluster up if it
# is not (root), builds and imports the operator image, runs them through
# hack/e2e.sh, prints the tables and leaves them as markdown and JSON under
# _output/bench/. A run that passes also writes them to
# docs/results/bench.md and its data,
# docs/results/data/bench-{speed,bootstrap,scale,etcd}.json (hack/gen-docs
# bench), with the date, commit and machine; a part not run (BENCH_ONLY)
# keeps its last run. The restore part runs first, off the cluster: the data
# path of a restore to a point, a BENCH_RESTORE_MIB snapshot and an archived hour
# of changes (hack/bench/restore/run.sh, its section in
# docs/results/backup-restore.md).
# Run it alone on the node: other work there slows the figures down.
#
#   hack/bench/run.sh                      # everything, median of 3 (about an hour)
#   BENCH_RUNS=1 BENCH_SCALE=10 BENCH_RESTORE_MIB=0 hack/bench/run.sh   # a quick look
#   BENCH_ONLY=scale hack/bench/run.sh
#   BENCH_ONLY=bootstrap hack/bench/run.sh  # the start of new clusters, both modes, every version
#   BENCH_ONLY=etcd hack/bench/run.sh      # etcd's benchmark tool, median of 3 (minutes)
#   BENCH_ONLY=restore hack/bench/run.sh   # a restore to a point's data path: 1 GiB and an hour of changes
#
# Environment:
#   BENCH_RUNS         runs of each lifecycle and bootstrap scenario, and of
#                      each workload of etcd's benchmark tool on each side (default 3)
#   BENCH_RESTORE_MIB  snapshot size of the restores (default 1024; 0: no restore),
#                      the lifecycle's on the cluster and the restore part's data path
#   BENCH_SCALE        numbers of idle one-member clusters (default "10 50 100")
#   BENCH_BURST        clusters created at once among them (default 20)
#   BENCH_WINDOW       seconds of each idle window (default 60)
#   BENCH_ONLY         speed, bootstrap, scale, etcd or restore: run only that part (or
#                      several, separated by commas: BENCH_ONLY=speed,bootstrap)
#   BENCH_PROFILE      seconds of a CPU profile of the operator taken after the
#                      last idle window (default: none), left under _output/bench/
# and hack/e2e.sh's (E2E_SKIP_BUILD=1, LOCAL_CLUSTER_STATE_DIR, E2E_TIMEOUT).
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

export E2E_BENCH=${BENCH_RUNS:-3}
export E2E_BENCH_BOOTSTRAP=${BENCH_RUNS:-3}
export E2E_BENCH_ETCD=${BENCH_RUNS:-3}
export E2E_BENCH_RESTORE_MIB=${BENCH_RESTORE_MIB:-1024}
export E2E_BENCH_SCALE=${BENCH_SCALE:-10 50 100}
export E2E_BENCH_BURST=${BENCH_BURST:-20}
export E2E_BENCH_WINDOW=${BENCH_WINDOW:-60}
export E2E_BENCH_PROFILE=${BENCH_PROFILE:-}
export E2E_TIMEOUT=${E2E_TIMEOUT:-150m}
# BENCH_ONLY names one part or several, separated by commas.
# restore is no e2e test: the data path of a restore to a point (a snapshot of
# BENCH_RESTORE_MIB and an archived hour of changes) on this machine, whose
# section is in docs/results/backup-restore.md (hack/bench/restore/run.sh).
declare -A tests=([speed]=Speed [bootstrap]=Bootstrap [scale]=Scale [etcd]=EtcdBenchmark [restore]=)
parts=()
restore=0
only=${BENCH_ONLY:-speed,bootstrap,scale,etcd,restore}
IFS=, read -r -a asked <<<"$only"
for part in "${asked[@]}"; do
	# read drops a last empty field: "speed," is refused as "speed,,".
	if [[ ! -v tests[$part] || $only == *, ]]; then
		echo "BENCH_ONLY=${BENCH_ONLY}: want speed, bootstrap, scale, etcd or restore, or several of them separated by commas" >&2
		exit 2
	fi
	if [[ $part == restore ]]; then
		restore=1
		continue
	fi
	parts+=("${tests[$part]}")
done
run="^TestMeasure($(IFS='|'; echo "${parts[*]}"))\$"
if [[ $run == *EtcdBenchmark* ]]; then
	ETCD_BENCHMARK=$(bash hack/tools.sh benchmark)
	export ETCD_BENCHMARK
fi

mkdir -p _output/bench
marker=$(mktemp)
trap 'rm -f "$marker"' EXIT
rc=0
if ((restore)) && [[ ${BENCH_RESTORE_MIB:-1024} != 0 ]]; then
	SIZE_MIB=${BENCH_RESTORE_MIB:-1024} bash hack/bench/restore/run.sh || rc=$?
fi
if ((${#parts[@]} == 0)); then
	exit "$rc"
fi
bash hack/e2e.sh -run "$run" || rc=$?

found=0
while IFS= read -r md; do
	found=1
	printf '\n==== %s (and %s)\n\n' "$md" "${md%.md}.json"
	cat "$md"
done < <(find _output/bench -name '*.md' -newer "$marker" | sort)
if ((found == 0)); then
	echo "bench: no table was written; see the go test log under _output/e2e/" >&2
	((rc != 0)) || rc=1
elif ((rc == 0)); then
	commit=$(git rev-parse --short HEAD)
	git diff --quiet HEAD -- . ':(exclude)docs/results' || commit+="-dirty"
	go run ./hack/gen-docs bench -in _output/bench -since "$marker" -commit "$commit" -o docs/results/bench.md &&
		echo "bench: docs/results/bench.md written"
fi
exit "$rc"
