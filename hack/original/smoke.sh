#!/usr/bin/env bash
# smoke.sh: check the build of the original (build.sh) without the local
# cluster: its etcd-operator and etcd-backup-operator binaries run as host
# processes against a kube-apiserver of Kubernetes 1.32 that this script
# starts for itself (with its own etcd, and versitygw as the S3 store), on the
# hand-made CRDs of crds.yaml. There is no kubelet: pods stay Pending, so
# what is checked is what the original asks of the API:
#
#   - it wins its Endpoints leader lock with -create-crd=false;
#   - from the original's example EtcdCluster (etcd 3.4.23) it creates the
#     peer and client Services, both with publishNotReadyAddresses (the
#     patch), and the seed member pod, with the init container image
#     busybox:1.28.0-glibc and the image quay.io/coreos/etcd:v3.4.23, and
#     the status it writes (phase Running) is stored;
#   - its backup operator writes a one-shot backup to the path as given and
#     periodic ones as <path>_v<revision>_<time>, of etcd's snapshot of the
#     script's etcd, and `etcdutl snapshot restore` (which checks the
#     snapshot's sha256 trailer) restores each.
#
# The operators read their API server the way they do in a pod: from
# KUBERNETES_SERVICE_HOST/PORT and /var/run/secrets/kubernetes.io/serviceaccount,
# which each gets in a mount namespace of its own (unshare -m, a tmpfs on
# /run): nothing is written to the host's /run. Needs root for that.
# Everything it starts is stopped by pid on exit; its files are in a
# temporary directory, removed on success (kept and named on failure).
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

LOG_TAG=original-smoke
ORIG_HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../local-cluster/lib.sh
source "$ORIG_HACK/../local-cluster/lib.sh"
# shellcheck source=common.sh
source "$ORIG_HACK/common.sh"

[[ $(id -u) == 0 ]] || die "run as root: the operators get their service account files in a mount namespace (unshare -m)"
APISERVER=$K8S_BIN/kube-apiserver
[[ -x $APISERVER && -x $KUBECTL ]] || die "$APISERVER or $KUBECTL is missing: bash hack/kube-binaries.sh builds them"
ETCD_DIR=$(bash "$REPO_ROOT/hack/etcd-binaries.sh" "$STORE_ETCD_VERSION")
VERSITYGW=$(bash "$REPO_ROOT/hack/versitygw.sh")
for need in openssl unshare ss; do command -v "$need" >/dev/null || die "$need is missing"; done

step "building the original (build.sh)"
bash "$ORIG_HACK/build.sh" >/dev/null
ORIG_BIN=$CACHE_DIR/original/$ORIG_VERSION/bin

WORK=$(mktemp -d /tmp/original-smoke.XXXXXX)
PIDS=()
cleanup() {
	local rc=$? pid
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do
		while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
	done
	if ((rc == 0)); then
		rm -rf "$WORK"
	else
		warn "failed; logs and data kept in $WORK"
	fi
}
trap cleanup EXIT

# free_port: a TCP port nothing listens on.
free_port() {
	local p
	for ((p = 20000 + RANDOM % 20000; ; p++)); do
		[[ -z $(ss -Htln "sport = :$p") ]] && echo "$p" && return 0
	done
}

# start NAME CMD...: run CMD in the background, output to $WORK/NAME.log.
start() {
	local name=$1
	shift
	"$@" >"$WORK/$name.log" 2>&1 &
	PIDS+=($!)
	log "started $name (pid $!)"
}

# wait_until WHAT TIMEOUT CMD...: poll CMD every second until it succeeds.
wait_until() {
	local what=$1 timeout=$2 i
	shift 2
	for ((i = 0; i < timeout; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 1
	done
	die "$what: not within ${timeout}s"
}

k() { "$KUBECTL" --kubeconfig "$WORK/kubeconfig" "$@"; }

step "etcd, kube-apiserver and versitygw for the check"
etcd_port=$(free_port) peer_port=$((etcd_port + 1)) api_port=$(free_port) s3_port=$(free_port)
start etcd "$ETCD_DIR/etcd" --data-dir "$WORK/etcd" --name smoke \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
	--initial-cluster "smoke=http://127.0.0.1:$peer_port"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/serving.key" -out "$WORK/serving.crt" -days 1 \
	-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
openssl genrsa -out "$WORK/sa.key" 2048 2>/dev/null
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$token,admin,admin,system:masters" >"$WORK/tokens.csv"
start kube-apiserver "$APISERVER" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
	--secure-port="$api_port" --etcd-servers="http://127.0.0.1:$etcd_port" --authorization-mode=AlwaysAllow \
	--service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$WORK/sa.key" \
	--service-account-signing-key-file="$WORK/sa.key" --service-cluster-ip-range=10.0.0.0/24 \
	--tls-cert-file="$WORK/serving.crt" --tls-private-key-file="$WORK/serving.key" \
	--token-auth-file="$WORK/tokens.csv" --cert-dir="$WORK/certs"
mkdir -p "$WORK/s3/etcd-backups"
start versitygw "$VERSITYGW" --access smoke-access --secret smoke-secret --region us-east-1 \
	--port "127.0.0.1:$s3_port" posix "$WORK/s3"
cat >"$WORK/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: smoke
  cluster: {server: "https://127.0.0.1:$api_port", certificate-authority: "$WORK/serving.crt"}
users:
- name: admin
  user: {token: "$token"}
contexts:
- name: smoke
  context: {cluster: smoke, user: admin}
current-context: smoke
EOF
wait_until "the API server answering" 60 k get --raw /readyz

step "the hand-made CRDs, namespace original, the operators' own pods and the S3 secret"
ns=original
k create -f "$ORIG_HACK/crds.yaml" >/dev/null
for crd in "${CRDS[@]}"; do k wait --for=condition=Established "crd/$crd" --timeout=60s >/dev/null; done
k create namespace "$ns" >/dev/null
k -n "$ns" create serviceaccount default >/dev/null
# The operators look their own pod up by MY_POD_NAME.
for d in etcd-operator etcd-backup-operator; do
	k -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $d-smoke, labels: {name: $d}}
spec:
  containers: [{name: $d, image: "$ORIG_IMAGE"}]
EOF
done
printf '[default]\naws_access_key_id = smoke-access\naws_secret_access_key = smoke-secret\n' >"$WORK/aws-credentials"
printf '[default]\nregion = us-east-1\n' >"$WORK/aws-config"
k -n "$ns" create secret generic aws --from-file=credentials="$WORK/aws-credentials" \
	--from-file=config="$WORK/aws-config" >/dev/null
mkdir -p "$WORK/serviceaccount"
echo -n "$token" >"$WORK/serviceaccount/token"
echo -n "$ns" >"$WORK/serviceaccount/namespace"
cp "$WORK/serving.crt" "$WORK/serviceaccount/ca.crt"

# run_operator NAME ARGS...: the original's binary NAME as in its pod.
run_operator() {
	local name=$1
	shift
	# shellcheck disable=SC2016 # expanded by the inner shell
	start "$name" unshare -m bash -c 'mount --make-rprivate / && mount -t tmpfs tmpfs /run &&
mkdir -p /run/secrets/kubernetes.io/serviceaccount &&
cp "$0"/* /run/secrets/kubernetes.io/serviceaccount/ && exec "$@"' "$WORK/serviceaccount" \
		env KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$api_port" \
		MY_POD_NAMESPACE="$ns" MY_POD_NAME="$name-smoke" "$ORIG_BIN/$name" "$@"
}

step "the original's etcd-operator and its example cluster"
run_operator etcd-operator -create-crd=false -listen-addr="127.0.0.1:$(free_port)"
wait_until "etcd-operator holding its Endpoints lock" 60 \
	bash -c "[[ -n \$(\"\$0\" --kubeconfig \"\$1\" -n $ns get endpoints etcd-operator -o \
	'jsonpath={.metadata.annotations.control-plane\.alpha\.kubernetes\.io/leader}') ]]" "$KUBECTL" "$WORK/kubeconfig"
sed 's/"3.2.13"/"3.4.23"/' "$ORIGINAL_MANIFESTS/example-etcd-cluster.yaml" | k -n "$ns" apply -f - >/dev/null
cluster=example-etcd-cluster
wait_until "the seed member pod" 60 bash -c "[[ -n \$(\"\$0\" --kubeconfig \"\$1\" -n $ns get pods \
	-l etcd_cluster=$cluster -o name) ]]" "$KUBECTL" "$WORK/kubeconfig"
for svc in "$cluster" "$cluster-client"; do
	got=$(k -n "$ns" get service "$svc" -o jsonpath='{.spec.publishNotReadyAddresses}')
	[[ $got == true ]] || die "Service $svc: publishNotReadyAddresses is '$got', want true (the patch)"
	log "Service $svc publishes not-ready addresses"
done
got=$(k -n "$ns" get pods -l "etcd_cluster=$cluster" -o 'jsonpath={.items[0].spec.initContainers[0].image} {.items[0].spec.containers[0].image}')
[[ $got == "busybox:1.28.0-glibc quay.io/coreos/etcd:v3.4.23" ]] || die "seed pod images: '$got'"
log "seed pod: init container busybox:1.28.0-glibc, etcd quay.io/coreos/etcd:v3.4.23"
got=$(k -n "$ns" get etcdcluster "$cluster" -o 'jsonpath={.status.phase}')
[[ $got == Running ]] || die "EtcdCluster status.phase is '$got', want Running"
log "status.phase Running is stored (no status subresource)"

step "the original's etcd-backup-operator: one-shot and periodic backups to S3"
run_operator etcd-backup-operator -create-crd=false
backup() {
	local name=$1 path=$2 policy=$3
	k -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: etcd.database.coreos.com/v1beta2
kind: EtcdBackup
metadata: {name: $name}
spec:
  etcdEndpoints: ["http://127.0.0.1:$etcd_port"]
  storageType: S3
  $policy
  s3: {path: "$path", awsSecret: aws, endpoint: "http://127.0.0.1:$s3_port", forcePathStyle: true}
EOF
}
backup one-shot etcd-backups/one-shot.db ""
backup periodic etcd-backups/periodic.db "backupPolicy: {backupIntervalInSecond: 2, maxBackups: 2}"
wait_until "the one-shot backup" 60 test -f "$WORK/s3/etcd-backups/one-shot.db"
# shellcheck disable=SC2016 # expanded by the inner shell
wait_until "two periodic backups" 60 bash -c 'ls "$0"/periodic.db_v* | grep -c . | grep -qx 2' "$WORK/s3/etcd-backups"
k -n "$ns" delete etcdbackup periodic --wait=true --timeout=60s >/dev/null
mkdir -p "$WORK/restored"
for f in "$WORK/s3/etcd-backups"/*; do
	[[ -f $f ]] || continue
	name=${f##*/}
	if [[ $name != one-shot.db && ! $name =~ ^periodic\.db_v[0-9]+_[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{2}:[0-9]{2}:[0-9]{2}$ ]]; then
		die "backup object $name is not named as the original names them"
	fi
	"$ETCD_DIR/etcdutl" snapshot restore "$f" --data-dir "$WORK/restored/$name" >"$WORK/restore-$name.log" 2>&1 ||
		die "etcdutl snapshot restore $name failed (see $WORK/restore-$name.log)"
	log "backup $name restores with etcdutl"
done

step "the original's build works"
