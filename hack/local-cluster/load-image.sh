#!/usr/bin/env bash
# load-image.sh [TAR]: import an image tarball (default: the project image
# written by hack/build-image.sh, _output/etcd-operator-image.tar) into the
# running local cluster's containerd, namespace k8s.io, where the kubelet
# finds it. Skipped when the same tarball is already imported. The project
# image is also tagged <ref>-next: the same image under a second name, for
# the tests that roll the operators to a new image.
#
# load-image.sh --cluster: rebuild the cluster's own images (etcd, busybox,
# pause, CoreDNS; images.sh) whose recipe or inputs changed since they were
# built, and import those whose tarball changed. hack/e2e.sh runs it before
# every suite, so that a change to images.sh reaches a cluster that is up
# without restarting it; an unchanged image is neither rebuilt nor imported.
#
# Pods already running keep the old image; delete them (or roll the
# Deployment) to use the new one. Pods must use imagePullPolicy
# IfNotPresent or Never: there is no registry.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG is read by lib.sh
set -euo pipefail

LOG_TAG=load-image
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $# -le 1 ]] || die "usage: load-image.sh [IMAGE-TARBALL | --cluster]"
require_root_linux
containerd_up || die "containerd is not running on $CONTAINERD_SOCK (start the cluster with: make local-up)"
if [[ ${1:-} == --cluster ]]; then
	# shellcheck source=images.sh
	source "$LC_DIR/images.sh"
	[[ -x $TOOLS_DIR/imagebuild ]] || die "$TOOLS_DIR/imagebuild is missing: start the cluster with up.sh, which builds it"
	build_images
	for tar in $(image_tarballs); do import_image "$tar"; done
	exit 0
fi
tar=${1:-$PROJECT_IMAGE_TAR}
[[ -f $tar ]] || die "$tar not found (build it with: bash hack/build-image.sh)"
import_image "$tar"
if [[ $tar == "$PROJECT_IMAGE_TAR" ]]; then
	tag_next_image "$tar"
fi
