#!/usr/bin/env bash
# try.sh: `make try`. From a fresh machine to an etcd cluster that serves, the way
# a user installs it: the local Kubernetes (hack/local-cluster/up.sh, or the one
# already up), then the README's three steps - create_role.sh, the operator's
# Deployment, the example EtcdCluster - a wait until all three members are ready
# and a write and a read through the client Service, and what to type next.
# Re-runnable: every step applies what is already there. Root, like local-up.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

STATE_DIR=${LOCAL_CLUSTER_STATE_DIR:-/var/lib/etcd-operator-local}
CLUSTER=example-etcd-cluster

log() { printf '[try] %s\n' "$*" >&2; }
die() { printf '[try] ERROR: %s\n' "$*" >&2; exit 1; }

bash hack/local-cluster/up.sh
# shellcheck disable=SC1091
source "$STATE_DIR/env"
PATH=$(dirname "$KUBECTL"):$PATH
export PATH KUBECONFIG

log "create_role.sh: the ClusterRole and its binding to the default service account"
example/rbac/create_role.sh
log "the operator's Deployment (example/deployment.yaml, --create-crd=true)"
kubectl apply -f example/deployment.yaml
kubectl rollout status deployment/etcd-operator --timeout=5m
# The operator creates the CRDs as it starts: the EtcdCluster can be created once
# they are served.
kubectl wait --for=condition=Established --timeout=2m crd/etcdclusters.etcd.database.coreos.com
log "the example EtcdCluster ($CLUSTER, 3 members)"
kubectl apply -f example/example-etcd-cluster.yaml
kubectl wait --for=jsonpath='{.status.readyMembers}'=3/3 --timeout=5m "etcd/$CLUSTER" ||
	die "$CLUSTER is not 3/3 ready; see: kubectl describe etcd $CLUSTER"
member=$(kubectl get pods -l "etcd_cluster=$CLUSTER" -o jsonpath='{.items[0].metadata.name}')
endpoint=http://$CLUSTER-client:2379
kubectl exec "$member" -c etcd -- /usr/local/bin/etcdctl --endpoints="$endpoint" put /try/hello world >/dev/null ||
	die "a write through $endpoint failed"
got=$(kubectl exec "$member" -c etcd -- /usr/local/bin/etcdctl --endpoints="$endpoint" get /try/hello --print-value-only)
[[ $got == world ]] || die "a read through $endpoint returned \"$got\", not \"world\""
log "$CLUSTER serves: wrote /try/hello and read it back through $endpoint"
kubectl get etcd "$CLUSTER"

cat <<NEXT

Next:
  source $STATE_DIR/env; export PATH=\$(dirname "\$KUBECTL"):\$PATH
  kubectl get etcd                      # READY, AVAILABLE, VERSION of each cluster
  kubectl exec $member -c etcd -- /usr/local/bin/etcdctl --endpoints=$endpoint member list -w table
  kubectl scale etcd/$CLUSTER --replicas=5
  kubectl delete pod $member            # the operator replaces it
  kubectl delete etcd $CLUSTER          # and: sudo make local-down
NEXT
