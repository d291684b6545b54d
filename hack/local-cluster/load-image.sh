#!/usr/bin/env bash
# load-image.sh [TAR]: import an image tarball (default: the project image
# written by hack/build-image.sh, _output/etcd-operator-image.tar) into the
# running local cluster's containerd, namespace k8s.io, where the kubelet
# finds it. Skipped when the same tarball is already imported.
#
# Pods already running keep the old image; delete them (or roll the
# Deployment) to use the new one. Pods must use imagePullPolicy
# IfNotPresent or Never: there is no registry.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

LOG_TAG=load-image
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

tar=${1:-$PROJECT_IMAGE_TAR}
[[ $# -le 1 ]] || die "usage: load-image.sh [IMAGE-TARBALL]"
require_root_linux
[[ -f $tar ]] || die "$tar not found (build it with: bash hack/build-image.sh)"
containerd_up || die "containerd is not running on $CONTAINERD_SOCK (start the cluster with: make local-up)"
import_image "$tar"
