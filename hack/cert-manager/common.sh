# shellcheck shell=bash source-path=SCRIPTDIR disable=SC2034 # the variables are used by the scripts that source this
# common.sh: what build.sh, deploy.sh and undeploy.sh agree on. Sourced after
# hack/local-cluster/lib.sh, never run.

# shellcheck source=../local-cluster/addon.sh
source "$LC_DIR/addon.sh"

# The cert-manager release is the one go.mod requires: the CRDs deploy.sh
# applies come from the same module as the controllers main.go runs.
CM_VERSION=$(sed -n 's#^[[:space:]]*github.com/cert-manager/cert-manager \(v[^ ]*\)$#\1#p' "$CM_HACK/go.mod")
[[ -n $CM_VERSION ]] || die "$CM_HACK/go.mod requires no github.com/cert-manager/cert-manager"
CM_MODULE=github.com/cert-manager/cert-manager
CM_IMAGE=cert-manager-controller:$CM_VERSION-local
CM_DIR=$CACHE_DIR/cert-manager/$CM_VERSION
CM_BIN=$CM_DIR/bin/cert-manager-controller
CM_IMAGE_TAR=$CM_DIR/cert-manager-controller-$CM_VERSION.tar
# The namespace of the Deployment, and cert-manager's "cluster resource
# namespace": the Secrets of ClusterIssuers (a CA ClusterIssuer's key pair)
# live there.
CM_NAMESPACE=cert-manager
CM_NAME=cert-manager-controller
# The CRDs of the cert-manager.io group, as deploy/crds names them (the
# acme.cert-manager.io ones are not needed: no ACME controller runs).
CM_CRDS=(certificates certificaterequests issuers clusterissuers)
# On every object deploy.sh applies, so undeploy.sh finds them.
CM_LABEL=etcd-operator-local/cert-manager

# cm_go ARGS...: go in this directory's module, on its own go.mod and go.sum.
cm_go() { (cd "$CM_HACK" && GOWORK=off GOFLAGS='-mod=readonly -buildvcs=false' go "$@"); }

