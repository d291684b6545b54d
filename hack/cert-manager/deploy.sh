#!/usr/bin/env bash
# deploy.sh: run cert-manager's controller on the local cluster, for
# Issuers, ClusterIssuers and Certificates (cert-manager.io/v1) of the
# SelfSigned and CA kinds:
#
#   1. builds it and its image (build.sh; cached, so quick the second time)
#      and imports cert-manager-controller:<version>-local into the cluster
#      (hack/local-cluster/load-image.sh);
#   2. applies the CRDs of the cert-manager.io group from the same module
#      (deploy/crds of github.com/cert-manager/cert-manager, the version
#      go.mod requires), server-side: the Certificate CRD is too large for
#      kubectl's last-applied annotation;
#   3. applies controller.yaml: the namespace cert-manager (also the "cluster
#      resource namespace", where a CA ClusterIssuer's Secret lives), the
#      ServiceAccount, ClusterRole and ClusterRoleBinding
#      cert-manager-controller(-local), and the Deployment
#      cert-manager-controller (imagePullPolicy IfNotPresent);
#   4. waits for its pod to run and for its controllers to start.
#
# Idempotent: a second run changes nothing unless build.sh made a new image,
# which rolls the Deployment. Environment: the local cluster's
# (/var/lib/etcd-operator-local/env gives KUBECONFIG and KUBECTL); KUBECONFIG
# and KUBECTL already set win. Importing the image needs root (containerd's
# socket). Undo with undeploy.sh.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

LOG_TAG=cert-manager-deploy
CM_HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# lib.sh sets KUBECTL to the local cluster's; one given in the environment wins.
ENV_KUBECTL=${KUBECTL:-} ENV_KUBECONFIG=${KUBECONFIG:-}
# shellcheck source=../local-cluster/lib.sh
source "$CM_HACK/../local-cluster/lib.sh"
# shellcheck source=common.sh
source "$CM_HACK/common.sh"

[[ $# -eq 0 ]] || die "usage: $0 (no arguments)"
use_local_cluster

step "1/4 building $CM_IMAGE (hack/cert-manager/build.sh) and importing it"
# Not a process substitution: a failed build must stop the script.
built=$(bash "$CM_HACK/build.sh")
[[ $built == *"$CM_IMAGE_TAR"* ]] || die "build.sh did not print $CM_IMAGE_TAR"
bash "$LC_DIR/load-image.sh" "$CM_IMAGE_TAR"

step "2/4 the cert-manager.io CRDs of $CM_MODULE $CM_VERSION"
crd_dir=$(cm_go mod download -json "$CM_MODULE" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/deploy/crds
[[ -d $crd_dir ]] || die "no deploy/crds in the module directory of $CM_MODULE $CM_VERSION"
for crd in "${CM_CRDS[@]}"; do
	file=$crd_dir/cert-manager.io_$crd.yaml
	[[ -f $file ]] || die "$file not found"
	# deploy/crds holds plain manifests; the Helm chart's copies are templates.
	! grep -q '{{' "$file" || die "$file has Helm templating"
	kc apply --server-side --force-conflicts --field-manager="$CM_NAME-deploy" -f "$file"
done
for crd in "${CM_CRDS[@]}"; do
	kc wait --for=condition=Established "crd/$crd.cert-manager.io" --timeout=60s
done

step "3/4 namespace $CM_NAMESPACE, RBAC and the Deployment $CM_NAME (controller.yaml)"
sed -e "s|@IMAGE@|$CM_IMAGE|g" -e "s|@IMAGE_SHA256@|$(sha256sum "$CM_IMAGE_TAR" | cut -d' ' -f1)|g" \
	-e "s|@NAMESPACE@|$CM_NAMESPACE|g" -e "s|@LABEL@|$CM_LABEL|g" "$CM_HACK/controller.yaml" |
	kc apply -f -

step "4/4 waiting for the controller to run"
kc -n "$CM_NAMESPACE" rollout status "deployment/$CM_NAME" --timeout=180s
# Its log says so once every controller was built and the informers started.
deadline=$((SECONDS + 60))
until "$KUBECTL" -n "$CM_NAMESPACE" logs "deployment/$CM_NAME" 2>/dev/null | grep -q 'cert-manager controllers running'; do
	((SECONDS < deadline)) || {
		"$KUBECTL" -n "$CM_NAMESPACE" logs "deployment/$CM_NAME" --tail=30 >&2 || true
		die "$CM_NAME did not start its controllers within 60s"
	}
	sleep 1
done
kc -n "$CM_NAMESPACE" get pods -l app.kubernetes.io/name="$CM_NAME" -o wide

cat >&2 <<EOF

[$LOG_TAG] cert-manager $CM_VERSION (SelfSigned and CA issuers) runs in namespace $CM_NAMESPACE,
which is also where a ClusterIssuer's Secret lives (its cluster resource namespace).
Its log: $KUBECTL -n $CM_NAMESPACE logs deployment/$CM_NAME
Remove it: bash $CM_HACK/undeploy.sh [--delete-crds]
EOF
