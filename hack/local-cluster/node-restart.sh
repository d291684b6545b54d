#!/usr/bin/env bash
# node-restart.sh: the local node goes through what a reboot does to it, while
# the control plane (its own processes, as on a separate machine) stays up:
#   1. the kubelet and kube-proxy stop;
#   2. every container is killed with SIGKILL (a power cut gives no grace);
#   3. containerd stops;
#   4. after DOWN_SECONDS (default 5) containerd, the kubelet and kube-proxy
#      start again and the node reports Ready; the pods' containers are then
#      recreated by the kubelet, each on the volumes it had (emptyDir data is
#      gone with the pod only when the pod itself is replaced).
# Usage: sudo bash hack/local-cluster/node-restart.sh [DOWN_SECONDS]
# For tests (test/e2e) and for users who want to see a cluster survive a reboot.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/up.sh"
LOG_TAG=node-restart

restart_node() {
	local down=${1:-5} ids t0=$SECONDS
	require_root_linux
	detect_node
	cluster_healthy || die "the local cluster is not up (sudo make local-up)"

	stop_proc kubelet 10
	stop_proc kube-proxy 10
	ids=$(ctr_k8s tasks ls -q 2>/dev/null || true)
	log "killing $(wc -w <<<"$ids") container(s) with SIGKILL"
	for id in $ids; do
		ctr_k8s tasks kill --signal SIGKILL "$id" >/dev/null 2>&1 || true
	done
	stop_proc containerd 10
	log "node down; starting again in ${down}s"
	sleep "$down"

	start_containerd
	start_node
	log "node restarted in $((SECONDS - t0))s"
}

restart_node "$@"
