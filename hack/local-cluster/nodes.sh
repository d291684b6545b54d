# shellcheck shell=bash disable=SC2034 # the variables are used by the scripts that source this
# nodes.sh: the extra nodes of a multi-node local cluster (`make local-up
# NODES=3`). Sourced by up.sh, down.sh, load-image.sh and node.sh, after
# lib.sh; never run.
#
# The first node is the host itself, exactly as with NODES=1 (zone a). Every
# extra node is a machine of its own as far as Kubernetes and etcd can tell:
#   - a network namespace (eol-node-<zone>, pinned under NODES_NETNS_DIR) joined to the host by a veth on
#     the bridge eol-nodes, with its own address (172.31.250.<n>), its own pod
#     range (10.244.<n-1>.0/24 on its own cni0), its own iptables and
#     conntrack; the host routes each pod range to its node;
#   - its own containerd (root, state and socket under
#     $STATE_DIR/nodes/<zone>), kubelet (root directory, cgroup root
#     /eol-node-<zone>, pod logs) and kube-proxy, started inside the namespace
#     with `nsenter --net` only: the kubelet's volume mounts must be the ones
#     containerd sees, so the mount namespace stays the host's;
#   - its own client and serving certificates (system:node:<name>);
#   - the label topology.kubernetes.io/zone=<zone>, and local volumes bound to
#     it (StorageClass local-node), which, like real local disks, cannot follow
#     a pod to another node.
# All nodes share the host's disk, CPU and memory: a node "lost for good"
# loses its processes, its network and its local volumes, not the machine.

# At most six nodes: one /24 of pod addresses each, zones a to f.
NODE_ZONES=(a b c d e f)
NODES_BRIDGE=eol-nodes
NODES_NET=172.31.250
NODES_BRIDGE_IP=$NODES_NET.1
NODES_DIR=$STATE_DIR/nodes
# The nodes' network namespaces are pinned here, not under /run/netns: `ip
# netns add` bind-mounts /run/netns onto itself, which hides the pod
# namespaces containerd pinned there before and leaves them impossible to
# delete.
NODES_NETNS_DIR=/run/etcd-operator-local-nodes
NODES_FILE=$STATE_DIR/nodes.list # "<name> <zone> <ip>" per extra node
LOCAL_VOLUME_CLASS=local-node
LOCAL_VOLUMES_PER_NODE=${LOCAL_VOLUMES_PER_NODE:-6}
# The comment that marks the host's iptables rules for the extra nodes.
NODES_RULE_COMMENT=etcd-operator-local-nodes

# extra_node_vars INDEX: set the variables of extra node INDEX (2..6):
# XN_ZONE XN_NAME XN_IP XN_NETNS XN_VETH XN_DIR XN_SOCK XN_POD_SUBNET XN_CGROUP.
extra_node_vars() {
	local i=$1
	((i >= 2 && i <= ${#NODE_ZONES[@]})) || die "node index $i: nodes 2 to ${#NODE_ZONES[@]} can be extra nodes"
	XN_ZONE=${NODE_ZONES[i - 1]}
	# The name it was added under (down.sh and node.sh do not detect the
	# host's node name as up.sh does).
	XN_NAME=$(awk -v z="$XN_ZONE" '$2 == z {print $1}' "$NODES_FILE" 2>/dev/null || true)
	[[ -n $XN_NAME ]] || XN_NAME=${NODE_NAME:?}-$XN_ZONE
	XN_IP=$NODES_NET.$i
	XN_NETNS=$NODES_NETNS_DIR/eol-node-$XN_ZONE
	XN_VETH=eol-$XN_ZONE
	XN_DIR=$NODES_DIR/$XN_ZONE
	XN_SOCK=/run/eol-node-$XN_ZONE/containerd.sock
	XN_POD_SUBNET=10.244.$((i - 1)).0/24
	XN_CGROUP=eol-node-$XN_ZONE
}

# extra_node_index NAME-OR-ZONE: the index of an extra node by name or zone.
extra_node_index() {
	local i
	for ((i = 2; i <= ${#NODE_ZONES[@]}; i++)); do
		extra_node_vars "$i"
		if [[ $1 == "$XN_NAME" || $1 == "$XN_ZONE" ]]; then
			echo "$i"
			return 0
		fi
	done
	return 1
}

# extra_node_indexes: the indexes of the extra nodes this cluster has (from
# NODES_FILE, written when they were added), one per line.
extra_node_indexes() {
	[[ -f $NODES_FILE ]] || return 0
	local name zone ip
	while read -r name zone ip; do
		[[ -n $zone ]] && extra_node_index "$zone"
	done <"$NODES_FILE"
}

# running_node_count: the host's node and every extra node whose kubelet runs.
running_node_count() {
	local i n=1
	for i in $(extra_node_indexes); do
		extra_node_vars "$i"
		if proc_alive "kubelet-$XN_ZONE"; then n=$((n + 1)); fi
	done
	echo "$n"
}

# in_node CMD...: run CMD in the current extra node's network namespace.
in_node() { nsenter --net="$XN_NETNS" "$@"; }

# ctr_node ARGS...: ctr on the current extra node's containerd.
ctr_node() { ctr --address "$XN_SOCK" --namespace k8s.io "$@"; }

# all_containerd_sockets: the host's containerd and every running extra
# node's, for images that every node must have.
all_containerd_sockets() {
	echo "$CONTAINERD_SOCK"
	local i
	for i in $(extra_node_indexes); do
		extra_node_vars "$i"
		proc_alive "containerd-$XN_ZONE" && echo "$XN_SOCK"
	done
	return 0
}

# ---------------------------------------------------------------------------
# Network
# ---------------------------------------------------------------------------
setup_nodes_bridge() {
	if ! ip link show "$NODES_BRIDGE" >/dev/null 2>&1; then
		ip link add "$NODES_BRIDGE" type bridge
		ip addr add "$NODES_BRIDGE_IP/24" dev "$NODES_BRIDGE"
	fi
	ip link set "$NODES_BRIDGE" up
	# A node lost for good takes its range's route with it: its pods'
	# addresses are then unreachable (setup_unrouted_ranges, made again in
	# case this cluster was brought up before it).
	setup_unrouted_ranges
	# What the nodes send elsewhere (CoreDNS's upstream) leaves with the host's
	# address; between nodes and to the host it keeps its own.
	iptables -t nat -C POSTROUTING -s "$NODES_NET.0/24" ! -d "$NODES_NET.0/24" ! -o "$NODES_BRIDGE" \
		-m comment --comment "$NODES_RULE_COMMENT" -j MASQUERADE 2>/dev/null ||
		iptables -t nat -A POSTROUTING -s "$NODES_NET.0/24" ! -d "$NODES_NET.0/24" ! -o "$NODES_BRIDGE" \
			-m comment --comment "$NODES_RULE_COMMENT" -j MASQUERADE
}

setup_node_network() {
	if ! mountpoint -q "$XN_NETNS" 2>/dev/null; then
		mkdir -p "$NODES_NETNS_DIR"
		touch "$XN_NETNS"
		unshare --net="$XN_NETNS" true
	fi
	if ! ip link show "$XN_VETH" >/dev/null 2>&1; then
		# Made inside the node, its other end moved out to this shell's
		# network namespace: the host's.
		in_node ip link add eth0 type veth peer name "$XN_VETH" netns "$$"
		ip link set "$XN_VETH" master "$NODES_BRIDGE"
	fi
	ip link set "$XN_VETH" up
	in_node ip link set lo up
	in_node ip addr replace "$XN_IP/24" dev eth0
	in_node ip link set eth0 up
	in_node ip route replace default via "$NODES_BRIDGE_IP"
	in_node sysctl -q -w net.ipv4.ip_forward=1
	in_node sysctl -q -w net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1 2>/dev/null ||
		warn "bridge netfilter sysctls are not per network namespace on this kernel"
	ip route replace "$XN_POD_SUBNET" via "$XN_IP" dev "$NODES_BRIDGE"
	setup_pod_masquerade "$XN_POD_SUBNET" in_node
}

# ---------------------------------------------------------------------------
# cgroups: the node's pods live under /<XN_CGROUP>/kubepods in every v1
# hierarchy, so its processes can be found (and killed) by node.
# ---------------------------------------------------------------------------
setup_node_cgroups() {
	local h
	for h in /sys/fs/cgroup/*/; do
		[[ -f $h/cgroup.procs && $h != */unified/ ]] || continue
		mkdir -p "$h$XN_CGROUP"
	done
	if [[ -d /sys/fs/cgroup/cpuset/$XN_CGROUP ]]; then
		cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$XN_CGROUP/cpuset.cpus"
		cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$XN_CGROUP/cpuset.mems"
	fi
}

# node_cgroup_pids: every process in the node's pod cgroups.
node_cgroup_pids() {
	local d
	for d in /sys/fs/cgroup/pids/$XN_CGROUP /sys/fs/cgroup/memory/$XN_CGROUP; do
		[[ -d $d ]] || continue
		find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
	done | sort -u
}

# node_shim_pids: the containerd shims of the node's containerd.
node_shim_pids() {
	local p
	for p in /proc/[0-9]*; do
		[[ $(readlink "$p/exe" 2>/dev/null) == */containerd-shim-runc-v2 ]] || continue
		tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "-address $XN_SOCK " && echo "${p#/proc/}"
	done
	return 0
}

remove_node_cgroups() {
	local d
	for d in /sys/fs/cgroup/*/"$XN_CGROUP"; do
		[[ -d $d ]] || continue
		find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
}

# ---------------------------------------------------------------------------
# Certificates and configuration
# ---------------------------------------------------------------------------
setup_node_pki() {
	local identity="$XN_NAME $XN_IP 1" f=$XN_DIR/identity
	[[ $(cat "$f" 2>/dev/null) != "$identity" || ! -f $PKI_DIR/kubelet-$XN_ZONE.crt ]] || return 0
	new_cert "kubelet-$XN_ZONE" "system:node:$XN_NAME" system:nodes
	new_cert "kubelet-serving-$XN_ZONE" "$XN_NAME" "" "DNS:$XN_NAME,DNS:localhost,IP:$XN_IP,IP:127.0.0.1"
	echo "$identity" >"$f"
}

# write_remote_kubeconfig FILE CERT-NAME: like write_kubeconfig, for a node
# that reaches the apiserver over the network rather than on 127.0.0.1.
write_remote_kubeconfig() {
	write_kubeconfig "$1" "$2"
	sed -i "s|https://127.0.0.1:$APISERVER_PORT|https://$NODE_IP:$APISERVER_PORT|" "$1"
}

# render_for_node TEMPLATE: up.sh's render, with the current extra node's
# paths, socket, pod range, certificate and name.
render_for_node() {
	CONTAINERD_ROOT=$XN_DIR/containerd CONTAINERD_STATE=/run/eol-node-$XN_ZONE CONTAINERD_SOCK=$XN_SOCK \
		RUNC_ROOT=/run/eol-node-$XN_ZONE/runc CNI_CONF_DIR=$XN_DIR/cni/net.d CNI_IPAM_DIR=$XN_DIR/cni/ipam \
		POD_SUBNET=$XN_POD_SUBNET KUBELET_SERVING_CERT=kubelet-serving-$XN_ZONE NODE_NAME=$XN_NAME \
		CONF_DIR=$XN_DIR/config render "$1"
}

write_node_configs() {
	local conf=$XN_DIR/config
	KUBELET_RESOLV_CONF=${KUBELET_RESOLV_CONF:-$CONF_DIR/resolv.conf}
	mkdir -p "$conf" "$XN_DIR/cni/net.d" "$XN_DIR/cni/ipam" "$XN_DIR/pod-logs" "$XN_DIR/kubelet"
	write_remote_kubeconfig "$conf/kubelet.kubeconfig" "kubelet-$XN_ZONE"
	write_remote_kubeconfig "$conf/kube-proxy.kubeconfig" kube-proxy
	render_for_node containerd.toml >"$conf/containerd.toml"
	render_for_node cni.conflist >"$XN_DIR/cni/net.d/10-$CNI_NETWORK_NAME.conflist"
	render_for_node kube-proxy-config.yaml >"$conf/kube-proxy-config.yaml"
	{
		render_for_node kubelet-config.yaml
		# The node's pods under a cgroup root of their own, and their logs
		# apart from the other kubelets', which would take them for orphans.
		echo "cgroupRoot: /$XN_CGROUP"
		echo "podLogsDir: $XN_DIR/pod-logs"
	} >"$conf/kubelet-config.yaml"
}

# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------
start_node_containerd() {
	start_proc "containerd-$XN_ZONE" nsenter --net="$XN_NETNS" \
		containerd --config "$XN_DIR/config/containerd.toml"
	wait_for 30 "containerd of node $XN_NAME" ctr --address "$XN_SOCK" version
}

import_node_images() {
	local tar
	for tar in "$@"; do
		[[ -f $tar ]] || continue
		CONTAINERD_SOCKETS=$XN_SOCK import_image "$tar"
	done
}

start_node_kubelet() {
	XN_KUBELET_STARTED_AT=$(date +%s)
	start_proc "kubelet-$XN_ZONE" nsenter --net="$XN_NETNS" "$K8S_BIN/kubelet" \
		--config="$XN_DIR/config/kubelet-config.yaml" --kubeconfig="$XN_DIR/config/kubelet.kubeconfig" \
		--hostname-override="$XN_NAME" --node-ip="$XN_IP" --root-dir="$XN_DIR/kubelet" \
		--node-labels="topology.kubernetes.io/zone=$XN_ZONE"
}

start_node_proxy() {
	start_proc "kube-proxy-$XN_ZONE" nsenter --net="$XN_NETNS" \
		"$K8S_BIN/kube-proxy" --config="$XN_DIR/config/kube-proxy-config.yaml"
}

# extra_node_ready: Ready, as posted by the kubelet started last (after a
# stop, the Node still says Ready from before until the node controller
# notices): its Lease was renewed since it started.
extra_node_ready() {
	local renewed
	[[ $(kubectl_admin get node "$XN_NAME" \
		-o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]] || return 1
	renewed=$(kubectl_admin -n kube-node-lease get lease "$XN_NAME" -o jsonpath='{.spec.renewTime}') || return 1
	(($(date -d "$renewed" +%s) >= ${XN_KUBELET_STARTED_AT:-0}))
}

# start_extra_node INDEX: bring extra node INDEX up (again), with the images
# given as further arguments; idempotent.
start_extra_node() {
	local i=$1
	shift
	extra_node_vars "$i"
	mkdir -p "$XN_DIR"
	setup_nodes_bridge
	setup_node_network
	setup_node_cgroups
	setup_node_pki
	write_node_configs
	proc_alive "containerd-$XN_ZONE" || start_node_containerd
	import_node_images "$@"
	proc_alive "kubelet-$XN_ZONE" || start_node_kubelet
	proc_alive "kube-proxy-$XN_ZONE" || start_node_proxy
	grep -q "^$XN_NAME " "$NODES_FILE" 2>/dev/null || echo "$XN_NAME $XN_ZONE $XN_IP" >>"$NODES_FILE"
	wait_for 120 "node $XN_NAME to be Ready" extra_node_ready
	create_local_volumes "$XN_NAME" "$XN_DIR/volumes"
}

# stop_extra_node_processes: what a power cut does to the current extra node:
# its kubelet, kube-proxy, every container and containerd are gone at once.
stop_extra_node_processes() {
	local pids
	stop_proc "kubelet-$XN_ZONE" 5
	stop_proc "kube-proxy-$XN_ZONE" 5
	pids=$( (node_cgroup_pids; node_shim_pids) | xargs)
	if [[ -n $pids ]]; then
		# shellcheck disable=SC2086 # one pid per word
		kill -KILL $pids 2>/dev/null || true
	fi
	stop_proc "containerd-$XN_ZONE" 5
	pids=$( (node_cgroup_pids; node_shim_pids) | xargs)
	if [[ -n $pids ]]; then
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null || true
	fi
}

# remove_extra_node: stop the current extra node and undo everything it put
# on the host; with "forget", its state (data, local volumes) goes too.
remove_extra_node() {
	local forget=${1:-}
	stop_extra_node_processes
	unmount_under "$XN_DIR/kubelet"
	# The kubelet's bind mount of its root directory onto itself.
	while mountpoint -q "$XN_DIR/kubelet" 2>/dev/null; do umount "$XN_DIR/kubelet" || break; done
	unmount_under "/run/eol-node-$XN_ZONE"
	unmount_under "$XN_DIR/containerd"
	ip route del "$XN_POD_SUBNET" 2>/dev/null || true
	ip link delete "$XN_VETH" 2>/dev/null || true
	if mountpoint -q "$XN_NETNS" 2>/dev/null; then umount "$XN_NETNS" || umount -l "$XN_NETNS" || true; fi
	rm -f "$XN_NETNS"
	remove_node_cgroups
	if [[ $forget == forget ]]; then
		rm -rf --one-file-system "$XN_DIR"
		if [[ -f $NODES_FILE ]]; then
			grep -v "^$XN_NAME " "$NODES_FILE" >"$NODES_FILE.tmp" || true
			mv "$NODES_FILE.tmp" "$NODES_FILE"
		fi
	fi
}

# remove_extra_nodes [forget]: every extra node, then the bridge and the
# host's rules for them.
remove_extra_nodes() {
	local i
	for i in $(extra_node_indexes); do
		extra_node_vars "$i"
		log "stopping node $XN_NAME"
		remove_extra_node "${1:-}"
	done
	ip link delete "$NODES_BRIDGE" 2>/dev/null || true
	while iptables -t nat -D POSTROUTING -s "$NODES_NET.0/24" ! -d "$NODES_NET.0/24" ! -o "$NODES_BRIDGE" \
		-m comment --comment "$NODES_RULE_COMMENT" -j MASQUERADE 2>/dev/null; do :; done
	if [[ ${1:-} == forget ]]; then rm -f "$NODES_FILE"; fi
}

# ---------------------------------------------------------------------------
# Local volumes: directories of one node, offered as PersistentVolumes of
# class local-node with node affinity, so a claim bound to one stays on that
# node, as on real local disks. Created once per node; a released volume
# keeps its data (Retain) until a test or the user deletes it.
# ---------------------------------------------------------------------------
create_local_volumes() {
	local node=$1 dir=$2 k name
	for ((k = 1; k <= LOCAL_VOLUMES_PER_NODE; k++)); do
		name=local-$node-$k
		kubectl_admin get pv "$name" >/dev/null 2>&1 && continue
		mkdir -p "$dir/$k"
		kubectl_admin apply -f - >/dev/null <<-EOF
			apiVersion: v1
			kind: PersistentVolume
			metadata:
			  name: $name
			  labels: {etcd-operator-local/node: "$node"}
			spec:
			  capacity: {storage: 1Gi}
			  accessModes: [ReadWriteOnce]
			  persistentVolumeReclaimPolicy: Retain
			  storageClassName: $LOCAL_VOLUME_CLASS
			  local: {path: "$dir/$k"}
			  nodeAffinity:
			    required:
			      nodeSelectorTerms:
			        - matchExpressions:
			            - {key: kubernetes.io/hostname, operator: In, values: ["$node"]}
		EOF
	done
}

# forget_extra_nodes_beyond N: a cluster started again with fewer nodes than
# it had leaves the others out for good: their Node objects are deleted (so
# the pods bound to them, CoreDNS's say, are made again on the nodes that run)
# and their state is removed. A node beyond N that runs is left as it is.
forget_extra_nodes_beyond() {
	local n=$1 i
	for i in $(extra_node_indexes); do
		((i > n)) || continue
		extra_node_vars "$i"
		if proc_alive "kubelet-$XN_ZONE"; then
			log "node $XN_NAME runs: left as it is (NODES=$n)"
			continue
		fi
		log "node $XN_NAME is not started again (NODES=$n): deleting it"
		kubectl_admin delete node "$XN_NAME" --wait=false >/dev/null 2>&1 || true
		kubectl_admin delete pv -l "etcd-operator-local/node=$XN_NAME" --wait=false >/dev/null 2>&1 || true
		remove_extra_node forget
	done
}

# label_first_node: the host's node is zone a once the cluster has others.
label_first_node() {
	kubectl_admin label node "$NODE_NAME" --overwrite "topology.kubernetes.io/zone=${NODE_ZONES[0]}" >/dev/null
}
