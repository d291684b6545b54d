# shellcheck shell=bash source-path=SCRIPTDIR disable=SC2034 # the variables are used by the scripts that source this
# common.sh: what build.sh, deploy.sh and undeploy.sh agree on. Sourced after
# hack/local-cluster/lib.sh, never run.

# shellcheck source=../local-cluster/addon.sh
source "$LC_DIR/addon.sh"

ORIG_VERSION=v0.9.4
ORIG_IMAGE=quay.io/coreos/etcd-operator:$ORIG_VERSION
# The image of the restore operator's fetch-backup init container.
CURL_IMAGE=tutum/curl:latest
# The original's example/ manifests, with only what Kubernetes 1.32 refuses
# changed (see the README there).
ORIGINAL_MANIFESTS=$REPO_ROOT/test/e2e/testdata/original
CRDS=(etcdclusters.etcd.database.coreos.com etcdbackups.etcd.database.coreos.com
	etcdrestores.etcd.database.coreos.com)
# The annotation of the hand-made CRDs in crds.yaml.
HAND_MADE_ANNOTATION=etcd.database.coreos.com/hand-made-for
HAND_MADE_VALUE=coreos-etcd-operator-$ORIG_VERSION
# On a namespace deploy.sh created, so undeploy.sh --delete-namespace knows.
CREATED_LABEL=etcd-operator-local/created-for-original
ROLE_NAME=original-etcd-operator
DEPLOYMENTS=(etcd-operator etcd-backup-operator etcd-restore-operator)

# binding_name NAMESPACE: the ClusterRoleBinding that gives NAMESPACE's
# default ServiceAccount the original's ClusterRole.
binding_name() { echo "$ROLE_NAME-$1"; }

# deployment_file NAME: the manifest of the original's Deployment NAME.
deployment_file() {
	case $1 in
	etcd-operator) echo deployment.yaml ;;
	etcd-backup-operator) echo backup-deployment.yaml ;;
	etcd-restore-operator) echo restore-deployment.yaml ;;
	*) die "no Deployment $1 in the original's examples" ;;
	esac
}


# crd_manifest NAME: the hand-made CRD NAME from crds.yaml.
crd_manifest() {
	awk -v name="$1" '
		/^---/ { if (keep) print doc; doc = ""; keep = 0; next }
		{ doc = doc $0 "\n" }
		$1 == "name:" && $2 == name && doc ~ /kind: CustomResourceDefinition/ && !seen { keep = 1; seen = 1 }
		END { if (keep) printf "%s", doc }
	' "$ORIG_HACK/crds.yaml"
}

# is_hand_made NAME: whether the CRD NAME in the cluster is one of crds.yaml.
is_hand_made() {
	[[ $("$KUBECTL" get crd "$1" -o "jsonpath={.metadata.annotations.${HAND_MADE_ANNOTATION//./\\.}}" 2>/dev/null) == "$HAND_MADE_VALUE" ]]
}

# replace_crd NAME: replace the CRD NAME with the manifest on stdin. A CRD is
# only updated at a given resourceVersion (the API refuses an unconditional
# update), so the live one is put into the manifest's metadata.
replace_crd() {
	local name=$1 rv
	rv=$("$KUBECTL" get crd "$name" -o 'jsonpath={.metadata.resourceVersion}')
	[[ -n $rv ]] || die "cannot read the resourceVersion of CRD $name"
	sed "0,/^  name: $name\$/s//  name: $name\n  resourceVersion: \"$rv\"/" | kc replace -f -
}
