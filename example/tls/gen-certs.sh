#!/usr/bin/env bash
# Generates a CA and the three certificates a static-TLS EtcdCluster needs, with the
# file names the operator expects, and optionally stores them as the three secrets.
# For trying TLS out: in production use your own CA (or cert-manager).
set -o errexit -o nounset -o pipefail

CLUSTER="${CLUSTER:-example}"
NAMESPACE="${NAMESPACE:-default}"
CLUSTER_DOMAIN="${CLUSTER_DOMAIN:-cluster.local}"
DAYS="${DAYS:-1825}"   # the original's example certificates: 43800 h
OUT="${OUT:-./certs}"
KUBECTL="${KUBECTL:-kubectl}"
CREATE_SECRETS=false

usage() {
    cat <<USAGE
Usage: $(basename "$0") [--cluster=NAME] [--namespace=NS] [--out=DIR] [--create-secrets]

Writes under DIR (default ./certs):
  peer.crt peer.key peer-ca.crt                         -> secret etcd-peer-tls
  server.crt server.key server-ca.crt                   -> secret etcd-server-tls
  etcd-client.crt etcd-client.key etcd-client-ca.crt    -> secret etcd-client-tls
--create-secrets also creates those secrets in the namespace with kubectl.
Env: CLUSTER (example), NAMESPACE (default), CLUSTER_DOMAIN (cluster.local), DAYS (1825).
USAGE
}

for arg in "$@"; do
    case "$arg" in
        --cluster=*) CLUSTER="${arg#*=}" ;;
        --namespace=*) NAMESPACE="${arg#*=}" ;;
        --out=*) OUT="${arg#*=}" ;;
        --create-secrets) CREATE_SECRETS=true ;;
        -h|--help) usage; exit 0 ;;
        *) echo "unknown option: $arg" >&2; usage >&2; exit 1 ;;
    esac
done

command -v openssl >/dev/null || { echo "openssl is needed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$OUT"
cd "$OUT"

# Members verify peers against the DNS names of their pods, with and without the
# cluster domain (etcd also matches the reverse DNS of the peer's address).
svc="${CLUSTER}.${NAMESPACE}.svc"
peer_sans="DNS:*.${svc},DNS:*.${svc}.${CLUSTER_DOMAIN}"
server_sans="DNS:*.${svc},DNS:*.${svc}.${CLUSTER_DOMAIN},DNS:${CLUSTER}-client.${NAMESPACE}.svc,DNS:${CLUSTER}-client.${NAMESPACE}.svc.${CLUSTER_DOMAIN},DNS:${CLUSTER}-client,DNS:localhost,IP:127.0.0.1"

openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days "$DAYS" \
    -subj "/CN=${CLUSTER}-etcd-ca" 2>/dev/null

issue() { # name cn extendedKeyUsage subjectAltName
    local name=$1 cn=$2 eku=$3 sans=$4
    openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "/CN=$cn" 2>/dev/null
    {
        echo "basicConstraints=CA:FALSE"
        echo "keyUsage=digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=$eku"
        [ -n "$sans" ] && echo "subjectAltName=$sans"
    } > "$name.ext"
    openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
        -out "$name.crt" -days "$DAYS" -extfile "$name.ext" 2>/dev/null
    rm -f "$name.csr" "$name.ext"
}

issue peer "${CLUSTER}-peer" serverAuth,clientAuth "$peer_sans"
issue server "${CLUSTER}-server" serverAuth,clientAuth "$server_sans"
issue etcd-client "${CLUSTER}-client" clientAuth ""
cp ca.crt peer-ca.crt
cp ca.crt server-ca.crt
cp ca.crt etcd-client-ca.crt
echo "certificates written to $(pwd)"

if [ "$CREATE_SECRETS" = true ]; then
    "$KUBECTL" -n "$NAMESPACE" create secret generic etcd-peer-tls \
        --from-file=peer.crt --from-file=peer.key --from-file=peer-ca.crt
    "$KUBECTL" -n "$NAMESPACE" create secret generic etcd-server-tls \
        --from-file=server.crt --from-file=server.key --from-file=server-ca.crt
    "$KUBECTL" -n "$NAMESPACE" create secret generic etcd-client-tls \
        --from-file=etcd-client.crt --from-file=etcd-client.key --from-file=etcd-client-ca.crt
fi
