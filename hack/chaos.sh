#!/usr/bin/env bash
# chaos.sh: `make chaos`. Runs the whole fault matrix (every ^TestChaos scenario of
# test/e2e, the long ones included, on a one-node local cluster, then every ^TestNodes
# scenario after adding two nodes), each with etcd-checker
# (a linearizability checker) running as a pod against the cluster under fault, and
# writes one line per scenario to _output/chaos/results.json:
#   scenario, ops, acked, failed, indeterminate, linearizable, ackedLost,
#   longestUnavailableSeconds, recoverySeconds, passed; a history that is not
# linearizable also leaves porcupine's visualisation, _output/chaos/scenarios/<scenario>.html.
# Beside the matrix, on the one node, the tenant control plane's scenarios
# (^TestTenantControlPlane: a real kube-apiserver on a cluster of the operator's under
# faults, judged by an informer) write one line each to _output/chaos/tenant.json:
#   scenario, ops, acked, missing, outOfOrder, longestUnavailableSeconds,
#   readyzFailures, longestNotReadySeconds, longestSilentWatchSeconds, passed.
# Both tables are also written to docs/results/chaos.md and their data,
# docs/results/data/chaos-matrix.json and chaos-tenant.json (hack/gen-docs chaos):
# the latest run, with its date, commit and machine; commit them to publish the figures.
# Environment: CHAOS_ONLY=matrix|tenant runs one part (the matrix is ^TestChaos and
# ^TestNodes; tenant is ^TestTenantControlPlane, on one node) and rewrites only its
# section of the page, the other keeping its last run; CHAOS_ONLY=nodes runs the
# matrix's ^TestNodes scenarios alone, on three nodes, and replaces only their rows
# (gen-docs chaos -merge: the line above the table names them and their run); E2E_CHAOS_MINUTES (the
# -chaos-level 1 scenario, default 3), and whatever hack/e2e.sh reads (E2E_PARALLEL,
# E2E_SKIP_BUILD, ...).
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

matrix=1 tenant=1 onenode=1 merge=()
case ${CHAOS_ONLY:-} in
'') ;;
matrix) tenant=0 ;;
tenant) matrix=0 ;;
nodes) tenant=0 onenode=0 merge=(-merge -machine "three local nodes in zones a, b, c on this machine") ;;
*)
	echo "[chaos] CHAOS_ONLY=${CHAOS_ONLY}: want matrix, tenant or nodes" >&2
	exit 2
	;;
esac
run='^(TestChaos|TestTenantControlPlane)'
((tenant)) || run='^TestChaos'
((matrix)) || run='^TestTenantControlPlane'

OUT=_output/chaos
rm -rf "$OUT/scenarios"
mkdir -p "$OUT/scenarios"
start=$SECONDS
rc=0
if ((onenode)); then
	# The matrix's first part is written for one node: a scenario that restarts or
	# stops the host's node must find every member of its clusters there.
	bash hack/local-cluster/one-node.sh chaos "sudo make chaos"
	# The tenant scenarios write theirs to $E2E_CHAOS_RESULTS/tenant (test/e2e's
	# writeTenantResult).
	E2E_CHAOS=1 E2E_CHAOS_RESULTS=$PWD/$OUT/scenarios E2E_TIMEOUT=${E2E_TIMEOUT:-60m} \
		bash hack/e2e.sh -run "$run" "$@" || rc=$?
fi
# Then the node events, on two more nodes (up.sh NODES=3), the long ones included.
if ((matrix)); then
	skip=(E2E_SKIP_BUILD=1)
	((onenode)) || skip=()
	if NODES=3 bash hack/local-cluster/up.sh; then
		env "${skip[@]}" E2E_CHAOS=1 E2E_CHAOS_RESULTS=$PWD/$OUT/scenarios E2E_TIMEOUT=${E2E_TIMEOUT:-60m} \
			bash hack/e2e.sh -run '^TestNodes' "$@" || rc=$?
	else
		rc=1
	fi
fi

# gather FILE...: the result lines, one JSON object per file, as one JSON array.
gather() {
	echo '['
	local first=1 f
	for f in "$@"; do
		((first)) || echo ','
		first=0
		tr -d '\n' <"$f"
	done
	echo
	echo ']'
}

shopt -s nullglob
files=() tenants=()
((matrix)) && files=("$OUT"/scenarios/*.json)
((tenant)) && tenants=("$OUT"/scenarios/tenant/*.json)
((matrix)) && gather "${files[@]}" >"$OUT/results.json"
((tenant)) && gather "${tenants[@]}" >"$OUT/tenant.json"

# get FIELD: FIELD of the flat JSON object in $line, without a JSON tool.
get() { sed -E "s/.*\"$1\":(\"[^\"]*\"|[^,}]*).*/\1/" <<<"$line" | tr -d '"'; }
((matrix)) && printf '%-30s %7s %7s %7s %7s %6s %6s %9s %9s %s\n' scenario ops acked failed indet linear lost unavail_s recover_s passed
for f in "${files[@]}"; do
	line=$(tr -d '\n' <"$f")
	printf '%-30s %7s %7s %7s %7s %6s %6s %9.1f %9.1f %s\n' "$(get scenario)" "$(get ops)" "$(get acked)" "$(get failed)" \
		"$(get indeterminate)" "$(get linearizable)" "$(get ackedLost)" "$(get longestUnavailableSeconds)" "$(get recoverySeconds)" "$(get passed)"
done
# porcupine's visualisation of each history that was not linearizable.
for h in "$OUT"/scenarios/*.html; do
	echo "[chaos] not linearizable: $h"
done
if ((tenant)); then
	echo "[chaos] a Kubernetes control plane as the client:"
	printf '%-34s %7s %7s %7s %7s %9s %6s %9s %9s %s\n' scenario ops acked missing order unavail_s readyz notready_s silent_s passed
	for f in "${tenants[@]}"; do
		# The tenant lines carry arrays (errors, examples) after the figures;
		# only the flat fields are read.
		line=$(tr -d '\n' <"$f")
		printf '%-34s %7s %7s %7s %7s %9.1f %6s %9.1f %9.1f %s\n' "$(get scenario)" "$(get ops)" "$(get acked)" "$(get missing)" \
			"$(get outOfOrder)" "$(get longestUnavailableSeconds)" "$(get readyzFailures)" "$(get longestNotReadySeconds)" \
			"$(get longestSilentWatchSeconds)" "$(get passed)"
	done
fi
took=$((SECONDS - start))
((matrix)) && echo "[chaos] ${#files[@]} scenarios in ${took}s; results in $OUT/results.json"
((tenant)) && echo "[chaos] ${#tenants[@]} tenant scenarios; results in $OUT/tenant.json"
# Each part that ran and wrote lines replaces its section of the page; the
# other keeps its last run.
parts=()
if ((${#files[@]} > 0)); then
	parts+=("${merge[@]}" -in "$OUT/results.json" -run "${#files[@]} scenarios in ${took} s, ${E2E_PARALLEL:-6} at a time")
else
	parts+=(-in '')
fi
if ((${#tenants[@]} > 0)); then
	how="${#tenants[@]} scenarios in ${took} s, ${E2E_PARALLEL:-6} at a time"
	((matrix)) && how="${#tenants[@]} scenarios alongside the matrix's, in ${took} s, ${E2E_PARALLEL:-6} at a time"
	parts+=(-tenant "$OUT/tenant.json" -tenant-run "$how")
fi
if ((${#files[@]} + ${#tenants[@]} > 0)); then
	commit=$(git rev-parse --short HEAD)
	git diff --quiet HEAD -- . ':(exclude)docs/results' || commit+="-dirty"
	go run ./hack/gen-docs chaos "${parts[@]}" -commit "$commit" \
		-kubernetes "$(sed -n 's/^K8S_VERSION=//p' hack/local-cluster/lib.sh)" \
		-o docs/results/chaos.md && echo "[chaos] docs/results/chaos.md written"
fi
exit "$rc"
