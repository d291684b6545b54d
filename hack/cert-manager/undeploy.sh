#!/usr/bin/env bash
# undeploy.sh [--delete-namespace] [--delete-crds]: remove what deploy.sh
# made:
#
#   1. deletes the Deployment cert-manager-controller and its ServiceAccount;
#   2. deletes the ClusterRoleBinding and ClusterRole
#      cert-manager-controller-local;
#   3. with --delete-namespace, deletes the namespace cert-manager, and with
#      it the Secrets of ClusterIssuers kept there; without it, it stays;
#   4. with --delete-crds, deletes the cert-manager.io CRDs, and with them
#      every Certificate, CertificateRequest, Issuer and ClusterIssuer in the
#      cluster (the Secrets of Certificates stay: they belong to their
#      namespaces); without it, they stay.
#
# Environment as for deploy.sh. The image stays imported.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

LOG_TAG=cert-manager-undeploy
CM_HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# lib.sh sets KUBECTL to the local cluster's; one given in the environment wins.
ENV_KUBECTL=${KUBECTL:-} ENV_KUBECONFIG=${KUBECONFIG:-}
# shellcheck source=../local-cluster/lib.sh
source "$CM_HACK/../local-cluster/lib.sh"
# shellcheck source=common.sh
source "$CM_HACK/common.sh"

usage() {
	echo "usage: $0 [--delete-namespace] [--delete-crds]" >&2
	exit 1
}

delete_namespace=false delete_crds=false
for arg in "$@"; do
	case $arg in
	--delete-namespace) delete_namespace=true ;;
	--delete-crds) delete_crds=true ;;
	*) usage ;;
	esac
done
use_local_cluster

step "1/4 the Deployment $CM_NAME and its ServiceAccount"
kc -n "$CM_NAMESPACE" delete deployment,serviceaccount -l "$CM_LABEL=true" --ignore-not-found --wait=true --timeout=120s

step "2/4 RBAC"
kc delete clusterrolebinding,clusterrole -l "$CM_LABEL=true" --ignore-not-found

step "3/4 namespace $CM_NAMESPACE"
if $delete_namespace && "$KUBECTL" get namespace "$CM_NAMESPACE" >/dev/null 2>&1; then
	if [[ $("$KUBECTL" get namespace "$CM_NAMESPACE" -o "jsonpath={.metadata.labels.${CM_LABEL//./\\.}}") == true ]]; then
		kc delete namespace "$CM_NAMESPACE" --wait=true --timeout=180s
	else
		warn "namespace $CM_NAMESPACE was not created by deploy.sh: left as it is"
	fi
else
	log "namespace $CM_NAMESPACE stays"
fi

step "4/4 CRDs"
if $delete_crds; then
	for crd in "${CM_CRDS[@]}"; do
		kc delete crd "$crd.cert-manager.io" --ignore-not-found --wait=true --timeout=120s
	done
else
	log "the cert-manager.io CRDs stay (--delete-crds deletes them, and every object of theirs)"
fi
