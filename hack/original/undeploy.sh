#!/usr/bin/env bash
# undeploy.sh NAMESPACE [--put-back-crds] [--delete-namespace]: remove what
# deploy.sh NAMESPACE made, in an order that leaves nothing stuck:
#
#   1. deletes the EtcdRestores, EtcdBackups and EtcdClusters in NAMESPACE
#      while the original's operators still run: its backup operator removes
#      its finalizer (backup-operator-periodic) from periodic EtcdBackups, and
#      the garbage collector removes the members' pods and Services, which
#      carry an ownerReference to their EtcdCluster;
#   2. deletes the Deployments etcd-operator, etcd-backup-operator and
#      etcd-restore-operator, and the Service etcd-restore-operator the
#      restore operator made for itself;
#   3. deletes the ClusterRoleBinding original-etcd-operator-NAMESPACE, and
#      the ClusterRole original-etcd-operator once no other namespace's
#      binding uses it;
#   4. with --put-back-crds, replaces the hand-made CRDs with this project's
#      (example/crd/); without it, they stay (other namespaces may run the
#      original);
#   5. with --delete-namespace, deletes NAMESPACE if deploy.sh created it.
#
# Backups in object stores are not touched. Environment as for deploy.sh.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

LOG_TAG=original-undeploy
ORIG_HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# lib.sh sets KUBECTL to the local cluster's; one given in the environment wins.
ENV_KUBECTL=${KUBECTL:-} ENV_KUBECONFIG=${KUBECONFIG:-}
# shellcheck source=../local-cluster/lib.sh
source "$ORIG_HACK/../local-cluster/lib.sh"
# shellcheck source=common.sh
source "$ORIG_HACK/common.sh"

usage() {
	echo "usage: $0 NAMESPACE [--put-back-crds] [--delete-namespace]" >&2
	exit 1
}

ns='' put_back_crds=false delete_namespace=false
for arg in "$@"; do
	case $arg in
	--put-back-crds) put_back_crds=true ;;
	--delete-namespace) delete_namespace=true ;;
	-*) usage ;;
	*)
		[[ -z $ns ]] || usage
		ns=$arg
		;;
	esac
done
[[ -n $ns ]] || usage
use_local_cluster

if kc get namespace "$ns" >/dev/null 2>&1; then
	step "1/5 the original's resources in $ns"
	for kind in etcdrestores etcdbackups etcdclusters; do
		if kc get crd "$kind.etcd.database.coreos.com" >/dev/null 2>&1; then
			kc -n "$ns" delete "$kind.etcd.database.coreos.com" --all --ignore-not-found --wait=true --timeout=120s ||
				warn "some $kind in $ns were not deleted within 2 minutes (a periodic EtcdBackup keeps its finalizer if the backup operator is not running)"
		fi
	done
	# The members go with their EtcdCluster through the garbage collector.
	kc -n "$ns" wait --for=delete pod -l app=etcd --timeout=120s ||
		warn "etcd pods are still in $ns"

	step "2/5 the original's Deployments in $ns"
	kc -n "$ns" delete deployment "${DEPLOYMENTS[@]}" --ignore-not-found --wait=true --timeout=120s
	kc -n "$ns" delete service etcd-restore-operator --ignore-not-found
else
	log "namespace $ns does not exist: steps 1 and 2 skipped"
fi

step "3/5 RBAC"
kc delete clusterrolebinding "$(binding_name "$ns")" --ignore-not-found
others=$("$KUBECTL" get clusterrolebindings -o "jsonpath={range .items[?(@.roleRef.name==\"$ROLE_NAME\")]}{.metadata.name}{\"\\n\"}{end}")
if [[ -z $others ]]; then
	kc delete clusterrole "$ROLE_NAME" --ignore-not-found
else
	log "ClusterRole $ROLE_NAME stays: bound by $(echo "$others" | tr '\n' ' ')"
fi

step "4/5 CRDs"
if $put_back_crds; then
	for crd in "${CRDS[@]}"; do
		if ! kc get crd "$crd" >/dev/null 2>&1; then
			kc create -f "$REPO_ROOT/example/crd/$crd.yaml"
		elif is_hand_made "$crd"; then
			replace_crd "$crd" <"$REPO_ROOT/example/crd/$crd.yaml"
		else
			log "CRD $crd is not the hand-made one: left as it is"
		fi
	done
	for crd in "${CRDS[@]}"; do
		kc wait --for=condition=Established "crd/$crd" --timeout=60s
	done
else
	log "the CRDs stay as they are (--put-back-crds puts this project's back)"
fi

step "5/5 namespace"
if $delete_namespace && kc get namespace "$ns" >/dev/null 2>&1; then
	if [[ $("$KUBECTL" get namespace "$ns" -o "jsonpath={.metadata.labels.${CREATED_LABEL//./\\.}}") == true ]]; then
		kc delete namespace "$ns" --wait=true --timeout=180s
	else
		warn "namespace $ns was not created by deploy.sh: left as it is"
	fi
else
	log "namespace $ns stays"
fi
