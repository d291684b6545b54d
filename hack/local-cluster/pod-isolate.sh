#!/usr/bin/env bash
# pod-isolate.sh: cut a pod of the local node off on some TCP ports, and heal it.
#   cut  NAMESPACE POD [PORT...]  drop every packet to or from PORT (default 2380,
#                                 etcd's peer port) in the pod's network namespace;
#   heal NAMESPACE POD            remove those rules again.
# The rules live in a chain of their own (LC-ISOLATE) inside the pod's network
# namespace, found through containerd (the pod's sandbox task), so they hold
# while the pod's containers restart and go with the pod; nothing on the host
# changes. Both directions are dropped: with etcd's peer port that is a member
# that still answers its clients on 2379 but hears no peer and is heard by none.
# Usage: sudo bash hack/local-cluster/pod-isolate.sh cut default example-0001 [2380]
# For tests (test/e2e) and for users who want to see a partitioned member rejoin.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
LOG_TAG=pod-isolate
CHAIN=LC-ISOLATE

# sandbox_pid NAMESPACE POD: the pid of the pod's sandbox (pause) task, which
# holds the pod's network namespace.
sandbox_pid() {
	local id pid one
	id=$(ctr_k8s containers ls -q "labels.\"io.kubernetes.pod.namespace\"==$1,labels.\"io.kubernetes.pod.name\"==$2,labels.\"io.cri-containerd.kind\"==sandbox")
	[[ -n $id ]] || die "no sandbox of pod $1/$2 on this node"
	# A pod recreated under the same name has a second sandbox until the old one
	# is removed; the running one is the pod's.
	for one in $id; do
		pid=$(ctr_k8s tasks ls | awk -v id="$one" '$1 == id && $3 == "RUNNING" {print $2}')
		[[ -n $pid ]] && echo "$pid" && return 0
	done
	die "no running sandbox task of pod $1/$2"
}

in_pod() { nsenter --target "$PID" --net -- "$@"; }

cut() {
	local port
	heal
	in_pod iptables -N "$CHAIN"
	for port in "$@"; do
		in_pod iptables -A "$CHAIN" -p tcp --dport "$port" -j DROP
		in_pod iptables -A "$CHAIN" -p tcp --sport "$port" -j DROP
	done
	in_pod iptables -I INPUT -j "$CHAIN"
	in_pod iptables -I OUTPUT -j "$CHAIN"
	log "cut $NS/$POD (netns of pid $PID) off on tcp port(s) $*"
}

heal() {
	in_pod iptables -D INPUT -j "$CHAIN" 2>/dev/null || true
	in_pod iptables -D OUTPUT -j "$CHAIN" 2>/dev/null || true
	in_pod iptables -F "$CHAIN" 2>/dev/null || true
	in_pod iptables -X "$CHAIN" 2>/dev/null || true
}

main() {
	(($# >= 3)) || die "usage: $0 cut|heal NAMESPACE POD [PORT...]"
	require_root_linux
	local verb=$1
	NS=$2 POD=$3
	shift 3
	PID=$(sandbox_pid "$NS" "$POD")
	case $verb in
	cut) cut "${@:-2380}" ;;
	heal)
		heal
		log "healed $NS/$POD (netns of pid $PID)"
		;;
	*) die "unknown verb $verb (cut or heal)" ;;
	esac
}

main "$@"
