#!/usr/bin/env bash
# down.sh [--purge]: stop the local cluster started by up.sh and undo its
# runtime changes to the host. `make local-down` runs it.
#
# Stops exactly the processes up.sh recorded (by pid), removes the pod
# containers, unmounts the kubelet's mounts, deletes the pods' network
# namespaces, the cni0 bridge and the KUBE-*/CNI-* iptables chains.
# Keeps certificates, etcd data and logs (so up.sh resumes the same cluster),
# the containerd images, the binary cache and the Go caches (so the next
# up.sh is fast). --purge also deletes the state directory and the kubelet's
# directory: the next up.sh starts an empty cluster.
#
# Idempotent: running it twice, or without a cluster, is fine.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

LOG_TAG=${LOG_TAG:-local-down}
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PURGE=0
for arg in "$@"; do
	case $arg in
	--purge) PURGE=1 ;;
	-h | --help)
		sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*) die "unknown argument: $arg (usage: down.sh [--purge])" ;;
	esac
done

# Pod containers, through our containerd while it still runs: kill and
# delete every task, then delete the containers (and their snapshots).
remove_pod_containers() {
	proc_alive containerd && containerd_up || return 0
	local ids
	ids=$(ctr_k8s tasks ls -q 2>/dev/null || true)
	if [[ -n $ids ]]; then
		log "removing $(wc -w <<<"$ids") pod container task(s)"
		# shellcheck disable=SC2086
		ctr_k8s tasks rm -f $ids >/dev/null 2>&1 || true
	fi
	ids=$(ctr_k8s containers ls -q 2>/dev/null || true)
	if [[ -n $ids ]]; then
		log "removing $(wc -w <<<"$ids") pod container(s)"
		# shellcheck disable=SC2086
		ctr_k8s containers rm $ids >/dev/null 2>&1 || true
	fi
}

# Fallback when containerd was already gone: the shims of namespace k8s.io
# and the processes in the kubelet's pod cgroups. Only when no containerd
# and no kubelet run at all (see main), so nothing else's pods can be hit.
kill_leftover_pod_processes() {
	local pids=() p f
	for p in /proc/[0-9]*; do
		[[ $(readlink "$p/exe" 2>/dev/null) == */containerd-shim-runc-v2 ]] || continue
		tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -- '-namespace k8s.io ' && pids+=("${p#/proc/}")
	done
	for f in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
		[[ -d $f ]] || continue
		while read -r p; do pids+=("$p"); done < <(find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null)
	done
	((${#pids[@]} == 0)) && return 0
	log "killing ${#pids[@]} leftover pod process(es) and shim(s)"
	kill -KILL "${pids[@]}" 2>/dev/null || true
}

# The kubelet bind-mounts its root directory onto itself (to make it a
# shared mount). A bind mount has a root other than "/" in mountinfo; a
# filesystem someone mounted at $KUBELET_ROOT has "/" and is left alone.
unmount_kubelet_root() {
	local i
	for ((i = 0; i < 5; i++)); do
		awk -v p="$KUBELET_ROOT" '$5 == p && $4 != "/" {found=1} END {exit !found}' /proc/self/mountinfo || return 0
		umount "$KUBELET_ROOT" || return 0
		log "unmounted the kubelet's bind mount of $KUBELET_ROOT"
	done
}

# The pods' network namespaces (containerd names them cni-<uuid>).
delete_netns() {
	local ns n=0
	for ns in /run/netns/cni-*; do
		[[ -e $ns ]] || continue
		ip netns delete "${ns##*/}" 2>/dev/null || { umount "$ns" 2>/dev/null; rm -f "$ns"; } || true
		n=$((n + 1))
	done
	((n == 0)) || log "deleted $n pod network namespace(s)"
}

# Remove the KUBE-* (kubelet, kube-proxy) and CNI-* (bridge, portmap) chains
# and every rule that mentions them, and the pods' masquerade rule
# (setup_pod_masquerade), table by table, leaving other rules as
# they are: save the table, drop those lines, restore it.
cleanup_iptables() {
	local tool table dump
	for tool in iptables ip6tables; do
		command -v "$tool-save" >/dev/null || continue
		for table in filter nat mangle raw; do
			dump=$("$tool-save" -t "$table" 2>/dev/null) || continue
			grep -qE "(KUBE|CNI)-|$POD_MASQ_COMMENT" <<<"$dump" || continue
			grep -vE "(KUBE|CNI)-|$POD_MASQ_COMMENT" <<<"$dump" | "$tool-restore" ||
				warn "could not clean $tool table $table"
			log "removed KUBE-*/CNI-* chains from $tool table $table"
		done
	done
}

# Undo what the cluster's pods left on the host, once no kubelet, kube-proxy
# or containerd runs any more.
host_cleanup() {
	kill_leftover_pod_processes
	unmount_under "$KUBELET_ROOT"
	unmount_kubelet_root
	unmount_under /run/containerd/io.containerd.runtime.v2.task/k8s.io
	unmount_under /run/containerd/io.containerd.grpc.v1.cri/sandboxes
	delete_netns
	if ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
		ip link delete "$CNI_BRIDGE" && log "deleted bridge $CNI_BRIDGE"
	fi
	cleanup_iptables
	remove_unrouted_ranges
	# IP allocations and CNI results of the pods just removed.
	rm -rf "${CNI_IPAM_DIR:?}"/* /var/lib/cni/results/"$CNI_NETWORK_NAME"-* 2>/dev/null || true
}

main() {
	require_root_linux
	# The Kubernetes processes stop in parallel (each takes a second or two to
	# shut down gracefully); the kubelet is gone before the pods are removed,
	# so it cannot recreate them. The apiserver keeps no state of its own and
	# its graceful shutdown can wait up to a minute for connections to drain,
	# so it gets 5 s. etcd goes after the apiserver, containerd last.
	local c jobs=() forget=
	# The extra nodes first: their kubelets and containerds are ours too, and
	# the check below for others' would take them for someone else's.
	if ((PURGE)); then forget=forget; fi
	remove_extra_nodes "$forget"
	for c in kube-proxy kubelet kube-scheduler kube-controller-manager; do
		stop_proc "$c" &
		jobs+=($!)
	done
	stop_proc kube-apiserver 5 &
	jobs+=($!)
	wait "${jobs[@]}"
	stop_proc etcd
	remove_pod_containers
	stop_proc containerd

	# Our processes are gone now. If a kubelet, kube-proxy or containerd still
	# runs, it is not ours (another state directory, or started by hand): the
	# mounts, namespaces, bridge and iptables rules are then its, not ours.
	local others
	others=$(for c in kubelet kube-proxy containerd; do pgrep -x "$c" || true; done | xargs)
	if [[ -n $others ]]; then
		warn "kubelet/kube-proxy/containerd not started by this up.sh are running (pids $others):"
		warn "leaving pod processes, mounts, network namespaces, $CNI_BRIDGE and iptables alone"
	else
		host_cleanup
	fi

	if ((PURGE)); then
		if [[ -n $others ]] || grep -q " $KUBELET_ROOT/" /proc/self/mounts; then
			warn "$KUBELET_ROOT is in use: not deleting it"
		else
			rm -rf --one-file-system "$KUBELET_ROOT"
			log "purged $KUBELET_ROOT"
		fi
		rm -rf --one-file-system "$STATE_DIR"
		log "purged $STATE_DIR (binary cache $CACHE_DIR and containerd's images kept)"
	fi
	log "down"
}

# Run main only when executed, so tests can source the functions.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
