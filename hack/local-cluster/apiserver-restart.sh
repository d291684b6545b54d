#!/usr/bin/env bash
# apiserver-restart.sh: the local cluster's kube-apiserver goes away and comes
# back, as it does on a control-plane upgrade or a crash:
#   1. kube-apiserver is stopped (SIGTERM, SIGKILL after 10 s);
#   2. after DOWN_SECONDS (default 20) it starts again with the command line it
#      had, and the script returns once /readyz answers.
# Everything else keeps running: the kubelet keeps the pods' containers, kube-proxy
# keeps its rules, CoreDNS answers from its cache; only what talks to the
# apiserver (controllers, operators, the kubelet's status updates) has to wait.
# Usage: sudo bash hack/local-cluster/apiserver-restart.sh [DOWN_SECONDS]
# For tests (test/e2e) and for users who want to see the operator ride it out.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/up.sh"
LOG_TAG=apiserver-restart

restart_apiserver() {
	local down=${1:-20} pid t0=$SECONDS args=()
	require_root_linux
	detect_node
	cluster_healthy || die "the local cluster is not up (sudo make local-up)"

	# The command line is read from the running process, so the restart gives
	# it the flags up.sh gave it without a second copy of them.
	pid=$(proc_pid kube-apiserver) || die "kube-apiserver is not running"
	mapfile -d '' -t args <"/proc/$pid/cmdline"
	((${#args[@]} > 0)) || die "cannot read the command line of kube-apiserver (pid $pid)"

	stop_proc kube-apiserver 10
	log "kube-apiserver down; starting again in ${down}s"
	sleep "$down"

	start_proc kube-apiserver "${args[@]}"
	WATCHED=(kube-apiserver)
	wait_for 90 "kube-apiserver /readyz" kubectl_admin get --raw /readyz
	log "kube-apiserver back $((SECONDS - t0))s after it was stopped"
}

restart_apiserver "$@"
