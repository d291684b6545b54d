#!/usr/bin/env bash
# smoke-test.sh: check that the running local cluster does what the
# etcd-operator e2e tests rely on, in a throwaway namespace:
#   1. an etcd pod from the local quay.io/coreos/etcd image runs and is Ready
#      (exec readiness probe without a shell);
#   2. busybox's nslookup resolves <pod>.<subdomain>.<ns>.svc through a
#      headless Service (the operator's check-dns init container), and fails
#      for a name that does not exist;
#   3. a 3-member etcd cluster forms over peer DNS names;
#   4. kubectl exec and a ClusterIP Service (kube-proxy) work;
#   5. ownerReference garbage collection deletes dependents;
#   6. a hostPath PV and a PVC of StorageClass "standard" bind.
# With several nodes (make local-up NODES=3), the three members of 3 run one
# per node, so peers, Services and DNS are checked across nodes, and:
#   7. every node has its zone label, and a claim of StorageClass local-node
#      binds to a volume of the node its pod was scheduled to.
# Exit status 0 when all pass. Usage: bash hack/local-cluster/smoke-test.sh
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

LOG_TAG=smoke-test
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ -f $ENV_FILE ]] || die "$ENV_FILE not found: is the cluster up (make local-up)?"

NS=smoke-$(date +%s)
ETCD_IMAGE=$ETCD_IMAGE_REPO:v${ETCD_VERSION:-3.5.21}
k() { kubectl_admin -n "$NS" "$@"; }

cleanup() {
	kubectl_admin delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
	kubectl_admin delete pv "$NS-pv" --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT

pass() { log "PASS: $*"; }

# etcd_pod NAME SUBDOMAIN INITIAL-CLUSTER [NODE]: an etcd member shaped like
# the operator's: hostname/subdomain, a check-dns init container, no shell;
# on NODE when given.
etcd_pod() {
	local name=$1 sub=$2 cluster=$3 fqdn=$1.$2.$NS.svc node=${4:-}
	cat <<-EOF
		apiVersion: v1
		kind: Pod
		metadata:
		  name: $name
		  labels: {app: smoke-etcd, cluster: $sub}
		spec:
		  ${node:+nodeName: $node}
		  hostname: $name
		  subdomain: $sub
		  restartPolicy: Never
		  automountServiceAccountToken: false
		  initContainers:
		    - name: check-dns
		      image: $BUSYBOX_IMAGE
		      imagePullPolicy: IfNotPresent
		      command: ["/bin/sh", "-c", "TIMEOUT_READY=60; while ( ! nslookup $fqdn ); do TIMEOUT_READY=\$(( TIMEOUT_READY-1 )); if [ \$TIMEOUT_READY -eq 0 ]; then echo Timed out waiting for DNS entry; exit 1; fi; sleep 1; done"]
		  containers:
		    - name: etcd
		      image: $ETCD_IMAGE
		      imagePullPolicy: IfNotPresent
		      command: ["/usr/local/bin/etcd", "--data-dir=/var/etcd/data", "--name=$name",
		        "--initial-advertise-peer-urls=http://$fqdn:2380", "--listen-peer-urls=http://0.0.0.0:2380",
		        "--listen-client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://$fqdn:2379",
		        "--initial-cluster=$cluster", "--initial-cluster-state=new", "--initial-cluster-token=$sub-token"]
		      ports: [{name: client, containerPort: 2379}, {name: server, containerPort: 2380}]
		      readinessProbe:
		        exec: {command: ["etcdctl", "endpoint", "status"]}
		        initialDelaySeconds: 1
		        periodSeconds: 2
		      volumeMounts: [{name: etcd-data, mountPath: /var/etcd}]
		  volumes: [{name: etcd-data, emptyDir: {}}]
		---
	EOF
}

# headless_service NAME: the operator's peer Service.
headless_service() {
	cat <<-EOF
		apiVersion: v1
		kind: Service
		metadata:
		  name: $1
		spec:
		  clusterIP: None
		  publishNotReadyAddresses: true
		  selector: {app: smoke-etcd, cluster: $1}
		  ports: [{name: client, port: 2379}, {name: peer, port: 2380}]
		---
	EOF
}

# check_nodes NODE...: 7, on a cluster of several nodes.
check_nodes() {
	local node zone last=${*: -1}
	for node in "$@"; do
		zone=$(kubectl_admin get node "$node" -o jsonpath='{.metadata.labels.topology\.kubernetes\.io/zone}')
		[[ -n $zone ]] || die "node $node has no topology.kubernetes.io/zone label"
	done
	pass "every node has its zone"
	k apply -f - >/dev/null <<-EOF
		apiVersion: v1
		kind: PersistentVolumeClaim
		metadata:
		  name: local
		spec:
		  storageClassName: $LOCAL_VOLUME_CLASS
		  accessModes: [ReadWriteOnce]
		  resources: {requests: {storage: 1Gi}}
		---
		apiVersion: v1
		kind: Pod
		metadata:
		  name: on-local
		spec:
		  restartPolicy: Never
		  nodeSelector: {kubernetes.io/hostname: $last}
		  containers:
		    - name: busybox
		      image: $BUSYBOX_IMAGE
		      imagePullPolicy: IfNotPresent
		      command: ["sh", "-c", "echo data > /data/file && sleep 3600"]
		      volumeMounts: [{name: data, mountPath: /data}]
		  volumes: [{name: data, persistentVolumeClaim: {claimName: local}}]
	EOF
	k wait --for=condition=Ready pod/on-local --timeout=120s >/dev/null
	local pv
	pv=$(k get pvc local -o jsonpath='{.spec.volumeName}')
	[[ $(kubectl_admin get pv "$pv" -o jsonpath='{.metadata.labels.etcd-operator-local/node}') == "$last" ]] ||
		die "the claim of a pod on $last was bound to $pv, a volume of another node"
	pass "a local-node claim binds to a volume of its pod's node ($pv on $last)"
	# The volume goes back to the pool for the next run, empty.
	k delete pod on-local --wait=true >/dev/null
	k delete pvc local --wait=true >/dev/null
	rm -rf "${LOCAL_CLUSTER_STATE_DIR:-/var/lib/etcd-operator-local}/nodes/"*/volumes/*/file
	kubectl_admin patch pv "$pv" --type=json -p '[{"op":"remove","path":"/spec/claimRef"}]' >/dev/null
}

main() {
	local t0=$SECONDS
	kubectl_admin create namespace "$NS" >/dev/null
	wait_for 60 "ServiceAccount default in $NS" k get serviceaccount default

	# 1 + 2: single member, then busybox nslookup from another pod.
	{
		headless_service single
		etcd_pod single-0 single "single-0=http://single-0.single.$NS.svc:2380"
		cat <<-EOF
			apiVersion: v1
			kind: Pod
			metadata:
			  name: client
			spec:
			  restartPolicy: Never
			  containers:
			    - name: busybox
			      image: $BUSYBOX_IMAGE
			      imagePullPolicy: IfNotPresent
			      command: ["sh", "-c", "sleep 3600"]
		EOF
	} | k apply -f - >/dev/null
	k wait --for=condition=Ready pod/single-0 pod/client --timeout=120s >/dev/null
	pass "etcd pod ($ETCD_IMAGE) Ready, exec readiness probe without a shell"
	k exec client -- nslookup "single-0.single.$NS.svc" >/dev/null
	pass "nslookup single-0.single.$NS.svc (search list applied)"
	if k exec client -- nslookup "nosuchpod.single.$NS.svc" >/dev/null 2>&1; then
		die "nslookup of a missing name succeeded"
	fi
	pass "nslookup of a missing name fails"
	[[ $(k exec client -- readlink /bin/sh) == dash ]] || die "/bin/sh is not dash"

	# 3 + 4: three members over peer DNS names (one per node when there are
	# several); exec; ClusterIP Service.
	local members="" i nodes=()
	read -r -a nodes <<<"$(kubectl_admin get nodes -o jsonpath='{.items[*].metadata.name}')"
	for i in 0 1 2; do members+="${members:+,}trio-$i=http://trio-$i.trio.$NS.svc:2380"; done
	{
		headless_service trio
		for i in 0 1 2; do
			if ((${#nodes[@]} > 1)); then
				etcd_pod "trio-$i" trio "$members" "${nodes[i % ${#nodes[@]}]}"
			else
				etcd_pod "trio-$i" trio "$members"
			fi
		done
		cat <<-EOF
			apiVersion: v1
			kind: Service
			metadata:
			  name: trio-client
			spec:
			  selector: {app: smoke-etcd, cluster: trio}
			  ports: [{name: client, port: 2379}]
		EOF
	} | k apply -f - >/dev/null
	k wait --for=condition=Ready pod/trio-0 pod/trio-1 pod/trio-2 --timeout=180s >/dev/null
	local n
	n=$(k exec trio-0 -c etcd -- etcdctl member list | grep -c started)
	[[ $n == 3 ]] || die "expected 3 started members, got $n"
	k exec trio-0 -c etcd -- etcdctl --endpoints="http://trio-2.trio.$NS.svc:2379" put smoke ok >/dev/null
	pass "3-member etcd cluster formed over peer DNS names on ${#nodes[@]} node(s); kubectl exec works"
	wait_for 30 "etcd /health through Service trio-client" \
		k exec trio-0 -c etcd -- etcdctl --dial-timeout=5s --endpoints="http://trio-client.$NS.svc:2379" endpoint health
	pass "ClusterIP Service (kube-proxy) reaches etcd"

	# 5: garbage collection of dependents.
	k create configmap owner >/dev/null
	local uid
	uid=$(k get configmap owner -o jsonpath='{.metadata.uid}')
	k apply -f - >/dev/null <<-EOF
		apiVersion: v1
		kind: ConfigMap
		metadata:
		  name: dependent
		  ownerReferences:
		    - {apiVersion: v1, kind: ConfigMap, name: owner, uid: $uid, controller: true}
	EOF
	k delete configmap owner >/dev/null
	wait_for 60 "garbage collection of the dependent ConfigMap" bash -c \
		"! '$KUBECTL' --kubeconfig '$ADMIN_KUBECONFIG' -n '$NS' get configmap dependent"
	pass "ownerReference garbage collection"

	# 6: static hostPath volume of class "standard".
	kubectl_admin apply -f - >/dev/null <<-EOF
		apiVersion: v1
		kind: PersistentVolume
		metadata:
		  name: $NS-pv
		spec:
		  storageClassName: standard
		  capacity: {storage: 1Gi}
		  accessModes: [ReadWriteOnce]
		  persistentVolumeReclaimPolicy: Delete
		  hostPath: {path: /tmp/$NS-pv, type: DirectoryOrCreate}
		---
		apiVersion: v1
		kind: PersistentVolumeClaim
		metadata:
		  name: claim
		  namespace: $NS
		spec:
		  storageClassName: standard
		  accessModes: [ReadWriteOnce]
		  resources: {requests: {storage: 1Gi}}
	EOF
	wait_for 60 "PVC of class standard to bind" bash -c \
		"[[ \$('$KUBECTL' --kubeconfig '$ADMIN_KUBECONFIG' -n '$NS' get pvc claim -o jsonpath='{.status.phase}') == Bound ]]"
	pass "hostPath PV + PVC of StorageClass standard bound"

	((${#nodes[@]} > 1)) && check_nodes "${nodes[@]}"
	log "all checks passed in $((SECONDS - t0))s"
}

main "$@"
