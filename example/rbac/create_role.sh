#!/usr/bin/env bash
# Grants a service account of a namespace (its "default" one unless
# --service-account says otherwise) what the etcd operators need: a ClusterRole and
# ClusterRoleBinding (the default, needed for --create-crd=true and --cluster-wide),
# or with --namespaced a Role and RoleBinding in that namespace only.
#
# It applies (kubectl apply), so running it again updates the rules in place.
set -o errexit
set -o nounset
set -o pipefail

ROLE_NAME="${ROLE_NAME:-etcd-operator}"
ROLE_BINDING_NAME="${ROLE_BINDING_NAME:-etcd-operator}"
NAMESPACE="${NAMESPACE:-default}"
NAMESPACED="${NAMESPACED:-false}"
SERVICE_ACCOUNT="${SERVICE_ACCOUNT:-default}"
OPERATOR="${OPERATOR:-}"
KUBECTL="${KUBECTL:-kubectl}"

usage() {
    cat <<USAGE
Usage: $(basename "$0") [options]

Creates or updates the RBAC rules the etcd operators need, bound to a service
account of the namespace ("default" unless --service-account is given; a named
one is created if missing). Run the operators' Deployments with
serviceAccountName set to it: then the other pods of the namespace do not get
the operators' rights.

Options:
  --role-name=NAME          name of the (Cluster)Role      (env ROLE_NAME, default etcd-operator)
  --role-binding-name=NAME  name of the (Cluster)RoleBinding (env ROLE_BINDING_NAME, default etcd-operator)
  --namespace=NAMESPACE     namespace of the service account (env NAMESPACE, default default)
  --service-account=NAME    service account to bind (env SERVICE_ACCOUNT, default default)
  --namespaced              create a Role and RoleBinding instead, for operators run with
                            --create-crd=false (env NAMESPACED=true)
  --operator=NAME           only what one operator uses: etcd-operator, etcd-backup-operator
                            or etcd-restore-operator (env OPERATOR; default: what all three use,
                            as the original's role); run it once per operator, each with its
                            own --service-account, role and binding names
  -h, --help                show this help

kubectl is taken from \$KUBECTL, or from PATH.
USAGE
}

for arg in "$@"; do
    case "$arg" in
        --role-name=*) ROLE_NAME="${arg#*=}" ;;
        --role-binding-name=*) ROLE_BINDING_NAME="${arg#*=}" ;;
        --namespace=*) NAMESPACE="${arg#*=}" ;;
        --service-account=*) SERVICE_ACCOUNT="${arg#*=}" ;;
        --namespaced) NAMESPACED=true ;;
        --operator=*) OPERATOR="${arg#*=}" ;;
        -h|--help) usage; exit 0 ;;
        *) echo "unknown option: $arg" >&2; usage >&2; exit 1 ;;
    esac
done

for value in "$ROLE_NAME" "$ROLE_BINDING_NAME" "$NAMESPACE" "$SERVICE_ACCOUNT"; do
    if ! [[ "$value" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]]; then
        echo "not a valid Kubernetes name: '$value'" >&2
        exit 1
    fi
done

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rules="$dir"
case "$OPERATOR" in
    "") ;;
    etcd-operator|etcd-backup-operator|etcd-restore-operator) rules="$dir/$OPERATOR" ;;
    *) echo "unknown --operator '$OPERATOR': etcd-operator, etcd-backup-operator or etcd-restore-operator" >&2; exit 1 ;;
esac
if [ "$NAMESPACED" = true ]; then
    role="$rules/role-template.yaml" binding="$dir/role-binding-template.yaml"
else
    role="$rules/cluster-role-template.yaml" binding="$dir/cluster-role-binding-template.yaml"
fi

if ! "$KUBECTL" get namespace "$NAMESPACE" >/dev/null; then
    echo "namespace $NAMESPACE does not exist: create it first (kubectl create namespace $NAMESPACE)" >&2
    exit 1
fi

render() {
    sed -e "s/<ROLE_NAME>/${ROLE_NAME}/g" \
        -e "s/<ROLE_BINDING_NAME>/${ROLE_BINDING_NAME}/g" \
        -e "s/<NAMESPACE>/${NAMESPACE}/g" \
        -e "s/<SERVICE_ACCOUNT>/${SERVICE_ACCOUNT}/g" "$1"
}

# Every namespace has its "default" service account; another one is created here,
# so that the operators can run as an account of their own.
service_account() {
    [ "$SERVICE_ACCOUNT" = default ] && return
    cat <<SA
apiVersion: v1
kind: ServiceAccount
metadata:
  name: ${SERVICE_ACCOUNT}
  namespace: ${NAMESPACE}
---
SA
}

{ service_account; render "$role"; echo "---"; render "$binding"; } | "$KUBECTL" apply -f -
