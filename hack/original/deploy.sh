#!/usr/bin/env bash
# deploy.sh NAMESPACE [--cluster-wide] [--replace-crds] [--only-etcd-operator]:
# run the original coreos/etcd-operator v0.9.4 on the local cluster, in
# NAMESPACE, as its example/ directory did:
#
#   1. builds the original and its images (build.sh; cached, so quick the
#      second time) and imports quay.io/coreos/etcd-operator:v0.9.4 and
#      busybox:1.28.0-glibc into the cluster (hack/local-cluster/load-image.sh);
#   2. creates NAMESPACE if it does not exist;
#   3. installs the hand-made CRDs of crds.yaml (EtcdCluster, EtcdBackup,
#      EtcdRestore; see the comment there). CRDs by those names that are not
#      the hand-made ones (this project's, with a schema and a status
#      subresource) are replaced only with --replace-crds: they are cluster-wide,
#      and this project's operators elsewhere in the cluster use them;
#      undeploy.sh --put-back-crds puts this project's back;
#   4. creates the ClusterRole and ClusterRoleBinding of the original's
#      example/rbac/create_role.sh (its templates, as kept under
#      test/e2e/testdata/original), with the role named original-etcd-operator
#      and the binding original-etcd-operator-NAMESPACE: the ServiceAccount
#      "default" of NAMESPACE gets the role;
#   5. creates the original's Deployments etcd-operator, etcd-backup-operator
#      and etcd-restore-operator (only the first with --only-etcd-operator)
#      from its example/ manifests, with -create-crd=false added to each
#      command, imagePullPolicy IfNotPresent (there is no registry), and
#      -cluster-wide uncommented with --cluster-wide;
#   6. waits for each Deployment's pod to run (the original has no readiness
#      probe) and says how to create a cluster.
#
# The original's Services need spec.publishNotReadyAddresses on Kubernetes
# 1.32; build.sh patches its source for that (publish-not-ready-addresses.patch).
# Its member pods must run an etcd image with a shell (its probes run
# /bin/sh): quay.io/coreos/etcd:v3.4.23 on the local cluster, so set
# spec.version: 3.4.23. Its restore operator's seed pod runs tutum/curl,
# which build.sh makes from Debian's bash and curl.
#
# Environment: the local cluster's (/var/lib/etcd-operator-local/env gives
# KUBECONFIG and KUBECTL); KUBECONFIG and KUBECTL already set win. Importing
# images needs root (containerd's socket). Undo with undeploy.sh NAMESPACE.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

LOG_TAG=original-deploy
ORIG_HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# lib.sh sets KUBECTL to the local cluster's; one given in the environment wins.
ENV_KUBECTL=${KUBECTL:-} ENV_KUBECONFIG=${KUBECONFIG:-}
# shellcheck source=../local-cluster/lib.sh
source "$ORIG_HACK/../local-cluster/lib.sh"
# shellcheck source=common.sh
source "$ORIG_HACK/common.sh"

usage() {
	echo "usage: $0 NAMESPACE [--cluster-wide] [--replace-crds] [--only-etcd-operator]" >&2
	exit 1
}

ns='' cluster_wide=false replace_crds=false only_etcd_operator=false
for arg in "$@"; do
	case $arg in
	--cluster-wide) cluster_wide=true ;;
	--replace-crds) replace_crds=true ;;
	--only-etcd-operator) only_etcd_operator=true ;;
	-h | --help) usage ;;
	-*) usage ;;
	*)
		[[ -z $ns ]] || usage
		ns=$arg
		;;
	esac
done
[[ -n $ns ]] || usage
use_local_cluster

step "1/6 building the original and its images (hack/original/build.sh)"
# Not a process substitution: a failed build must stop the script.
built=$(bash "$ORIG_HACK/build.sh")
for tar in $built; do
	[[ $tar == *.tar ]] || continue
	log "importing $tar"
	bash "$LC_DIR/load-image.sh" "$tar"
done

step "2/6 namespace $ns"
if ! kc get namespace "$ns" >/dev/null 2>&1; then
	kc create namespace "$ns"
	kc label namespace "$ns" "$CREATED_LABEL=true"
fi

step "3/6 the hand-made CRDs (crds.yaml)"
for crd in "${CRDS[@]}"; do
	if ! kc get crd "$crd" >/dev/null 2>&1; then
		log "creating CRD $crd"
		crd_manifest "$crd" | kc create -f -
	elif is_hand_made "$crd"; then
		log "CRD $crd: the hand-made one is installed"
		crd_manifest "$crd" | replace_crd "$crd"
	elif $replace_crds; then
		log "CRD $crd: replacing this project's definition with the hand-made one (--replace-crds)"
		crd_manifest "$crd" | replace_crd "$crd"
	else
		die "CRD $crd is not the hand-made one (it is this project's, or another's): the original needs the hand-made one (no status subresource); rerun with --replace-crds to replace it for the whole cluster, and put this project's back afterwards with undeploy.sh $ns --put-back-crds"
	fi
done
for crd in "${CRDS[@]}"; do
	kc wait --for=condition=Established "crd/$crd" --timeout=60s
done

step "4/6 ClusterRole $ROLE_NAME and ClusterRoleBinding $(binding_name "$ns") (example/rbac/create_role.sh)"
sed -e "s/<ROLE_NAME>/$ROLE_NAME/g" "$ORIGINAL_MANIFESTS/cluster-role-template.yaml" | kc apply -f -
sed -e "s/<ROLE_NAME>/$ROLE_NAME/g" -e "s/<ROLE_BINDING_NAME>/$(binding_name "$ns")/g" -e "s/<NAMESPACE>/$ns/g" \
	"$ORIGINAL_MANIFESTS/cluster-role-binding-template.yaml" | kc apply -f -

step "5/6 the original's Deployments in $ns"
deployments=("${DEPLOYMENTS[@]}")
if $only_etcd_operator; then deployments=(etcd-operator); fi
for d in "${deployments[@]}"; do
	manifest=$ORIGINAL_MANIFESTS/$(deployment_file "$d")
	sed_args=(
		# Add -create-crd=false after the command, as the original's docs
		# said for hand-made CRDs.
		-e "s|^\( *\)- $d\$|&\n\1- -create-crd=false|"
		-e "s|^\( *\)image: $ORIG_IMAGE\$|&\n\1imagePullPolicy: IfNotPresent|"
	)
	if $cluster_wide && [[ $d == etcd-operator ]]; then
		sed_args+=(-e 's|^\( *\)#- -cluster-wide$|\1- -cluster-wide|')
	fi
	log "Deployment $d from $manifest"
	sed "${sed_args[@]}" "$manifest" | kc -n "$ns" apply -f -
done

step "6/6 waiting for the operators' pods to run"
for d in "${deployments[@]}"; do
	kc -n "$ns" rollout status "deployment/$d" --timeout=180s
done
kc -n "$ns" get pods -l "name in ($(
	IFS=,
	echo "${deployments[*]}"
))" -o wide

cat >&2 <<EOF

[$LOG_TAG] The original runs in namespace $ns. A cluster, as its example made one
(etcd 3.4.23: the local cluster's etcd image with a shell, which its probes need):

  sed 's/"3.2.13"/"3.4.23"/' $ORIGINAL_MANIFESTS/example-etcd-cluster.yaml | $KUBECTL -n $ns apply -f -
  $KUBECTL -n $ns get pods -l etcd_cluster=example-etcd-cluster -w

Its log: $KUBECTL -n $ns logs deployment/etcd-operator
Remove it: bash $ORIG_HACK/undeploy.sh $ns [--put-back-crds] [--delete-namespace]
EOF
