#!/usr/bin/env bash
# kube-binaries.sh: builds the Kubernetes release of the local cluster
# (kube-apiserver and the rest, hack/local-cluster/lib.sh K8S_VERSION) from
# the Go module proxy into the local cluster's binary cache, where
# hack/local-cluster/up.sh finds it already built (and the other way round),
# and prints that directory. A release already there costs nothing. `make
# unit` runs it first: the tenant tests in test/e2e/framework run a real
# kube-apiserver on an etcd process.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LOG_TAG, LOG_DIR are read by lib.sh/build.sh
set -o errexit -o nounset -o pipefail

LOG_TAG=kube-binaries
# shellcheck source=local-cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/local-cluster/lib.sh"
# shellcheck source=local-cluster/build.sh
source "$LC_DIR/build.sh"
LOG_DIR=$REPO_ROOT/_output/logs
mkdir -p "$LOG_DIR"

build_kubernetes
echo "$K8S_BIN"
