#!/usr/bin/env bash
# node.sh ACTION NODE: what happens to machines, done to one node of a
# multi-node local cluster (`make local-up NODES=3`). NODE is a node's name
# (vm-b) or zone (b). The extra nodes can be stopped, lost and cut off; the
# first node is the host, which runs the control plane, so only drain applies
# to it (node-restart.sh and node-notready.sh act on it).
#
#   stop NODE      power cut: the node's network goes down and its kubelet,
#                  kube-proxy, every container and containerd are killed at
#                  once; its data (emptyDir, local volumes) stays on disk.
#   start NODE     power back: network, containerd, kubelet, kube-proxy; waits
#                  until the node is Ready. The kubelet restarts the pods still
#                  bound to it, on the volumes they had.
#   lose NODE      lost for good: a power cut, then the Node object deleted and
#                  the node's network namespace, state and local volumes gone.
#   add NODE       a new, empty node under that name (after lose), with every
#                  image and fresh local volumes.
#   cut NODE       a partition: every packet in or out of the node's network
#                  is dropped (iptables in its namespace), processes run on.
#   heal NODE      the partition's rules removed.
#   drain NODE     `kubectl drain` as users run it before maintenance: cordon,
#                  then evictions that respect PodDisruptionBudgets.
#   uncordon NODE  schedulable again.
#   list           the nodes, their zone, address and state.
# Root, like up.sh. Prints how long each step took.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/up.sh"
LOG_TAG=node

CUT_COMMENT=etcd-operator-local-cut

usage() {
	sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# select_extra_node NODE: the extra node's variables, or a clear refusal.
select_extra_node() {
	local i
	if [[ $1 == "$NODE_NAME" || $1 == "${NODE_ZONES[0]}" ]]; then
		die "$1 is the host's node, which runs the control plane: use node-restart.sh or node-notready.sh"
	fi
	i=$(extra_node_index "$1") || die "no extra node $1 (nodes: $(kubectl_admin get nodes -o name | xargs))"
	extra_node_vars "$i"
	XN_INDEX=$i
}

# node_name NODE: the Kubernetes name of a node given by name or zone.
node_name() {
	if [[ $1 == "${NODE_ZONES[0]}" ]]; then echo "$NODE_NAME"; elif extra_node_index "$1" >/dev/null; then
		extra_node_vars "$(extra_node_index "$1")"
		echo "$XN_NAME"
	else echo "$1"; fi
}

node_stop() {
	select_extra_node "$1"
	ip link set "$XN_VETH" down 2>/dev/null || true
	stop_extra_node_processes
	log "node $XN_NAME is off (network down, processes killed; data kept)"
}

node_start() {
	select_extra_node "$1"
	[[ -d $XN_DIR ]] || die "node $XN_NAME was lost for good: use add"
	start_extra_node "$XN_INDEX"
	log "node $XN_NAME is back and Ready"
}

node_lose() {
	select_extra_node "$1"
	ip link set "$XN_VETH" down 2>/dev/null || true
	stop_extra_node_processes
	kubectl_admin delete node "$XN_NAME" --wait=true >/dev/null 2>&1 || true
	remove_extra_node forget
	log "node $XN_NAME is lost for good: Node deleted, its processes, network and local volumes gone"
}

node_add() {
	local images
	select_extra_node "$1"
	images=$(image_tarballs)
	if [[ -f $PROJECT_IMAGE_TAR ]]; then images+=" $PROJECT_IMAGE_TAR"; fi
	# The local volumes of a node lost before are gone with it.
	kubectl_admin delete pv -l "etcd-operator-local/node=$XN_NAME" --wait=false >/dev/null 2>&1 || true
	# shellcheck disable=SC2086 # one tarball per word
	start_extra_node "$XN_INDEX" $images
	if [[ -f $PROJECT_IMAGE_TAR ]]; then CONTAINERD_SOCKETS=$XN_SOCK tag_next_image "$PROJECT_IMAGE_TAR"; fi
	log "node $XN_NAME added"
}

cut_rules() {
	local action=$1
	in_node iptables "$action" INPUT -i eth0 -m comment --comment "$CUT_COMMENT" -j DROP &&
		in_node iptables "$action" OUTPUT -o eth0 -m comment --comment "$CUT_COMMENT" -j DROP &&
		in_node iptables "$action" FORWARD -i eth0 -m comment --comment "$CUT_COMMENT" -j DROP &&
		in_node iptables "$action" FORWARD -o eth0 -m comment --comment "$CUT_COMMENT" -j DROP
}

node_cut() {
	select_extra_node "$1"
	cut_rules -C 2>/dev/null || cut_rules -I
	log "node $XN_NAME is cut off: nothing in or out of its network; its processes run on"
}

node_heal() {
	select_extra_node "$1"
	while cut_rules -D 2>/dev/null; do :; done
	log "node $XN_NAME is reachable again"
}

node_drain() {
	local name
	name=$(node_name "$1")
	kubectl_admin drain "$name" --ignore-daemonsets --delete-emptydir-data --timeout="${DRAIN_TIMEOUT:-10m}"
}

node_list() {
	kubectl_admin get nodes -L topology.kubernetes.io/zone -o wide
}

main() {
	require_root_linux
	detect_node
	local action=${1:-} t0=$SECONDS
	[[ -n $action ]] || usage
	[[ $action == list ]] && {
		node_list
		return
	}
	[[ $# -eq 2 ]] || usage
	case $action in
	stop) node_stop "$2" ;;
	start) node_start "$2" ;;
	lose) node_lose "$2" ;;
	add) node_add "$2" ;;
	cut) node_cut "$2" ;;
	heal) node_heal "$2" ;;
	drain) node_drain "$2" ;;
	uncordon) kubectl_admin uncordon "$(node_name "$2")" ;;
	*) usage ;;
	esac
	log "$action $2: $((SECONDS - t0))s"
}

main "$@"
