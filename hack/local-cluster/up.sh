#!/usr/bin/env bash
# up.sh: bring up a single-node Kubernetes (v1.32.9, built from source) on
# this host, for the etcd-operator e2e tests. `make local-up` runs it.
#
# Everything is local: binaries are built through the Go module proxy,
# images are assembled with hack/imagebuild and imported into containerd
# (there is no registry: pods must use imagePullPolicy IfNotPresent/Never).
#
# Idempotent: on a healthy cluster it only rebuilds and re-imports the images
# that changed (the project's, and the cluster's own after a change to
# images.sh) and says "already up"; after a failed or partial start it
# cleans up with down.sh and starts again. Stop with down.sh.
#
# Environment:
#   LOCAL_CLUSTER_STATE_DIR  state directory (default /var/lib/etcd-operator-local)
#   XDG_CACHE_HOME           binary and image cache under .../etcd-operator-local
#   IMAGE                    tag of the project image (default openetcd/etcd-operator:v0.1.0)
#   NODE_IP, NODE_NAME       override the detected node address and name
#   NODES                    how many nodes (default 1: the host alone; up to 6).
#                            The others are extra nodes on this host (nodes.sh),
#                            each in a zone of its own; node.sh stops, loses,
#                            cuts off and drains them.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

LOG_TAG=local-up
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=build.sh
source "$LC_DIR/build.sh"
# shellcheck source=images.sh
source "$LC_DIR/images.sh"

# The address pods use to reach services on the host, and the node name.
detect_node() {
	NODE_IP=${NODE_IP:-$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')}
	[[ -n $NODE_IP ]] || NODE_IP=$(hostname -I | awk '{print $1}')
	[[ -n $NODE_IP ]] || die "cannot find this host's IP address; set NODE_IP"
	NODE_NAME=${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
}

# render TEMPLATE: print templates/TEMPLATE with every @VAR@ replaced by $VAR.
render() {
	local text var
	text=$(<"$LC_DIR/templates/$1")
	for var in $(grep -o '@[A-Z0-9_]*@' <<<"$text" | sort -u | tr -d @); do
		[[ -n ${!var:-} ]] || die "template $1 uses @$var@ but \$$var is empty"
		text=${text//"@$var@"/"${!var}"} # quoted: "&" in a value stays literal
	done
	printf '%s\n' "$text"
}

# ---------------------------------------------------------------------------
# Health check for the "already up" path.
# ---------------------------------------------------------------------------
node_ready() {
	[[ $(kubectl_admin get node "$NODE_NAME" \
		-o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

cluster_healthy() {
	local c
	for c in "${COMPONENTS[@]}"; do proc_alive "$c" || return 1; done
	[[ -x $KUBECTL && -f $ADMIN_KUBECONFIG ]] || return 1
	kubectl_admin get --raw /readyz >/dev/null 2>&1 || return 1
	node_ready
}

# Leftovers of an earlier run: recorded processes, pod sandboxes, the bridge.
has_leftovers() {
	compgen -G "$PID_DIR/*.pid" >/dev/null || compgen -G "/run/netns/cni-*" >/dev/null ||
		ip link show "$CNI_BRIDGE" >/dev/null 2>&1
}

# ---------------------------------------------------------------------------
# Preflight
# ---------------------------------------------------------------------------
missing_packages() {
	local p
	for p in "${APT_PACKAGES[@]}"; do
		[[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) == installed ]] || echo "$p"
	done
}

print_changes() {
	local missing
	missing=$(missing_packages | xargs)
	cat >&2 <<-EOF
		[$LOG_TAG] This will change the host:
		  - apt packages: ${missing:-none missing (all of ${APT_PACKAGES[*]} installed)}
		    (a temporary /usr/sbin/policy-rc.d keeps their services from starting)
		  - sysctls: net.ipv4.ip_forward=1, net.bridge.bridge-nf-call-iptables=1,
		    net.bridge.bridge-nf-call-ip6tables=1 (down.sh leaves them set)
		  - network: bridge $CNI_BRIDGE ($POD_SUBNET), pod network namespaces /run/netns/cni-*,
		    CNI result cache /var/lib/cni
		  - iptables/ip6tables: KUBE-* chains (kubelet, kube-proxy) and CNI-* chains (CNI)
		  - containerd: $STATE_DIR/config/containerd.toml, socket $CONTAINERD_SOCK,
		    images in /var/lib/containerd (namespace k8s.io)
		  - kubelet: $KUBELET_ROOT (pod volumes and mounts)
		  - processes: ${COMPONENTS[*]}
		    (ports $APISERVER_PORT, $STORE_ETCD_CLIENT_PORT, $STORE_ETCD_PEER_PORT, 10248-10259)
		  - files: $STATE_DIR (certs, configs, logs, pids, etcd data);
		    cache $CACHE_DIR (binaries, images) and the Go build/module caches
	EOF
}

# Refuse to start over processes we did not start.
check_host_free() {
	local port busy=
	if containerd_up; then
		die "a containerd not started by up.sh is serving $CONTAINERD_SOCK; stop it first (its CRI settings would not be ours)"
	fi
	for port in "$APISERVER_PORT" "$STORE_ETCD_CLIENT_PORT" "$STORE_ETCD_PEER_PORT" 10248 10249 10250 10256 10257 10259; do
		if [[ -n $(ss -Htln "sport = :$port") ]]; then busy+=" $port"; fi
	done
	[[ -z $busy ]] || die "ports already in use:$busy (see: ss -ltnp); stop what uses them first"
}

# ---------------------------------------------------------------------------
# Phase: apt
# ---------------------------------------------------------------------------
install_packages() {
	local missing
	missing=$(missing_packages | xargs)
	if [[ -z $missing ]]; then
		log "apt: all packages installed"
		return 0
	fi
	log "apt: installing $missing"
	# policy-rc.d exiting 101 tells invoke-rc.d not to start services from
	# postinst scripts (containerd, etcd); up.sh starts what it needs itself.
	local policy=/usr/sbin/policy-rc.d
	if [[ -e $policy ]]; then mv "$policy" "$policy.local-cluster-saved"; fi
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 0755 "$policy"
	local rc=0
	# shellcheck disable=SC2086 # $missing: one word per package
	{
		DEBIAN_FRONTEND=noninteractive apt-get update -q &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
	} >>"$LOG_DIR/apt.log" 2>&1 || rc=$?
	rm -f "$policy"
	if [[ -e $policy.local-cluster-saved ]]; then mv "$policy.local-cluster-saved" "$policy"; fi
	((rc == 0)) || die "apt-get failed (log: $LOG_DIR/apt.log)"
}

# ---------------------------------------------------------------------------
# Phase: project image (hack/build-image.sh); optional while the code is in
# flux: the cluster comes up without it.
# ---------------------------------------------------------------------------
build_project_image() {
	if IMAGE=$PROJECT_IMAGE bash "$REPO_ROOT/hack/build-image.sh" >>"$LOG_DIR/build-image.log" 2>&1; then
		PROJECT_IMAGE_BUILT=1
	else
		PROJECT_IMAGE_BUILT=0
		warn "the project image $PROJECT_IMAGE did not build (the code may not compile yet);"
		warn "the cluster comes up without it. Log: $LOG_DIR/build-image.log"
		warn "later: bash hack/build-image.sh && bash hack/local-cluster/load-image.sh"
	fi
}

import_project_image() {
	if [[ ${PROJECT_IMAGE_BUILT:-0} == 1 ]]; then import_image "$PROJECT_IMAGE_TAR"; fi
}

# ---------------------------------------------------------------------------
# Phase: host setup (sysctls, resolv.conf, PKI, configs)
# ---------------------------------------------------------------------------
setup_sysctls() {
	[[ -d /proc/sys/net/bridge ]] || modprobe br_netfilter 2>/dev/null || true
	[[ -d /proc/sys/net/bridge ]] ||
		die "bridge netfilter (br_netfilter) is not available: Service traffic between pods would not work"
	sysctl -q -w net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 \
		net.bridge.bridge-nf-call-ip6tables=1 >/dev/null
}

# The kubelet's resolvConf: the host's upstream nameservers, never the
# cluster DNS itself nor a loopback stub that pods cannot reach.
setup_resolv_conf() {
	KUBELET_RESOLV_CONF=$CONF_DIR/resolv.conf
	local src=/etc/resolv.conf filtered
	if grep -q '^nameserver 127\.0\.0\.53' "$src" && [[ -f /run/systemd/resolve/resolv.conf ]]; then
		src=/run/systemd/resolve/resolv.conf
	fi
	filtered=$(grep -v -E "^nameserver (127\.|::1|${CLUSTER_DNS_IP//./\\.}$)" "$src" || true)
	if grep -q '^nameserver' <<<"$filtered"; then
		printf '%s\n' "$filtered" >"$KUBELET_RESOLV_CONF"
	elif [[ -f $KUBELET_RESOLV_CONF ]]; then
		# The host already resolves through the cluster DNS: keep the copy
		# taken before that.
		log "keeping $KUBELET_RESOLV_CONF (the host resolver has no usable upstream)"
	else
		die "no upstream nameserver in $src for CoreDNS to forward to"
	fi
}

# new_cert NAME CN [O] [SANS]: key + certificate signed by the cluster CA,
# usable for both client and server authentication.
new_cert() {
	local name=$1 cn=$2 org=${3:-} sans=${4:-} subj ext
	subj="/CN=$cn"
	[[ -z $org ]] || subj+="/O=$org"
	ext=$(mktemp)
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=serverAuth,clientAuth"
		[[ -z $sans ]] || echo "subjectAltName=$sans"
	} >"$ext"
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$PKI_DIR/$name.key" -subj "$subj" -out "$PKI_DIR/$name.csr" 2>/dev/null
	openssl x509 -req -in "$PKI_DIR/$name.csr" -CA "$PKI_DIR/ca.crt" -CAkey "$PKI_DIR/ca.key" \
		-set_serial "0x$(openssl rand -hex 16)" -days 3650 -sha256 -extfile "$ext" \
		-out "$PKI_DIR/$name.crt" 2>/dev/null
	rm -f "$ext" "$PKI_DIR/$name.csr"
	chmod 0600 "$PKI_DIR/$name.key"
}

# The CA and service-account keys survive restarts (so tokens and kubeconfigs
# stay valid); the other certificates are reissued when the node's name or
# address changed.
setup_pki() {
	mkdir -p "$PKI_DIR"
	chmod 0700 "$PKI_DIR"
	if [[ ! -f $PKI_DIR/ca.crt ]]; then
		openssl req -x509 -new -nodes -newkey rsa:2048 -keyout "$PKI_DIR/ca.key" -out "$PKI_DIR/ca.crt" \
			-days 3650 -subj "/CN=etcd-operator-local-ca" \
			-addext "basicConstraints=critical,CA:TRUE" \
			-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
		rm -f "$PKI_DIR/identity"
	fi
	if [[ ! -f $PKI_DIR/sa.key ]]; then
		openssl genrsa -out "$PKI_DIR/sa.key" 2048 2>/dev/null
		openssl rsa -in "$PKI_DIR/sa.key" -pubout -out "$PKI_DIR/sa.pub" 2>/dev/null
	fi
	local identity="$NODE_NAME $NODE_IP 1"
	[[ $(cat "$PKI_DIR/identity" 2>/dev/null) != "$identity" ]] || return 0
	log "issuing certificates for node $NODE_NAME ($NODE_IP)"
	new_cert apiserver kube-apiserver "" "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$CLUSTER_DOMAIN,DNS:localhost,DNS:$NODE_NAME,IP:$KUBERNETES_SVC_IP,IP:127.0.0.1,IP:$NODE_IP"
	new_cert apiserver-kubelet-client kube-apiserver-kubelet-client
	new_cert admin kubernetes-admin system:masters
	new_cert controller-manager system:kube-controller-manager
	new_cert scheduler system:kube-scheduler
	new_cert kube-proxy system:kube-proxy
	new_cert kubelet "system:node:$NODE_NAME" system:nodes
	new_cert kubelet-serving "$NODE_NAME" "" "DNS:$NODE_NAME,DNS:localhost,IP:$NODE_IP,IP:127.0.0.1"
	echo "$identity" >"$PKI_DIR/identity"
}

# write_kubeconfig FILE CERT-NAME: a self-contained kubeconfig (certificates
# embedded) for the apiserver on 127.0.0.1.
write_kubeconfig() {
	local file=$1 name=$2
	cat >"$file" <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		  - name: etcd-operator-local
		    cluster:
		      server: https://127.0.0.1:$APISERVER_PORT
		      certificate-authority-data: $(base64 -w0 "$PKI_DIR/ca.crt")
		users:
		  - name: $name
		    user:
		      client-certificate-data: $(base64 -w0 "$PKI_DIR/$name.crt")
		      client-key-data: $(base64 -w0 "$PKI_DIR/$name.key")
		contexts:
		  - name: etcd-operator-local
		    context:
		      cluster: etcd-operator-local
		      user: $name
		current-context: etcd-operator-local
	EOF
	chmod 0600 "$file"
}

write_configs() {
	write_kubeconfig "$ADMIN_KUBECONFIG" admin
	write_kubeconfig "$CONF_DIR/controller-manager.kubeconfig" controller-manager
	write_kubeconfig "$CONF_DIR/scheduler.kubeconfig" scheduler
	write_kubeconfig "$CONF_DIR/kube-proxy.kubeconfig" kube-proxy
	write_kubeconfig "$CONF_DIR/kubelet.kubeconfig" kubelet
	render containerd.toml >"$CONF_DIR/containerd.toml"
	render cni.conflist >"$CNI_CONF_DIR/10-$CNI_NETWORK_NAME.conflist"
	render kubelet-config.yaml >"$CONF_DIR/kubelet-config.yaml"
	render kube-proxy-config.yaml >"$CONF_DIR/kube-proxy-config.yaml"
}

host_setup() {
	mkdir -p "$CONF_DIR" "$CNI_CONF_DIR" "$CNI_IPAM_DIR" "$STATE_DIR/kubelet-plugins"
	setup_sysctls
	setup_resolv_conf
	setup_pki
	write_configs
	setup_pod_masquerade "$POD_SUBNET"
	setup_unrouted_ranges
}

# ---------------------------------------------------------------------------
# Phases: start the processes
# ---------------------------------------------------------------------------
start_containerd() {
	start_proc containerd containerd --config "$CONF_DIR/containerd.toml"
	WATCHED+=(containerd)
	wait_for 30 "containerd on $CONTAINERD_SOCK" containerd_up
}

import_images() {
	local tar
	for tar in $(image_tarballs); do import_image "$tar"; done
	import_project_image
}

start_control_plane() {
	local etcd_dir
	etcd_dir=$(etcd_bin_dir "$STORE_ETCD_VERSION")
	start_proc etcd "$etcd_dir/etcd" --name=store --data-dir="$STATE_DIR/store-etcd" \
		--listen-client-urls="http://127.0.0.1:$STORE_ETCD_CLIENT_PORT" \
		--advertise-client-urls="http://127.0.0.1:$STORE_ETCD_CLIENT_PORT" \
		--listen-peer-urls="http://127.0.0.1:$STORE_ETCD_PEER_PORT" \
		--initial-advertise-peer-urls="http://127.0.0.1:$STORE_ETCD_PEER_PORT" \
		--initial-cluster="store=http://127.0.0.1:$STORE_ETCD_PEER_PORT"
	WATCHED+=(etcd)
	wait_for 30 "etcd on 127.0.0.1:$STORE_ETCD_CLIENT_PORT" \
		"$etcd_dir/etcdctl" --endpoints="http://127.0.0.1:$STORE_ETCD_CLIENT_PORT" endpoint health

	start_proc kube-apiserver "$K8S_BIN/kube-apiserver" \
		--etcd-servers="http://127.0.0.1:$STORE_ETCD_CLIENT_PORT" \
		--bind-address=0.0.0.0 --secure-port="$APISERVER_PORT" --advertise-address="$NODE_IP" \
		--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
		--allow-privileged=true \
		--client-ca-file="$PKI_DIR/ca.crt" \
		--tls-cert-file="$PKI_DIR/apiserver.crt" --tls-private-key-file="$PKI_DIR/apiserver.key" \
		--kubelet-client-certificate="$PKI_DIR/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$PKI_DIR/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority="$PKI_DIR/ca.crt" \
		--kubelet-preferred-address-types=InternalIP,Hostname \
		--service-cluster-ip-range="$SERVICE_CIDR" \
		--service-account-issuer="https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
		--service-account-key-file="$PKI_DIR/sa.pub" \
		--service-account-signing-key-file="$PKI_DIR/sa.key" \
		--profiling=false
	WATCHED+=(kube-apiserver)
	wait_for 90 "kube-apiserver /readyz" kubectl_admin get --raw /readyz
	render bootstrap.yaml >"$CONF_DIR/bootstrap.yaml"
	kubectl_admin apply -f "$CONF_DIR/bootstrap.yaml" >/dev/null

	start_proc kube-controller-manager "$K8S_BIN/kube-controller-manager" \
		--kubeconfig="$CONF_DIR/controller-manager.kubeconfig" \
		--authentication-kubeconfig="$CONF_DIR/controller-manager.kubeconfig" \
		--authorization-kubeconfig="$CONF_DIR/controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 --leader-elect=false --controllers='*' \
		--use-service-account-credentials=true \
		--service-account-private-key-file="$PKI_DIR/sa.key" \
		--root-ca-file="$PKI_DIR/ca.crt" \
		--cluster-signing-cert-file="$PKI_DIR/ca.crt" --cluster-signing-key-file="$PKI_DIR/ca.key" \
		--service-cluster-ip-range="$SERVICE_CIDR" --profiling=false
	start_proc kube-scheduler "$K8S_BIN/kube-scheduler" \
		--kubeconfig="$CONF_DIR/scheduler.kubeconfig" \
		--authentication-kubeconfig="$CONF_DIR/scheduler.kubeconfig" \
		--authorization-kubeconfig="$CONF_DIR/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --leader-elect=false --profiling=false
	WATCHED+=(kube-controller-manager kube-scheduler)
}

# After a restart the Node object still says Ready from the previous run, and
# the kubelet may take a minute to post fresh status. Its Lease, renewed every
# 10 s from the start, shows that the kubelet we just started is registered;
# the CoreDNS check afterwards shows that it runs pods.
node_ready_since_start() {
	local renewed
	node_ready || return 1
	renewed=$(kubectl_admin -n kube-node-lease get lease "$NODE_NAME" -o jsonpath='{.spec.renewTime}') || return 1
	(($(date -d "$renewed" +%s) >= KUBELET_STARTED_AT))
}

# Also used alone by node-notready.sh, which stops only the kubelet.
start_kubelet() {
	KUBELET_STARTED_AT=$(date +%s)
	start_proc kubelet "$K8S_BIN/kubelet" \
		--config="$CONF_DIR/kubelet-config.yaml" --kubeconfig="$CONF_DIR/kubelet.kubeconfig" \
		--hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --root-dir="$KUBELET_ROOT"
}

# containerd answers on its socket before its CRI plugin has recovered the
# containers it knew ("server is not initialized yet"), and the kubelet exits at
# once when its first CRI call fails. After a node restart with many dead
# containers that recovery takes long enough to lose the race, so a kubelet
# that exits within its first seconds is started again.
start_kubelet_once_cri_serves() {
	local attempt
	for attempt in 1 2 3 4 5 6 7 8 9 10; do
		start_kubelet
		sleep 3
		proc_alive kubelet && return 0
		log "kubelet exited at start (attempt $attempt): $(tail -n 1 "$LOG_DIR/kubelet.log" | cut -c1-200)"
		sleep 1
	done
	die "the kubelet kept exiting at start (log: $LOG_DIR/kubelet.log)"
}

start_node() {
	start_kubelet_once_cri_serves
	start_proc kube-proxy "$K8S_BIN/kube-proxy" --config="$CONF_DIR/kube-proxy-config.yaml"
	WATCHED+=(kubelet kube-proxy)
	wait_for 120 "node $NODE_NAME to be Ready" node_ready_since_start
	# Pods can only be created once the namespace's ServiceAccount exists.
	wait_for 60 "the default ServiceAccount" kubectl_admin -n default get serviceaccount default
}

start_addons() {
	render coredns.yaml >"$CONF_DIR/coredns.yaml"
	kubectl_admin apply -f "$CONF_DIR/coredns.yaml" >/dev/null
	wait_for 180 "CoreDNS to answer on $CLUSTER_DNS_IP" cluster_dns_works
}

# End to end, from the host: kube-proxy's rules for the kube-dns Service, the
# pod network and a live CoreDNS. (The Deployment's readyReplicas could still
# be the previous run's.)
cluster_dns_works() {
	"$TOOLS_DIR/nslookup" "kubernetes.default.svc.$CLUSTER_DOMAIN" "$CLUSTER_DNS_IP"
}

# start_extra_nodes: nodes 2..NODES, each with every image (the project's
# under its second tag too), the host's node labelled zone a, and local
# volumes on every node.
start_extra_nodes() {
	((NODES > 1)) || return 0
	((NODES <= ${#NODE_ZONES[@]})) || die "NODES=$NODES: at most ${#NODE_ZONES[@]} nodes"
	local i images
	images=$(image_tarballs)
	if [[ ${PROJECT_IMAGE_BUILT:-0} == 1 ]]; then images+=" $PROJECT_IMAGE_TAR"; fi
	# The local-node StorageClass, on a cluster started before it existed.
	render bootstrap.yaml >"$CONF_DIR/bootstrap.yaml"
	kubectl_admin apply -f "$CONF_DIR/bootstrap.yaml" >/dev/null
	label_first_node
	create_local_volumes "$NODE_NAME" "$NODES_DIR/${NODE_ZONES[0]}/volumes"
	for ((i = 2; i <= NODES; i++)); do
		extra_node_vars "$i"
		# shellcheck disable=SC2086 # one tarball per word
		timed "node $XN_NAME" start_extra_node "$i" $images
	done
	if [[ ${PROJECT_IMAGE_BUILT:-0} == 1 ]]; then tag_next_image "$PROJECT_IMAGE_TAR"; fi
}

# ---------------------------------------------------------------------------
# Result
# ---------------------------------------------------------------------------
write_env() {
	cat >"$ENV_FILE" <<-EOF
		# Local etcd-operator test cluster; source this file (written by up.sh).
		export KUBECONFIG=$ADMIN_KUBECONFIG
		export KUBECTL=$KUBECTL
		export NODE_NAME=$NODE_NAME
		export NODE_IP=$NODE_IP
		export CLUSTER_DNS_IP=$CLUSTER_DNS_IP
		export ETCD_BIN_DIR_3_4=$(etcd_bin_dir "$ETCD_DEBIAN_VERSION")
		export ETCD_BIN_DIR_3_5=$(etcd_bin_dir 3.5.21)
		export ETCD_BIN_DIR_3_5_LATEST=$(etcd_bin_dir "$ETCD_LATEST_35")
		export ETCD_BIN_DIR_3_6=$(etcd_bin_dir "$ETCD_36")
		export ETCD_BIN_DIR_3_6_LATEST=$(etcd_bin_dir "$ETCD_LATEST_36")
		export ETCD_BIN_DIR_3_7=$(etcd_bin_dir "$ETCD_LATEST_37")
		export OPERATOR_IMAGE=$PROJECT_IMAGE
		export LOCAL_CLUSTER_NODES=$(running_node_count)
	EOF
}

print_usage() {
	cat >&2 <<-EOF
		[$LOG_TAG] Cluster ready. To use it:
		    export KUBECONFIG=$ADMIN_KUBECONFIG
		    export PATH=$K8S_BIN:\$PATH
		  or: source $ENV_FILE   (KUBECONFIG, KUBECTL, NODE_IP, ETCD_BIN_DIR_3_5, ETCD_BIN_DIR_3_6, ...)
		  Logs: $LOG_DIR   Stop: bash hack/local-cluster/down.sh [--purge]
		  Reload the operator image: bash hack/build-image.sh && bash hack/local-cluster/load-image.sh
	EOF
}

on_exit() {
	local rc=$?
	((rc == 0)) && return
	log "FAILED (exit $rc). Logs: $LOG_DIR. Processes started so far are left running for"
	log "inspection; the next up.sh cleans them up, or run hack/local-cluster/down.sh."
}

main() {
	require_root_linux
	mkdir -p "$STATE_DIR" "$LOG_DIR" "$PID_DIR"
	detect_node
	NODES=${NODES:-1}
	[[ $NODES =~ ^[1-9]$ ]] || die "NODES=$NODES: give a number of nodes from 1 to ${#NODE_ZONES[@]}"
	local t_start=$SECONDS

	if cluster_healthy; then
		build_images
		build_project_image
		import_images
		forget_extra_nodes_beyond "$NODES"
		start_extra_nodes
		write_env
		log "already up (node $NODE_NAME, $NODE_IP)"
		print_usage
		return 0
	fi
	trap on_exit EXIT
	if has_leftovers; then
		log "cleaning up an earlier, incomplete start"
		LOG_TAG=local-down bash "$LC_DIR/down.sh"
	fi
	print_changes
	check_host_free

	timed "phase apt" install_packages
	timed "phase build binaries" build_all
	timed "phase build images" build_images
	timed "phase build project image" build_project_image
	timed "phase host setup" host_setup
	timed "phase start containerd" start_containerd
	timed "phase import images" import_images
	timed "phase start control plane" start_control_plane
	forget_extra_nodes_beyond "$NODES"
	timed "phase start node" start_node
	timed "phase start coredns" start_addons
	timed "phase start extra nodes" start_extra_nodes
	write_env
	log "up in $((SECONDS - t_start))s (node $NODE_NAME, $NODE_IP; $NODES node(s))"
	print_usage
}

# Sourced (by node-restart.sh) for its phases, run otherwise.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	main "$@"
fi
