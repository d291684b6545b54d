#!/usr/bin/env bash
# chaos.sh: `make chaos`. Runs the whole fault matrix (every ^TestChaos scenario of
# test/e2e, the long ones included, on a one-node local cluster, then every ^TestNodes
# scenario after adding two nodes), each with etcd-checker
# (a linearizability checker) running as a pod against the cluster under fault, and
# writes one line per scenario to _output/chaos/results.json:
#   scenario, ops, acked, failed, indeterminate, linearizable, ackedLost,
#   longestUnavailableSeconds, recoverySeconds, passed; a history that is not
# linearizable also leaves porcupine's visualisation, _output/chaos/scenarios/<scenario>.html.
# The table is also written to docs/results/chaos.md and its data,
# docs/results/data/chaos-matrix.json (hack/gen-docs chaos): the latest run, with its
# date, commit and machine; commit both to publish the figures.
# Environment: E2E_CHAOS_MINUTES (the -chaos-level 1 scenario, default 3), and
# whatever hack/e2e.sh reads (E2E_PARALLEL, E2E_SKIP_BUILD, ...).
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The matrix's first part is written for one node: a scenario that restarts or
# stops the host's node must find every member of its clusters there.
bash hack/local-cluster/one-node.sh chaos "sudo make chaos"

OUT=_output/chaos
rm -rf "$OUT/scenarios"
mkdir -p "$OUT/scenarios"
start=$SECONDS
rc=0
E2E_CHAOS=1 E2E_CHAOS_RESULTS=$PWD/$OUT/scenarios E2E_TIMEOUT=${E2E_TIMEOUT:-60m} \
	bash hack/e2e.sh -run '^TestChaos' "$@" || rc=$?
# Then the node events, on two more nodes (up.sh NODES=3), the long ones included.
if NODES=3 bash hack/local-cluster/up.sh; then
	E2E_CHAOS=1 E2E_SKIP_BUILD=1 E2E_CHAOS_RESULTS=$PWD/$OUT/scenarios E2E_TIMEOUT=${E2E_TIMEOUT:-60m} \
		bash hack/e2e.sh -run '^TestNodes' "$@" || rc=$?
else
	rc=1
fi

shopt -s nullglob
files=("$OUT"/scenarios/*.json)
{
	echo '['
	first=1
	for f in "${files[@]}"; do
		((first)) || echo ','
		first=0
		tr -d '\n' <"$f"
	done
	echo
	echo ']'
} >"$OUT/results.json"

printf '%-30s %7s %7s %7s %7s %6s %6s %9s %9s %s\n' scenario ops acked failed indet linear lost unavail_s recover_s passed
for f in "${files[@]}"; do
	# One JSON object per file, flat: pull the fields out without a JSON tool.
	line=$(tr -d '\n' <"$f")
	get() { sed -E "s/.*\"$1\":(\"[^\"]*\"|[^,}]*).*/\1/" <<<"$line" | tr -d '"'; }
	printf '%-30s %7s %7s %7s %7s %6s %6s %9.1f %9.1f %s\n' "$(get scenario)" "$(get ops)" "$(get acked)" "$(get failed)" \
		"$(get indeterminate)" "$(get linearizable)" "$(get ackedLost)" "$(get longestUnavailableSeconds)" "$(get recoverySeconds)" "$(get passed)"
done
# porcupine's visualisation of each history that was not linearizable.
for h in "$OUT"/scenarios/*.html; do
	echo "[chaos] not linearizable: $h"
done
echo "[chaos] ${#files[@]} scenarios in $((SECONDS - start))s; results in $OUT/results.json"
if ((${#files[@]} > 0)); then
	commit=$(git rev-parse --short HEAD)
	git diff --quiet HEAD -- . ':(exclude)docs/results' || commit+="-dirty"
	go run ./hack/gen-docs chaos -in "$OUT/results.json" -commit "$commit" \
		-kubernetes "$(sed -n 's/^K8S_VERSION=//p' hack/local-cluster/lib.sh)" \
		-run "${#files[@]} scenarios in $((SECONDS - start)) s, ${E2E_PARALLEL:-6} at a time" \
		-o docs/results/chaos.md && echo "[chaos] docs/results/chaos.md written"
fi
exit "$rc"
