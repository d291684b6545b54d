# shellcheck shell=bash disable=SC2034 # the variables are used by the scripts that source this
# lib.sh: settings and helpers shared by up.sh, down.sh and load-image.sh.
# Sourced, never run. Everything the local cluster puts on the host is named
# here, so the three scripts agree on it.

# ---------------------------------------------------------------------------
# Locations
# ---------------------------------------------------------------------------
LC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$LC_DIR/../.." && pwd)

# Cluster state: certificates, configs, logs, pid files, etcd data.
STATE_DIR=${LOCAL_CLUSTER_STATE_DIR:-/var/lib/etcd-operator-local}
# Built binaries and images; kept by down.sh (even --purge) so the next
# up.sh does not rebuild anything.
CACHE_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator-local
BIN_CACHE=$CACHE_DIR/bin
TOOLS_DIR=$CACHE_DIR/tools
IMAGES_DIR=$CACHE_DIR/images

PKI_DIR=$STATE_DIR/pki
CONF_DIR=$STATE_DIR/config
LOG_DIR=$STATE_DIR/logs
PID_DIR=$STATE_DIR/pids
ADMIN_KUBECONFIG=$STATE_DIR/admin.kubeconfig
ENV_FILE=$STATE_DIR/env
CNI_CONF_DIR=$STATE_DIR/cni/net.d
CNI_IPAM_DIR=$STATE_DIR/cni/ipam

# ---------------------------------------------------------------------------
# Versions
# ---------------------------------------------------------------------------
K8S_VERSION=v1.32.9
COREDNS_VERSION=v1.15.0
# Built from the Go module proxy. 3.5.35 is the newest 3.5 the proxy serves
# (3.5.26, 3.5.28-3.5.30 are refused): etcd's guide wants 3.5.32 or later
# before a move to 3.6, so version-move tests go 3.5.21 -> 3.5.35 -> 3.6.6.
# 3.6.16 and 3.7.3 are the newest 3.6 and 3.7 it serves; etcd 3.7 wants a
# recent 3.6 patch before a move to it.
ETCD_BUILT_VERSIONS=(3.5.21 3.5.35 3.6.6 3.6.16 3.7.3)
ETCD_LATEST_35=3.5.35
ETCD_36=3.6.6 # the 3.6 of ETCD_BIN_DIR_3_6: unit tests run it as processes
ETCD_LATEST_36=3.6.16
ETCD_LATEST_37=3.7.3
ETCD_DEBIAN_VERSION=3.4.23         # Debian's etcd-server / etcd-client
STORE_ETCD_VERSION=3.5.21          # the etcd that backs the apiserver

K8S_BIN=$BIN_CACHE/kubernetes-$K8S_VERSION
COREDNS_BIN=$BIN_CACHE/coredns-$COREDNS_VERSION
KUBECTL=$K8S_BIN/kubectl
etcd_bin_dir() { echo "$BIN_CACHE/etcd-v$1"; }

# ---------------------------------------------------------------------------
# Network and ports
# ---------------------------------------------------------------------------
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SVC_IP=10.96.0.1
CLUSTER_DNS_IP=10.96.0.10
CLUSTER_DOMAIN=cluster.local
POD_SUBNET=10.244.0.0/24  # the only node's pod range (host-local IPAM)
CLUSTER_CIDR=10.244.0.0/16
# The comment that marks each node's rule masquerading what its pods send out
# of the cluster's pod range (setup_pod_masquerade).
POD_MASQ_COMMENT=etcd-operator-local-pods
CNI_BRIDGE=cni0
CNI_NETWORK_NAME=etcd-operator-local
CNI_BIN_DIR=/usr/lib/cni
APISERVER_PORT=6443
# The apiserver's own etcd stays off 2379/2380 so etcd processes started by
# tests on the host can use the default ports.
STORE_ETCD_CLIENT_PORT=2479
STORE_ETCD_PEER_PORT=2480
CONTAINERD_SOCK=/run/containerd/containerd.sock
CONTAINERD_ROOT=/var/lib/containerd
CONTAINERD_STATE=/run/containerd
RUNC_ROOT=$CONTAINERD_STATE/runc
KUBELET_SERVING_CERT=kubelet-serving # in PKI_DIR; each extra node has its own
KUBELET_ROOT=/var/lib/kubelet

# ---------------------------------------------------------------------------
# Images (all built locally; pods must use imagePullPolicy IfNotPresent/Never)
# ---------------------------------------------------------------------------
PAUSE_IMAGE=registry.k8s.io/pause:3.10
BUSYBOX_IMAGE=docker.io/library/busybox:1.28.0-glibc # operator default
ETCD_IMAGE_REPO=quay.io/coreos/etcd
COREDNS_IMAGE=registry.k8s.io/coredns/coredns:$COREDNS_VERSION
PROJECT_IMAGE=${IMAGE:-openetcd/etcd-operator:v0.1.0}
PROJECT_IMAGE_TAR=$REPO_ROOT/_output/etcd-operator-image.tar
# Label put on every image we import: the sha256 of the tarball, so an
# unchanged image is not imported again.
IMAGE_SHA_LABEL=etcd-operator-local.tar-sha256

# Host processes, in start order. down.sh stops them in reverse order.
COMPONENTS=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

APT_PACKAGES=(etcd-server etcd-client containerd runc containernetworking-plugins iptables
	busybox-static conntrack socat ethtool openssl dash curl)

# ---------------------------------------------------------------------------
# Logging
# ---------------------------------------------------------------------------
LOG_TAG=${LOG_TAG:-local-cluster}
log() { printf '[%s] %s\n' "$LOG_TAG" "$*" >&2; }
warn() { printf '[%s] WARNING: %s\n' "$LOG_TAG" "$*" >&2; }
die() {
	printf '[%s] ERROR: %s\n' "$LOG_TAG" "$*" >&2
	exit 1
}

# timed LABEL CMD...: run CMD and print "[tag] LABEL: Ns".
timed() {
	local label=$1 t0=$SECONDS
	shift
	"$@"
	log "$label: $((SECONDS - t0))s"
}

require_root_linux() {
	[[ $(uname -s) == Linux ]] || die "the local cluster runs on Linux only (this is $(uname -s))"
	[[ $(id -u) == 0 ]] || die "run as root: it installs packages, configures networking and runs kubelet (try: sudo bash $0)"
}

# ---------------------------------------------------------------------------
# Processes. Every process we start gets a pid file "<pid> <start time>" in
# PID_DIR; the start time (field 22 of /proc/PID/stat) protects against
# killing an unrelated process that reused the pid.
# ---------------------------------------------------------------------------
proc_starttime() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null; }

# proc_pid NAME: print the pid of our running NAME, fail if it is not running.
proc_pid() {
	local f=$PID_DIR/$1.pid pid start
	[[ -s $f ]] || return 1
	read -r pid start <"$f" || true
	[[ -n ${pid:-} && -n ${start:-} && $(proc_starttime "$pid") == "$start" ]] || return 1
	echo "$pid"
}
proc_alive() { proc_pid "$1" >/dev/null; }

# start_proc NAME CMD...: start CMD in its own session, detached from the
# terminal, output appended to LOG_DIR/NAME.log, pid recorded.
start_proc() {
	local name=$1 pidf=$PID_DIR/$1.pid log=$LOG_DIR/$1.log
	shift
	mkdir -p "$PID_DIR" "$LOG_DIR"
	rm -f "$pidf"
	printf '==== %s starting: %s\n' "$(date -Is)" "$*" >>"$log"
	# The inner shell writes its own pid and then execs the command, so the
	# recorded pid is the command's whatever setsid does. It first closes every
	# descriptor it inherited beyond stdio: a daemon that kept the one of
	# `flock /work/cluster.lock make e2e` held that lock for as long as the
	# cluster ran, and every later flock waited for ever.
	# shellcheck disable=SC2016 # expanded by the inner shell
	setsid bash -c 'for fd in /proc/$$/fd/*; do fd=${fd##*/}; if ((fd > 2)); then eval "exec $fd>&-"; fi; done
echo $$ >"$0.tmp"; exec "$@"' "$pidf" "$@" >>"$log" 2>&1 </dev/null &
	local i pid=
	for ((i = 0; i < 100; i++)); do
		[[ -s $pidf.tmp ]] && pid=$(<"$pidf.tmp") && [[ -n $pid ]] && break
		sleep 0.05
	done
	[[ -n $pid ]] || die "could not start $name (see $log)"
	echo "$pid $(proc_starttime "$pid")" >"$pidf"
	rm -f "$pidf.tmp"
}

# stop_proc NAME [SECONDS]: SIGTERM our NAME, SIGKILL it if it is still
# there after SECONDS (default 20), forget its pid.
stop_proc() {
	local name=$1 grace=${2:-20} pid i
	if pid=$(proc_pid "$name"); then
		log "stopping $name (pid $pid)"
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < grace * 10; i++)); do
			proc_alive "$name" || break
			sleep 0.1
		done
		if proc_alive "$name"; then
			log "$name did not stop in ${grace}s, killing it"
			kill -KILL "$pid" 2>/dev/null || true
			for ((i = 0; i < 50; i++)); do
				proc_alive "$name" || break
				sleep 0.1
			done
		fi
	fi
	rm -f "$PID_DIR/$name.pid"
}

# ---------------------------------------------------------------------------
# Waiting: poll with a deadline, fail fast if one of our processes died.
# ---------------------------------------------------------------------------
# Names of the processes that must stay alive while we wait (set by up.sh).
WATCHED=()

check_watched() {
	local n
	for n in "${WATCHED[@]}"; do
		if ! proc_alive "$n"; then
			log "--- last lines of $LOG_DIR/$n.log:"
			tail -n 30 "$LOG_DIR/$n.log" >&2 || true
			die "$n exited unexpectedly (log: $LOG_DIR/$n.log)"
		fi
	done
}

# wait_for SECONDS DESCRIPTION CMD...: run CMD every 0.5 s until it succeeds.
wait_for() {
	local timeout=$1 what=$2 deadline=$((SECONDS + $1))
	shift 2
	until "$@" >/dev/null 2>&1; do
		check_watched
		((SECONDS < deadline)) || die "timed out after ${timeout}s waiting for $what"
		sleep 0.5
	done
}

kubectl_admin() { "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

# ---------------------------------------------------------------------------
# containerd and images
# ---------------------------------------------------------------------------
ctr_k8s() { ctr --address "${CTR_SOCK:-$CONTAINERD_SOCK}" --namespace k8s.io "$@"; }
containerd_up() { [[ -S $CONTAINERD_SOCK ]] && ctr --address "$CONTAINERD_SOCK" version >/dev/null 2>&1; }

# normalize_ref REF: the name containerd (and the kubelet) use for REF, e.g.
# busybox:1 -> docker.io/library/busybox:1, foo/bar:1 -> docker.io/foo/bar:1.
normalize_ref() {
	local ref=$1 first=${1%%/*}
	if [[ $ref != */* ]]; then
		echo "docker.io/library/$ref"
	elif [[ $first != *.* && $first != *:* && $first != localhost ]]; then
		echo "docker.io/$ref"
	else
		echo "$ref"
	fi
}

# tar_image_ref TAR: the tag recorded in a docker-format image tarball.
tar_image_ref() {
	tar -xOf "$1" manifest.json | sed -n 's/.*"RepoTags":\["\([^"]*\)".*/\1/p'
}

# import_image TAR: import into containerd's k8s.io namespace, on every node
# (CONTAINERD_SOCKETS, default all_containerd_sockets), unless the same
# tarball (by sha256) is already there under its tag.
import_image() {
	local tar=$1 ref sha sock where
	ref=$(tar_image_ref "$tar")
	[[ -n $ref ]] || die "$tar has no tag in manifest.json"
	ref=$(normalize_ref "$ref")
	sha=$(sha256sum "$tar" | cut -d' ' -f1)
	for sock in ${CONTAINERD_SOCKETS:-$(all_containerd_sockets)}; do
		where=
		[[ $sock == "$CONTAINERD_SOCK" ]] || where=" on ${sock%/containerd.sock}"
		if CTR_SOCK=$sock ctr_k8s images ls "name==$ref" 2>/dev/null | grep -qF "$IMAGE_SHA_LABEL=$sha"; then
			log "image $ref: already imported$where"
			continue
		fi
		CTR_SOCK=$sock ctr_k8s images import "$tar" >/dev/null
		CTR_SOCK=$sock ctr_k8s images label "$ref" "$IMAGE_SHA_LABEL=$sha" >/dev/null
		log "image $ref: imported$where"
	done
}

# NEXT_TAG_SUFFIX names the second tag of the project image: the same image
# under another name, which a Deployment rolled to it takes for a new image,
# as an upgrade of the operator does (see test/e2e/rollout_test.go).
NEXT_TAG_SUFFIX=-next

# tag_next_image TAR: tags the image of TAR, imported, as <ref>$NEXT_TAG_SUFFIX.
tag_next_image() {
	local ref next sock
	ref=$(normalize_ref "$(tar_image_ref "$1")")
	next=$ref$NEXT_TAG_SUFFIX
	for sock in ${CONTAINERD_SOCKETS:-$(all_containerd_sockets)}; do
		CTR_SOCK=$sock ctr_k8s images rm "$next" >/dev/null 2>&1 || true
		CTR_SOCK=$sock ctr_k8s images tag "$ref" "$next" >/dev/null
	done
	log "image $next: the same image, tagged for upgrade tests"
}

# unmount_under DIR: unmount everything mounted below DIR, deepest first.
unmount_under() {
	local m n=0
	while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || warn "cannot unmount $m"
		n=$((n + 1))
	done < <(awk -v p="$1/" 'index($2, p) == 1 {print $2}' /proc/self/mounts | sort -r -u)
	((n == 0)) || log "unmounted $n mount(s) under $1"
}

# The extra nodes of a multi-node cluster.
# shellcheck source=nodes.sh
source "$LC_DIR/nodes.sh"

# setup_pod_masquerade SUBNET [PREFIX...]: what the pods of SUBNET send out of
# the cluster's pod range leaves with their node's address, as the bridge
# plugin's ipMasq did; between pods of different nodes it keeps the pod's own
# address, as a real cluster's pod network does (the bridge plugin masquerades
# everything out of its node's own range, which made etcd's peer TLS, checking
# the remote address against the peer certificate's names, refuse members on
# other nodes). PREFIX runs iptables elsewhere (in_node, for a node's network
# namespace).
# The bridge the Service range is routed to (setup_unrouted_ranges). This
# machine's kernel has no dummy device.
UNROUTED_SERVICES_DEV=eol-services

# setup_unrouted_ranges keeps a packet for a pod or Service address that
# nothing serves on this host. Without it such a packet follows the host's
# default route out of the machine, where this sandbox's egress proxy
# answers HTTP/2 404 to any address: an etcd client whose connection landed
# there keeps it (the proxy answers its keep-alives) and takes "404 (Not
# Found)" for its cluster's answer, for minutes. A cluster's own network
# drops such packets.
#
# Pod addresses no node routes (each node's range, and the host's on cni0,
# is more specific) are unreachable. The Service range cannot be: the host's
# own connections to a Service are routed before kube-proxy's DNAT turns the
# Service address into a pod's, so an unreachable route would fail them. It
# goes to a bridge with no port instead, where nothing answers: a connection
# that reaches it fails as one to a dead machine does (no route to host, once
# address resolution gives up). Only a packet kube-proxy neither translated
# nor rejected (a Service between its rules) gets there.
setup_unrouted_ranges() {
	ip route replace unreachable "$CLUSTER_CIDR"
	if ! ip link show "$UNROUTED_SERVICES_DEV" >/dev/null 2>&1; then
		ip link add "$UNROUTED_SERVICES_DEV" type bridge
	fi
	ip link set "$UNROUTED_SERVICES_DEV" up
	ip route replace "$SERVICE_CIDR" dev "$UNROUTED_SERVICES_DEV"
}

remove_unrouted_ranges() {
	ip route del unreachable "$CLUSTER_CIDR" 2>/dev/null || true
	ip link delete "$UNROUTED_SERVICES_DEV" 2>/dev/null || true
}

setup_pod_masquerade() {
	local subnet=$1
	shift
	local rule=(POSTROUTING -s "$subnet" ! -d "$CLUSTER_CIDR" -m comment --comment "$POD_MASQ_COMMENT" -j MASQUERADE)
	"$@" iptables -t nat -C "${rule[@]}" 2>/dev/null || "$@" iptables -t nat -A "${rule[@]}"
}
