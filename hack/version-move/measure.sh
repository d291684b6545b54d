#!/usr/bin/env bash
# measure.sh: which etcd clusters can move to 3.6, measured with real etcd
# processes on this host rather than assumed from the upgrade guide.
#
# Each scenario bootstraps a 3-member cluster the way the operator does (a
# seed, then members added as learners and promoted) or all at once, writes
# keys, rolls every member through the given versions one at a time (same
# data directory, new binary), and finally restarts one follower on etcd
# 3.6. It reports, for that member: the snapshots it saved while running its
# last 3.5 binary (etcd_debugging_snap_save_total_duration_seconds_count),
# what walcheck finds in the log 3.6 will replay, and whether 3.6 started.
#
#   bash hack/version-move/measure.sh            # every scenario
#   bash hack/version-move/measure.sh born-3.5   # scenarios whose name matches
#
# Binaries come from the local cluster's cache (hack/local-cluster/up.sh
# builds them): $ETCD_BIN_CACHE/etcd-v<version>/{etcd,etcdctl}.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

BIN_CACHE=${ETCD_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator-local/bin}
V36=${V36:-3.6.6}
FILTER=${1:-}
WORK=$(mktemp -d /tmp/version-move.XXXXXX)
WALCHECK=$WORK/walcheck
PIDS=()

cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

die() { echo "measure: $*" >&2; exit 1; }
bin() { echo "$BIN_CACHE/etcd-v$1/$2"; }
V35_LATEST=${V35_LATEST:-3.5.35}
for v in 3.4.23 3.5.21 "$V35_LATEST" "$V36"; do
	[[ -x $(bin "$v" etcd) ]] || die "no etcd $v under $BIN_CACHE (run hack/local-cluster/up.sh once, or set ETCD_BIN_CACHE)"
done
go build -o "$WALCHECK" ./hack/version-move/walcheck

# Ports: a block of 6 per scenario from a random base, so a leftover process
# of an earlier run cannot answer for this one.
BASE=$((20000 + RANDOM % 20000))

ctl() { "$(bin 3.5.21 etcdctl)" --endpoints="$ENDPOINTS" --command-timeout=5s "$@"; }
peer() { echo "http://127.0.0.1:$((BASE + 2 * $1))"; }
client() { echo "http://127.0.0.1:$((BASE + 2 * $1 + 1))"; }

# start_member I VERSION STATE INITIAL_CLUSTER [FLAGS...]
start_member() {
	local i=$1 v=$2 state=$3 initial=$4
	shift 4
	"$(bin "$v" etcd)" --name "m$i" --data-dir "$WORK/$SCENARIO/m$i" \
		--listen-peer-urls "$(peer "$i")" --initial-advertise-peer-urls "$(peer "$i")" \
		--listen-client-urls "$(client "$i")" --advertise-client-urls "$(client "$i")" \
		--initial-cluster "$initial" --initial-cluster-state "$state" --initial-cluster-token "$SCENARIO" \
		"$@" >>"$WORK/$SCENARIO/m$i.log" 2>&1 &
	PID[$i]=$!
	PIDS+=("$!")
}

stop_member() {
	kill "${PID[$1]}" 2>/dev/null || true
	wait "${PID[$1]}" 2>/dev/null || true
}

# healthy I [SECONDS]: the member answers a linearizable health check.
healthy() {
	local i=$1 deadline=$((SECONDS + ${2:-30}))
	while ((SECONDS < deadline)); do
		if ! kill -0 "${PID[$i]}" 2>/dev/null; then return 1; fi
		if "$(bin 3.5.21 etcdctl)" --endpoints="$(client "$i")" --command-timeout=2s endpoint health >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.5
	done
	return 1
}

# member_id I: by peer URL, since a member that has not started has no name.
member_id() { ctl member list | awk -F', ' -v p="$(peer "$1")" '$4 == p { print $1 }'; }

leader_index() {
	local i
	for i in 1 2 3; do
		if "$(bin 3.5.21 etcdctl)" --endpoints="$(client "$i")" endpoint status 2>/dev/null | grep -q ', true, false,'; then
			echo "$i"
			return
		fi
	done
}

cluster_version() { curl -s "$(client "$1")/version" | sed -n 's/.*"etcdcluster":"\([^"]*\)".*/\1/p'; }

snapshots_saved() {
	curl -s "$(client "$1")/metrics" | awk '/^etcd_debugging_snap_save_total_duration_seconds_count/ { print $2 }'
}

# probe_health: what the operator's readiness probe does, GET /health on
# every member every 2 s (here every 0.5 s), until the scenario ends.
probe_health() {
	while :; do
		for i in 1 2 3; do curl -s -m 1 "$(client "$i")/health" >/dev/null 2>&1 || true; done
		sleep 0.5
	done
}

# add_learner I INITIAL_CLUSTER VERSION: the operator's join: MemberAdd as a
# learner, start the member, promote it once it has caught up.
add_learner() {
	local i=$1 initial=$2 v=$3 id deadline=$((SECONDS + 30))
	# etcd refuses a change until the leader has been connected to a quorum
	# for 5 s ("unhealthy cluster").
	until ctl member add "m$i" --learner --peer-urls="$(peer "$i")" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "$SCENARIO: m$i could not be added"
		sleep 1
	done
	start_member "$i" "$v" existing "$initial"
	deadline=$((SECONDS + 30))
	id=$(member_id "$i")
	until ctl member promote "$id" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "$SCENARIO: m$i was never promoted"
		sleep 0.5
	done
}

# replace_member I VERSION: what the operator does with a dead member: remove
# it, then join a fresh one (new data) under the same name and peer URL.
replace_member() {
	local i=$1 v=$2 id deadline=$((SECONDS + 30))
	id=$(member_id "$i")
	stop_member "$i"
	until ctl member remove "$id" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "$SCENARIO: m$i could not be removed"
		sleep 1
	done
	rm -rf "${WORK:?}/$SCENARIO/m$i"
	add_learner "$i" "m1=$(peer 1),m2=$(peer 2),m3=$(peer 3)" "$v"
	healthy "$i" || die "$SCENARIO: replaced m$i not healthy"
}

# scenario NAME BOOT(learners|all|learners+replace) PROBES(probed|unprobed)
#   "VERSIONS" WRITES
#   [FLAGS FOR THE LAST 3.5 STEP]
# VERSIONS: the binary versions the cluster runs in turn before 3.6.
scenario() {
	SCENARIO=$1
	local boot=$2 probes=$3 versions=($4) writes=$5 i v step=0 prober=
	shift 5
	local last_flags=("$@")
	[[ -z $FILTER || $SCENARIO == *$FILTER* ]] || return 0
	mkdir -p "$WORK/$SCENARIO"
	BASE=$((BASE + 6))
	PID=()
	ENDPOINTS="$(client 1),$(client 2),$(client 3)"
	local first=${versions[0]} all="m1=$(peer 1),m2=$(peer 2),m3=$(peer 3)"

	if [[ $boot == all ]]; then
		for i in 1 2 3; do start_member "$i" "$first" new "$all"; done
		for i in 1 2 3; do healthy "$i" || die "$SCENARIO: m$i did not start on $first"; done
	else
		start_member 1 "$first" new "m1=$(peer 1)"
		healthy 1 || die "$SCENARIO: seed did not start"
		local initial="m1=$(peer 1)"
		ENDPOINTS=$(client 1)
		for i in 2 3; do
			initial="$initial,m$i=$(peer "$i")"
			add_learner "$i" "$initial" "$first"
		done
		ENDPOINTS="$(client 1),$(client 2),$(client 3)"
		for i in 1 2 3; do healthy "$i" || die "$SCENARIO: m$i not healthy after bootstrap"; done
		if [[ $boot == learners+replace ]]; then
			ENDPOINTS="$(client 1),$(client 2)"
			replace_member 3 "$first"
			ENDPOINTS="$(client 1),$(client 2),$(client 3)"
		fi
	fi
	if [[ $probes == probed ]]; then
		probe_health &
		prober=$!
		PIDS+=("$prober")
	fi
	for ((k = 0; k < writes; k++)); do ctl put "k$((k % 50))" "v$k" >/dev/null; done

	for v in "${versions[@]:1}"; do
		step=$((step + 1))
		local flags=()
		if ((step == ${#versions[@]} - 1)); then flags=("${last_flags[@]}"); fi
		for i in 1 2 3; do
			stop_member "$i"
			start_member "$i" "$v" existing "$all" "${flags[@]}"
			healthy "$i" || die "$SCENARIO: m$i did not start on $v (log: $WORK/$SCENARIO/m$i.log)"
		done
		local want=${v%.*}.0 deadline=$((SECONDS + 30))
		until [[ $(cluster_version 1) == "$want" ]]; do
			((SECONDS < deadline)) || die "$SCENARIO: cluster version stayed $(cluster_version 1) after all members ran $v"
			sleep 0.5
		done
		for ((k = 0; k < writes; k++)); do ctl put "k$((k % 50))" "w$k" >/dev/null; done
	done

	[[ -z $prober ]] || kill "$prober"
	local victim=1
	[[ $(leader_index) == 1 ]] && victim=2
	local members_before
	members_before=$(ctl member list | wc -l)
	local snaps
	snaps=$(snapshots_saved "$victim")
	stop_member "$victim"
	local wal
	wal=$("$WALCHECK" "$WORK/$SCENARIO/m$victim" | tail -1)
	start_member "$victim" "$V36" existing "$all"
	local result="3.6 STARTED"
	if healthy "$victim" 20; then
		local seen
		seen=$("$(bin "$V36" etcdctl)" --endpoints="$(client "$victim")" member list 2>/dev/null | wc -l)
		[[ $seen == "$members_before" ]] || result="3.6 STARTED but lists $seen members, not $members_before"
	else
		result="3.6 FAILED: $(grep -m1 -oE '"msg":"[^"]*"' <(grep -E '"level":"(panic|fatal)"' "$WORK/$SCENARIO/m$victim.log") || echo 'no panic in log')"
	fi
	printf '%-40s | snapshots saved on 3.5: %-4s | %s | %s\n' "$SCENARIO" "${snaps:-?}" "$wal" "$result"
	for i in 1 2 3; do stop_member "$i"; done
}

echo "versions: 3.4.23 (Debian), 3.5.21, $V35_LATEST, $V36; logs under $WORK"
scenario born-3.5-learners learners unprobed "3.5.21" 200
scenario born-3.5-learners-probed learners probed "3.5.21" 200
scenario born-3.5-all-at-once all unprobed "3.5.21" 200
scenario born-3.4-learners learners unprobed "3.4.23 3.5.21" 200
scenario born-3.4-learners-probed learners probed "3.4.23 3.5.21" 200
scenario born-3.4-all-at-once-probed all probed "3.4.23 3.5.21" 200
scenario born-3.4-probed-snapshot-after-3.5 learners probed "3.4.23 3.5.21" 200 --snapshot-count=50
scenario born-3.5-member-replaced learners+replace probed "3.5.21" 200
scenario born-3.4-probed-via-$V35_LATEST learners probed "3.4.23 $V35_LATEST" 200
scenario born-3.4-probed-via-3.5.21-and-$V35_LATEST learners probed "3.4.23 3.5.21 $V35_LATEST" 200
scenario born-3.5.21-via-$V35_LATEST learners probed "3.5.21 $V35_LATEST" 200
