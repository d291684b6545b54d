#!/usr/bin/env bash
# e2e.sh: `make e2e`. Runs the end-to-end suite (test/e2e) on the local
# single-node Kubernetes:
#   1. starts the local cluster with hack/local-cluster/up.sh if it is not
#      up and healthy (that needs root);
#   2. rebuilds the cluster's own images (etcd, busybox, ...) that changed
#      since the cluster was started, and the project image from the working
#      tree, and imports those that changed (hack/build-image.sh,
#      hack/local-cluster/load-image.sh): no restart of a cluster that is up;
#   3. runs `go test -tags e2e` and prints which scenarios failed.
# A timing line is printed per phase. Exit status is non-zero on any failure.
#
# Usage: hack/e2e.sh [go test flags, e.g. -run TestKilledMemberIsReplaced]
#        hack/e2e.sh clean   remove what interrupted runs left behind (namespaces
#                            labelled etcd-operator-e2e, their ClusterRoles and
#                            ClusterRoleBindings e2e-e2e-*, hostPath volumes);
#                            do not run it while a suite is running
# Environment:
#   E2E_PARALLEL          tests run at once (default 6: the tests mostly wait; with 6
#                         the per-test times were the same as with 4, and the suite
#                         took a third less time)
#   E2E_TIMEOUT           go test -timeout (default 40m)
#   E2E_MEASURE=N         also run TestMeasureLifecycle N times (alone: use -run)
#   E2E_MEASURE_IDLE=0    leave out its idle figures (7 minutes of waiting)
#   E2E_MEASURE_ONLY      only these of its scenarios: emptydir, v36 (emptydir on etcd 3.6), pvc, whole, upgrade
#   E2E_OPERATOR_LOG_LEVEL  --log-level of the suite's shared operator (debug: every
#                         pass's wait reason, to tell where a measured time went)
#   E2E_RESTORE_BENCH_MIB=M  also run TestMeasureRestore with an M MiB snapshot
#   E2E_BENCH, E2E_BENCH_BOOTSTRAP, E2E_BENCH_SCALE, E2E_BENCH_ETCD  also run the bench's
#                         TestMeasureSpeed, TestMeasureBootstrap, TestMeasureScale,
#                         TestMeasureEtcdBenchmark (hack/bench/run.sh sets them)
#   E2E_KEEP_NAMESPACES=1 leave failed tests' clusters and namespaces behind
#   E2E_SKIP_BUILD=1      use the image already on the node
#   E2E_CHAOS=1           also run the long fault scenarios (^TestChaosLong, ^TestNodesLong; make chaos)
#   E2E_ORIGINAL=1        also run the tests of coreos/etcd-operator v0.9.4 itself (hack/original;
#                         make e2e-original)
#   E2E_CERT_MANAGER=1    also run the tests of clusters whose certificates cert-manager issues
#                         (^TestCertManager), on cert-manager built by hack/cert-manager (make e2e-cert-manager)
#   E2E_PREVIOUS_RELEASE=1  also build and import the previous release's image from its commit
#                         (hack/previous-release.sh) and run the upgrade from it (make e2e-upgrade)
#   LOCAL_CLUSTER_NODES   from the cluster's env file: the node events (^TestNodes) run
#                         only on a cluster of 3 nodes (make local-up NODES=3), and
#                         there alone unless -run is given
#   E2E_CHAOS_RESULTS     where each fault scenario writes its result line (default _output/e2e/chaos)
#   LOCAL_CLUSTER_STATE_DIR  as in hack/local-cluster (default /var/lib/etcd-operator-local)
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

STATE_DIR=${LOCAL_CLUSTER_STATE_DIR:-/var/lib/etcd-operator-local}
ENV_FILE=$STATE_DIR/env
OUT_DIR=_output/e2e
RUN_ID=$(date -u +%Y%m%d-%H%M%S)
LOG=$OUT_DIR/go-test-$RUN_ID.log

log() { printf '[e2e] %s\n' "$*" >&2; }
die() { printf '[e2e] ERROR: %s\n' "$*" >&2; exit 1; }

# phase NAME CMD...: run CMD and print how long it took, whatever its outcome.
# errexit does not apply inside CMD (it runs on the left of ||), so the
# functions below return on the first failure themselves.
phase() {
	local name=$1 start=$SECONDS rc=0
	shift
	log "=== $name"
	"$@" || rc=$?
	log "=== $name: $((SECONDS - start))s$( ((rc == 0)) || echo " (FAILED, exit $rc)")"
	return "$rc"
}

cluster_healthy() {
	[[ -f $ENV_FILE ]] || return 1
	# shellcheck disable=SC1090
	source "$ENV_FILE"
	[[ -x ${KUBECTL:-} ]] || return 1
	"$KUBECTL" get --raw /readyz >/dev/null 2>&1 || return 1
	# Every node Ready (a multi-node cluster has several).
	local ready
	ready=$("$KUBECTL" get nodes -o jsonpath='{.items[*].status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) || return 1
	[[ -n $ready && -z $(tr -d ' ' <<<"${ready//True/}") ]]
}

need_root() {
	[[ $(id -u) == 0 ]] || die "$1 needs root: run sudo -E make e2e (or sudo make local-up first)"
}

ensure_cluster() {
	if cluster_healthy; then
		log "local cluster is up (node ${NODE_NAME:-?}, $NODE_IP)"
		return 0
	fi
	need_root "starting the local cluster"
	log "local cluster not up or not healthy: starting it (hack/local-cluster/up.sh)"
	bash hack/local-cluster/up.sh || return
	cluster_healthy || die "the local cluster is still not healthy after up.sh; see $STATE_DIR/logs"
}

# cluster_images: a cluster that is up gets the images of this tree's
# images.sh (the etcd images' contents, say); unchanged ones are skipped.
cluster_images() {
	if [[ $(id -u) != 0 ]]; then
		log "not root: the cluster's images stay as they are"
		return 0
	fi
	bash hack/local-cluster/load-image.sh --cluster
}

build_image() {
	bash hack/build-image.sh || return
	need_root "importing the image into containerd"
	bash hack/local-cluster/load-image.sh
}

# previous_release_image: the previous release's image, built from its commit
# (cached after the first time) and imported; the upgrade test runs the same
# script again, which then finds both done.
previous_release_image() {
	need_root "importing the previous release's image into containerd"
	bash hack/previous-release.sh --load >/dev/null
}

# summary LOG RC: the verdict of every top-level test, then the failed ones again;
# RC is go test's exit status.
summary() {
	local log=$1 rc=$2
	log "=== results (top-level tests)"
	grep -E '^--- (PASS|FAIL|SKIP): Test' "$log" | sed 's/^/    /' >&2 || true
	local failed skipped
	failed=$(grep -E '^--- FAIL: Test' "$log" | awk '{print $3}' || true)
	skipped=$(grep -E '^--- SKIP: Test' "$log" | awk '{print $3}' || true)
	if [[ -n $skipped ]]; then
		log "skipped: $(echo "$skipped" | tr '\n' ' ')"
	fi
	if [[ -n $failed ]]; then
		log "FAILED scenarios: $(echo "$failed" | tr '\n' ' ')"
		last_words "$log" $failed >&2
		log "their dumps: _output/e2e/artifacts/<test>/; full log: $log"
	fi
	if [[ $rc -ne 0 && -z $failed ]]; then
		log "the suite failed outside any test (setup?): see the lines starting with 'e2e:', 'FAIL' or 'panic:' in $log"
	fi
}

# last_words LOG TEST...: each failed test's last lines before its failure dump,
# where its t.Error or t.Fatal is: the end of the suite's output is what a CI
# shows, and there the dumps would hide why the test failed. go test -v marks
# whose lines follow with "=== RUN|CONT|NAME|PAUSE <test>"; the dump begins
# with a "======== " line.
last_words() {
	local log=$1
	shift
	awk -v tests="$*" -v keep=25 '
	BEGIN { n = split(tests, t, " "); for (i = 1; i <= n; i++) want[t[i]] = 1 }
	/^=== (RUN|CONT|NAME|PAUSE) / { split($3, p, "/"); cur = p[1]; next }
	/^(--- |FAIL|PASS|ok )/ { next }
	cur in want && !(cur in dumped) {
		if (index($0, "======== ")) { dumped[cur] = 1; next }
		line[cur, count[cur]++ % keep] = $0
	}
	END {
		for (i = 1; i <= n; i++) {
			name = t[i]; c = count[name]
			print "[e2e] " name ", its last lines before its dump:"
			for (j = (c > keep ? c - keep : 0); j < c; j++) print "  " line[name, j % keep]
		}
	}' "$log"
}

run_suite() {
	mkdir -p "$OUT_DIR"
	local args=(-tags e2e -count=1 -v -timeout "${E2E_TIMEOUT:-40m}" -parallel "${E2E_PARALLEL:-6}")
	# The measurements only print figures; they run when asked for (E2E_MEASURE=<runs>,
	# E2E_RESTORE_BENCH_MIB=<size>, and the bench's E2E_BENCH, E2E_BENCH_BOOTSTRAP,
	# E2E_BENCH_SCALE, E2E_BENCH_ETCD), so that the suite reports no skipped test.
	# The longer fault scenarios (^TestChaosLong) run in `make chaos` (E2E_CHAOS=1).
	local skip=()
	if [[ -z ${E2E_MEASURE:-} && -z ${E2E_RESTORE_BENCH_MIB:-} && -z ${E2E_BENCH:-} && -z ${E2E_BENCH_BOOTSTRAP:-} && -z ${E2E_BENCH_SCALE:-} && -z ${E2E_BENCH_ETCD:-} ]]; then
		skip+=('^TestMeasure')
	fi
	if [[ ${E2E_CHAOS:-} != 1 ]]; then
		skip+=('^TestChaosLong' '^TestNodesLong')
	fi
	# The original operator itself (hack/original) replaces the cluster-wide
	# CRDs while it runs, so those tests run alone, when asked (make e2e-original).
	if [[ ${E2E_ORIGINAL:-} != 1 ]]; then
		skip+=('^TestOriginalItself' '^TestBackupsTheOriginalItself')
	fi
	# cert-manager is built from its Go module for these tests alone (minutes
	# with a cold cache), so they run when asked (make e2e-cert-manager).
	if [[ ${E2E_CERT_MANAGER:-} != 1 ]]; then
		skip+=('^TestCertManager')
	fi
	# The previous release's operators install its CRDs over this tree's, so
	# the upgrade from it runs alone, when asked (make e2e-upgrade).
	if [[ ${E2E_PREVIOUS_RELEASE:-} != 1 ]]; then
		skip+=('^TestUpgradeFromThePreviousRelease')
	fi
	# The node events (^TestNodes) need several nodes, and the rest of the suite
	# is written for one (a node restart there reaches every member): on a
	# cluster of several nodes only ^TestNodes run unless -run says otherwise.
	if ((${LOCAL_CLUSTER_NODES:-1} < 3)); then
		skip+=('^TestNodes')
	elif [[ " $* " != *" -run "* && " $* " != *" -run="* ]]; then
		log "a cluster of ${LOCAL_CLUSTER_NODES} nodes: running the node events (^TestNodes); the rest of the suite runs on one node"
		args+=(-run '^TestNodes')
	fi
	if ((${#skip[@]} > 0)); then
		args+=(-skip "$(IFS='|'; echo "${skip[*]}")")
	fi
	log "go test ${args[*]} ./test/e2e/ $* (log: $LOG)"
	local rc=0
	go test "${args[@]}" ./test/e2e/ "$@" 2>&1 | tee "$LOG" || rc=$?
	summary "$LOG" "$rc"
	return "$rc"
}

clean() {
	cluster_healthy || die "the local cluster is not up"
	local k=$KUBECTL
	"$k" delete namespace -l etcd-operator-e2e --wait=false
	{ "$k" get clusterrolebindings,clusterroles -o name | grep -E '/e2e-e2e-' || true; } | xargs -r "$k" delete
	"$k" delete persistentvolumes -l etcd-operator-e2e
	rm -rf /tmp/etcd-operator-e2e-pv
}

main() {
	if [[ ${1:-} == clean ]]; then
		clean
		return
	fi
	local start=$SECONDS rc=0
	phase "local cluster" ensure_cluster || exit
	phase "cluster images" cluster_images || exit
	# shellcheck disable=SC1090
	source "$ENV_FILE"
	export KUBECONFIG KUBECTL NODE_IP
	# The chart test installs with helm, built from the Go module proxy.
	HELM=$(bash hack/tools.sh helm) || exit
	export HELM
	if [[ ${E2E_SKIP_BUILD:-} == 1 ]]; then
		log "E2E_SKIP_BUILD=1: using the image already on the node"
	else
		phase "build and import the operator image" build_image || exit
	fi
	if [[ ${E2E_PREVIOUS_RELEASE:-} == 1 ]]; then
		phase "build and import the previous release's image" previous_release_image || exit
	fi
	phase "e2e suite" run_suite "$@" || rc=$?
	log "=== total: $((SECONDS - start))s"
	if ((rc != 0)); then
		log "FAILED (exit $rc)"
	else
		log "PASSED"
	fi
	return "$rc"
}

main "$@"
