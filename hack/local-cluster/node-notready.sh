#!/usr/bin/env bash
# node-notready.sh: the local node's kubelet stops for as long as the node
# controller takes to mark the node NotReady and its pods not Ready, as when a
# node loses its network or its kubelet hangs; its containers keep running.
#   1. the kubelet stops (kube-proxy, containerd and every container run on);
#   2. once the node's Ready condition is no longer True and every pod on it
#      is marked not Ready (their endpoints leave the Services), the node stays
#      so for HOLD_SECONDS (default 10);
#   3. the kubelet starts again and the node reports Ready.
# The node controller waits --node-monitor-grace-period (50 s on Kubernetes
# 1.32) before it marks anything, so a run takes about a minute and a half. Pods
# tolerate the unreachable taint for 300 s (DefaultTolerationSeconds): none is
# evicted.
# Usage: sudo bash hack/local-cluster/node-notready.sh [HOLD_SECONDS]
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/up.sh"
LOG_TAG=node-notready

node_not_ready() { ! node_ready; }

# Every pod bound to the node has Ready=False (or no Ready condition yet).
pods_marked_not_ready() {
	local statuses
	statuses=$(kubectl_admin get pods -A --field-selector "spec.nodeName=$NODE_NAME" \
		-o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}') || return 1
	! grep -qx True <<<"$statuses"
}

# Whatever stops this script, the node gets its kubelet back.
restore_kubelet() {
	if ! proc_alive kubelet; then
		log "starting the kubelet again"
		start_kubelet
	fi
}

node_notready() {
	local hold=${1:-10} t0=$SECONDS
	require_root_linux
	detect_node
	cluster_healthy || die "the local cluster is not up (sudo make local-up)"

	trap restore_kubelet EXIT
	stop_proc kubelet 10
	wait_for 180 "node $NODE_NAME to be marked NotReady" node_not_ready
	log "node NotReady $((SECONDS - t0))s after the kubelet stopped"
	wait_for 60 "the pods on $NODE_NAME to be marked not Ready" pods_marked_not_ready
	log "its pods not Ready $((SECONDS - t0))s after the kubelet stopped; holding ${hold}s"
	sleep "$hold"

	start_kubelet
	WATCHED+=(kubelet)
	wait_for 120 "node $NODE_NAME to be Ready" node_ready_since_start
	log "node Ready again $((SECONDS - t0))s after the kubelet stopped"
}

node_notready "$@"
